"""Shardy tensor shardings: per dimension, the mesh axes that shard it (major to minor).

Text forms, exactly as Shardy prints them:

- dimension sharding: ``{}``, ``{?}``, ``{"a", "b"}``, ``{"a", ?}``, with a priority ``{"a"}p1``;
- tensor sharding: ``#sdy.sharding<@mesh, [{"a", ?}, {"b"}p1], replicated={"c"}, unreduced={"d"}>``,
  or with an inline mesh ``#sdy.sharding<mesh<["a"=2]>, [{"a"}]>``; inside
  ``#sdy.sharding_per_value<[...]>`` and op syntax the ``#sdy.sharding`` prefix is dropped.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from xlapy.errors import VerifyError
from xlapy.sharding.axis_ref import AxisRef, parse_axis_ref
from xlapy.sharding.mesh import Mesh, parse_mesh
from xlapy.syntax import Cursor

# A missing priority means the highest one.
DEFAULT_PRIORITY = 0
_INT64_MAX = 2**63 - 1

_KEYWORD = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*")
_BARE_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*")
_QUOTED_SYMBOL = re.compile(r'"((?:[^"\\\n]|\\.)*)"')


@dataclass(frozen=True)
class DimensionSharding:
    axes: tuple[AxisRef, ...] = ()
    # Closed: propagation may not shard this dimension further.
    is_closed: bool = True
    # Lower is more important; None is the default (highest) priority.
    priority: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "axes", tuple(self.axes))

    @staticmethod
    def parse(text: str) -> DimensionSharding:
        cursor = Cursor(text)
        result = parse_dimension_sharding(cursor)
        _expect_end(cursor, "dimension sharding")
        return result

    @property
    def is_open(self) -> bool:
        return not self.is_closed

    @property
    def empty_axes(self) -> bool:
        return not self.axes

    def sharded_size(self, mesh: Mesh) -> int:
        """Product of the sizes of the axes sharding this dimension."""
        size = 1
        for axis in self.axes:
            size *= axis.size(mesh)
        return size

    @property
    def priority_or_default(self) -> int:
        return DEFAULT_PRIORITY if self.priority is None else self.priority

    def with_axes(self, axes: Iterable[AxisRef]) -> DimensionSharding:
        return dataclasses.replace(self, axes=tuple(axes))

    def closed(self) -> DimensionSharding:
        return DimensionSharding(self.axes, True, self.priority)

    def opened(self) -> DimensionSharding:
        return DimensionSharding(self.axes, False, self.priority)

    def without_priority(self) -> DimensionSharding:
        return DimensionSharding(self.axes, self.is_closed)

    def take_front(self, count: int) -> DimensionSharding:
        return dataclasses.replace(self, axes=self.axes[:count])

    def drop_front(self, count: int) -> DimensionSharding:
        return dataclasses.replace(self, axes=self.axes[count:])

    def __str__(self) -> str:
        items = [str(axis) for axis in self.axes]
        if not self.is_closed:
            items.append("?")
        text = "{" + ", ".join(items) + "}"
        return text if self.priority is None else f"{text}p{self.priority}"


@dataclass(frozen=True)
class TensorSharding:
    # The mesh symbol name (without '@') or an inline mesh.
    mesh: str | Mesh
    dim_shardings: tuple[DimensionSharding, ...] = ()
    replicated_axes: tuple[AxisRef, ...] = ()
    unreduced_axes: tuple[AxisRef, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "dim_shardings", tuple(self.dim_shardings))
        object.__setattr__(self, "replicated_axes", tuple(self.replicated_axes))
        object.__setattr__(self, "unreduced_axes", tuple(self.unreduced_axes))

    def __hash__(self) -> int:
        # Shardings key the caches of propagation, looked up for every op it
        # visits: hash the nested tuples once.
        cached = self.__dict__.get("_hash")
        if cached is None:
            cached = hash((self.mesh, self.dim_shardings, self.replicated_axes, self.unreduced_axes))
            object.__setattr__(self, "_hash", cached)
        return cached

    def __getstate__(self) -> dict:
        # Not the cached hash: a mesh name hashes differently in another process.
        state = dict(self.__dict__)
        state.pop("_hash", None)
        return state

    # -- construction ---------------------------------------------------------
    @staticmethod
    def parse(text: str) -> TensorSharding:
        """Parse ``#sdy.sharding<...>`` or the bare ``<...>``."""
        cursor = Cursor(text)
        result = parse_tensor_sharding(cursor)
        _expect_end(cursor, "tensor sharding")
        return result

    @staticmethod
    def fully_open(mesh: str | Mesh, rank: int) -> TensorSharding:
        """Every dimension ``{?}``: nothing sharded yet, everything may be."""
        return TensorSharding(mesh, tuple(DimensionSharding((), is_closed=False) for _ in range(rank)))

    @staticmethod
    def fully_closed(mesh: str | Mesh, rank: int) -> TensorSharding:
        """Every dimension ``{}``: replicated, and must stay so."""
        return TensorSharding(mesh, tuple(DimensionSharding((), is_closed=True) for _ in range(rank)))

    @staticmethod
    def closed(mesh: str | Mesh, axes_per_dim: Sequence[Sequence[AxisRef | str]]) -> TensorSharding:
        """Closed dimension shardings from axis lists (names or ``AxisRef``s)."""
        return TensorSharding(mesh, tuple(DimensionSharding(_refs(axes), is_closed=True) for axes in axes_per_dim))

    # -- views ----------------------------------------------------------------
    @property
    def rank(self) -> int:
        return len(self.dim_shardings)

    @property
    def mesh_name(self) -> str | None:
        """The referenced mesh symbol, None for an inline mesh."""
        return self.mesh if isinstance(self.mesh, str) else None

    def mesh_of(self, meshes: dict[str, Mesh]) -> Mesh:
        """The mesh this sharding is bound to (inline, or looked up in ``meshes``)."""
        if isinstance(self.mesh, Mesh):
            return self.mesh
        if self.mesh not in meshes:
            raise VerifyError(f"unknown mesh: @{self.mesh}")
        return meshes[self.mesh]

    def is_closed(self, dim: int) -> bool:
        return self.dim_shardings[dim].is_closed

    @property
    def is_fully_closed(self) -> bool:
        return all(dim.is_closed for dim in self.dim_shardings)

    @property
    def is_fully_open(self) -> bool:
        return all(dim.is_open for dim in self.dim_shardings)

    @property
    def is_fully_replicated(self) -> bool:
        """No dimension is sharded (replicated/unreduced axes do not matter)."""
        return all(dim.empty_axes for dim in self.dim_shardings)

    @property
    def empty_axes(self) -> bool:
        """No axis is used anywhere, not even as replicated or unreduced."""
        return self.is_fully_replicated and not self.replicated_axes and not self.unreduced_axes

    def axis_refs(self) -> Iterator[AxisRef]:
        """Every axis ref: dimension shardings in order, then replicated, then unreduced."""
        for dim in self.dim_shardings:
            yield from dim.axes
        yield from self.replicated_axes
        yield from self.unreduced_axes

    def sharding_axis_refs(self) -> Iterator[AxisRef]:
        """The axis refs that shard a dimension."""
        for dim in self.dim_shardings:
            yield from dim.axes

    def is_bound(self, axis_name: str) -> bool:
        """``axis_name`` (or a sub-axis of it) is used anywhere in this sharding."""
        return any(ref.name == axis_name for ref in self.axis_refs())

    def can_shard(self, dim: int, axis_name: str) -> bool:
        return not self.is_bound(axis_name) and not self.is_closed(dim)

    def can_replicate(self, axis_name: str) -> bool:
        return not self.is_bound(axis_name)

    def local_shape(self, global_dims: Sequence[int], mesh: Mesh, allow_non_divisible: bool = True
                    ) -> tuple[int, ...] | None:
        """Per-device dimension sizes (rounded up); None when not divisible and that is not allowed."""
        local = []
        for size, dim in zip(global_dims, self.dim_shardings, strict=True):
            shards = dim.sharded_size(mesh)
            if size % shards and not allow_non_divisible:
                return None
            local.append(-(-size // shards))
        return tuple(local)

    def global_shape(self, local_dims: Sequence[int], mesh: Mesh) -> tuple[int, ...]:
        return tuple(size * dim.sharded_size(mesh) for size, dim in zip(local_dims, self.dim_shardings, strict=True))

    # -- derived shardings ----------------------------------------------------
    def replace(self, **changes) -> TensorSharding:
        return dataclasses.replace(self, **changes)

    def with_dim_shardings(self, dim_shardings: Iterable[DimensionSharding]) -> TensorSharding:
        return dataclasses.replace(self, dim_shardings=tuple(dim_shardings))

    def replace_dim_sharding(self, dim: int, sharding: DimensionSharding) -> TensorSharding:
        dims = list(self.dim_shardings)
        dims[dim] = sharding
        return dataclasses.replace(self, dim_shardings=tuple(dims))

    def replace_replicated_axes(self, axes: Iterable[AxisRef]) -> TensorSharding:
        return dataclasses.replace(self, replicated_axes=tuple(axes))

    def replace_unreduced_axes(self, axes: Iterable[AxisRef]) -> TensorSharding:
        return TensorSharding(self.mesh, self.dim_shardings, self.replicated_axes, tuple(axes))

    def close_dims(self, dims: Iterable[int]) -> TensorSharding:
        """Close the given dimensions; like Shardy, this drops their priorities."""
        chosen = set(dims)
        return self.with_dim_shardings(
            DimensionSharding(d.axes, True) if i in chosen else d for i, d in enumerate(self.dim_shardings))

    def open_dims(self, dims: Iterable[int]) -> TensorSharding:
        """Open the given dimensions; like Shardy, this drops their priorities."""
        chosen = set(dims)
        return self.with_dim_shardings(
            DimensionSharding(d.axes, False) if i in chosen else d for i, d in enumerate(self.dim_shardings))

    def closed_like(self) -> TensorSharding:
        """Same dimension axes and priorities, all closed, no replicated/unreduced axes."""
        return TensorSharding(self.mesh, tuple(d.closed() for d in self.dim_shardings))

    def fully_open_like(self) -> TensorSharding:
        return TensorSharding.fully_open(self.mesh, self.rank)

    def fully_closed_like(self) -> TensorSharding:
        return TensorSharding.fully_closed(self.mesh, self.rank)

    def sharded(self, dim: int, axis_name: str) -> TensorSharding:
        """Shard open dimension ``dim`` further along the full axis ``axis_name``."""
        assert self.can_shard(dim, axis_name), f"cannot shard dim {dim} of {self.body()} on {axis_name}"
        old = self.dim_shardings[dim]
        return self.replace_dim_sharding(dim, DimensionSharding((*old.axes, AxisRef(axis_name)), is_closed=False))

    def replicated(self, axis_name: str, mesh: Mesh) -> TensorSharding:
        """Add the full axis ``axis_name`` to the replicated axes, keeping them in mesh order."""
        assert self.can_replicate(axis_name), f"cannot replicate {self.body()} on {axis_name}"
        axes = sorted((*self.replicated_axes, AxisRef(axis_name)), key=lambda ref: ref.sort_key(mesh))
        return self.replace_replicated_axes(axes)

    def without_priorities(self) -> TensorSharding:
        return self.with_dim_shardings(d.without_priority() for d in self.dim_shardings)

    def dim_axes_equal(self, other: TensorSharding) -> bool:
        """Same rank and the same axes per dimension (open/closed and priorities ignored)."""
        return self.rank == other.rank and all(
            a.axes == b.axes for a, b in zip(self.dim_shardings, other.dim_shardings))

    # -- text -----------------------------------------------------------------
    def mesh_text(self) -> str:
        return f"mesh{self.mesh}" if isinstance(self.mesh, Mesh) else print_symbol(self.mesh)

    def body(self) -> str:
        """``<@mesh, [...]>``: the form used inside ``sharding_per_value`` and op syntax."""
        text = "<" + self.mesh_text() + ", [" + ", ".join(str(d) for d in self.dim_shardings) + "]"
        if self.replicated_axes:
            text += ", replicated={" + ", ".join(str(a) for a in self.replicated_axes) + "}"
        if self.unreduced_axes:
            text += ", unreduced={" + ", ".join(str(a) for a in self.unreduced_axes) + "}"
        return text + ">"

    def __str__(self) -> str:
        return "#sdy.sharding" + self.body()


def _refs(axes: Sequence[AxisRef | str]) -> tuple[AxisRef, ...]:
    return tuple(axis if isinstance(axis, AxisRef) else AxisRef(axis) for axis in axes)


def print_symbol(name: str) -> str:
    """``@name``, quoted when it is not a bare MLIR identifier."""
    if _BARE_SYMBOL.fullmatch(name):
        return "@" + name
    return '@"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def print_sharding_list(shardings: Iterable[TensorSharding]) -> str:
    """``[<...>, <...>]`` (as in ``in_shardings=[...]``)."""
    return "[" + ", ".join(s.body() for s in shardings) + "]"


def print_sharding_per_value(shardings: Iterable[TensorSharding]) -> str:
    return "#sdy.sharding_per_value<" + print_sharding_list(shardings) + ">"


# -- parsing --------------------------------------------------------------------

def _expect_end(cursor: Cursor, what: str) -> None:
    if not cursor.at_end():
        raise cursor.error(f"unexpected {cursor.found()} after the {what}")


def parse_dimension_sharding(cursor: Cursor) -> DimensionSharding:
    """``{"a", "b":(1)2, ?}`` followed by an optional priority ``p<N>``."""
    cursor.expect("{", "to start a dimension sharding")
    axes: list[AxisRef] = []
    is_closed = True
    while not cursor.eat("}"):
        if axes and not cursor.eat(","):
            raise cursor.error(f"expected ',' or '}}' in a dimension sharding, got {cursor.found()}")
        if cursor.eat("?"):
            is_closed = False
            cursor.expect("}", "after '?' in a dimension sharding")
            break
        axes.append(parse_axis_ref(cursor))
    return DimensionSharding(tuple(axes), is_closed, _parse_priority(cursor))


def _parse_priority(cursor: Cursor) -> int | None:
    cursor.skip_space()
    start = cursor.pos
    match = _KEYWORD.match(cursor.text, cursor.pos)
    if not match:
        return None
    word = match.group()
    digits = word[1:]
    if len(word) < 2 or word[0] != "p" or not digits.isdigit() or not digits.isascii():
        raise cursor.error(f"expecting priority in format 'p<number>', got: {word}", start)
    if digits.startswith("0") and len(digits) > 1:
        raise cursor.error(f"priorities with leading zeros are not allowed, got: {word}", start)
    if int(digits) > _INT64_MAX:
        raise cursor.error(f"expecting integer priority, got: {word}", start)
    cursor.pos = match.end()
    return int(digits)


def _parse_symbol(cursor: Cursor) -> str:
    cursor.skip_space()
    quoted = _QUOTED_SYMBOL.match(cursor.text, cursor.pos)
    if quoted:
        cursor.pos = quoted.end()
        return re.sub(r"\\(.)", r"\1", quoted.group(1))
    return cursor.match(_BARE_SYMBOL, "a mesh symbol name after '@'").group()


def parse_mesh_or_ref(cursor: Cursor) -> str | Mesh:
    """``@name`` or an inline ``mesh<...>``."""
    if cursor.eat("@"):
        return _parse_symbol(cursor)
    if cursor.ident() == "mesh":
        cursor.pos += len("mesh")
        return parse_mesh(cursor)
    raise cursor.error(f"expected a mesh symbol '@name' or an inline 'mesh<...>', got {cursor.found()}")


def _parse_axis_list(cursor: Cursor, what: str) -> tuple[AxisRef, ...]:
    cursor.expect("=", f"after '{what}'")
    return tuple(cursor.delimited("{", "}", lambda: parse_axis_ref(cursor), f"the {what} axes"))


def parse_tensor_sharding(cursor: Cursor) -> TensorSharding:
    """``#sdy.sharding<...>`` or the bare ``<mesh_or_ref, [dims], replicated={...}, unreduced={...}>``."""
    cursor.eat("#sdy.sharding")
    cursor.expect("<", "to start a tensor sharding")
    mesh = parse_mesh_or_ref(cursor)
    cursor.expect(",", "after the mesh of a tensor sharding")
    dims = cursor.delimited("[", "]", lambda: parse_dimension_sharding(cursor), "the dimension shardings")
    replicated: tuple[AxisRef, ...] = ()
    unreduced: tuple[AxisRef, ...] = ()
    seen: set[str] = set()
    while cursor.eat(","):
        word = cursor.ident()
        if word not in ("replicated", "unreduced") or word in seen:
            raise cursor.error(f"expected 'replicated={{...}}' or 'unreduced={{...}}' in a tensor sharding, "
                               f"got {cursor.found()}")
        seen.add(word)
        cursor.pos += len(word)
        if word == "replicated":
            replicated = _parse_axis_list(cursor, word)
        else:
            unreduced = _parse_axis_list(cursor, word)
    cursor.expect(">", "to end a tensor sharding")
    return TensorSharding(mesh, tuple(dims), replicated, unreduced)


def parse_sharding_list(cursor: Cursor) -> list[TensorSharding]:
    """``[<...>, <...>]``."""
    return cursor.delimited("[", "]", lambda: parse_tensor_sharding(cursor), "the list of shardings")


def parse_sharding_per_value(cursor: Cursor) -> list[TensorSharding]:
    """``#sdy.sharding_per_value<[<...>, ...]>`` (the ``#sdy.sharding_per_value`` prefix is optional)."""
    cursor.eat("#sdy.sharding_per_value")
    cursor.expect("<", "to start a sharding_per_value")
    shardings = parse_sharding_list(cursor)
    cursor.expect(">", "to end a sharding_per_value")
    return shardings


def parse_sharding_per_value_text(text: str) -> list[TensorSharding]:
    cursor = Cursor(text)
    result = parse_sharding_per_value(cursor)
    _expect_end(cursor, "sharding_per_value")
    return result
