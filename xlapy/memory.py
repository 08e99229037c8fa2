"""A limit on buffers whose size comes from input: checked before allocating,
so that a huge shape is a clear error instead of a ``MemoryError`` (or the
machine swapping) halfway through."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from xlapy.errors import XlapyError

if TYPE_CHECKING:
    from xlapy.shapes import Shape

LIMIT_VARIABLE = "XLAPY_MAX_BYTES"


def byte_limit() -> int:
    """The most bytes one request may allocate: ``$XLAPY_MAX_BYTES`` when set,
    else the memory the system reports available."""
    configured = os.environ.get(LIMIT_VARIABLE)
    if configured is not None:
        try:
            limit = int(configured)
        except ValueError:
            limit = -1
        if limit < 0:
            raise XlapyError(f"${LIMIT_VARIABLE} must be a non-negative number of bytes, not {configured!r}")
        return limit
    return _available_memory()


def _available_memory() -> int:
    """What the system reports available, capped by this process's address-space limit: read again after
    ``_READING_SECONDS``."""
    global _last_reading
    now = time.monotonic()
    if _last_reading is not None and now - _last_reading[0] < _READING_SECONDS:
        return _last_reading[1]
    available = min(_read_system_available_memory(), _address_space_limit())
    _last_reading = (now, available)
    return available


def _address_space_limit() -> int:
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    except (ImportError, OSError, ValueError):
        return 1 << 62
    return 1 << 62 if soft == resource.RLIM_INFINITY else soft


@contextlib.contextmanager
def out_of_memory_as_error(what: str) -> Iterator[None]:
    """A failed allocation that the size checks could not foresee (memory taken
    by other processes meanwhile, intermediates of a computation) as an ``XlapyError``."""
    try:
        yield
    except MemoryError:
        raise XlapyError(f"out of memory {what}") from None


# How long a reading of the available memory is used again: an executable called in a loop checks its result
# buffers on every call, and reading /proc/meminfo costs tens of microseconds (the address-space limit, a system
# call, a few).
_READING_SECONDS = 0.1
_last_reading: tuple[float, int] | None = None


def _read_system_available_memory() -> int:
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, AttributeError):
        return 1 << 40


def check_bytes(nbytes: int, what: str) -> None:
    """Refuse ``what`` when it needs more than ``byte_limit()`` bytes."""
    limit = byte_limit()
    if nbytes > limit:
        _refuse(nbytes, what, limit)


def check_available_bytes(nbytes: int, what: str) -> None:
    """Refuse ``what`` when it needs more than the memory the system reports available: for a buffer made again
    and again (an executable's results, on every call) whose size ``check_bytes`` has accepted once. It costs
    a fraction of ``check_bytes``, which looks ``$XLAPY_MAX_BYTES`` up in the environment (tens of
    microseconds when a kernel has just evicted the caches)."""
    available = _available_memory()
    if nbytes > available:
        _refuse(nbytes, what, available)


def _refuse(nbytes: int, what: str, limit: int) -> None:
    raise XlapyError(f"{what} needs {_human(nbytes)}, more than the {_human(limit)} available "
                     f"(${LIMIT_VARIABLE} sets the limit)")


def _human(nbytes: int) -> str:
    if nbytes < 1024:
        return f"{nbytes} bytes"
    for unit, scale in (("EiB", 1 << 60), ("PiB", 1 << 50), ("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20),
                        ("KiB", 1 << 10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit} ({nbytes} bytes)"
    return f"{nbytes} bytes"


def buffer_bytes(shape: Shape) -> int:
    """The bytes xlapy allocates for an array of ``shape``: every element of its physical buffer (layout
    padding included) in whole bytes. This is XLA's ``physical_byte_size`` except for packed layouts
    (``E(n)``), whose elements xlapy keeps one per byte."""
    from xlapy.shapes import ELEMENT_TYPES, physical_byte_size, physical_element_count

    layout = shape.layout
    if layout is None or not layout.element_size_in_bits:
        return physical_byte_size(shape)
    return physical_element_count(shape) * ELEMENT_TYPES[shape.element_type].dtype.itemsize
