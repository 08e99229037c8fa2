"""Random HLO programs with while loops and conditionals, for testing the
passes that rewrite them against the interpreter.

``while_loop_texts()`` draws a module whose entry runs a counted loop: an
``s32`` counter, a bound that is a constant or a state element (itself
starting as a constant or a parameter), and array elements that start as
parameters or constants (sometimes two as the same one), some passed through unchanged, the others updated
from elementwise ops, broadcasts, reshapes and transposes of the state, of
constants and of values computed from the unchanged elements only (what
loop-invariant code motion hoists). Sometimes the body holds a second loop,
and sometimes the loop's body or condition are shared with a second loop.

``conditional_texts()`` draws a module with a ``conditional``: a predicate
or branch index that is a parameter or a constant (in or out of range), one
to three branches on tuples or arrays, whose roots are arrays or tuples
(some elements repeated, some parameters unread), and users that read some
elements of the result, all of it, or nothing.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

_UNARY = ("negate", "tanh", "sine", "abs", "floor")
_BINARY = ("add", "subtract", "multiply", "maximum", "minimum")
_CONSTANTS = ("0.5", "-1", "2", "0", "1.5")


def _shape(dims: tuple[int, ...]) -> str:
    return f"f32[{','.join(map(str, dims))}]"


def _constant(draw: Any, dims: tuple[int, ...]) -> str:
    value = draw(st.sampled_from(_CONSTANTS))
    if not dims:
        return f"constant({value})"
    count = 1
    for d in dims:
        count *= d
    values = [draw(st.sampled_from(_CONSTANTS)) for _ in range(count)]

    def nested(level: int, offset: int) -> tuple[str, int]:
        if level == len(dims):
            return values[offset], offset + 1
        parts = []
        for _ in range(dims[level]):
            text, offset = nested(level + 1, offset)
            parts.append(text)
        return "{" + ", ".join(parts) + "}", offset

    return f"constant({nested(0, 0)[0]})"


class _Body:
    """Lines of a computation over arrays of one shape, and the values drawn so far."""

    def __init__(self, draw: Any, dims: tuple[int, ...]) -> None:
        self.draw, self.dims, self.shape = draw, dims, _shape(dims)
        self.lines: list[str] = []
        self.count = 0

    def add(self, stem: str, text: str, shape: str | None = None) -> str:
        self.count += 1
        name = f"{stem}.{self.count}"
        self.lines.append(f"  {name} = {shape or self.shape} {text}")
        return name

    def value(self, pool: list[str]) -> str:
        """A new value computed from ``pool`` (arrays of the body's shape)."""
        draw = self.draw
        kind = draw(st.sampled_from(("unary", "binary", "binary", "broadcast", "constant", "rearrange")))
        if kind == "unary":
            return self.add("u", f"{draw(st.sampled_from(_UNARY))}({draw(st.sampled_from(pool))})")
        if kind == "binary":
            a, b = draw(st.sampled_from(pool)), draw(st.sampled_from(pool))
            return self.add("b", f"{draw(st.sampled_from(_BINARY))}({a}, {b})")
        if kind == "broadcast":
            scalar = self.add("s", _constant(draw, ()), "f32[]")
            dims = ",".join(map(str, self.dims))
            broadcast = self.add("bc", f"broadcast({scalar}), dimensions={{}}")
            return self.add("b", f"{draw(st.sampled_from(_BINARY))}({draw(st.sampled_from(pool))}, {broadcast})") \
                if dims else broadcast
        if kind == "constant":
            return self.add("c", _constant(draw, self.dims))
        # A reshape or transpose and back, with an elementwise op between.
        x = draw(st.sampled_from(pool))
        if len(self.dims) == 2 and draw(st.booleans()):
            flipped = _shape((self.dims[1], self.dims[0]))
            t = self.add("t", f"transpose({x}), dimensions={{1,0}}", flipped)
            u = self.add("u", f"{draw(st.sampled_from(_UNARY))}({t})", flipped)
            return self.add("t", f"transpose({u}), dimensions={{1,0}}")
        count = 1
        for d in self.dims:
            count *= d
        flat = _shape((count,))
        r = self.add("r", f"reshape({x})", flat)
        y = self.add("r", f"reshape({draw(st.sampled_from(pool))})", flat)
        u = self.add("u", f"{draw(st.sampled_from(_BINARY))}({r}, {y})", flat)
        return self.add("r", f"reshape({u})")


_DIMS = st.sampled_from(((), (3,), (2, 3), (4,)))


@st.composite
def while_loop_texts(draw: Any, nested: bool = True) -> str:
    """The text of a module that runs a counted while loop (see the module's docstring)."""
    dims = draw(_DIMS)
    shape = _shape(dims)
    elements = draw(st.integers(1, 4))
    invariant = [draw(st.booleans()) for _ in range(elements)]
    from_constant = [draw(st.booleans()) for _ in range(elements)]
    bound_in_state = draw(st.booleans())
    trips = draw(st.integers(0, 4))
    state = ["s32[]", *([shape] * elements), *(["s32[]"] if bound_in_state else [])]
    state_shape = f"({', '.join(state)})"
    computations: list[str] = []

    def body_text(name: str, depth: int) -> str:
        body = _Body(draw, dims)
        body.lines.append(f"  p = {state_shape} parameter(0)")
        counter = body.add("i", "get-tuple-element(p), index=0", "s32[]")
        reads = [body.add("x", f"get-tuple-element(p), index={k + 1}") for k in range(elements)]
        invariants = [r for r, inv in zip(reads, invariant, strict=True) if inv]
        # Values of the invariant elements and constants only: loop invariant.
        pool = list(invariants)
        for _ in range(draw(st.integers(0, 3)) if invariants else 0):
            pool.append(body.value(pool))
        one = body.add("one", "constant(1)", "s32[]")
        results = [body.add("next", f"add({counter}, {one})", "s32[]")]
        everything = pool + reads
        if depth == 0 and nested and draw(st.booleans()):
            everything.append(inner_loop(body, everything))
        for read, inv in zip(reads, invariant, strict=True):
            if inv:
                results.append(read)
            else:
                value = body.value(everything)
                everything.append(value)
                results.append(body.add("y", f"add({read}, {value})"))
        if bound_in_state:
            results.append(body.add("n", f"get-tuple-element(p), index={elements + 1}", "s32[]"))
        body.lines.append(f"  ROOT out = {state_shape} tuple({', '.join(results)})")
        return f"{name} {{\n" + "\n".join(body.lines) + "\n}\n"

    def inner_loop(body: _Body, pool: list[str]) -> str:
        # A loop of its own counting to 2, adding a value of the outer body each trip.
        inner_state = f"(s32[], {shape}, {shape})"
        suffix = len(computations)
        computations.append(
            f"inner_body.{suffix} {{\n  q = {inner_state} parameter(0)\n"
            f"  j = s32[] get-tuple-element(q), index=0\n  a = {shape} get-tuple-element(q), index=1\n"
            f"  b = {shape} get-tuple-element(q), index=2\n  one = s32[] constant(1)\n  k = s32[] add(j, one)\n"
            f"  e = {shape} tanh(b)\n  s = {shape} add(a, e)\n  ROOT r = {inner_state} tuple(k, s, b)\n}}\n")
        computations.append(
            f"inner_cond.{suffix} {{\n  q = {inner_state} parameter(0)\n  j = s32[] get-tuple-element(q), index=0\n"
            f"  two = s32[] constant(2)\n  ROOT c = pred[] compare(j, two), direction=LT\n}}\n")
        zero = body.add("z", "constant(0)", "s32[]")
        init = body.add("inner_init", f"tuple({zero}, {draw(st.sampled_from(pool))}, {draw(st.sampled_from(pool))})",
                        inner_state)
        loop = body.add("inner", f"while({init}), condition=inner_cond.{suffix}, body=inner_body.{suffix}",
                        inner_state)
        return body.add("inner_sum", f"get-tuple-element({loop}), index=1")

    def condition_text(name: str) -> str:
        lines = [f"  p = {state_shape} parameter(0)", "  i = s32[] get-tuple-element(p), index=0"]
        if bound_in_state:
            lines.append(f"  n = s32[] get-tuple-element(p), index={elements + 1}")
        else:
            lines.append(f"  n = s32[] constant({trips})")
        lines.append("  ROOT c = pred[] compare(i, n), direction=LT")
        return f"{name} {{\n" + "\n".join(lines) + "\n}\n"

    computations.append(body_text("body", 0))
    computations.append(condition_text("cond"))
    parameters = [f"  a.{k} = {shape} parameter({k})" for k in range(elements)]
    entry = list(parameters)
    init = ["zero"]
    entry.append("  zero = s32[] constant(0)")
    for k in range(elements):
        if k and draw(st.booleans()):
            init.append(init[-1])  # two elements starting as one value (repeats when both are invariant)
        elif from_constant[k]:
            entry.append(f"  k.{k} = {shape} {_constant(draw, dims)}")
            init.append(f"k.{k}")
        else:
            init.append(f"a.{k}")
    if bound_in_state:
        bound_parameter = draw(st.booleans())
        entry.append(f"  limit = s32[] parameter({elements})" if bound_parameter
                     else f"  limit = s32[] constant({trips})")
        init.append("limit")
    entry.append(f"  init = {state_shape} tuple({', '.join(init)})")
    entry.append(f"  w = {state_shape} while(init), condition=cond, body=body")
    root = "w"
    if draw(st.booleans()):
        # A second loop on the same body and condition, from the first one's result.
        entry.append(f"  w2 = {state_shape} while(w), condition=cond, body=body")
        root = "w2"
    entry.append(f"  ROOT result = {shape} get-tuple-element({root}), index={draw(st.integers(1, elements))}")
    text = "HloModule loops\n\n" + "\n".join(computations) + "\nENTRY main {\n" + "\n".join(entry) + "\n}\n"
    return text


@st.composite
def conditional_texts(draw: Any) -> str:
    """The text of a module with a conditional (see the module's docstring)."""
    dims = draw(_DIMS)
    shape = _shape(dims)
    on_predicate = draw(st.booleans())
    branch_count = 2 if on_predicate else draw(st.integers(1, 3))
    result_count = draw(st.integers(1, 3))
    tuple_result = draw(st.booleans()) or result_count > 1
    result_shape = f"({', '.join([shape] * result_count)})" if tuple_result else shape
    computations, operands, entry = [], [], []
    parameter_count = 0
    for branch in range(branch_count):
        width = draw(st.integers(1, 3))
        tuple_operand = draw(st.booleans()) or width > 1
        body = _Body(draw, dims)
        if tuple_operand:
            operand_shape = f"({', '.join([shape] * width)})"
            body.lines.append(f"  p = {operand_shape} parameter(0)")
            # Some elements are never read.
            reads = [body.add("x", f"get-tuple-element(p), index={k}") for k in range(width) if draw(st.booleans())]
            if not reads:
                reads = [body.add("x", "get-tuple-element(p), index=0")]
        else:
            operand_shape = shape
            body.lines.append(f"  p = {shape} parameter(0)")
            reads = ["p"]
        pool = list(reads)
        for _ in range(draw(st.integers(0, 3))):
            pool.append(body.value(pool))
        if dims and draw(st.integers(0, 3)) == 0:
            # An op the simplifier counts as expensive, so that the branches are not both run.
            pool.append(body.add("rev", f"reverse({pool[-1]}), dimensions={{0}}"))
        results = [draw(st.sampled_from(pool)) for _ in range(result_count)]
        if tuple_result:
            body.lines.append(f"  ROOT out = {result_shape} tuple({', '.join(results)})")
        else:
            body.lines.append(f"  ROOT out = {shape} copy({results[0]})")
        computations.append(f"branch.{branch} {{\n" + "\n".join(body.lines) + "\n}\n")
        # Each branch's operand: a tuple of parameters, or one parameter.
        if tuple_operand:
            names = []
            for _ in range(width):
                entry.append(f"  a.{parameter_count} = {shape} parameter({parameter_count})")
                names.append(f"a.{parameter_count}")
                parameter_count += 1
            entry.append(f"  o.{branch} = {operand_shape} tuple({', '.join(names)})")
            operands.append(f"o.{branch}")
        else:
            entry.append(f"  a.{parameter_count} = {shape} parameter({parameter_count})")
            operands.append(f"a.{parameter_count}")
            parameter_count += 1
    selector_type = "pred[]" if on_predicate else "s32[]"
    if draw(st.booleans()):
        value = draw(st.booleans()) if on_predicate else draw(st.integers(-1, branch_count))
        entry.append(f"  sel = {selector_type} constant({str(value).lower()})")
    else:
        entry.append(f"  sel = {selector_type} parameter({parameter_count})")
    branches = ", ".join(f"branch.{b}" for b in range(branch_count))
    selects = ("true_computation=branch.0, false_computation=branch.1" if on_predicate and draw(st.booleans())
               else f"branch_computations={{{branches}}}")
    entry.append(f"  c = {result_shape} conditional(sel, {', '.join(operands)}), {selects}")
    use = draw(st.sampled_from(("elements", "whole", "elements")))
    if tuple_result and use == "elements":
        read = sorted({draw(st.integers(0, result_count - 1)) for _ in range(draw(st.integers(1, 2)))})
        parts = [f"r.{k}" for k in read]
        entry.extend(f"  r.{k} = {shape} get-tuple-element(c), index={k}" for k in read)
        entry.append(f"  ROOT result = ({', '.join([shape] * len(parts))}) tuple({', '.join(parts)})")
    else:
        entry.append(f"  ROOT result = ({result_shape}) tuple(c)")
    return "HloModule conditionals\n\n" + "\n".join(computations) + "\nENTRY main {\n" + "\n".join(entry) + "\n}\n"
