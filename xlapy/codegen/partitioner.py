"""The computation partitioner (XLA's computation_partitioner; docs/emitters.md).

A fused computation is split into subgraphs, each of which can be emitted as
one function computing its roots at one set of indices:

- an instruction with one user goes with its user;
- an instruction with several users joins them only if they are all in one
  subgraph and all read it through the same indexing map (from that
  subgraph's root indices); otherwise it roots a subgraph of its own.

Parameters belong to no subgraph: functions read them with
``tensor.extract``. The roots of the computation (the operands of a root
tuple) are the results of the first subgraph together. A root that an
instruction of another subgraph reads is computed by a subgraph of its own,
which the first one calls: as in XLA, where a value whose users lie in
several subgraphs roots one, no function calls back into a function that
calls it (the first one would otherwise call its reader, which calls it).

One more rule gives the partition of XLA's docs/emitters.md example (``log``/``transpose``/``add`` in
three functions): an index-changing instruction (not elementwise) that reads
another subgraph's value roots a subgraph of its own, so that functions call
each other only at their own indices. Today's XLA keeps such an instruction
with its user (two functions for the emitters document's example); the calls are inlined either way.

A reduce (or reduce-window) reads its inputs at indices with range variables, many elements per output element:
they are computed by functions of their own, called in the reduction loop. The computations that fused
instructions apply to elements (reducers) are not partitioned: each becomes one function of scalars.
A variadic reduce's tuple value is computed at the indices of its first result (``index_shape``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from xlapy.errors import UnimplementedError
from xlapy.hlo.ir import HloComputation, HloInstruction
from xlapy.indexing import IndexingMap
from xlapy.indexing.ops import op_output_to_input
from xlapy.shapes import Shape


@dataclass(eq=False)
class Subgraph:
    """Instructions emitted together in one function. ``roots`` are its
    results; ``instructions`` are in def-before-use order."""

    name: str
    roots: list[HloInstruction]
    instructions: list[HloInstruction] = field(default_factory=list)

    @property
    def index_rank(self) -> int:
        return len(index_shape(self.roots[0].shape).dimensions)


@dataclass
class PartitionedComputation:
    computation: HloComputation
    subgraphs: list[Subgraph]
    subgraph_of: dict[HloInstruction, Subgraph]

    @property
    def root_subgraph(self) -> Subgraph:
        return self.subgraphs[0]


def index_shape(shape: Shape) -> Shape:
    """The shape whose indices a value is computed at: a tuple's first element for a variadic reduce, whose
    results all have its dimensions (XLA's ``GetIndexShape``)."""
    return shape.tuple_shapes[0] if shape.is_tuple else shape


def computation_roots(computation: HloComputation) -> list[HloInstruction]:
    """The instructions a computation returns; a root tuple stands for its
    operands (internal tuples are not supported, as in XLA)."""
    root = computation.root
    if root.opcode != "tuple":
        return [root]
    roots = list(dict.fromkeys(root.operands))
    for r in roots:
        if r.opcode == "tuple" or r.shape.tuple_shapes:
            raise UnimplementedError(f"nested tuple output {r.name} in {computation.name}")
    return roots


def _function_name(computation: HloComputation, root: HloInstruction, first: bool) -> str:
    name = computation.name if first else f"{computation.name}_{root.name}"
    return re.sub(r"[^A-Za-z0-9_.$]", "_", name)


def partition(computation: HloComputation) -> PartitionedComputation:
    """Partitions ``computation`` by the rules of XLA's computation partitioner."""
    forced: set[HloInstruction] = set()
    while True:
        partitioned = _partition(computation, forced)
        remapping = {i for i in computation.instructions if _reads_other_subgraph_remapped(i, partitioned)}
        if remapping <= forced:
            return partitioned
        forced |= remapping


def _is_elementwise(instr: HloInstruction) -> bool:
    maps = op_output_to_input(instr)
    for operand, operand_maps in zip(instr.operands, maps):
        if len(operand.shape.dimensions) == 0:
            continue
        for m in operand_maps:
            if m.is_undefined() or m.range_vars or not m.reads_its_own_indices():
                return False
    return True


def _reads_other_subgraph_remapped(instr: HloInstruction, partitioned: PartitionedComputation) -> bool:
    owner = partitioned.subgraph_of.get(instr)
    if owner is None or instr in owner.roots:
        return False
    others = [op for op in instr.operands
              if op.opcode not in ("parameter", "constant") and partitioned.subgraph_of.get(op) is not owner]
    return bool(others) and not _is_elementwise(instr)


def _partition(computation: HloComputation, forced: set[HloInstruction]) -> PartitionedComputation:
    roots = computation_roots(computation)
    root_dims = index_shape(roots[0].shape).dimensions
    for r in roots[1:]:
        if index_shape(r.shape).dimensions != root_dims:
            raise UnimplementedError(
                f"multi-output fusion {computation.name} with outputs of different shapes "
                f"({roots[0].shape} and {r.shape})")
    first = Subgraph(_function_name(computation, roots[0], True), list(roots))
    subgraph_of: dict[HloInstruction, Subgraph] = {}
    # The map from the indices of an instruction's subgraph root to its own.
    from_root: dict[HloInstruction, IndexingMap] = {}
    subgraphs = [first]
    is_root = set(roots)
    # Instructions the root does not depend on compute nothing: they get no subgraph, and as users they do not
    # keep a value out of its user's subgraph.
    live = reached([computation.root])
    order = [i for i in computation.post_order()
             if id(i) in live and (i.opcode != "tuple" or i is not computation.root)]
    for instr in reversed(order):
        if instr in subgraph_of or instr.opcode == "parameter":
            continue
        users = [u for u in dict.fromkeys(instr.users) if u.opcode != "parameter" and id(u) in live]
        if instr in is_root:
            # An output is returned by the first function. It is computed there too unless an instruction of
            # another function reads it: that function would call the first one, which calls it back (its
            # output needs that function's value), without end. Such an output is computed by a function
            # of its own, which both call (XLA's partitioner gives a value read by several functions its own).
            outside = [u for u in users if u is not computation.root and subgraph_of.get(u) is not first]
            if outside:
                sub = Subgraph(_function_name(computation, instr, False), [instr])
                subgraphs.append(sub)
                subgraph_of[instr] = sub
            else:
                subgraph_of[instr] = first
            from_root[instr] = IndexingMap.identity(list(root_dims))
            continue
        joined = None if instr in forced else _common_subgraph(instr, users, subgraph_of, from_root)
        if joined is None:
            sub = Subgraph(_function_name(computation, instr, False), [instr])
            subgraphs.append(sub)
            subgraph_of[instr] = sub
            from_root[instr] = IndexingMap.identity(list(index_shape(instr.shape).dimensions))
        else:
            subgraph_of[instr], from_root[instr] = joined
    for instr in computation.post_order():
        if instr in subgraph_of:
            subgraph_of[instr].instructions.append(instr)
    return PartitionedComputation(computation, subgraphs, subgraph_of)


def reached(values: list[HloInstruction]) -> set[int]:
    """The ids of ``values`` and of every instruction they depend on."""
    found, pending = {id(v) for v in values}, list(values)
    while pending:
        for operand in pending.pop().operands:
            if id(operand) not in found:
                found.add(id(operand))
                pending.append(operand)
    return found


def _common_subgraph(instr, users, subgraph_of, from_root) -> tuple[Subgraph, IndexingMap] | None:
    """The subgraph ``instr`` may join and its map from that subgraph's root,
    or None when its users read it at different indices."""
    if not users or any(u not in subgraph_of for u in users):
        return None
    owners = {subgraph_of[u] for u in users}
    if len(owners) != 1:
        return None
    maps: set[IndexingMap] = set()
    for user in users:
        per_operand = op_output_to_input(user)
        for k, operand in enumerate(user.operands):
            if operand is not instr:
                continue
            for m in per_operand[k]:
                if m.is_undefined():
                    return None
                maps.add(from_root[user].compose(m).simplify().remove_unused_symbols())
    if len(maps) != 1:
        return None
    (only,) = maps
    # A map with range variables reads many elements per root index (a
    # reduction); such an operand is computed by a function of its own.
    return (owners.pop(), only) if not only.range_vars else None
