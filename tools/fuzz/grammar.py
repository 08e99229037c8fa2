"""Small random HLO modules for ``evaluate`` and ``compile``: an entry
computation of parameters and one or two kLoop fusions of elementwise ops,
broadcasts, slices, reshapes and constants. About one module in three is
made nasty on purpose: a slice past its operand, a tuple root whose shapes
differ from the fusion's, a wrong declared shape, a huge dimension, a
parameter number out of range, or a dead user of a fusion output."""

from __future__ import annotations

import random

FLOAT_TYPES = ["f32", "f32", "f64", "f16", "bf16"]
INT_TYPES = ["s32", "s8", "u8", "s64"]
UNARY_FLOAT = ["negate", "abs", "exponential", "tanh", "sqrt", "log", "sine", "cosine", "floor", "sign", "rsqrt",
               "logistic", "exponential-minus-one", "log-plus-one", "cbrt", "round-nearest-even"]
UNARY_INT = ["negate", "abs", "not", "sign"]
BINARY_FLOAT = ["add", "subtract", "multiply", "divide", "maximum", "minimum", "power", "atan2", "remainder"]
BINARY_INT = ["add", "subtract", "multiply", "maximum", "minimum", "and", "or", "xor", "shift-left"]
UNARY_COMPLEX = ["negate", "exponential", "sqrt", "log", "tanh"]
BINARY_COMPLEX = ["add", "subtract", "multiply", "divide"]
NASTY_KINDS = ["slice_past_bounds", "tuple_root_mismatch", "wrong_shape", "huge_dimension", "bad_parameter_number",
               "dead_output_user", "negative_dimension", "broadcast_bad_dims", "self_call"]


def _shape_text(element_type: str, dims: list[int]) -> str:
    return f"{element_type}[{','.join(map(str, dims))}]"


class _Body:
    def __init__(self, rng: random.Random, element_type: str, dims: list[int], parameters: int):
        self.rng, self.type, self.dims = rng, element_type, dims
        self.lines: list[str] = []
        self.values: list[str] = []
        self.count = 0
        for i in range(parameters):
            self.values.append(self._add(f"{_shape_text(element_type, dims)} parameter({i})", prefix="p"))

    def _add(self, rhs: str, prefix: str = "v") -> str:
        name = f"{prefix}{self.count}"
        self.count += 1
        self.lines.append(f"  {name} = {rhs}")
        return name

    def op(self) -> str:
        rng, shape = self.rng, _shape_text(self.type, self.dims)
        is_float = self.type in FLOAT_TYPES
        unary, binary = (UNARY_FLOAT, BINARY_FLOAT) if is_float else (UNARY_INT, BINARY_INT)
        if self.type == "c64":
            unary, binary = UNARY_COMPLEX, BINARY_COMPLEX
        elif self.type.startswith("u"):
            unary = ["not", "negate"]
        kind = rng.random()
        if kind < 0.35:
            return self._add(f"{shape} {rng.choice(unary)}({rng.choice(self.values)})")
        if kind < 0.75:
            return self._add(f"{shape} {rng.choice(binary)}({rng.choice(self.values)}, {rng.choice(self.values)})")
        if kind < 0.85 and self.type != "c64":
            a, b = rng.choice(self.values), rng.choice(self.values)
            direction = rng.choice(["LT", "GT", "EQ", "NE", "GE", "LE"])
            predicate = self._add(f"{_shape_text('pred', self.dims)} compare({a}, {b}), direction={direction}")
            return self._add(f"{shape} select({predicate}, {a}, {b})")
        if kind < 0.93:
            value = rng.choice(["1", "2", "0.5", "-3"]) if is_float else rng.choice(["1", "2", "3"])
            if self.type == "c64":
                value = "(1, 0.5)"
            scalar = self._add(f"{self.type}[] constant({value})", prefix="c")
            return self._add(f"{shape} broadcast({scalar}), dimensions={{}}")
        # A slice of the operand's full extent and back: the identity, through slice indexing.
        bounds = ",".join(f"[0:{d}]" for d in self.dims)
        return self._add(f"{shape} slice({rng.choice(self.values)}), slice={{{bounds}}}")


def random_module(rng: random.Random, nasty: bool | None = None) -> tuple[str, str]:
    """A module text and the nasty kind it was given ('' when none)."""
    if nasty is None:
        nasty = rng.random() < 0.35
    kind = rng.choice(NASTY_KINDS) if nasty else ""
    element_type = rng.choice(FLOAT_TYPES + INT_TYPES + ["c64", "pred"] if rng.random() < 0.1 else
                              FLOAT_TYPES + INT_TYPES)
    if element_type == "pred":
        element_type = "s32"
    rank = rng.choice([0, 1, 1, 2, 2, 3])
    dims = [rng.choice([1, 2, 3, 4, 5, 8, 16, 17, 33]) for _ in range(rank)]
    if kind == "huge_dimension":
        dims = [*(dims or [1])[:-1], rng.choice([4_000_000, 50_000_000, 2**31, 2**40])]
    if kind == "negative_dimension":
        dims = [*(dims or [1])[:-1], -rng.choice([1, 2, 8])]
    parameters = rng.choice([1, 2, 3])
    body = _Body(rng, element_type, dims, parameters)
    for _ in range(rng.choice([1, 2, 3, 5, 8])):
        try:
            body.op()
        except IndexError:
            break
    shape = _shape_text(element_type, dims)
    fusion_shape = shape
    root = body.values[-1] if body.count == parameters else f"v{body.count - 1}"
    if kind == "slice_past_bounds":
        sliced_dims = [d * rng.choice([2, 128, 1000]) for d in dims] or [8]
        bounds = ",".join(f"[0:{d}]" for d in sliced_dims)
        fusion_shape = _shape_text(element_type, sliced_dims)
        root = body._add(f"{fusion_shape} slice({root}), slice={{{bounds}}}")
    elif kind == "broadcast_bad_dims":
        wider = [*dims, 4]
        fusion_shape = _shape_text(element_type, wider)
        root = body._add(f"{fusion_shape} broadcast({root}), dimensions={{{rng.choice(['5', '0,0', '-1', ''])}}}")
    elif kind == "wrong_shape":
        other = [d + rng.choice([1, 7, 1000]) for d in dims] or [3]
        fusion_shape = _shape_text(element_type, other)
        root = body._add(f"{fusion_shape} negate({root})" if element_type not in ("u8",) else
                         f"{fusion_shape} add({root}, {root})")
    elif kind == "bad_parameter_number":
        body.lines[0] = body.lines[0].replace("parameter(0)", f"parameter({rng.choice([5, -1, 2**40])})")
    tuple_root = kind in ("tuple_root_mismatch", "dead_output_user") or rng.random() < 0.15
    fused_lines = list(body.lines)
    if tuple_root:
        second = body.values[0]
        tuple_shape = f"({fusion_shape}, {shape})"
        fused_lines.append(f"  ROOT t = {tuple_shape} tuple({root}, {second})")
        declared = tuple_shape
        if kind == "tuple_root_mismatch":
            declared = f"({fusion_shape}, {_shape_text(element_type, [rng.choice([1, 4])])})"
            if rng.random() < 0.5:
                declared = f"({_shape_text(element_type, [rng.choice([4, 4_000_000])])}, {shape})"
    else:
        fused_lines[-1] = fused_lines[-1].replace(f"  {root} =", f"  ROOT {root} =", 1)
        declared = fusion_shape
    entry = [f"  a{i} = {shape} parameter({i})" for i in range(parameters)]
    args = ", ".join(f"a{i}" for i in range(parameters))
    calls = "fused" if kind != "self_call" else "main"
    if tuple_root:
        entry.append(f"  f = {declared} fusion({args}), kind=kLoop, calls={calls}")
        if kind == "dead_output_user":
            entry.append(f"  dead = {fusion_shape} get-tuple-element(f), index=0")
            entry.append(f"  ROOT out = {shape} get-tuple-element(f), index=1")
        else:
            entry.append(f"  ROOT out = {fusion_shape} get-tuple-element(f), index=0")
    else:
        entry.append(f"  ROOT f = {declared} fusion({args}), kind=kLoop, calls={calls}")
    text = ("HloModule generated\n\nfused {\n" + "\n".join(fused_lines) + "\n}\n\nENTRY main {\n" + "\n".join(entry)
            + "\n}\n")
    return text, kind
