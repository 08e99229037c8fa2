"""What the loop emitter can compute inside a fusion, stated for the fusion
passes (which sit below the code generator and may not import it).

``LOOP_EMITTER_OPCODES`` is the set of opcodes the loop emitter has an
elemental rule for (``xlapy/codegen/elemental_rules.py``: the ``ELEMENTAL``
and ``COMPLEX_ELEMENTAL`` tables) plus the ops it emits with loops of their own
(``reduce``, ``reduce-window``, ``dynamic-update-slice``); a test keeps the two
in step. ``is_loop_emittable`` adds the cheap checks of element types and forms
the emitter refuses (complex numbers outside the complex rules, bitcast-convert
between widths of sub-byte types or pred, gather outside ``gather_simplifier``'s canonical form,
a map whose computation holds an array or an op the emitter cannot compute on scalars).

``can_be_loop_fused`` is XLA:CPU's ``CanBeLoopFused``
(``xla/service/cpu/cpu_instruction_fusion.cc``): elementwise ops and the data
movement ops the elemental emitter indexes well; ``reduce-window`` is emitted
but, as in XLA:CPU, never fused with other ops.
"""

from __future__ import annotations

from collections.abc import Callable

from xlapy.hlo.ir import HloComputation, HloInstruction
from xlapy.hlo.opcodes import OPCODES
from xlapy.shapes import ELEMENT_TYPES

# The code generator's elemental opcodes (``ELEMENTAL | COMPLEX_ELEMENTAL``).
ELEMENTAL_OPCODES = frozenset("""
abs add and atan2 bitcast bitcast-convert broadcast cbrt ceil clamp compare complex concatenate constant convert
copy cosine count-leading-zeros divide dynamic-slice erf exponential exponential-minus-one floor gather imag iota
is-finite log log-plus-one logistic map maximum minimum multiply negate not or pad popcnt power real
reduce-precision remainder reshape reverse round-nearest-afz round-nearest-even rsqrt select shift-left
shift-right-arithmetic shift-right-logical sign sine slice sqrt stochastic-convert subtract tan tanh transpose xor
""".split())

# Ops the loop emitter writes with loops of their own rather than one elemental rule.
# The concatenate emitter takes a concatenate hero of at most this many operands, as XLA:GPU's
# (``GetEmitterFusionKind``); the fusion pass knows it too, since such a concatenate needs no branches.
CONCATENATE_HERO_MAX_OPERANDS = 4

LOOP_OPCODES = frozenset({"reduce", "reduce-window", "dynamic-update-slice"})

LOOP_EMITTER_OPCODES = ELEMENTAL_OPCODES | LOOP_OPCODES

# Opcodes the emitter computes on complex numbers: the complex rules
# (``COMPLEX_ELEMENTAL``) and the rules that only move or choose elements
# (``ANY_ELEMENT_TYPE``).
COMPLEX_OPCODES = frozenset("""
abs add compare complex convert cosine divide exponential exponential-minus-one imag iota log log-plus-one logistic
map multiply negate power real rsqrt sign sine sqrt subtract tan tanh
broadcast transpose reshape bitcast slice reverse copy constant pad concatenate dynamic-slice gather select
""".split())

# Data-movement opcodes XLA:CPU fuses besides elementwise ones (``CanBeLoopFused``).
_LOOP_FUSIBLE_MOVEMENT = frozenset({
    "bitcast", "broadcast", "concatenate", "dynamic-slice", "dynamic-update-slice", "gather", "iota", "pad", "reduce",
    "reshape", "reverse", "slice", "transpose",
})  # fmt: skip

# A predicate the caller may pass to the fusion passes: whether the code
# generator can emit an instruction inside a loop fusion.
EmittablePredicate = Callable[[HloInstruction], bool]


def _is_complex(element_type: str) -> bool:
    return element_type in ELEMENT_TYPES and ELEMENT_TYPES[element_type].is_complex


def _bits(element_type: str) -> int:
    return ELEMENT_TYPES[element_type].bit_width if element_type in ELEMENT_TYPES else 0


def is_elementwise(instr: HloInstruction) -> bool:
    """XLA's ``IsElementwise``: unary/binary/ternary elementwise ops, constants,
    maps (over every dimension in order, as the shape rule requires) and
    bitcast-converts between types of one width."""
    spec = OPCODES.get(instr.opcode)
    if instr.opcode in ("constant", "map"):
        return True
    if instr.opcode == "bitcast-convert":
        return _bits(instr.shape.element_type) == _bits(instr.operands[0].shape.element_type)
    return spec is not None and spec.is_elementwise


def _is_canonical_gather(instr: HloInstruction) -> bool:
    operand, starts = instr.operands
    rank = len(operand.shape.dimensions)
    return (tuple(instr.attr("offset_dims") or ()) == tuple(range(1, rank + 1))
            and not tuple(instr.attr("collapsed_slice_dims") or ())
            and instr.attr("index_vector_dim") == 1
            and len(starts.shape.dimensions) == 2
            and not tuple(instr.attr("operand_batching_dims") or ()))


def is_loop_emittable(instr: HloInstruction) -> bool:
    """Whether the loop emitter can compute ``instr`` inside a fusion, as far
    as its opcode, element types and form tell."""
    if instr.opcode not in LOOP_EMITTER_OPCODES:
        return False
    if instr.shape.is_tuple:
        # A variadic reduce (argmax's value and index) is emitted as the fused root, one output per element.
        if instr.opcode != "reduce" or any(s.is_tuple for s in instr.shape.tuple_shapes):
            return False
        return not any(_is_complex(s.element_type) for s in instr.shape.tuple_shapes) and \
            not any(o.shape.is_tuple for o in instr.operands)
    types = [instr.shape.element_type, *(o.shape.element_type for o in instr.operands)]
    if any(o.shape.is_tuple for o in instr.operands):
        return False
    if any(_is_complex(t) for t in types) and instr.opcode not in COMPLEX_OPCODES | LOOP_OPCODES:
        return False
    if instr.opcode == "bitcast-convert" and _bits(types[0]) != _bits(types[1]) and \
            (min(_bits(types[0]), _bits(types[1])) < 8 or "pred" in types):
        return False  # between widths only types of whole bytes
    if instr.opcode == "map":
        return _computes_scalars(instr.called_computations[0])
    return instr.opcode != "gather" or _is_canonical_gather(instr)


def _computes_scalars(computation: HloComputation) -> bool:
    """Whether the emitter can make a function of scalars of ``computation`` (a mapped computation): every
    instruction a scalar array it computes (nested maps included)."""
    for instr in computation.instructions:
        if instr.shape.is_tuple or instr.shape.dimensions:
            return False
        if instr.opcode != "parameter" and not is_loop_emittable(instr):
            return False
    return True


def can_be_loop_fused(instr: HloInstruction, emittable: EmittablePredicate | None = None) -> bool:
    """XLA:CPU's ``CanBeLoopFused``, restricted to what the loop emitter can
    compute (``emittable``, by default ``is_loop_emittable``)."""
    if not (is_elementwise(instr) or instr.opcode in _LOOP_FUSIBLE_MOVEMENT):
        return False
    return (emittable or is_loop_emittable)(instr)
