"""Random HLO programs of elementwise ops on reshaped or transposed values,
for testing the reshape mover against the interpreter.

``rearranged_elementwise_texts()`` draws a module whose parameters go
through one reshape or transpose (the same one, or sometimes another one),
and then through chains of elementwise ops (unary and binary arithmetic,
compares, selects, converts) that mix those values with constants,
broadcasts of scalars or of vectors, and parameters already in the
rearranged shape; some rearranged values are also read by the root tuple.
"""

from __future__ import annotations

import math
from typing import Any

from hypothesis import strategies as st

_SOURCES = ((2, 3), (2, 3, 4), (6,), (1, 4, 1), (3, 1, 2))


def _shape(element_type: str, dims: tuple[int, ...]) -> str:
    return f"{element_type}[{','.join(map(str, dims))}]"


def _literal(draw: Any, dims: tuple[int, ...]) -> str:
    values = iter(draw(st.lists(st.sampled_from(("0", "1", "-2", "0.5", "3")), min_size=math.prod(dims),
                                max_size=math.prod(dims))))

    def nested(level: int) -> str:
        if level == len(dims):
            return next(values)
        return "{" + ", ".join(nested(level + 1) for _ in range(dims[level])) + "}"

    return nested(0)


@st.composite
def rearranged_elementwise_texts(draw: Any) -> str:
    source = draw(st.sampled_from(_SOURCES))
    count = math.prod(source)
    if draw(st.booleans()) and len(source) > 1:
        permutation = tuple(draw(st.permutations(range(len(source)))))
        target = tuple(source[p] for p in permutation)
        rearrange = f"transpose({{x}}), dimensions={{{{{','.join(map(str, permutation))}}}}}"
    else:
        halves = ((count // 2, 2), (2, count // 2)) if count % 2 == 0 else ((1, count, 1),)
        target = draw(st.sampled_from([d for d in ((count,), (1, count), *halves) if d != source]))
        rearrange = "reshape({x})"
    lines: list[str] = []
    names = iter(range(10_000))

    def add(text: str, element_type: str = "f32", dims: tuple[int, ...] = target) -> str:
        name = f"v.{next(names)}"
        lines.append(f"  {name} = {_shape(element_type, dims)} {text}")
        return name

    parameters = draw(st.integers(1, 3))
    for k in range(parameters):
        lines.append(f"  p.{k} = {_shape('f32', source)} parameter({k})")
    pool = [add(rearrange.format(x=f"p.{k}")) for k in range(parameters)]
    rearranged = list(pool)
    next_parameter = parameters
    for _ in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(("unary", "binary", "binary", "constant", "scalar", "vector", "parameter",
                                     "compare", "convert", "other")))
        if kind == "unary":
            pool.append(add(f"{draw(st.sampled_from(('negate', 'tanh', 'abs', 'exponential')))}"
                            f"({draw(st.sampled_from(pool))})"))
        elif kind == "binary":
            pool.append(add(f"{draw(st.sampled_from(('add', 'multiply', 'subtract', 'maximum')))}"
                            f"({draw(st.sampled_from(pool))}, {draw(st.sampled_from(pool))})"))
        elif kind == "constant":
            pool.append(add(f"constant({_literal(draw, target)})"))
        elif kind == "scalar":
            scalar = add(f"constant({draw(st.sampled_from(('2', '-1', '0.25')))})", dims=())
            pool.append(add(f"broadcast({scalar}), dimensions={{}}"))
        elif kind == "vector" and target:
            axis = draw(st.integers(0, len(target) - 1))
            lines.append(f"  p.{next_parameter} = {_shape('f32', (target[axis],))} parameter({next_parameter})")
            pool.append(add(f"broadcast(p.{next_parameter}), dimensions={{{axis}}}"))
            next_parameter += 1
        elif kind == "parameter":
            lines.append(f"  p.{next_parameter} = {_shape('f32', target)} parameter({next_parameter})")
            pool.append(f"p.{next_parameter}")
            next_parameter += 1
        elif kind == "compare":
            a, b = draw(st.sampled_from(pool)), draw(st.sampled_from(pool))
            mask = add(f"compare({a}, {b}), direction={draw(st.sampled_from(('LT', 'GE', 'EQ')))}", "pred")
            pool.append(add(f"select({mask}, {draw(st.sampled_from(pool))}, {draw(st.sampled_from(pool))})"))
        elif kind == "convert":
            integer = add(f"convert({draw(st.sampled_from(pool))})", "s32")
            pool.append(add(f"convert({integer})"))
        else:
            # Another rearrange of a parameter: not equivalent when the shapes differ.
            lines.append(f"  p.{next_parameter} = {_shape('f32', source)} parameter({next_parameter})")
            pool.append(add(rearrange.format(x=f"p.{next_parameter}")))
            next_parameter += 1
    results = [pool[-1]] + [draw(st.sampled_from(pool)) for _ in range(draw(st.integers(0, 1)))]
    if draw(st.booleans()):
        results.append(draw(st.sampled_from(rearranged)))
    shapes = ", ".join(_shape("f32", target) for _ in results)
    lines.append(f"  ROOT out = ({shapes}) tuple({', '.join(results)})")
    return "HloModule rearranges\n\nENTRY main {\n" + "\n".join(lines) + "\n}\n"
