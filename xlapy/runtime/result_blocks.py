"""Memory for the results an executable hands to its caller, reused once the caller has let go of it.

A handed result is the caller's: nothing may write it while any array (or memoryview, ctypes or DLPack
export) derived from it lives. Making it afresh on every call costs the pages' first touch (a result of more
than 32 MiB is mapped anew by glibc each time and every page is zeroed by the kernel) and numpy's allocation
work around it. So each block is handed out through a *template*: an array whose base is a small ``_Lease``
object (not an ndarray), so that numpy points every view, reshape, transpose or slice of the result at the
template itself (it collapses a view's base only through ndarrays that do not own their data, and stops at
the template, whose base is the lease). The template's reference count then tells whether anything of the
caller's still refers to the block: the run holds the block, and only its own reference counts when the
caller has dropped everything derived from it. The executable's own views of the memory (its context's
bindings, prepared kernels) go through another array, ``data``, so that they never count.

The lease keeps the underlying allocation alive, so a result outlives the executable that made it.
"""

from __future__ import annotations

import sys

import numpy as np

from xlapy.runtime.thunks.base import allocate_at


class _Lease:
    """Exposes ``nbytes`` bytes at ``address`` (inside ``owner``) to numpy and keeps ``owner`` alive."""

    __slots__ = ("__array_interface__", "owner")

    def __init__(self, owner: np.ndarray, address: int, nbytes: int):
        self.owner = owner
        self.__array_interface__ = {"data": (address, False), "shape": (nbytes,), "typestr": "|u1", "version": 3}


class ResultBlock:
    """``nbytes`` aligned bytes for one result allocation: ``data`` and ``address`` for the executable to bind,
    ``template`` for the arrays it hands over."""

    __slots__ = ("_logical", "_references", "address", "data", "template")

    def __init__(self, nbytes: int, what: str):
        self.data, self.address = allocate_at(nbytes, what)
        self.template = np.asarray(_Lease(self.data, self.address, nbytes))
        # The result's array as the caller sees it, made once: each call hands a new view of it (one numpy
        # operation, which counts when a kernel has just evicted numpy's code from the caches). Its own
        # reference to the template counts among ``_references``, those of the block.
        self._logical: np.ndarray | None = None
        self._references = 2  # the attribute and ``getrefcount``'s own argument

    def free(self) -> bool:
        """Whether nothing but this block refers to the handed memory: no array the caller holds can see a
        write into it."""
        return sys.getrefcount(self.template) == self._references

    def hand(self, nbytes: int, dtype: np.dtype, major_to_minor: tuple[int, ...],
             order: tuple[int, ...] | None) -> np.ndarray:
        """A new array over the block: ``dtype`` elements of ``major_to_minor`` dimensions (the physical
        order), transposed by ``order`` (None: in order). The same arguments on every call."""
        logical = self._logical
        if logical is None:
            logical = self.template[:nbytes].view(dtype).reshape(major_to_minor)
            if order is not None:
                logical = logical.transpose(order)
            self._logical = logical
            self._references = 3
        return logical.view()
