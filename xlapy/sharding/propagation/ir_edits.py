"""Edits of the module's structure that Shardy's import and export steps
make: moving, cloning, creating and removing ops, keeping the records of how
the frontend that read the module will print it (``instr.mlir``,
``module.mlir``, see ``xlapy.hlo.mlir_structure``) in step. An instruction or
module without a record (not read from MLIR) has nothing to keep."""

from __future__ import annotations

from xlapy.hlo import HloComputation, HloInstruction, HloModule
from xlapy.hlo.mlir_structure import copy_source, encodes_mlir_structure, op_results, source_of
from xlapy.sharding.mesh import Mesh
from xlapy.sharding.tensor_sharding import TensorSharding


def rename_op(instr: HloInstruction, mlir_name: str) -> None:
    """Print ``instr`` as the MLIR op ``mlir_name`` (e.g. a constant as ``sdy.constant``)."""
    source_of(instr).rename_op(mlir_name)


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
    definer = value.operands[0] if value.opcode == "get-tuple-element" and encodes_mlir_structure(value) else value
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
    copy_source(instr, copy)
    if not keep_name:
        source_of(copy).forget_result_names()
    copy.sdy_sharding = instr.sdy_sharding
    computation.add_instruction(copy, before=before or instr)
    return copy


def forget_name(instr: HloInstruction) -> None:
    """Print ``instr`` with a fresh SSA name (its name went to a copy)."""
    copy_source(instr, instr)
    source_of(instr).forget_result_names()


def new_constraint_after(value: HloInstruction, sharding: TensorSharding) -> HloInstruction:
    """A new ``sdy.sharding_constraint`` of ``value`` right after its definition."""
    computation = value.parent
    constraint = HloInstruction("sharding_constraint", "sdy.sharding_constraint", value.shape, [value])
    constraint.sdy_sharding = sharding
    _give_record(constraint, computation)
    computation.add_instruction(constraint)
    move_after_value(constraint, value)
    return constraint


def _new_reshard(value: HloInstruction, sharding: TensorSharding, computation: HloComputation,
                 before: HloInstruction | None) -> HloInstruction:
    reshard = HloInstruction("reshard", "sdy.reshard", value.shape, [value])
    reshard.sdy_sharding = sharding
    _give_record(reshard, computation)
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
    is_function = computation.mlir is not None and computation.mlir.is_function
    for user in list(value.users):
        if user is exclude or user.parent is not computation or position[id(user)] <= tail_at:
            continue
        if user is computation.root and encodes_mlir_structure(user) and is_function:
            continue
        user.replace_operand_with(value, tail)
    if computation.root is value and not is_function and value.parent is computation:
        computation.root = tail


def set_meshes(module: HloModule, meshes: dict[str, Mesh]) -> None:
    """The module's meshes become ``meshes`` (in that order; new ones print
    before the first function)."""
    module.meshes.clear()
    module.meshes.update(meshes)


def _give_record(instr: HloInstruction, computation: HloComputation) -> None:
    """A new op of ``computation`` prints as the MLIR op its opcode names."""
    module = computation.module
    if module is not None and module.mlir is not None:
        instr.mlir = module.mlir.new_op_record(instr.opcode, instr.shape)


def renumber_values(module: HloModule, functions: list[HloComputation]) -> None:
    """The values of ``functions`` print numbered as MLIR's printer numbers
    them after ops were added and removed."""
    if module.mlir is not None:
        module.mlir.renumber_values(functions)
