"""The HLO opcode table: one entry per opcode, in XLA's spelling, with the
facts every pass needs. Later rules (shape inference, interpreter, indexing,
emission) are registries keyed by these names."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class OpKind(Enum):
    UNARY = "elementwise unary"
    BINARY = "elementwise binary"
    TERNARY = "elementwise ternary"
    OTHER = "other"


@dataclass(frozen=True)
class OpSpec:
    name: str
    kind: OpKind = OpKind.OTHER
    # Number of operands, or None when it varies.
    arity: int | None = None

    @property
    def is_elementwise(self) -> bool:
        return self.kind is not OpKind.OTHER


_UNARY = """abs cbrt ceil count-leading-zeros copy cosine erf exponential exponential-minus-one floor imag is-finite
log log-plus-one logistic negate not popcnt real round-nearest-afz round-nearest-even rsqrt sign sine sqrt tan tanh
convert bitcast-convert reduce-precision""".split()
_BINARY = """add and atan2 compare complex divide maximum minimum multiply or power remainder shift-left
shift-right-arithmetic shift-right-logical stochastic-convert subtract xor""".split()
_TERNARY = "clamp select".split()
_FIXED = {
    "parameter": 0, "constant": 0, "iota": 0, "partition-id": 0, "replica-id": 0, "rng-get-and-update-state": 0,
    "broadcast": 1, "reshape": 1, "transpose": 1, "slice": 1, "reverse": 1, "bitcast": 1, "get-tuple-element": 1,
    "get-dimension-size": 1, "domain": 1, "copy-start": 1, "copy-done": 1, "pad": 2, "dot": 2, "convolution": 2,
    "add-dependency": 2, "set-dimension-size": 2, "while": 1, "gather": 2, "rng-bit-generator": 1, "fft": 1,
    "cholesky": 1, "triangular-solve": 2, "send": 2, "send-done": 1, "recv": 1, "recv-done": 1,
    "select-and-scatter": 3, "dynamic-update-slice": None, "topk": 1, "batch-norm-inference": 5,
    "batch-norm-training": 3, "batch-norm-grad": 5, "infeed": 1, "outfeed": 2, "ragged-dot": 3,
}
_VARIADIC = """tuple concatenate dynamic-slice dynamic-reshape reduce reduce-window sort map call conditional
fusion custom-call scatter rng after-all opt-barrier all-reduce all-reduce-start all-reduce-done
all-gather all-gather-start all-gather-done reduce-scatter all-to-all ragged-all-to-all collective-permute
collective-permute-start collective-permute-done collective-broadcast async-start async-update async-done
""".split()

# Elementwise ops computed by a math function (an approximation in compiled code, where the interpreter rounds the
# exact value once): sqrt and divide are not among them, IEEE fixes their results.
TRANSCENDENTAL_OPCODES = frozenset({
    "atan2", "cbrt", "cosine", "erf", "exponential", "exponential-minus-one", "log", "log-plus-one", "logistic",
    "power", "rsqrt", "sine", "tan", "tanh",
})

OPCODES: dict[str, OpSpec] = {
    **{name: OpSpec(name, OpKind.UNARY, 1) for name in _UNARY},
    **{name: OpSpec(name, OpKind.BINARY, 2) for name in _BINARY},
    **{name: OpSpec(name, OpKind.TERNARY, 3) for name in _TERNARY},
    **{name: OpSpec(name, OpKind.OTHER, arity) for name, arity in _FIXED.items()},
    **{name: OpSpec(name) for name in _VARIADIC},
}
# XLA's printer spells an async wrapping of op X as `X-start` / `X-update` / `X-done`.
for _name in [n for n in OPCODES if not n.endswith(("-start", "-done", "-update"))]:
    for _suffix in ("-start", "-update", "-done"):
        OPCODES.setdefault(_name + _suffix, OpSpec(_name + _suffix))
