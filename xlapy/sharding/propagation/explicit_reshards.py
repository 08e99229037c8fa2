"""The last step of Shardy's propagation pipeline: explicit reshards where an
op's operands and results are sharded incompatibly under its sharding rule
(``sdy-insert-explicit-reshards`` as the pipeline runs it, without its full
version).

Only two kinds of op get reshards:

- a concatenate whose operands are not all sharded exactly like its result:
  every factor gets one sharding (``explicit_reshards_factors``), operands
  sharded otherwise are resharded to it before the op, and the result, if it
  differs, is computed that way and resharded back after the op;
- a dot (or dot_general) whose result shards a dimension with the
  contracting axes (``explicit_reshards_dot``).

Ops are visited as MLIR walks a function: the ops of an op's regions before
the op itself, and reshards added after an op are not visited. Data-flow ops,
calls and ops without a rule (or with the user's own) get none. What the pass
does for values with unreduced axes (all-reduces and other collectives) is
not supported: an op using or defining such a value is reported."""

from __future__ import annotations

from collections import Counter

from xlapy.errors import UnimplementedError
from xlapy.hlo import HloComputation, HloInstruction, HloModule
from xlapy.hlo.mlir_structure import encodes_mlir_structure, op_results, source_of
from xlapy.sharding.mesh import Mesh
from xlapy.sharding.propagation import ir_edits
from xlapy.sharding.propagation.axes import erase_manual_axes
from xlapy.sharding.propagation.explicit_reshards_dot import dot_result_factor_axes, element_count
from xlapy.sharding.propagation.explicit_reshards_factors import common_factor_axes
from xlapy.sharding.propagation.projection import ShardingProjection, TensorFactorShardings
from xlapy.sharding.rules.lookup import op_sharding_rule
from xlapy.sharding.sharding_rule import OpShardingRule
from xlapy.sharding.tensor_sharding import TensorSharding
from xlapy.sharding.values import region_owners

MeshRef = str | Mesh


def insert_explicit_reshards(module: HloModule, functions: list[HloComputation]) -> None:
    """Add the reshards to ``functions`` (the module's functions, after the
    pipeline's export steps)."""
    ExplicitReshards(module).run(functions)


class ExplicitReshards:
    """The pass over one module: which op owns each region, and the meshes."""

    def __init__(self, module: HloModule):
        self.meshes: dict[str, Mesh] = module.meshes
        # The op owning each region (calls excluded: their callee is a function).
        self.region_op: dict[int, HloInstruction] = region_owners(module)

    def run(self, functions: list[HloComputation]) -> None:
        for function in functions:
            self._walk(function)

    def _walk(self, computation: HloComputation) -> None:
        # A copy: ops inserted while visiting are not visited.
        for instr in list(computation.instructions):
            if instr.opcode == "parameter" or encodes_mlir_structure(instr):
                continue
            if instr.opcode != "call":
                for region in instr.called_computations:
                    self._walk(region)
            self._visit(instr)

    # -- shardings as the pass reads them ---------------------------------------------
    def sharding(self, value: HloInstruction) -> TensorSharding | None:
        """The sharding of ``value``; a region argument shares it with what it
        stands for (a while's result, a manual computation's in_sharding
        without the manual axes)."""
        if value.opcode != "parameter" or value.parent is None:
            return value.sdy_sharding
        owner = self.region_op.get(id(value.parent))
        if owner is None:
            return value.sdy_sharding
        index = value.parameter_number
        if owner.opcode == "stablehlo.while":
            results = op_results(owner)
            return results[index].sdy_sharding if index < len(results) else None
        if owner.opcode == "sdy.manual_computation":
            in_shardings = owner.attributes.get("in_shardings")
            if not in_shardings:
                return None
            return erase_manual_axes(in_shardings[index], tuple(owner.attributes.get("manual_axes", ())))
        return None

    def _function_of(self, instr: HloInstruction) -> HloComputation:
        computation = instr.parent
        while id(computation) in self.region_op:
            computation = self.region_op[id(computation)].parent
        return computation

    def _op_mesh(self, shardings: list[TensorSharding | None]) -> tuple[MeshRef, Mesh] | None:
        """The mesh the op's reshards use: None when no tensor has a sharding,
        their meshes differ (device order aside) or it is a maximal mesh;
        else the mesh most of the sharded tensors use (the first of those
        tied), by default the first tensor's."""
        common: tuple[MeshRef, Mesh] | None = None
        for sharding in shardings:
            if sharding is None:
                continue
            mesh = sharding.mesh_of(self.meshes)
            if common is None or common[1].is_empty:
                common = (sharding.mesh, mesh)
            elif mesh.axes != common[1].axes and not mesh.is_empty:
                return None
        if common is None or common[1].is_maximal:
            return None
        counts: Counter = Counter()
        best, best_count = common, 0
        for sharding in shardings:
            if sharding is not None and not sharding.is_fully_replicated:
                counts[sharding.mesh] += 1
                if counts[sharding.mesh] > best_count:
                    best, best_count = (sharding.mesh, sharding.mesh_of(self.meshes)), counts[sharding.mesh]
        return best

    # -- ops ------------------------------------------------------------------------------
    def _visit(self, instr: HloInstruction) -> None:
        results = op_results(instr)
        operand_shardings = [self.sharding(o) for o in instr.operands]
        result_shardings = [r.sdy_sharding for r in results]
        _reject_unreduced(instr, self._function_of(instr), operand_shardings + result_shardings)
        if instr.opcode not in ("concatenate", "dot"):
            return
        rule = op_sharding_rule(instr)
        if rule is None or rule.is_custom:
            return
        chosen = self._op_mesh(operand_shardings + result_shardings)
        if chosen is None:
            return
        mesh_ref, mesh = chosen
        projection = ShardingProjection.build(operand_shardings, result_shardings, rule, mesh,
                                              closed_if_missing=True)
        if instr.opcode == "concatenate":
            if any(s != result_shardings[0] for s in operand_shardings):
                self._reshard_to_common_axes(instr, rule, projection, operand_shardings, result_shardings,
                                             mesh_ref, mesh)
            return
        found = dot_result_factor_axes(instr, projection, rule)
        if found is not None:
            factor, axes = found
            projection.results[0].factors[factor].axes = axes
            sharding = projection.results[0].to_tensor_sharding(rule.result_mappings[0], rule.factor_sizes,
                                                                mesh_ref, mesh)
            _compute_result_as(instr, sharding, result_shardings[0])

    def _reshard_to_common_axes(self, instr: HloInstruction, rule: OpShardingRule, projection: ShardingProjection,
                                operand_shardings: list[TensorSharding | None],
                                result_shardings: list[TensorSharding | None], mesh_ref: MeshRef,
                                mesh: Mesh) -> None:
        results = op_results(instr)
        sizes = [element_count(v) for v in (*instr.operands, *results)]
        axes_per_factor = common_factor_axes(projection, rule, sizes, mesh)
        changed_operands = [False] * len(projection.operands)
        changed_results = [False] * len(projection.results)
        for factor, axes in enumerate(axes_per_factor):
            for changed, tensors in ((changed_operands, projection.operands), (changed_results, projection.results)):
                for index, tensor in enumerate(tensors):
                    if _set_factor_axes(tensor, factor, axes):
                        changed[index] = True
        for index, operand in enumerate(list(instr.operands)):
            if changed_operands[index] or self._other_device_order(operand_shardings[index], mesh):
                sharding = projection.operands[index].to_tensor_sharding(
                    rule.operand_mappings[index], rule.factor_sizes, mesh_ref, mesh)
                instr.replace_operand(index, ir_edits.new_reshard_before(instr, operand, sharding))
        for index, result in enumerate(results):
            if changed_results[index] or self._other_device_order(result_shardings[index], mesh):
                sharding = projection.results[index].to_tensor_sharding(
                    rule.result_mappings[index], rule.factor_sizes, mesh_ref, mesh)
                _compute_result_as(result, sharding, result_shardings[index]
                                   or TensorSharding.fully_closed(mesh_ref, len(result.shape.dimensions)))

    def _other_device_order(self, sharding: TensorSharding | None, mesh: Mesh) -> bool:
        """A sharded tensor on the op's mesh with another device order is
        resharded onto the op's mesh."""
        if sharding is None or sharding.is_fully_replicated:
            return False
        return sharding.mesh_of(self.meshes).device_ids != mesh.device_ids


def _set_factor_axes(tensor: TensorFactorShardings, factor: int, axes: tuple) -> bool:
    """Give ``factor`` of ``tensor`` exactly ``axes``; whether that changed it."""
    sharding = tensor.factors.get(factor)
    if sharding is None or (sharding.axes == list(axes) and not sharding.overflow_axes):
        return False
    sharding.axes, sharding.overflow_axes = list(axes), []
    return True


def _compute_result_as(result: HloInstruction, sharding: TensorSharding, original: TensorSharding) -> None:
    """``result`` is computed with ``sharding``; a reshard right after it gives
    its users the ``original`` sharding."""
    reshard = ir_edits.new_reshard_after(result, original)
    ir_edits.replace_uses_except(result, reshard, keep=reshard)
    result.sdy_sharding = sharding


def _describe(instr: HloInstruction, function: HloComputation) -> str:
    """The op as the program names it: ``stablehlo.dot_general %3 in @main``."""
    return f"{source_of(instr).describe() or instr.opcode} in @{function.name}"


def _reject_unreduced(instr: HloInstruction, function: HloComputation,
                      shardings: list[TensorSharding | None]) -> None:
    for sharding in shardings:
        if sharding is not None and sharding.unreduced_axes:
            raise UnimplementedError(
                f"{_describe(instr, function)}: a value with unreduced axes "
                f"({', '.join(map(str, sharding.unreduced_axes))}) at explicit-reshard insertion, which would "
                "need Shardy's unreduced collectives (sdy.all_reduce...): not supported")
