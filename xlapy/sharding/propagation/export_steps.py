"""The steps Shardy runs on a module after propagation (its export pipeline,
up to where it hands the module to the partitioner): sharding groups are
removed, sharding constraints become reshards, function inputs and outputs
are made evenly divisible (and the main function's free of sub-axes in open
dimensions), and every sharding is closed."""

from __future__ import annotations

from math import gcd

import numpy as np

from xlapy.hlo import HloComputation, HloInstruction, HloModule
from xlapy.hlo.mlir_structure import region_results, source_of
from xlapy.sharding.axis_ref import AxisRef
from xlapy.sharding.mesh import Mesh
from xlapy.sharding.propagation import ir_edits
from xlapy.sharding.propagation.graph import DATA_FLOW_OPCODES, ProgramGraph, is_static_array
from xlapy.sharding.propagation.module_shardings import transform_shardings
from xlapy.sharding.tensor_sharding import DimensionSharding, TensorSharding


def _written_attributes(instr: HloInstruction) -> dict[str, str]:
    """The attributes the text gave ``instr`` that the IR does not hold."""
    return source_of(instr).attribute_texts()


def _attributes_key(instr: HloInstruction) -> tuple:
    return tuple(sorted((k, v) for k, v in _written_attributes(instr).items() if k != "value"))


def _constant_key(instr: HloInstruction) -> tuple | None:
    literal = instr.literal
    if isinstance(literal, np.ndarray):
        value = (literal.dtype.str, literal.shape, literal.tobytes())
    else:
        value = _written_attributes(instr).get("value", str(literal))
    return ("constant", str(instr.shape), value, instr.sdy_sharding, _attributes_key(instr))


def merge_constants_and_scalar_broadcasts(module: HloModule) -> bool:
    """Identical constants, and identical broadcasts of one scalar, with the
    same sharding in the same region become one (undoing the splitting
    where propagation gave the copies the same sharding). Whether any merged."""
    merged = False
    for computation in module.computations:
        seen: dict[tuple, object] = {}
        for instr in list(computation.instructions):
            if instr.opcode == "constant":
                key = _constant_key(instr)
            elif instr.opcode == "broadcast" and instr.operands[0].shape.is_array \
                    and not instr.operands[0].shape.dimensions:
                key = ("broadcast", str(instr.shape), tuple(instr.attributes.get("dimensions", ())),
                       id(instr.operands[0]), instr.sdy_sharding, _attributes_key(instr))
            else:
                continue
            first = seen.setdefault(key, instr)
            if first is not instr:
                ir_edits.replace_uses_except(instr, first, None)
                computation.remove_instruction(instr)
                merged = True
    return merged


def remove_sharding_groups(module: HloModule) -> None:
    for computation in module.computations:
        for instr in list(computation.instructions):
            if instr.opcode == "sdy.sharding_group":
                if instr.attributes.get("has_result"):
                    ir_edits.replace_uses_except(instr, instr.operands[0], None)
                computation.remove_instruction(instr)


def constraints_to_reshards(module: HloModule) -> None:
    for computation in module.computations:
        for instr in computation.instructions:
            if instr.opcode == "sdy.sharding_constraint":
                ir_edits.to_reshard(instr)


def evenly_sharded(sharding: TensorSharding, dims: tuple[int, ...], mesh: Mesh) -> TensorSharding:
    """The largest prefix of each dimension sharding that divides the dimension."""
    new_dims = []
    for dim, size in zip(sharding.dim_shardings, dims):
        if size % dim.sharded_size(mesh) == 0:
            new_dims.append(dim)
            continue
        remaining, axes = size, []
        for axis in dim.axes:
            axis_size = axis.size(mesh)
            common = gcd(axis_size, remaining)
            if common == 1:
                break
            if common == axis_size:
                axes.append(axis)
                remaining //= common
            else:
                axes.append(AxisRef(axis.name, (axis.pre_size, common)))
                break
        new_dims.append(DimensionSharding(tuple(axes), dim.is_closed))
    return TensorSharding(sharding.mesh, tuple(new_dims), sharding.replicated_axes, sharding.unreduced_axes)


def update_non_divisible_io_shardings(module: HloModule, graph: ProgramGraph,
                                     funcs: list[HloComputation]) -> None:
    """Function arguments and results, and manual computation edges, get
    shardings that divide their dimensions evenly."""
    def update(value, dims: tuple[int, ...]) -> None:
        sharding = graph.get(value)
        if sharding is not None:
            graph.set(value, evenly_sharded(sharding, dims, graph.mesh_of(sharding)))

    for func in funcs:
        for param in func.parameters:
            if is_static_array(param) and id(param) not in graph.alias:
                update(param, tuple(param.shape.dimensions))
        for index, value in enumerate(region_results(func)):
            if is_static_array(value) and index < len(func.result_shardings) and func.result_shardings[index]:
                sharding = func.result_shardings[index]
                func.result_shardings[index] = evenly_sharded(sharding, tuple(value.shape.dimensions),
                                                              graph.mesh_of(sharding))
    for edge in graph.edges:
        # Like Shardy's walk, which does not enter the regions of data-flow ops.
        if edge.op.opcode == "sdy.manual_computation" and not _inside_data_flow_op(edge.op, graph):
            update(edge.store, tuple(edge.owner.shape.dimensions))


def _inside_data_flow_op(instr, graph: ProgramGraph) -> bool:
    computation = instr.parent
    while computation is not None and id(computation) in graph.region_parent:
        parent = graph.region_parent[id(computation)]
        if parent.opcode in DATA_FLOW_OPCODES:
            return True
        computation = parent.parent
    return False


def _without_sub_axes_in_open_dims(sharding: TensorSharding) -> TensorSharding:
    dims = []
    for dim in sharding.dim_shardings:
        if dim.is_closed:
            dims.append(dim)
            continue
        axes = []
        for axis in dim.axes:
            if axis.sub_axis is not None:
                break
            axes.append(axis)
        dims.append(dim.with_axes(axes))
    return sharding.with_dim_shardings(dims)


def remove_sub_axes_in_main_io(main: HloComputation | None) -> None:
    if main is None:
        return
    for param in main.parameters:
        if param.sdy_sharding is not None:
            param.sdy_sharding = _without_sub_axes_in_open_dims(param.sdy_sharding)
    main.result_shardings = [None if s is None else _without_sub_axes_in_open_dims(s)
                             for s in main.result_shardings]


def _closed_keeping_unreduced(sharding: TensorSharding) -> TensorSharding:
    # Shardy's closing drops the replicated axes but keeps the unreduced ones.
    return sharding.closed_like().replace_unreduced_axes(sharding.unreduced_axes)


def close_shardings(module: HloModule) -> None:
    transform_shardings(module, _closed_keeping_unreduced)


def main_function(module: HloModule, funcs: list[HloComputation]) -> HloComputation | None:
    if module.entry is not None:
        return module.entry
    return funcs[0] if len(funcs) == 1 else None

