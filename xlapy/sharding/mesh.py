"""Shardy meshes: named device axes and an optional device order.

Text form (as Shardy prints it): ``<["x"=2, "y"=4]>``, ``<["x"=2], device_ids=[1, 0]>``,
``<[], device_ids=[3]>`` (a maximal mesh: one device, no axes) and ``<[]>`` (the empty
placeholder mesh). The attribute form ``#sdy.mesh<...>`` is accepted too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from xlapy.errors import VerifyError
from xlapy.syntax import Cursor

# A quoted axis name; Shardy accepts any MLIR string, we accept the escapes used in practice.
STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"')


def quote(name: str) -> str:
    """An axis name as Shardy prints it (an MLIR string literal)."""
    return '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def unquote(body: str) -> str:
    return re.sub(r"\\(.)", r"\1", body)


@dataclass(frozen=True)
class MeshAxis:
    name: str
    size: int

    def __str__(self) -> str:
        return f"{quote(self.name)}={self.size}"


@dataclass(frozen=True)
class Mesh:
    axes: tuple[MeshAxis, ...] = ()
    # None: the implicit order iota(total_size). Shardy drops an explicit iota list, so do we.
    device_ids: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "axes", tuple(self.axes))
        if self.device_ids is not None:
            ids = tuple(self.device_ids)
            is_iota = bool(self.axes) and ids == tuple(range(len(ids))) and len(ids) == self.total_size
            object.__setattr__(self, "device_ids", None if is_iota else ids)

    @staticmethod
    def of(*axes: tuple[str, int], device_ids: tuple[int, ...] | None = None) -> Mesh:
        """``Mesh.of(("x", 2), ("y", 4))``."""
        return Mesh(tuple(MeshAxis(name, size) for name, size in axes), device_ids)

    @staticmethod
    def parse(text: str) -> Mesh:
        cursor = Cursor(text)
        mesh = parse_mesh(cursor)
        if not cursor.at_end():
            raise cursor.error(f"unexpected {cursor.found()} after the mesh")
        return mesh

    @property
    def axis_names(self) -> tuple[str, ...]:
        return tuple(axis.name for axis in self.axes)

    def has_axis(self, name: str) -> bool:
        return any(axis.name == name for axis in self.axes)

    def axis_size(self, name: str) -> int:
        for axis in self.axes:
            if axis.name == name:
                return axis.size
        raise VerifyError(f'unknown axis name: "{name}" in mesh {self}')

    def axis_index(self, name: str) -> int:
        """Position of axis ``name`` in the mesh (major to minor)."""
        for index, axis in enumerate(self.axes):
            if axis.name == name:
                return index
        raise VerifyError(f'unknown axis name: "{name}" in mesh {self}')

    @property
    def total_size(self) -> int:
        size = 1
        for axis in self.axes:
            size *= axis.size
        return size

    @property
    def is_maximal(self) -> bool:
        return not self.axes and self.device_ids is not None and len(self.device_ids) == 1

    @property
    def maximal_device_id(self) -> int | None:
        return self.device_ids[0] if self.is_maximal else None

    @property
    def is_empty(self) -> bool:
        """The placeholder mesh ``<[]>``: no axes and no device ids."""
        return not self.axes and not self.device_ids

    def __str__(self) -> str:
        text = "<[" + ", ".join(str(axis) for axis in self.axes) + "]"
        if self.device_ids is not None:
            text += ", device_ids=[" + ", ".join(str(i) for i in self.device_ids) + "]"
        return text + ">"

    def attr(self) -> str:
        """The attribute form ``#sdy.mesh<...>``."""
        return "#sdy.mesh" + str(self)


def parse_quoted(cursor: Cursor, what: str) -> str:
    return unquote(cursor.match(STRING, what).group(1))


def _parse_axis(cursor: Cursor) -> MeshAxis:
    name = parse_quoted(cursor, "a quoted mesh axis name")
    cursor.expect("=", "after a mesh axis name")
    return MeshAxis(name, cursor.int("a mesh axis size"))


def parse_mesh(cursor: Cursor) -> Mesh:
    """Read ``<[...]>``, ``<[...], device_ids=[...]>`` or the ``#sdy.mesh<...>`` attribute."""
    cursor.eat("#sdy.mesh")
    cursor.expect("<", "to start a mesh")
    axes: list[MeshAxis] = []
    device_ids: list[int] | None = None
    if cursor.peek("["):
        axes = cursor.delimited("[", "]", lambda: _parse_axis(cursor), "the mesh axes")
        if cursor.eat(","):
            device_ids = _parse_device_ids(cursor)
    else:
        # Older spelling without the axis list: ``<device_ids=[0]>``.
        device_ids = _parse_device_ids(cursor)
    cursor.expect(">", "to end a mesh")
    return Mesh(tuple(axes), None if device_ids is None else tuple(device_ids))


def _parse_device_ids(cursor: Cursor) -> list[int]:
    if cursor.ident() != "device_ids":
        raise cursor.error(f"expected 'device_ids' in a mesh, got {cursor.found()}")
    cursor.pos += len("device_ids")
    cursor.expect("=", "after 'device_ids'")
    return cursor.delimited("[", "]", lambda: cursor.int("a device id"), "the device ids")
