"""The element kinds each elementwise rule computes, one entry per opcode (operand 0's kind).

``check_element_kinds`` runs before a rule: an operand of another kind raises ``VerifyError`` where HLO itself
forbids the type (erf, floor, not, ... on complex numbers), else ``UnimplementedError``: XLA accepts the op
there but defines no result the interpreter could reproduce (complex remainder, atan2 and cbrt; ordered
comparisons, maximum, minimum and clamp of complex numbers, which XLA:CPU orders inconsistently: LT and GT
lexicographically, LE, GE, maximum and minimum by the real part alone). Opcodes without an entry take every kind.
"""

from __future__ import annotations

from xlapy.errors import UnimplementedError
from xlapy.hlo import HloInstruction
from xlapy.hlo.shape_rules.inference import infer_shape
from xlapy.shapes import ELEMENT_TYPES, TypeKind

_PRED, _SIGNED, _UNSIGNED = TypeKind.PRED, TypeKind.SIGNED, TypeKind.UNSIGNED
_FLOAT, _COMPLEX = TypeKind.FLOAT, TypeKind.COMPLEX

_INTEGERS = frozenset({_SIGNED, _UNSIGNED})
_BITS = frozenset({_PRED, _SIGNED, _UNSIGNED})
_FLOATS = frozenset({_FLOAT})
_FLOATS_OR_COMPLEX = frozenset({_FLOAT, _COMPLEX})
_REAL_NUMBERS = frozenset({_SIGNED, _UNSIGNED, _FLOAT})
_ORDERED = frozenset({_PRED, _SIGNED, _UNSIGNED, _FLOAT})
_SIGNED_NUMBERS = frozenset({_SIGNED, _FLOAT, _COMPLEX})
_NUMBERS = frozenset({_SIGNED, _UNSIGNED, _FLOAT, _COMPLEX})

# Key: the opcode; for compare, the opcode and its direction.
ACCEPTED_KINDS: dict[str, frozenset[TypeKind]] = {
    **dict.fromkeys(["floor", "ceil", "round-nearest-afz", "round-nearest-even", "erf", "cbrt", "is-finite",
                     "atan2", "reduce-precision", "stochastic-convert", "complex"], _FLOATS),
    **dict.fromkeys(["cosine", "sine", "tan", "tanh", "exponential", "exponential-minus-one", "log",
                     "log-plus-one", "logistic", "rsqrt", "sqrt", "real", "imag"], _FLOATS_OR_COMPLEX),
    **dict.fromkeys(["abs", "sign"], _SIGNED_NUMBERS),
    **dict.fromkeys(["negate", "subtract", "divide", "power"], _NUMBERS),
    "remainder": _REAL_NUMBERS,
    **dict.fromkeys(["maximum", "minimum", "clamp", "compare LT", "compare LE", "compare GT", "compare GE"],
                    _ORDERED),
    **dict.fromkeys(["not", "and", "or", "xor"], _BITS),
    **dict.fromkeys(["popcnt", "count-leading-zeros", "shift-left", "shift-right-logical",
                     "shift-right-arithmetic"], _INTEGERS),
}

_KIND_NAMES = {_PRED: "pred", _SIGNED: "signed integers", _UNSIGNED: "unsigned integers",
               _FLOAT: "floating-point numbers", _COMPLEX: "complex numbers"}


def _key(instr: HloInstruction) -> str:
    return f"compare {instr.attr('direction')}" if instr.opcode == "compare" else instr.opcode


def check_element_kinds(instr: HloInstruction) -> None:
    """Raise unless the interpreter's rule of ``instr`` computes its operands' element type (module docstring)."""
    accepted = ACCEPTED_KINDS.get(_key(instr))
    if accepted is None or not instr.operands:
        return
    element_type = instr.operands[0].shape.element_type
    if ELEMENT_TYPES[element_type].kind in accepted:
        return
    infer_shape(instr)  # raises VerifyError (naming the instruction) where HLO forbids the type
    names = [name for kind, name in _KIND_NAMES.items() if kind in accepted]
    listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"
    raise UnimplementedError(f"{_key(instr)} ({instr.name}) is not supported on {element_type}: XLA defines no "
                             f"consistent result there (supported: {listed})")
