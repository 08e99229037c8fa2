"""The steps Shardy runs on a module before propagation (its import
pipeline): meshes written inline become module meshes, axes of size 1 are
dropped, constant sub-computations are split per use, manual axes are made
explicit, and sharding constraints that dictate their input's sharding are
applied to it."""

from __future__ import annotations

from xlapy.errors import VerifyError
from xlapy.hlo import HloComputation, HloInstruction, HloModule
from xlapy.hlo.mlir_structure import encodes_mlir_structure, op_results
from xlapy.sharding.axis_ref import AxisRef
from xlapy.sharding.mesh import Mesh
from xlapy.sharding.propagation import ir_edits
from xlapy.sharding.propagation.call_graph import is_func_call
from xlapy.sharding.propagation.graph import ProgramGraph
from xlapy.sharding.propagation.module_shardings import manual_computations, transform_shardings
from xlapy.sharding.propagation.rules import is_elementwise
from xlapy.sharding.tensor_sharding import TensorSharding

# -- meshes -------------------------------------------------------------------------

def _new_mesh_name(mesh: Mesh, taken: dict[str, Mesh]) -> str:
    if mesh.is_maximal:
        return f"maximal_mesh_{mesh.maximal_device_id}"
    candidates = ["mesh"] + [f"mesh_{i}" for i in range(len(taken) + 1)]
    return next(name for name in candidates if name not in taken)


def lift_inlined_meshes(module: HloModule) -> None:
    """Every mesh becomes a module mesh referenced by name, and no two module
    meshes are equal (shardings of a duplicate use the first one)."""
    renamed: dict[str, str] = {}
    kept: dict[str, Mesh] = {}
    for name, mesh in module.meshes.items():
        first = next((n for n, m in kept.items() if m == mesh), None)
        if first is None:
            kept[name] = mesh
        else:
            renamed[name] = first
    added: dict[str, Mesh] = {}

    def lift(sharding: TensorSharding) -> TensorSharding:
        mesh = sharding.mesh
        if isinstance(mesh, Mesh):
            name = next((n for n, m in {**kept, **added}.items() if m == mesh), None)
            if name is None:
                name = _new_mesh_name(mesh, {**kept, **added})
                added[name] = mesh
            return sharding.replace(mesh=name)
        if mesh in renamed:
            return sharding.replace(mesh=renamed[mesh])
        return sharding

    transform_shardings(module, lift)
    if renamed or added:
        ir_edits.set_meshes(module, {**kept, **added})


def remove_size_one_axes(module: HloModule) -> None:
    """Axes of size 1 shard nothing: drop them from shardings and manual axes."""
    def meshes_of(sharding: TensorSharding) -> Mesh:
        return sharding.mesh_of(module.meshes)

    def keep(axes: tuple[AxisRef, ...], mesh: Mesh) -> tuple[AxisRef, ...]:
        return tuple(a for a in axes if not (a.sub_axis is None and mesh.has_axis(a.name)
                                              and mesh.axis_size(a.name) == 1))

    def strip(sharding: TensorSharding) -> TensorSharding:
        mesh = meshes_of(sharding)
        if all(axis.size > 1 for axis in mesh.axes):
            return sharding
        dims = tuple(d.with_axes(keep(d.axes, mesh)) for d in sharding.dim_shardings)
        return TensorSharding(sharding.mesh, dims, keep(sharding.replicated_axes, mesh),
                              keep(sharding.unreduced_axes, mesh))

    for manual in manual_computations(module):
        in_shardings = manual.attributes.get("in_shardings", ())
        if in_shardings:
            mesh = meshes_of(in_shardings[0])
            manual.attributes["manual_axes"] = tuple(a for a in manual.attributes.get("manual_axes", ())
                                                     if not (mesh.has_axis(a) and mesh.axis_size(a) == 1))
    transform_shardings(module, strip)


# -- manual computations --------------------------------------------------------------

def _with_manual_axes(sharding: TensorSharding, manual_axes: list[str], mesh: Mesh) -> TensorSharding:
    missing = [AxisRef(a) for a in manual_axes if not sharding.is_bound(a)]
    if not missing:
        return sharding
    replicated = sorted((*sharding.replicated_axes, *missing), key=lambda axis: axis.sort_key(mesh))
    return sharding.replace_replicated_axes(replicated)


def manual_axes_cleanup(module: HloModule) -> None:
    """Every in/out sharding names every manual axis (unused ones become
    replicated), and manual axes are in mesh order."""
    for manual in manual_computations(module):
        in_shardings = list(manual.attributes.get("in_shardings", ()))
        results = [r for r in op_results(manual) if r.sdy_sharding is not None]
        shardings = in_shardings + [r.sdy_sharding for r in results]
        if not shardings:
            continue
        mesh = shardings[0].mesh_of(module.meshes)
        manual_axes = sorted(manual.attributes.get("manual_axes", ()), key=mesh.axis_index)
        manual.attributes["manual_axes"] = tuple(manual_axes)
        # Tokens have no dimensions and are not completed.
        manual.attributes["in_shardings"] = tuple(
            _with_manual_axes(s, manual_axes, mesh) if operand.shape.is_array else s
            for s, operand in zip(in_shardings, manual.operands))
        for result in results:
            if result.shape.is_array:
                result.sdy_sharding = _with_manual_axes(result.sdy_sharding, manual_axes, mesh)


# -- constants ---------------------------------------------------------------------------

CONSTANT_PRESERVING_OPCODES = ("broadcast", "stablehlo.broadcast_in_dim", "reshape", "slice")


def _is_scalar(instr: HloInstruction) -> bool:
    return instr.shape.is_array and not instr.shape.dimensions


def _is_constant_expression(instr: HloInstruction, constants: set[int]) -> bool:
    if instr.opcode in ("constant", "iota"):
        return True
    preserving = instr.opcode in CONSTANT_PRESERVING_OPCODES or (
        is_elementwise(instr) and instr.opcode not in ("sdy.sharding_constraint", "sdy.reshard"))
    return preserving and all(id(operand) in constants for operand in instr.operands)


def _is_scalar_expansion(instr: HloInstruction) -> bool:
    return instr.opcode == "broadcast" and _is_scalar(instr.operands[0])


def _is_group_marker(instr: HloInstruction) -> bool:
    """A sharding_group op that only marks its operand (Shardy's no-result form)."""
    return instr.opcode == "sdy.sharding_group" and not instr.attributes.get("has_result")


class _ConstantSplitter:
    """Gives every use of a constant sub-computation (constants, iotas, and
    broadcasts, reshapes, slices and elementwise ops of them; broadcasts of
    scalars) its own copy, so the uses can be sharded independently. Scalars
    are not copied: they are never sharded."""

    def __init__(self, computation: HloComputation):
        self.computation = computation
        self.constants: set[int] = set()
        self.expansions: set[int] = set()
        self.order: list[HloInstruction] = []
        self.named: set[int] = set()

    def run(self) -> None:
        self._visit(self.computation)
        for instr in reversed(self.order):
            if instr.parent is not None and all(_is_group_marker(u) for u in instr.users) \
                    and instr.parent.root is not instr:
                for user in list(instr.users):
                    user.parent.remove_instruction(user)
                instr.parent.remove_instruction(instr)
            elif id(instr) in self.named:
                ir_edits.forget_name(instr)

    def _visit(self, computation: HloComputation) -> None:
        for instr in list(computation.instructions):
            if instr.opcode == "parameter" or encodes_mlir_structure(instr) or instr.opcode == "sdy.sharding_group":
                if instr is computation.root and encodes_mlir_structure(instr) and instr.opcode == "tuple":
                    self._split_operands(instr)
                continue
            if _is_constant_expression(instr, self.constants):
                self.constants.add(id(instr))
                self.order.append(instr)
                continue
            if _is_scalar_expansion(instr):
                self.expansions.add(id(instr))
                self.order.append(instr)
                continue
            self._split_operands(instr)
            for region in instr.called_computations:
                if instr.opcode != "call":
                    self._visit(region)
        root = computation.root
        if root is not None and (id(root) in self.constants or id(root) in self.expansions):
            computation.root = self._clone_tree(root, {})

    def _split_operands(self, user: HloInstruction) -> None:
        for index, operand in enumerate(user.operands):
            if id(operand) in self.constants or id(operand) in self.expansions:
                user.replace_operand(index, self._clone_tree(operand, {}))

    def _clone_tree(self, instr: HloInstruction, mapping: dict[int, HloInstruction]) -> HloInstruction:
        if _is_scalar(instr):
            return instr
        if id(instr) in mapping:
            return mapping[id(instr)]
        operands = [self._clone_tree(o, mapping) for o in instr.operands]
        # The first copy takes the original's name (the original goes away).
        copy = ir_edits.clone_before(instr, operands, keep_name=id(instr) not in self.named)
        self.named.add(id(instr))
        mapping[id(instr)] = copy
        for user in list(instr.users):
            if _is_group_marker(user):
                ir_edits.clone_before(user, [copy], before=instr)
        return copy


def split_constants(module: HloModule, graph_funcs: list[HloComputation]) -> None:
    for computation in module.computations:
        for instr in computation.instructions:
            if instr.opcode == "constant":
                ir_edits.mark_sdy_constant(instr)
    for func in graph_funcs:
        _ConstantSplitter(func).run()


# -- sharding constraints ---------------------------------------------------------------

def _is_constraint_or_manual(instr: HloInstruction) -> bool:
    return instr.opcode in ("sdy.sharding_constraint", "sdy.manual_computation")


def _uses(value: HloInstruction) -> int:
    count = sum(sum(1 for o in user.operands if o is value) for user in value.users)
    if value.parent is not None and value.parent.root is value:
        count += 1
    return count


class _ConstraintApplier:
    def __init__(self, module: HloModule):
        self.module = module
        self.graph = ProgramGraph(module, with_units=False)

    def is_edge_target(self, value: HloInstruction) -> bool:
        graph = self.graph
        resolved = graph.resolve(value)
        return id(resolved) in graph.edge_of_store or value.opcode == "sdy.data_flow_edge"

    def used_by_constraint_with_other_sharding(self, value: HloInstruction, sharding: TensorSharding) -> bool:
        for user in value.users:
            if user.opcode == "sdy.sharding_constraint" and user.sdy_sharding != sharding:
                return True
            if user.opcode == "sdy.manual_computation":
                in_shardings = user.attributes.get("in_shardings", ())
                if any(o is value and in_shardings[k] != sharding for k, o in enumerate(user.operands)):
                    return True
        return False

    def should_apply(self, value: HloInstruction, sharding: TensorSharding) -> bool:
        if id(value) in self.graph.unshardable or not value.shape.is_array:
            return False
        if self.graph.get(value) is not None:
            return False
        if not sharding.is_fully_closed:
            return False
        return not self.used_by_constraint_with_other_sharding(value, sharding)

    def apply(self, value: HloInstruction, sharding: TensorSharding, constraint_after) -> None:
        if not self.should_apply(value, sharding):
            return
        if self.is_edge_target(value):
            # Restrict the uses only, not every target of the edge.
            constraint = constraint_after()
            ir_edits.replace_uses_except(value, constraint, constraint)
        else:
            self.graph.set(value, sharding)

    def chain_tail(self, head: HloInstruction) -> HloInstruction | None:
        source = head.operands[0]
        if source.opcode == "sdy.sharding_constraint" or self.graph.get(source) is not None:
            return None
        if any(_is_constraint_or_manual(u) for u in source.users if u is not head):
            return None
        tail = head
        while _uses(tail) == 1 and tail.users and tail.users[0].opcode == "sdy.sharding_constraint":
            tail = tail.users[0]
        if tail is head or any(_is_constraint_or_manual(u) for u in tail.users):
            return None
        return tail

    def visit(self, computation: HloComputation) -> None:
        # Post-order, as MLIR walks: regions before the op that holds them.
        for instr in list(computation.instructions):
            if instr.opcode != "call":
                for region in instr.called_computations:
                    self.visit(region)
            elif is_func_call(instr):
                # Each callee has one call (the call graph is flat): it is
                # walked where it is called, as an inlined named computation.
                self.visit(instr.called_computations[0])
            if instr.opcode == "sdy.sharding_constraint":
                tail = self.chain_tail(instr)
                if tail is not None:
                    ir_edits.replace_later_uses(instr.operands[0], tail, exclude=instr)
                self.apply(instr.operands[0], instr.sdy_sharding,
                           lambda c=instr: ir_edits.move_after_value(c, c.operands[0]))
            elif instr.opcode == "sdy.manual_computation":
                for operand, sharding in zip(list(instr.operands), instr.attributes.get("in_shardings", ())):
                    self.apply(operand, sharding,
                               lambda o=operand, s=sharding: ir_edits.new_constraint_after(o, s))


def apply_sharding_constraints(module: HloModule, funcs: list[HloComputation]) -> None:
    applier = _ConstraintApplier(module)
    for func in funcs:
        applier.visit(func)


# -- sharding groups ------------------------------------------------------------------------

def check_sharding_groups(module: HloModule) -> None:
    """Members of a group have one shape and all live outside manual
    computations or in the same one."""
    shapes: dict[int, tuple[int, ...]] = {}
    owners: dict[int, object] = {}
    parents = {id(c): i for comp in module.computations for i in comp.instructions for c in i.called_computations
               if i.opcode != "call"}
    for computation in module.computations:
        for instr in computation.instructions:
            if instr.opcode != "sdy.sharding_group":
                continue
            group = int(instr.attributes["group_id"])
            dims = tuple(instr.operands[0].shape.dimensions)
            if shapes.setdefault(group, dims) != dims:
                raise VerifyError(f"sharding group {group}: all values must have the same shape "
                                  f"({list(shapes[group])} vs {list(dims)})")
            manual = _enclosing_manual_computation(computation, parents)
            if owners.setdefault(group, manual) is not manual:
                raise VerifyError(f"sharding group {group}: values cannot cross manual computation boundaries")


def _enclosing_manual_computation(computation: HloComputation | None,
                                  parents: dict[int, HloInstruction]) -> HloInstruction | None:
    while computation is not None and id(computation) in parents:
        parent = parents[id(computation)]
        if parent.opcode == "sdy.manual_computation":
            return parent
        computation = parent.parent
    return None
