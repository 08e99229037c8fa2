"""The HLO verifier: the invariants of XLA's ``HloVerifier`` checked on a
module, whether it was parsed or built and rewritten by a pass.

``verify(module)`` raises ``VerifyError`` at the first broken invariant; the
message names the computation, the instruction and the rule, e.g.
``computation main, instruction add.3: operands of add must have the same
shape, got f32[2] and f32[3]``.

Structure is checked for every computation before any shape, so that the
shape rules only ever see well-formed graphs. Every attribute xlapy models
must hold a value of the form the parser gives it (``AttributeKind.holds``):
passes, frontends and edits set attributes too, and the interpreter and the
emitters read them as they are.
"""

from __future__ import annotations

from xlapy.errors import VerifyError, XlapyError
from xlapy.hlo.attributes import ATTRIBUTES
from xlapy.hlo.ir import HloComputation, HloInstruction, HloModule
from xlapy.hlo.opcodes import OPCODES
from xlapy.hlo.shape_rules.helpers import same_shape, show, without_layout
from xlapy.hlo.shape_rules.inference import has_shape_rule, infer_shape
from xlapy.hlo.stablehlo_forms import CAPTURING_OPCODES, STABLEHLO_OPCODES
from xlapy.shapes import Shape, ShapeParser, check_shape


def verify(module: HloModule) -> None:
    """Raise ``VerifyError`` unless ``module`` is a valid HLO module.

    Opcodes are checked by their own rules wherever the instruction came
    from: StableHLO's forms have opcodes of their own
    (``xlapy.hlo.stablehlo_forms``), whose regions may use the values of the
    computations they run inside; other opcodes with a dialect prefix
    (``chlo.*``, ops an MLIR frontend kept under their names) are ops
    xlapy has no rules for, accepted as declared."""
    _check_module(module)
    owners = _owners(module)
    # The call graph before any edge, so that a region's use of an enclosing
    # computation's value can be told from an edge to a foreign instruction.
    _check_call_graph(module)
    enclosing = _Enclosing(module, owners)
    # Operands first everywhere, so that an edge to a foreign instruction is
    # reported at the instruction that uses it, not at the one it uses.
    for computation in module.computations:
        _check_operands(module, computation, enclosing)
    for computation in module.computations:
        _check_users_and_order(computation, owners)
    for computation in module.computations:
        _check_attribute_kinds(computation)
        _check_shapes(computation)
    _check_entry_layout(module)


def _check_attribute_kinds(computation: HloComputation) -> None:
    """Every attribute xlapy models holds a value of the form the parser makes of it (``AttributeKind.holds``),
    wherever the instruction came from: the interpreter, the emitters and the runtime read the attribute itself,
    so a value of another form (a string "false" for a boolean, the text "{1,2}" for a list, "1" for an integer)
    would crash them or silently pick a code path."""
    for instr in computation.instructions:
        for name, value in instr.attributes.items():
            kind = ATTRIBUTES.get(name)
            if kind is not None and not kind.holds(value):
                shown = value if isinstance(value, str) else repr(value)
                raise _error(computation, f"attribute {name} of {instr.opcode} must be {kind.spelling}, got {shown}",
                             instr)


def _error(computation: HloComputation, message: str, instr: HloInstruction | None = None) -> VerifyError:
    where = f"computation {computation.name}" + (f", instruction {instr.name}" if instr is not None else "")
    return VerifyError(f"{where}: {message}")


# -- the module --------------------------------------------------------------------------

def _check_module(module: HloModule) -> None:
    if not module.computations:
        raise VerifyError(f"module {module.name} has no computations")
    names: dict[str, HloComputation] = {}
    for computation in module.computations:
        if computation.name in names:
            raise VerifyError(f"module {module.name} has two computations named {computation.name}")
        names[computation.name] = computation
    entries = [c for c in module.computations if c.is_entry]
    if module.entry is None or not entries:
        raise VerifyError(f"module {module.name} has no entry computation")
    if len(entries) > 1:
        raise VerifyError(f"module {module.name} has {len(entries)} entry computations: "
                          f"{', '.join(c.name for c in entries)}")
    if not any(c is module.entry for c in module.computations):
        raise VerifyError(f"the entry computation {module.entry.name} of module {module.name} is not in the module")
    if entries[0] is not module.entry:
        raise VerifyError(f"module {module.name} names {module.entry.name} as its entry, but {entries[0].name} "
                          "is marked as the entry")
    # Instruction names are unique in a whole module, not just per computation.
    owners: dict[str, tuple[HloComputation, HloInstruction]] = {}
    for computation in module.computations:
        for instr in computation.instructions:
            if instr.name in owners:
                other, first = owners[instr.name]
                if first is instr:
                    where = "twice in the computation" if other is computation else f"in computation {other.name} too"
                    raise _error(computation, f"is listed {where}", instr)
                where = "earlier in the same computation" if other is computation else f"in computation {other.name}"
                raise _error(computation, f"the name {instr.name} is already used {where}", instr)
            owners[instr.name] = (computation, instr)


# -- one computation's graph ------------------------------------------------------------------

def _owners(module: HloModule) -> dict[int, HloComputation]:
    """id(instruction) -> the computation listing it."""
    return {id(i): c for c in module.computations for i in c.instructions}


class _Enclosing:
    """Which computations run inside which: a region of StableHLO's control
    flow may use the values of every computation that (transitively) calls it."""

    def __init__(self, module: HloModule, owners: dict[int, HloComputation]):
        self._owners = owners
        self.capturing = _capturing_regions(module)
        self._callers: dict[int, list[HloComputation]] = {}
        for computation in module.computations:
            for callee in computation.called_computations():
                self._callers.setdefault(id(callee), []).append(computation)
        self._ancestors: dict[int, set[int]] = {}

    def encloses(self, outer: HloComputation, inner: HloComputation) -> bool:
        ancestors = self._ancestors.get(id(inner))
        if ancestors is None:
            ancestors = set()
            pending = list(self._callers.get(id(inner), ()))
            while pending:
                caller = pending.pop()
                if id(caller) not in ancestors:
                    ancestors.add(id(caller))
                    pending.extend(self._callers.get(id(caller), ()))
            self._ancestors[id(inner)] = ancestors
        return id(outer) in ancestors

    def captures(self, value: HloInstruction, region: HloComputation) -> bool:
        """Whether ``region`` may use ``value``: a value listed in a computation
        that ``region`` runs inside."""
        owner = self._owners.get(id(value))
        return owner is not None and owner is value.parent and self.encloses(owner, region)


def _is_dialect_op(opcode: str) -> bool:
    # An MLIR op kept under its name (`chlo.erf_inv`, an op read in the
    # generic form); HLO's opcodes have no dialect prefix.
    return "." in opcode


def _capturing_regions(module: HloModule) -> set[int]:
    """The ids of the regions that may use values of the computations they
    run inside: those of StableHLO's control flow."""
    return {id(region) for computation in module.computations for instr in computation.instructions
            if instr.opcode in CAPTURING_OPCODES for region in instr.called_computations}


def _check_operands(module: HloModule, computation: HloComputation, enclosing: _Enclosing) -> None:
    members = {id(i) for i in computation.instructions}
    if computation.root is None:
        raise _error(computation, "has no ROOT instruction")
    if id(computation.root) not in members:
        raise _error(computation, f"the ROOT {computation.root.name} is not an instruction of the computation")
    computations = {id(c) for c in module.computations}
    captures = id(computation) in enclosing.capturing
    for instr in computation.instructions:
        if instr.parent is not computation:
            owner = "no computation" if instr.parent is None else f"computation {instr.parent.name}"
            raise _error(computation, f"is listed in this computation, but its parent is {owner}", instr)
        spec = OPCODES.get(instr.opcode) or STABLEHLO_OPCODES.get(instr.opcode)
        if spec is None and not _is_dialect_op(instr.opcode):
            raise _error(computation, f"unknown opcode {instr.opcode}", instr)
        arity = None if spec is None else spec.arity
        if arity is not None and len(instr.operands) != arity:
            raise _error(computation, f"{instr.opcode} takes {arity} operand{'s' * (arity != 1)}, "
                                      f"got {len(instr.operands)}", instr)
        for index, operand in enumerate(instr.operands):
            if id(operand) not in members:
                if captures and enclosing.captures(operand, computation):
                    continue
                where = "no computation" if operand.parent is None else f"computation {operand.parent.name}"
                why = "" if captures or not enclosing.captures(operand, computation) else (
                    f"; only the regions of {', '.join(sorted(CAPTURING_OPCODES))} use values of the computations "
                    "they run inside")
                raise _error(computation, f"operand {index} ({operand.name}) is not in this computation but in "
                                          f"{where}{why}", instr)
        for predecessor in instr.control_predecessors:
            if id(predecessor) not in members:
                raise _error(computation, f"its control predecessor {predecessor.name} is not in this "
                                          "computation", instr)
        for callee in instr.called_computations:
            if id(callee) not in computations:
                raise _error(computation, f"calls computation {callee.name}, which is not in the module", instr)
        if instr.opcode == "fusion" and instr.called_computations:
            fused = instr.called_computations[0]
            if fused.fusion_instruction is not None and fused.fusion_instruction is not instr:
                raise _error(computation, f"calls fused computation {fused.name}, which belongs to fusion "
                                          f"{fused.fusion_instruction.name}", instr)
    _check_parameter_numbers(computation)


def _check_users_and_order(computation: HloComputation, owners: dict[int, HloComputation]) -> None:
    """Operand and user lists mirror each other (as do control edges), and
    the graph has no cycle. Linear in the number of edges: a value may have
    many thousands of users."""
    members = {id(i) for i in computation.instructions}
    # Sets of users (and of operands), built once per instruction rather than
    # searched once per edge: a value may have 40,000 users, a tuple as many operands.
    user_sets: dict[int, set[int]] = {}
    operand_sets: dict[int, set[int]] = {}
    successor_sets: dict[int, set[int]] = {}
    predecessor_sets: dict[int, set[int]] = {}
    for instr in computation.instructions:
        # A user is listed once however many times it uses the value.
        if len(_ids(user_sets, instr, instr.users)) != len(instr.users):
            twice = next(u for i, u in enumerate(instr.users) if any(v is u for v in instr.users[:i]))
            raise _error(computation, f"lists {twice.name} as a user twice", instr)
        for operand in instr.operands:
            if id(instr) not in _ids(user_sets, operand, operand.users):
                raise _error(computation, f"uses {operand.name}, but is missing from its users", instr)
        for user in instr.users:
            if id(user) not in members and (owners.get(id(user)) is not user.parent or user.parent is None):
                raise _error(computation, f"its user {user.name} is not in this computation", instr)
            if id(instr) not in _ids(operand_sets, user, user.operands):
                raise _error(computation, f"lists {user.name} as a user, but is not one of its operands", instr)
        for predecessor in instr.control_predecessors:
            if id(instr) not in _ids(successor_sets, predecessor, predecessor.control_successors):
                raise _error(computation, f"its control predecessor {predecessor.name} does not list it as a "
                                          "successor", instr)
        for successor in instr.control_successors:
            if id(successor) not in members:
                raise _error(computation, f"its control successor {successor.name} is not in this computation",
                             instr)
            if id(instr) not in _ids(predecessor_sets, successor, successor.control_predecessors):
                raise _error(computation, f"its control successor {successor.name} does not list it as a "
                                          "predecessor", instr)
    computation.post_order()  # raises VerifyError naming the computation on a cycle


def _ids(cache: dict[int, set[int]], owner: HloInstruction, members: list[HloInstruction]) -> set[int]:
    """The ids of ``members`` (a list of ``owner``'s), computed once per owner."""
    found = cache.get(id(owner))
    if found is None:
        found = cache[id(owner)] = {id(m) for m in members}
    return found


def _check_parameter_numbers(computation: HloComputation) -> None:
    """Parameters are numbered 0..n-1, each number once."""
    seen: dict[int, HloInstruction] = {}
    params = [i for i in computation.instructions if i.opcode == "parameter"]
    for param in params:
        number = param.parameter_number
        if not isinstance(number, int) or number < 0:
            raise _error(computation, f"parameter number {number} is not a non-negative integer", param)
        if number in seen:
            raise _error(computation, f"parameter number {number} is also used by {seen[number].name}", param)
        seen[number] = param
    for number in range(len(params)):
        if number not in seen:
            raise _error(computation, f"has {len(params)} parameters, but none is number {number} "
                                      f"(numbers used: {sorted(seen)})")


def _check_call_graph(module: HloModule) -> None:
    """No computation calls itself, directly or through others."""
    state: dict[int, int] = {}  # 1: on the current path, 2: done
    for root in module.computations:
        if id(root) in state:
            continue
        stack = [(root, iter(root.called_computations()))]
        state[id(root)] = 1
        while stack:
            computation, callees = stack[-1]
            callee = next(callees, None)
            if callee is None:
                state[id(computation)] = 2
                stack.pop()
            elif state.get(id(callee)) == 1:
                path = " -> ".join(c.name for c, _ in stack) + f" -> {callee.name}"
                raise _error(callee, f"calls itself: {path}")
            elif id(callee) not in state:
                state[id(callee)] = 1
                stack.append((callee, iter(callee.called_computations())))


# -- shapes ----------------------------------------------------------------------------------

def _check_shapes(computation: HloComputation) -> None:
    for instr in computation.instructions:
        try:
            check_shape(instr.shape)
        except XlapyError as e:
            raise _error(computation, f"declares an invalid shape {show(instr.shape)}: {e}", instr) from None
        if not has_shape_rule(instr.opcode):
            continue  # no rule: the declared shape is accepted
        try:
            inferred = infer_shape(instr)
        except VerifyError as e:
            raise VerifyError(f"computation {computation.name}, {e}") from None
        if not same_shape(inferred, instr.shape):
            raise _error(computation, f"{instr.opcode} produces {show(inferred)}, but the instruction declares "
                                      f"{show(instr.shape)}", instr)


def _check_entry_layout(module: HloModule) -> None:
    """The entry's parameters and root agree with ``entry_computation_layout``
    (shapes only; its layouts are the module's, which may differ)."""
    text = module.attributes.get("entry_computation_layout")
    entry = module.entry
    if text is None or entry is None:
        return
    try:
        params, result = _read_program_shape(str(text))
    except XlapyError as e:
        raise VerifyError(f"module {module.name}: cannot read entry_computation_layout {text}: {e}") from None
    actual = entry.parameters
    if len(params) != len(actual):
        raise _error(entry, f"has {len(actual)} parameters, but entry_computation_layout lists {len(params)}")
    for number, (shape, param) in enumerate(zip(params, actual)):
        if not same_shape(shape, param.shape):
            raise _error(entry, f"entry_computation_layout gives parameter {number} the shape {show(shape)}, "
                                f"but it is {show(param.shape)}", param)
    if entry.root is not None and not same_shape(result, entry.root.shape):
        raise _error(entry, f"entry_computation_layout gives the result the shape {show(result)}, "
                            f"but the ROOT is {show(entry.root.shape)}", entry.root)


def _read_program_shape(text: str) -> tuple[list[Shape], Shape]:
    """``{(p0, p1, ...)->result}`` as module headers write it."""
    parser = ShapeParser(text)
    parser.expect("{", "to start the program shape")
    parser.expect("(", "to start the parameter shapes")
    params: list[Shape] = []
    if not parser.eat(")"):
        while True:
            params.append(without_layout(parser.parse_shape()))
            if parser.eat(")"):
                break
            parser.expect(",", "or ')' between parameter shapes")
    parser.expect("->", "before the result shape")
    result = without_layout(parser.parse_shape())
    parser.expect("}", "to end the program shape")
    return params, result
