"""Functions and calls in Shardy's propagation pipeline.

Before propagation every function called more than once gets a copy per call
(its callees too), so that each call can be sharded on its own: the pipeline
then propagates through a callee as through a named computation inlined at
its call, its arguments and results being data-flow edges (the callee's
argument shardings and the call's result shardings are where those edges
start). Afterwards each callee is a private function again, named after the
function it copies, and the copies that ended up with the same argument and
result shardings are merged back into one; where a call's operands or results
are sharded differently from its callee's arguments or results, reshards are
inserted. Functions nobody calls (other than ``@main``) get the shardings of
the values they return as result shardings.

The order of the functions follows Shardy's: ``@main`` first, then the other
functions nobody calls, then the callees in the order their calls end
(inner calls first)."""

from __future__ import annotations

from collections.abc import Iterator

from xlapy.hlo import HloComputation, HloInstruction, HloModule
from xlapy.hlo.mlir_structure import copy_source, op_results, region_results, source_of
from xlapy.sharding.propagation import ir_edits
from xlapy.sharding.tensor_sharding import TensorSharding


def is_func_call(instr: HloInstruction) -> bool:
    """A ``func.call`` (not a composite: a call with ``is_composite=true``)."""
    if instr.opcode != "call" or not instr.called_computations:
        return False
    return str(instr.attributes.get("is_composite", "false")) != "true"


def functions(module: HloModule) -> list[HloComputation]:
    """The module's functions in order (not the regions of ops)."""
    if module.mlir is not None:
        return module.mlir.functions
    regions = {id(c) for comp in module.computations for instr in comp.instructions
               if instr.opcode != "call" for c in instr.called_computations}
    return [c for c in module.computations if id(c) not in regions]


def _set_functions(module: HloModule, funcs: list[HloComputation]) -> None:
    if module.mlir is not None:
        module.mlir.set_functions(funcs)
    live: list[HloComputation] = []
    seen: set[int] = set()

    def keep(computation: HloComputation) -> None:
        if id(computation) in seen:
            return
        seen.add(id(computation))
        live.append(computation)
        for instr in computation.instructions:
            for called in instr.called_computations:
                keep(called)

    for func in funcs:
        keep(func)
    order = {id(c): i for i, c in enumerate(module.computations)}
    module.computations = sorted(live, key=lambda c: order.get(id(c), len(order)))
    for computation in module.computations:
        computation.module = module


def is_private(func: HloComputation) -> bool:
    if func.mlir is None:
        return not func.is_entry
    return func.mlir.is_private


def calls_in(computation: HloComputation) -> Iterator[HloInstruction]:
    """The calls of a function body (in its regions too), in program order."""
    for instr in computation.instructions:
        if instr.opcode != "call":
            for region in instr.called_computations:
                yield from calls_in(region)
        elif is_func_call(instr):
            yield instr


def retarget(call: HloInstruction, callee: HloComputation) -> None:
    call.called_computations[0] = callee
    call.attributes["to_apply"] = callee.name
    source_of(call).set_callee(callee.name)


def _rename(func: HloComputation, name: str) -> None:
    func.name = name
    if func.mlir is not None:
        func.mlir.rename(name)


def _referenced(computation: HloComputation) -> Iterator[HloComputation]:
    """The functions a function body names (calls, composites' decompositions)."""
    for instr in computation.instructions:
        if instr.opcode == "call":
            yield from instr.called_computations
        else:
            for region in instr.called_computations:
                yield from _referenced(region)


def symbol_dce(module: HloModule) -> None:
    """Private functions no live function names go away (public ones are live)."""
    funcs = functions(module)
    live: set[int] = set()
    stack = [f for f in funcs if not is_private(f)]
    while stack:
        func = stack.pop()
        if id(func) in live:
            continue
        live.add(id(func))
        stack.extend(_referenced(func))
    if len(live) != len(funcs):
        _set_functions(module, [f for f in funcs if id(f) in live])


def propagate_sharding_from_func_to_call(module: HloModule) -> None:
    """A call without shardings takes its callee's result shardings."""
    for func in functions(module):
        for call in calls_in(func):
            results = op_results(call)
            if any(r.sdy_sharding is not None for r in results):
                continue
            shardings = call.called_computations[0].result_shardings
            present = [s for s in shardings if s is not None]
            if not present:
                continue
            for index, result in enumerate(results):
                sharding = shardings[index] if index < len(shardings) else None
                if sharding is None and result.shape.is_array:
                    sharding = TensorSharding.fully_open(present[0].mesh, len(result.shape.dimensions))
                result.sdy_sharding = sharding


# -- copies ---------------------------------------------------------------------------------

def clone_computation(computation: HloComputation, module: HloModule, name: str) -> HloComputation:
    """A deep copy of ``computation`` (its regions too; calls still call the
    same functions)."""
    copy = HloComputation(name)
    if computation.mlir is not None:
        copy.mlir = computation.mlir.copied()
        copy.mlir.rename(name)
    copy.result_shardings = list(computation.result_shardings)
    copy.execution_thread = computation.execution_thread
    module.add_computation(copy)
    mapping: dict[int, HloInstruction] = {}
    for instr in computation.instructions:
        operands = [mapping[id(o)] for o in instr.operands]
        new = instr.clone(operands, suffix="clone")
        new.attributes = dict(instr.attributes)
        copy_source(instr, new)
        if instr.opcode == "call":
            new.called_computations = list(instr.called_computations)
        else:
            new.called_computations = [
                clone_computation(c, module, fresh_name(c.name, {k.name for k in module.computations}))
                for c in instr.called_computations]
        copy.add_instruction(new)
        mapping[id(instr)] = new
    if computation.root is not None:
        copy.root = mapping[id(computation.root)]
    return copy


def fresh_name(name: str, taken: set[str]) -> str:
    """``name``, or ``name_N`` with the first N not in ``taken`` (how MLIR's
    symbol table renames a clashing symbol)."""
    if name not in taken:
        return name
    counter = 0
    while f"{name}_{counter}" in taken:
        counter += 1
    return f"{name}_{counter}"


class CallGraph:
    """What the pipeline remembers about functions between its import and
    export steps: the function each callee copies."""

    def __init__(self, module: HloModule):
        self.module = module
        self.original_name: dict[int, str] = {}
        self.main: HloComputation | None = None
        self._counter = 0

    def original(self, func: HloComputation) -> str:
        return self.original_name.get(id(func), func.name)

    # -- import -------------------------------------------------------------------------
    def flatten(self) -> None:
        """Every function gets at most one call: further calls get copies."""
        module = self.module
        seen: set[int] = set()
        for func in list(functions(module)):
            for call in list(calls_in(func)):
                callee = call.called_computations[0]
                if id(callee) not in seen:
                    seen.add(id(callee))
                else:
                    # The copy's own callees are fresh copies too.
                    retarget(call, self._clone_recursively(callee))

    def _clone_recursively(self, func: HloComputation) -> HloComputation:
        module = self.module
        copy = clone_computation(func, module, fresh_name(func.name, {f.name for f in functions(module)}))
        self.original_name[id(copy)] = self.original(func)
        _set_functions(module, [*functions(module), copy])
        for call in list(calls_in(copy)):
            retarget(call, self._clone_recursively(call.called_computations[0]))
        return copy

    def order_functions(self) -> None:
        """``@main`` first, then the other functions nobody calls; callees after."""
        funcs = functions(self.module)
        called = {id(call.called_computations[0]) for f in funcs for call in calls_in(f)}
        top = [f for f in funcs if id(f) not in called]
        mains = [f for f in top if f.name == "main"]
        self.main = mains[0] if mains else (top[0] if len(top) == 1 else None)
        ordered = mains + [f for f in top if f not in mains]
        _set_functions(self.module, ordered + [f for f in funcs if id(f) in called])

    def fill_callee_arguments(self) -> None:
        """A callee whose arguments are partly sharded: the others are fully open
        (a named computation's in_shardings are all or none)."""
        for func in functions(self.module):
            for call in calls_in(func):
                _fill_open(call.called_computations[0].parameters)

    # -- export -------------------------------------------------------------------------
    def export(self, get_sharding) -> list[HloComputation]:
        """Callees become private functions again, deduplicated; returns the
        module's functions."""
        module = self.module
        funcs = functions(module)
        called = {id(call.called_computations[0]) for f in funcs for call in calls_in(f)}
        top = [f for f in funcs if id(f) not in called]
        taken = {f.name for f in top}
        exported: list[HloComputation] = []

        def walk(computation: HloComputation) -> None:
            for instr in computation.instructions:
                if instr.opcode != "call":
                    for region in instr.called_computations:
                        walk(region)
                elif is_func_call(instr):
                    callee = instr.called_computations[0]
                    walk(callee)
                    self._export_callee(instr, callee, taken)
                    exported.append(callee)

        for func in top:
            walk(func)
        _set_functions(module, top + exported)
        # Functions other than main return what their returned values hold.
        for func in top + exported:
            if func is self.main:
                continue
            func.result_shardings = [get_sharding(v) for v in region_results(func)]
        self._unflatten(get_sharding)
        symbol_dce(module)
        self._insert_call_result_reshards()
        return functions(module)

    def _export_callee(self, call: HloInstruction, callee: HloComputation, taken: set[str]) -> None:
        original = self.original(callee)
        name = original
        if name in taken:
            while True:
                name = f"{original}_{self._counter}"
                self._counter += 1
                if name not in taken:
                    break
        taken.add(name)
        _rename(callee, name)
        # A named computation's in_shardings and out_shardings are all or none.
        _fill_open([p for p in callee.parameters])
        _fill_open(op_results(call))
        self.original_name[id(callee)] = original
        if callee.mlir is not None:
            callee.mlir.make_private()
        for param in callee.parameters:
            copy_source(param, param)
            source_of(param).drop_attributes()
        retarget(call, callee)

    def _key(self, func: HloComputation) -> tuple:
        return (self.original(func), tuple(p.sdy_sharding for p in func.parameters),
                tuple(func.result_shardings))

    def _unflatten(self, get_sharding) -> None:
        funcs = functions(self.module)
        cache: dict[tuple, HloComputation] = {}
        calls = [call for f in funcs for call in calls_in(f)]
        for call in calls:
            cache.setdefault(self._key(call.called_computations[0]), call.called_computations[0])
        for call in calls:
            target = cache[self._key(call.called_computations[0])]
            retarget(call, target)
            for index, param in enumerate(target.parameters):
                wanted = param.sdy_sharding
                operand = call.operands[index]
                if wanted is not None and not equivalent(get_sharding(operand), wanted) and operand.shape.is_array:
                    reshard = ir_edits.new_reshard_before(call, operand, wanted)
                    call.replace_operand(index, reshard)

    def _insert_call_result_reshards(self) -> None:
        for func in functions(self.module):
            for call in list(calls_in(func)):
                shardings = call.called_computations[0].result_shardings
                for index, result in enumerate(op_results(call)):
                    wanted = shardings[index] if index < len(shardings) else None
                    have = result.sdy_sharding
                    if wanted is None or equivalent(have, wanted) or not result.shape.is_array:
                        continue
                    reshard = ir_edits.new_reshard_after(result, have)
                    result.sdy_sharding = wanted
                    ir_edits.replace_uses_except(result, reshard, keep=reshard)


def equivalent(a: TensorSharding | None, b: TensorSharding | None) -> bool:
    """Shardy's equivalence of shardings: the same axes per dimension and the
    same unreduced axes on the same mesh (open or closed does not matter); no
    sharding is equivalent to a fully replicated one."""
    if a is None or b is None:
        other = b if a is None else a
        return other is None or (other.is_fully_replicated and not other.unreduced_axes)
    return a.mesh == b.mesh and a.dim_axes_equal(b) and a.unreduced_axes == b.unreduced_axes


def _fill_open(values: list[HloInstruction]) -> None:
    present = [v.sdy_sharding for v in values if v.sdy_sharding is not None]
    if not present:
        return
    for value in values:
        if value.sdy_sharding is None and value.shape.is_array:
            value.sdy_sharding = TensorSharding.fully_open(present[0].mesh, len(value.shape.dimensions))


