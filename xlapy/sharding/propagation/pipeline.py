"""Shardy's propagation pipeline: import steps, user-priority propagation,
export steps, in the order of Shardy's ``sdy-propagation-pipeline``: after
every sharding is closed (the module XLA dumps as Shardy's "after
propagation" one), explicit reshards are inserted where a concatenate's
operands disagree with its result or a dot's result conflicts with its
operands (``explicit_reshards``), and what is then dead is removed."""

from __future__ import annotations

from xlapy.hlo import HloModule
from xlapy.sharding.propagation import call_graph, dce, export_steps, import_steps, ir_edits
from xlapy.sharding.propagation.explicit_reshards import insert_explicit_reshards
from xlapy.sharding.propagation.graph import ProgramGraph
from xlapy.sharding.propagation.groups import ShardingGroups
from xlapy.sharding.propagation.user_priority import user_priority_propagate


def prepare(module: HloModule, data_flow_edges: bool = True) -> tuple[ProgramGraph, ShardingGroups]:
    """The program graph and sharding groups propagation runs on, after the
    members of each sharding group were given their common sharding."""
    draft = ProgramGraph(module, with_units=False, data_flow_edges=data_flow_edges)
    ShardingGroups(draft).sync(draft, merge=not data_flow_edges)
    graph = ProgramGraph(module, data_flow_edges=data_flow_edges)
    return graph, ShardingGroups(graph)


def run_pipeline(module: HloModule, explicit_reshards: bool = True) -> None:
    """``explicit_reshards=False`` stops before the explicit reshards: the
    module as Shardy has it when XLA dumps it "after propagation"."""
    calls = call_graph.CallGraph(module)
    # Import.
    call_graph.symbol_dce(module)
    import_steps.lift_inlined_meshes(module)
    import_steps.remove_size_one_axes(module)
    call_graph.propagate_sharding_from_func_to_call(module)
    import_steps.split_constants(module, call_graph.functions(module))
    call_graph.symbol_dce(module)
    import_steps.manual_axes_cleanup(module)
    calls.flatten()
    call_graph.symbol_dce(module)
    calls.fill_callee_arguments()
    calls.order_functions()
    import_steps.apply_sharding_constraints(module, ProgramGraph(module, with_units=False).funcs)
    import_steps.check_sharding_groups(module)
    # Propagation.
    graph, groups = prepare(module)
    user_priority_propagate(graph, groups)
    # Export.
    funcs = calls.export(graph.get)
    export_steps.merge_constants_and_scalar_broadcasts(module)
    graph.finish_edges()
    export_steps.remove_sharding_groups(module)
    export_steps.constraints_to_reshards(module)
    export_steps.update_non_divisible_io_shardings(module, graph, funcs)
    export_steps.remove_sub_axes_in_main_io(calls.main)
    export_steps.close_shardings(module)
    if explicit_reshards:
        insert_explicit_reshards(module, funcs)
    # The canonicalizer at the end of the pipeline removes what is now dead
    # (e.g. the reshard of a sharding constraint without uses).
    dce.dce_module(module, funcs)
    # As MLIR prints them: ops were added and removed.
    ir_edits.renumber_values(module, funcs)
