"""The program as propagation sees it: values and where their shardings
live, the units propagation goes through (ops with a sharding rule,
propagation barriers, data-flow edges), and who to revisit when a value's
sharding changes.

Data-flow edges connect the values that must be sharded alike across control
flow: the result of a while with its operand and the value the body returns
(and, as targets sharing the result's sharding, the body's and condition's
arguments); the result of a case with what each branch returns; the result of
an optimization barrier with its operand; the arguments of a manual
computation's body with its operands, and its results with what the body
returns; the parameters of a function called once with the call's operands,
and the call's results with what the function returns. An edge's sharding is
kept on its owner value (the op result, or the body argument), or on an
``sdy.data_flow_edge`` op when the program has one for that owner. Inside a
manual computation values have local shardings that name only free axes; the
edges add and remove the manual axes.

Without ``data_flow_edges`` (Shardy's propagation passes run on their own,
not in the pipeline that adds the edges), only explicit ``sdy.data_flow_edge``
ops are edges: the arguments of a while's regions still share the sharding of
its results, and the body arguments of a manual or named computation still
hold its in_shardings, but nothing crosses from operands or returned values.
Only the main function exchanges shardings between its results and the values
it returns (every function called from nowhere when there is no ``@main``)."""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any

from xlapy.errors import VerifyError
from xlapy.hlo import HloComputation, HloInstruction, HloModule
from xlapy.hlo.mlir_structure import encodes_mlir_structure, op_results, region_results
from xlapy.sharding.mesh import Mesh
from xlapy.sharding.propagation.axes import add_free_axes, erase_manual_axes
from xlapy.sharding.propagation.call_graph import functions, is_func_call
from xlapy.sharding.propagation.rules import dims_of, identity_rule, is_elementwise, rule_of
from xlapy.sharding.sharding_rule import OpShardingRule
from xlapy.sharding.tensor_sharding import TensorSharding
from xlapy.sharding.values import region_owners
from xlapy.sharding.verify import describe

# Ops whose results (or region arguments) are owners of data-flow edges.
DATA_FLOW_OPCODES = frozenset({"stablehlo.while", "stablehlo.case", "stablehlo.if", "stablehlo.optimization_barrier",
                               "sdy.manual_computation", "sdy.named_computation", "call"})
# Ops whose region arguments and results are edges (in_shardings/out_shardings).
REGION_EDGE_OPCODES = ("sdy.manual_computation", "sdy.named_computation")


@dataclass(frozen=True, eq=False)
class FuncResult:
    """Result ``index`` of a function: its sharding is a result attribute."""

    computation: HloComputation
    index: int

    def __repr__(self) -> str:
        return f"<result {self.index} of {self.computation.name}>"


Value = Any  # HloInstruction | FuncResult


def is_static_array(instr: HloInstruction) -> bool:
    shape = instr.shape
    return shape.is_array and all(d >= 0 for d in shape.dimensions)


# -- units ------------------------------------------------------------------------

class UnitForm:
    """What the direction functions of the priority strategies look at in a
    unit (besides the uses of its operands): units of one form get the same
    directions. One object per form and graph."""

    __slots__ = ("elementwise", "kind", "opcode", "rule")

    def __init__(self, kind: str, elementwise: bool, opcode: str | None, rule: OpShardingRule):
        self.kind, self.elementwise, self.opcode, self.rule = kind, elementwise, opcode, rule


class Unit:
    """Something propagation goes through. ``elementwise``/``rule``/``instr``
    are what the direction functions of the priority strategies look at."""

    kind = "unit"

    def __init__(self, instr: HloInstruction | None = None, rule: OpShardingRule | None = None,
                 elementwise: bool = False):
        # Every attribute is set here, even those set later, so that units
        # keep them without a dictionary each.
        self.instr, self.rule, self.elementwise = instr, rule, elementwise
        self.graph: Any = None
        # Set for op and edge units when the graph adds them.
        self.form: UnitForm | None = None
        # The operands (or sources) and results (or target) as propagation
        # reads and writes them, set on first use (``ProgramGraph.prepare_tensors``):
        # how many are operands; ``direct`` when they are the op's operands
        # and the op itself, each holding its own sharding (most ops); else the
        # values holding their shardings (revisited when one changes, looked
        # up in sharding groups) and, if every sharding is an op result's own,
        # those results.
        self.tensors_ready = False
        self.num_operands = 0
        self.direct = False
        self.tensor_keys: tuple[Any, ...] = ()
        self.holders: tuple[HloInstruction, ...] | None = None


class OpUnit(Unit):
    kind = "op"

    def __init__(self, instr: HloInstruction, rule: OpShardingRule):
        super().__init__(instr, rule, is_elementwise(instr))

    def __repr__(self) -> str:
        return f"<op {self.instr.name}>"


class BarrierUnit(Unit):
    kind = "barrier"

    def __init__(self, instr: HloInstruction):
        super().__init__(instr)

    def __repr__(self) -> str:
        return f"<barrier {self.instr.name}>"


class EdgeUnit(Unit):
    kind = "edge"

    def __init__(self, edge: DataFlowEdge):
        super().__init__(edge.store if edge.store is not edge.owner else None)
        self.edge = edge

    def __repr__(self) -> str:
        return f"<edge {self.edge.owner.name}>"


_SHARDING = attrgetter("sdy_sharding")


@dataclass(frozen=True, eq=False)
class RegionArgument:
    """Body argument ``index`` of a manual or named computation, whose
    sharding is the computation's in_sharding (without the manual axes)."""

    op: HloInstruction
    index: int

    @property
    def manual_axes(self) -> tuple[str, ...]:
        return tuple(self.op.attributes.get("manual_axes", ()))


@dataclass(eq=False)
class DataFlowEdge:
    op: HloInstruction
    index: int
    owner: HloInstruction
    # Where the sharding of all targets lives: the owner, or an explicit
    # sdy.data_flow_edge op using it.
    store: HloInstruction
    sources: list[HloInstruction]
    non_owner_targets: list[HloInstruction] = field(default_factory=list)
    # "plain", or for manual computations "manual_in" (body argument) / "manual_out" (result)
    kind: str = "plain"
    unit: EdgeUnit | None = None

    @property
    def virtual(self) -> bool:
        return self.store is self.owner

    @property
    def manual_axes(self) -> tuple[str, ...]:
        return tuple(self.op.attributes.get("manual_axes", ()))


class ProgramGraph:
    """Built once per propagation run; shardings are read and written through it."""

    def __init__(self, module: HloModule, with_units: bool = True, data_flow_edges: bool = True):
        """``with_units=False``: only values, edges and shardings (no rules);
        ``data_flow_edges=False``: only explicit ``sdy.data_flow_edge`` ops."""
        self.module = module
        self.data_flow_edges = data_flow_edges
        self.meshes: dict[str, Mesh] = module.meshes
        self.region_parent: dict[int, HloInstruction] = region_owners(module)
        self.called_once = self._callees_called_once() if data_flow_edges else {}
        top = functions(module)
        self.main_funcs = self._main_functions(top)
        # Callees called once are propagated through where they are called.
        self.funcs = [c for c in top if id(c) not in self.called_once]
        self.func_of_argument = {id(p): f for f in self.funcs for p in f.parameters}
        self.alias: dict[int, Value] = {}
        self.edges: list[DataFlowEdge] = []
        self.edge_of_store: dict[int, DataFlowEdge] = {}
        self.edge_of_owner: dict[int, DataFlowEdge] = {}
        self.edge_of_operand: dict[tuple[int, int], DataFlowEdge] = {}
        self.edge_of_return: dict[tuple[int, int], DataFlowEdge] = {}
        self.manual_in: dict[int, DataFlowEdge] = {}
        self.unshardable: set[int] = set()
        self._find_edges()
        self._check_edge_ops()
        self._find_aliases()
        self.unit_of: dict[int, Unit] = {}
        self.units: list[Unit] = []
        self._forms: dict[tuple, UnitForm] = {}
        # Every unit and every op without one, in the order Shardy visits them.
        self.order: list[Any] = []
        # What propagation through units worked out, for every run on this
        # graph (see ``driver.PropagationContext``).
        self.propagation_contexts: dict[tuple, Any] = {}
        if with_units:
            for func in self.funcs:
                self._walk(func)

    # -- structure ------------------------------------------------------------------
    def _callees_called_once(self) -> dict[int, HloInstruction]:
        calls: dict[int, list[HloInstruction]] = {}
        for computation in self.module.computations:
            for instr in computation.instructions:
                if is_func_call(instr):
                    calls.setdefault(id(instr.called_computations[0]), []).append(instr)
        return {callee: sites[0] for callee, sites in calls.items() if len(sites) == 1}

    def _main_functions(self, top: list[HloComputation]) -> set[int]:
        called = {id(instr.called_computations[0]) for c in self.module.computations for instr in c.instructions
                  if is_func_call(instr)}
        named = [f for f in top if f.name == "main"]
        return {id(f) for f in (named or [f for f in top if id(f) not in called])}

    def is_func_with_results(self, computation: HloComputation) -> bool:
        """Whether propagation exchanges shardings between the function's
        results and the values it returns: only for the main function."""
        return id(computation) in self.main_funcs

    def _new_edge(self, op: HloInstruction, index: int, owner: HloInstruction, sources: list[HloInstruction],
                  targets: list[HloInstruction] | None = None, kind: str = "plain") -> DataFlowEdge | None:
        if not is_static_array(owner):
            return None
        users = owner.users
        store = users[0] if len(users) == 1 and users[0].opcode == "sdy.data_flow_edge" else owner
        if store is owner and not self.data_flow_edges:
            return None
        edge = DataFlowEdge(op, index, owner, store, sources, list(targets or []), kind)
        edge.unit = EdgeUnit(edge)
        self.edges.append(edge)
        self.edge_of_store[id(store)] = edge
        self.edge_of_owner[id(owner)] = edge
        return edge

    def _find_edges(self) -> None:
        for computation in self.module.computations:
            for op in computation.instructions:
                if op.opcode not in DATA_FLOW_OPCODES:
                    continue
                if op.opcode in REGION_EDGE_OPCODES:
                    self._manual_computation_edges(op)
                    continue
                if op.opcode == "call":
                    if is_func_call(op):
                        self._call_edges(op)
                    continue
                results = op_results(op)
                for i, result in enumerate(results):
                    if op.opcode == "stablehlo.while":
                        cond, body = op.called_computations
                        edge = self._new_edge(op, i, result, [op.operands[i], region_results(body)[i]],
                                              [body.parameter(i), cond.parameter(i)])
                        if edge:
                            self.edge_of_operand[(id(op), i)] = edge
                            self.edge_of_return[(id(body), i)] = edge
                        elif is_static_array(result):
                            # The region arguments share the result's sharding.
                            self.alias[id(body.parameter(i))] = result
                            self.alias[id(cond.parameter(i))] = result
                    elif op.opcode in ("stablehlo.case", "stablehlo.if"):
                        branches = op.called_computations
                        edge = self._new_edge(op, i, result, [region_results(b)[i] for b in branches])
                        if edge:
                            for branch in branches:
                                self.edge_of_return[(id(branch), i)] = edge
                    else:  # stablehlo.optimization_barrier
                        edge = self._new_edge(op, i, result, [op.operands[i]])
                        if edge:
                            self.edge_of_operand[(id(op), i)] = edge

    def _check_edge_ops(self) -> None:
        """Every ``sdy.data_flow_edge`` op must follow a result or region
        argument of a data-flow op: Shardy's propagation has no owner to look
        up for any other value (and crashes on it)."""
        owners: set[int] = set()
        for computation in self.module.computations:
            for op in computation.instructions:
                if op.opcode in DATA_FLOW_OPCODES:
                    owners.update(id(result) for result in op_results(op))
                    for region in op.called_computations:
                        owners.update(id(param) for param in region.parameters)
        for computation in self.module.computations:
            for op in computation.instructions:
                if (op.opcode == "sdy.data_flow_edge" and id(op) not in self.edge_of_store
                        and not (op.operands and id(op.operands[0]) in owners)):
                    source = describe(op.operands[0]) if op.operands else "nothing"
                    raise VerifyError(f"{describe(op)}: its input ({source}) is not a result or region argument "
                                      "of a data-flow op (while, case, optimization_barrier, named or manual "
                                      "computation, call), so it has no data-flow edge")

    def _manual_computation_edges(self, op: HloInstruction) -> None:
        (body,) = op.called_computations
        for i, param in enumerate(body.parameters):
            edge = self._new_edge(op, i, param, [op.operands[i]], kind="manual_in")
            if edge:
                self.edge_of_operand[(id(op), i)] = edge
                if edge.virtual:
                    self.manual_in[id(param)] = edge
            elif is_static_array(param):
                # The argument holds its in_sharding without an edge.
                self.manual_in[id(param)] = RegionArgument(op, i)
        returned = region_results(body)
        for i, result in enumerate(op_results(op)):
            edge = self._new_edge(op, i, result, [returned[i]], kind="manual_out")
            if edge:
                self.edge_of_return[(id(body), i)] = edge

    @staticmethod
    def _has_edge_op(value: HloInstruction) -> bool:
        users = value.users
        return len(users) == 1 and users[0].opcode == "sdy.data_flow_edge"

    def _call_edges(self, op: HloInstruction) -> None:
        callee = op.called_computations[0]
        if self.called_once.get(id(callee)) is not op:
            return
        for i, param in enumerate(callee.parameters):
            edge = self._new_edge(op, i, param, [op.operands[i]])
            if edge:
                self.edge_of_operand[(id(op), i)] = edge
        returned = region_results(callee)
        for i, result in enumerate(op_results(op)):
            edge = self._new_edge(op, i, result, [returned[i]])
            if edge:
                self.edge_of_return[(id(callee), i)] = edge

    def _find_aliases(self) -> None:
        for edge in self.edges:
            for target in edge.non_owner_targets:
                self.alias[id(target)] = edge.store
            if not edge.virtual:
                self.alias[id(edge.owner)] = edge.store
        for computation in self.module.computations:
            parent = self.region_parent.get(id(computation))
            if parent is not None and parent.opcode not in DATA_FLOW_OPCODES:
                # Scalar arguments of reducers and comparators: nothing to shard.
                self.unshardable.update(id(p) for p in computation.parameters)
            for instr in computation.instructions:
                if instr.opcode == "sdy.sharding_group" and instr.attributes.get("has_result"):
                    self.alias[id(instr)] = instr.operands[0]

    # -- units in program order ----------------------------------------------------------
    def _add(self, unit: Unit) -> None:
        # Not a cycle: the graph goes away as soon as propagation is done with it.
        unit.graph = weakref.proxy(self)
        if unit.kind in ("op", "edge"):
            rule = unit.rule if unit.kind == "op" else self.edge_rule(unit.edge)
            opcode = None if unit.instr is None else unit.instr.opcode
            key = (unit.kind, unit.elementwise, opcode, rule)
            unit.form = self._forms.get(key)
            if unit.form is None:
                unit.form = self._forms[key] = UnitForm(*key)
        self.units.append(unit)
        self.order.append(unit)
        if unit.instr is not None:
            self.unit_of[id(unit.instr)] = unit

    def _walk(self, computation: HloComputation) -> None:
        # Edges of arguments come first in their block.
        for param in computation.parameters:
            edge = self.edge_of_owner.get(id(param))
            if edge is not None and edge.virtual:
                self._add(edge.unit)
        for instr in computation.instructions:
            if instr.opcode == "parameter" or encodes_mlir_structure(instr):
                continue
            unit = self._make_unit(instr)
            if unit is not None:
                self._add(unit)
            else:
                # Looked at too (e.g. removed when dead), though nothing
                # propagates through it.
                self.order.append(instr)
            if instr.opcode != "call":
                for region in instr.called_computations:
                    self._walk(region)
            elif self.called_once.get(id(instr.called_computations[0])) is instr:
                self._walk(instr.called_computations[0])
            for result in op_results(instr):
                edge = self.edge_of_owner.get(id(result))
                if edge is not None and edge.virtual:
                    self._add(edge.unit)

    def _make_unit(self, instr: HloInstruction) -> Unit | None:
        if instr.opcode == "sdy.data_flow_edge":
            edge = self.edge_of_store.get(id(instr))
            return edge.unit if edge is not None else None
        if instr.opcode == "sdy.propagation_barrier":
            return BarrierUnit(instr)
        if instr.opcode in DATA_FLOW_OPCODES or instr.opcode == "sdy.sharding_group":
            return None
        rule = rule_of(instr)
        return OpUnit(instr, rule) if rule is not None else None

    def prepare_tensors(self, unit: Unit) -> None:
        """Work out how to read and write the unit's tensors, once per graph:
        the program's structure stays put while it propagates, but for dead
        ops going away."""
        unit.tensors_ready = True
        if unit.kind == "edge":
            edge = unit.edge
            keys = (*map(self.resolve, edge.sources), edge.store)
            holders = (*keys[:-1], self.resolve(edge.store)) if edge.kind == "plain" else None
            num_operands = len(edge.sources)
        else:
            instr = unit.instr
            operands = instr.operands[:1] if unit.kind == "barrier" else instr.operands
            results = [instr] if unit.kind == "barrier" else op_results(instr)
            keys = holders = tuple(map(self.resolve, (*operands, *results)))
            num_operands = len(operands)
            if unit.kind == "op" and results == [instr] and all(map(self._is_direct, operands)) \
                    and self._is_direct(instr):
                # Nothing to keep: read straight from the op.
                unit.direct, unit.num_operands = True, num_operands
                return
        if holders is not None and not all(map(self._holds_own_sharding, holders)):
            holders = None
        unit.tensor_keys, unit.num_operands, unit.holders = keys, num_operands, holders

    def _is_direct(self, value: Value) -> bool:
        return self.resolve(value) is value and self._holds_own_sharding(value)

    def unit_shardings(self, unit: Unit) -> tuple[TensorSharding | None, ...]:
        """The shardings of the unit's operands then results, as its tensors see them."""
        if unit.direct:
            instr = unit.instr
            return (*map(_SHARDING, instr.operands), instr.sdy_sharding)
        holders = unit.holders
        if holders is not None:
            return tuple(map(_SHARDING, holders))
        if not unit.tensors_ready:
            self.prepare_tensors(unit)
            return self.unit_shardings(unit)
        if unit.kind != "edge":
            return tuple(map(self.get, unit.tensor_keys))
        return (*map(self.get, unit.tensor_keys[:-1]), self.edge_target_view(unit.edge))

    @staticmethod
    def tensor_key(unit: Unit, index: int) -> Value:
        """The value holding the sharding of tensor ``index`` of the unit
        (operands then results)."""
        if unit.direct:
            return unit.instr.operands[index] if index < unit.num_operands else unit.instr
        return unit.tensor_keys[index]

    def set_unit_tensor(self, unit: Unit, index: int, sharding: TensorSharding) -> None:
        """Give tensor ``index`` of the unit (operands then results) ``sharding``."""
        if unit.kind == "edge" and index == unit.num_operands:
            self.set_edge_target(unit.edge, sharding)
        else:
            self.set(self.tensor_key(unit, index), sharding)

    def _holds_own_sharding(self, value: Value) -> bool:
        """Whether ``get`` of the (resolved) ``value`` is its ``sdy_sharding``."""
        return isinstance(value, HloInstruction) and id(value) not in self.manual_in \
            and id(value) not in self.unshardable

    # -- shardings ------------------------------------------------------------------------
    def resolve(self, value: Value) -> Value:
        """The value whose sharding ``value`` shares."""
        while not isinstance(value, FuncResult) and id(value) in self.alias:
            value = self.alias[id(value)]
        return value

    def get(self, value: Value) -> TensorSharding | None:
        value = self.resolve(value)
        if isinstance(value, FuncResult):
            shardings = value.computation.result_shardings
            return shardings[value.index] if value.index < len(shardings) else None
        edge = self.manual_in.get(id(value))
        if edge is not None:
            in_shardings = edge.op.attributes.get("in_shardings")
            if not in_shardings:
                return None
            return erase_manual_axes(in_shardings[edge.index], edge.manual_axes)
        if id(value) in self.unshardable:
            return None
        return value.sdy_sharding

    def set(self, value: Value, sharding: TensorSharding) -> None:
        value = self.resolve(value)
        if isinstance(value, FuncResult):
            shardings = value.computation.result_shardings
            while len(shardings) <= value.index:
                shardings.append(None)
            shardings[value.index] = sharding
            return
        edge = self.manual_in.get(id(value))
        if edge is not None:
            in_shardings = list(edge.op.attributes.get("in_shardings") or ())
            if not in_shardings:
                # The first in_sharding: the others are fully open.
                body = edge.op.called_computations[0]
                in_shardings = [TensorSharding.fully_open(sharding.mesh, len(p.shape.dimensions))
                                for p in body.parameters]
            in_shardings[edge.index] = add_free_axes(in_shardings[edge.index], sharding, edge.manual_axes)
            edge.op.attributes["in_shardings"] = tuple(in_shardings)
            return
        if id(value) in self.unshardable:
            return
        value.sdy_sharding = sharding
        self._open_siblings(value, sharding)

    def _open_siblings(self, value: HloInstruction, sharding: TensorSharding) -> None:
        """An op's results have shardings all or none: the other results of a
        multi-result op get fully open ones (data-flow ops get theirs when
        propagation ends, see ``finish_edges``)."""
        if value.opcode != "get-tuple-element" or not encodes_mlir_structure(value) or id(value) in self.edge_of_owner:
            return
        for sibling in op_results(value.operands[0]):
            if sibling.sdy_sharding is None and sibling.shape.is_array:
                sibling.sdy_sharding = TensorSharding.fully_open(sharding.mesh, len(sibling.shape.dimensions))

    def mesh_of(self, sharding: TensorSharding) -> Mesh:
        return sharding.mesh_of(self.meshes)

    # -- edge views -----------------------------------------------------------------------
    def edge_target_view(self, edge: DataFlowEdge) -> TensorSharding | None:
        """The sharding of an edge's targets as its sources see it."""
        sharding = self.get(edge.store)
        if sharding is None or edge.kind == "plain":
            return sharding
        if edge.kind == "manual_in":
            in_shardings = edge.op.attributes.get("in_shardings")
            outer = in_shardings[edge.index] if in_shardings else sharding
            return add_free_axes(outer, sharding, edge.manual_axes)
        return erase_manual_axes(sharding, edge.manual_axes)

    def set_edge_target(self, edge: DataFlowEdge, sharding: TensorSharding) -> None:
        if edge.kind == "manual_in":
            sharding = erase_manual_axes(sharding, edge.manual_axes)
        elif edge.kind == "manual_out":
            outer = self.get(edge.store) or edge.owner.sdy_sharding
            if outer is not None:
                sharding = add_free_axes(outer, sharding, edge.manual_axes)
        self.set(edge.store, sharding)

    def edge_rule(self, edge: DataFlowEdge) -> OpShardingRule:
        return identity_rule(dims_of(edge.owner), len(edge.sources), 1)

    def finish_edges(self) -> None:
        """Like Shardy when it moves edge shardings back onto their ops: if
        some result of a data-flow op has a sharding, the others get fully open
        ones."""
        by_op: dict[int, list[DataFlowEdge]] = {}
        for edge in self.edges:
            if edge.virtual and edge.kind != "manual_in" and edge.owner.opcode == "get-tuple-element":
                by_op.setdefault(id(edge.op), []).append(edge)
        for edges in by_op.values():
            meshes = [e.owner.sdy_sharding.mesh for e in edges if e.owner.sdy_sharding is not None]
            if not meshes:
                continue
            for result in op_results(edges[0].op):
                if result.sdy_sharding is None and result.shape.is_array:
                    result.sdy_sharding = TensorSharding.fully_open(meshes[0], len(result.shape.dimensions))

    # -- uses -------------------------------------------------------------------------------
    def use_count(self, value: HloInstruction) -> int:
        """How many uses ``value`` has in the MLIR program (an op using it twice
        counts twice; so does returning it)."""
        count = 0
        for user in value.users:
            count += sum(1 for operand in user.operands if operand is value)
        parent = value.parent
        if parent is not None and parent.root is value:
            count += 1
        return count

    def operands_single_use(self, unit: Unit) -> bool:
        """Whether every operand (or source) of ``unit`` has a single use."""
        if unit.kind == "edge":
            values = unit.edge.sources
        elif unit.instr is not None:
            values = unit.instr.operands
        else:
            values = []
        return all(map(self._has_single_use, values))

    @staticmethod
    def _has_single_use(value: HloInstruction) -> bool:
        """``use_count(value) == 1`` without counting every use (a user is
        listed once however many times it uses the value)."""
        users = value.users
        if len(users) > 1:
            return False
        count = sum(1 for operand in users[0].operands if operand is value) if users else 0
        parent = value.parent
        if parent is not None and parent.root is value:
            count += 1
        return count == 1

    def definer(self, value: Value) -> Unit | None:
        """The unit that defines ``value`` (revisited when its sharding changes)."""
        if isinstance(value, FuncResult):
            return None
        edge = self.edge_of_store.get(id(value))
        if edge is not None:
            return edge.unit
        if value.opcode == "get-tuple-element" and encodes_mlir_structure(value):
            return self.unit_of.get(id(value.operands[0]))
        return self.unit_of.get(id(value))

    def users_to_notify(self, value: HloInstruction) -> Iterator[Unit]:
        """The units using ``value``, in the order Shardy revisits them (MLIR
        use lists list the latest use first; uses of an owner that an edge
        took over come in program order)."""
        users = value.users if id(value) in self.edge_of_store and self.edge_of_store[id(value)].virtual \
            else list(reversed(value.users))
        parent = value.parent
        root_first = parent is not None and parent.root is value and users is not value.users
        if root_first:
            yield from self._terminator_use(parent, 0)
        for user in users:
            positions = [k for k, operand in enumerate(user.operands) if operand is value]
            for k in reversed(positions):
                yield from self._use(user, k)
        if parent is not None and parent.root is value and not root_first:
            yield from self._terminator_use(parent, 0)

    def _use(self, user: HloInstruction, k: int) -> Iterator[Unit]:
        parent = user.parent
        if user.opcode == "tuple" and encodes_mlir_structure(user) and parent is not None and parent.root is user:
            yield from self._terminator_use(parent, k)
            return
        edge = self.edge_of_operand.get((id(user), k))
        if edge is not None:
            yield edge.unit
            return
        if id(user) in self.alias and user.opcode == "sdy.sharding_group":
            yield from self.users_to_notify(user)
            return
        unit = self.unit_of.get(id(user))
        if unit is not None:
            yield unit

    def _terminator_use(self, computation: HloComputation, k: int) -> Iterator[Unit]:
        edge = self.edge_of_return.get((id(computation), k))
        if edge is not None:
            yield edge.unit
            return
        parent = self.region_parent.get(id(computation))
        if parent is not None:
            unit = self.unit_of.get(id(parent))
            if unit is not None:
                yield unit

    # -- every sharding -------------------------------------------------------------------
    def sharding_slots(self) -> Iterator[Value]:
        """Every place that holds a sharding (function arguments and results,
        op results, edges), each once."""
        for func in self.funcs:
            for param in func.parameters:
                if id(param) not in self.alias:
                    yield param
            if self.is_func_with_results(func):
                for i in range(len(func.result_shardings)):
                    yield FuncResult(func, i)
        for computation in self.module.computations:
            for instr in computation.instructions:
                if instr.opcode == "parameter":
                    if id(instr) in self.manual_in:
                        yield instr
                    continue
                if id(instr) in self.alias or instr.shape.is_tuple:
                    continue
                yield instr
