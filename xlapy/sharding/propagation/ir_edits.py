"""Edits of the module's structure that Shardy's import and export steps
make: moving, cloning, creating and removing ops, keeping what the StableHLO
frontend needs to print them (``instr.mlir``) consistent."""

from __future__ import annotations

import copy as copy_module
import re

from xlapy.hlo import HloComputation, HloInstruction, HloModule
from xlapy.sharding.mesh import Mesh
from xlapy.sharding.tensor_sharding import TensorSharding
from xlapy.sharding.values import is_implicit, op_results


def _record_copy(record):
    return None if record is None else copy_module.copy(record)


def rename_op(instr: HloInstruction, mlir_name: str) -> None:
    """Print ``instr`` as the MLIR op ``mlir_name`` (e.g. a constant as ``sdy.constant``)."""
    record = instr.mlir
    if record is not None and hasattr(record, "name"):
        record.name = mlir_name


def mark_sdy_constant(instr: HloInstruction) -> None:
    rename_op(instr, "sdy.constant")


def to_reshard(instr: HloInstruction) -> None:
    instr.opcode = "sdy.reshard"
    rename_op(instr, "sdy.reshard")


def _position_after(value: HloInstruction) -> int:
    """Index in its computation right after ``value``'s op (after all the
    results of a multi-result op; after the arguments for an argument)."""
    computation = value.parent
    instructions = computation.instructions
    if value.opcode == "parameter":
        return max((i + 1 for i, instr in enumerate(instructions) if instr.opcode == "parameter"), default=0)
    definer = value.operands[0] if value.opcode == "get-tuple-element" and is_implicit(value) else value
    index = instructions.index(definer) + 1
    results = {id(r) for r in op_results(definer)} if definer.shape.is_tuple else set()
    while index < len(instructions) and id(instructions[index]) in results:
        index += 1
    return index


def move_after_value(instr: HloInstruction, value: HloInstruction) -> HloInstruction:
    computation = instr.parent
    computation.instructions.remove(instr)
    computation.instructions.insert(_position_after(value), instr)
    return instr


def clone_before(instr: HloInstruction, operands: list[HloInstruction], before: HloInstruction | None = None,
                 keep_name: bool = False) -> HloInstruction:
    """A copy of ``instr`` on ``operands``, inserted before ``before`` (default:
    ``instr``). It prints with a fresh SSA name unless ``keep_name`` (for the
    copy that takes the place of an op about to be removed)."""
    computation = instr.parent
    copy = instr.clone(operands, suffix="split")
    copy.mlir = _record_copy(instr.mlir)
    if not keep_name and hasattr(copy.mlir, "results"):
        copy.mlir.results = []
    copy.sdy_sharding = instr.sdy_sharding
    computation.add_instruction(copy, before=before or instr)
    return copy


def forget_name(instr: HloInstruction) -> None:
    """Print ``instr`` with a fresh SSA name (its name went to a copy)."""
    if hasattr(instr.mlir, "results"):
        instr.mlir = _record_copy(instr.mlir)
        instr.mlir.results = []


def new_constraint_after(value: HloInstruction, sharding: TensorSharding) -> HloInstruction:
    """A new ``sdy.sharding_constraint`` of ``value`` right after its definition."""
    computation = value.parent
    constraint = HloInstruction("sharding_constraint", "sdy.sharding_constraint", value.shape, [value])
    constraint.sdy_sharding = sharding
    _ensure_record(constraint)
    computation.add_instruction(constraint)
    move_after_value(constraint, value)
    return constraint


def _new_reshard(value: HloInstruction, sharding: TensorSharding, computation: HloComputation,
                 before: HloInstruction | None) -> HloInstruction:
    reshard = HloInstruction("reshard", "sdy.reshard", value.shape, [value])
    reshard.sdy_sharding = sharding
    _ensure_record(reshard)
    computation.add_instruction(reshard, before=before)
    return reshard


def new_reshard_before(user: HloInstruction, value: HloInstruction, sharding: TensorSharding) -> HloInstruction:
    """A new ``sdy.reshard`` of ``value`` right before ``user``."""
    return _new_reshard(value, sharding, user.parent, user)


def new_reshard_after(value: HloInstruction, sharding: TensorSharding) -> HloInstruction:
    """A new ``sdy.reshard`` of ``value`` right after its definition."""
    reshard = _new_reshard(value, sharding, value.parent, None)
    return move_after_value(reshard, value)


def replace_uses_except(value: HloInstruction, new: HloInstruction, keep: HloInstruction | None) -> None:
    """Every use of ``value`` (the computation's result too) except by ``keep`` now uses ``new``."""
    for user in list(value.users):
        if user is not keep:
            user.replace_operand_with(value, new)
    computation = value.parent
    if computation is not None and computation.root is value:
        computation.root = new


def replace_later_uses(value: HloInstruction, tail: HloInstruction, exclude: HloInstruction) -> None:
    """Uses of ``value`` after ``tail`` in its block (but not the function's
    return, nor ``exclude``) use ``tail`` instead."""
    computation: HloComputation = tail.parent
    position = {id(instr): i for i, instr in enumerate(computation.instructions)}
    tail_at = position[id(tail)]
    is_function = getattr(computation.mlir, "is_function", None)
    for user in list(value.users):
        if user is exclude or user.parent is not computation or position[id(user)] <= tail_at:
            continue
        if user is computation.root and is_implicit(user) and is_function:
            continue
        user.replace_operand_with(value, tail)
    if computation.root is value and not is_function and value.parent is computation:
        computation.root = tail


def set_meshes(module: HloModule, meshes: dict[str, Mesh]) -> None:
    """The module's meshes become ``meshes`` (in that order; new ones print
    before the first function)."""
    module.meshes.clear()
    module.meshes.update(meshes)


def _ensure_record(instr: HloInstruction):
    """The op's MLIR record, made for ops created by propagation."""
    from xlapy.frontends.mlir_syntax import type_of
    from xlapy.frontends.stablehlo_ops.records import OpRecord

    if not isinstance(instr.mlir, OpRecord):
        shapes = instr.shape.tuple_shapes if instr.shape.is_tuple else (instr.shape,)
        instr.mlir = OpRecord(instr.opcode, [], {}, (), [type_of(s) for s in shapes])
    return instr.mlir


_CONSTANT_NAME = re.compile(r"(c|cst)(_\d+)?")


def _keeps_name(op_name: str, name: str) -> bool:
    """Whether a result keeps the name the text gave it: names of the user's
    are kept, but the names MLIR gives constants (``%cst``, ``%c_3``) go when
    the constant is no longer a ``stablehlo.constant`` (an ``sdy.constant``
    made by splitting constants), as MLIR then numbers it."""
    from xlapy.frontends.stablehlo_ops import spec_for

    if name.isdigit():
        return False
    if op_name == "stablehlo.constant" or not _CONSTANT_NAME.fullmatch(name):
        return True
    spec = spec_for(op_name)
    return spec is not None and bool(spec.result_names)


def renumber_values(functions: list[HloComputation]) -> None:
    """Number op results the way MLIR's printer does after ops were added or
    removed: per block in order, each nested region continuing from the count
    after its parent block; named results keep their names (see ``_keeps_name``)."""
    for function in functions:
        stack = [(function, 0)]
        while stack:
            region, next_value = stack.pop()
            body = [i for i in region.instructions if i.opcode != "parameter" and not is_implicit(i)]
            for instr in body:
                count = len(op_results(instr)) if instr.shape.is_tuple else 1
                if instr.shape.is_tuple and not op_results(instr):
                    count = 0
                if count == 0:
                    continue
                record = _ensure_record(instr)
                if record.results and all(_keeps_name(record.name, name) for name, _ in record.results):
                    continue
                record.results = [(str(next_value), count)]
                next_value += 1
            for instr in body:
                if instr.opcode != "call":
                    stack.extend((callee, next_value) for callee in instr.called_computations)
