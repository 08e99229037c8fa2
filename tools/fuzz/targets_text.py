"""Entry points that read text: shapes, HLO, the verifier, indexing maps and
StableHLO. Each has ``generate(rng) -> case`` (plain data, made without
xlapy) and ``run(case) -> Outcome | None`` (None: the input was accepted and
no check failed)."""

from __future__ import annotations

import functools
import random
import re

from tools.fuzz import seeds
from tools.fuzz.mutate import deep_nesting, mutate, vocabulary_of
from tools.fuzz.outcome import Outcome, wrong


@functools.cache
def _vocabulary(kind: str) -> list[str]:
    return vocabulary_of(getattr(seeds, kind)())


def mutated(rng: random.Random, kind: str) -> str:
    texts = getattr(seeds, kind)()
    return mutate(rng.choice(texts), rng, _vocabulary(kind))


# --- shapes ---

def generate_shape(rng: random.Random) -> dict:
    if rng.random() < 0.05:
        return {"text": rng.choice(["(", "f32[1]{"]) + deep_nesting(rng)}
    return {"text": mutated(rng, "shapes")}


def _array_leaves(shape) -> list:
    if shape.tuple_shapes:
        return [leaf for s in shape.tuple_shapes for leaf in _array_leaves(s)]
    return [shape]


def run_shape(case: dict) -> Outcome | None:
    from xlapy.shapes import parse_shape

    text = case["text"]
    shape = parse_shape(text)
    if any(c.isdigit() and not c.isascii() for c in text):
        return wrong("accepted non-ASCII digits", text)
    if re.search(r"M\(\s*-", text):
        return wrong("accepted a negative M(...)", text)
    for leaf in _array_leaves(shape):
        count = 1
        for d in leaf.dimensions:
            count *= max(d, 1)  # '?' (unbounded) reads as a negative size
        if count >= 2**63:
            return wrong("accepted an element count past int64", text)
    printed = str(shape)
    again = parse_shape(printed)
    if again != shape:
        return wrong("shape prints as text that reads back differently", f"{text!r} -> {printed!r}")
    return None


# --- HLO modules ---

def generate_hlo(rng: random.Random) -> dict:
    return {"text": mutated(rng, "hlo_modules")}


# An integer constant written in the text: it must read exactly or be rejected.
_INTEGER_CONSTANT = re.compile(r"= ([su](?:4|8|16|32|64))\[\] constant\((-?[0-9][0-9.e+\-]*)\)")


def _bad_integer_constant(text: str) -> str:
    for element_type, literal in _INTEGER_CONSTANT.findall(text):
        bits = int(element_type[1:])
        low, high = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if element_type[0] == "s" else (0, 2**bits - 1)
        try:
            value = int(literal)
        except ValueError:
            return f"{element_type} constant({literal})"
        if not low <= value <= high:
            return f"{element_type} constant({literal})"
    return ""


def run_hlo(case: dict) -> Outcome | None:
    import xlapy
    from xlapy.hlo import print_module

    module = xlapy.parse_hlo(case["text"])
    bad = _bad_integer_constant(case["text"])
    if bad:
        return wrong("accepted an integer constant it cannot represent", bad)
    printed = print_module(module)
    try:
        xlapy.parse_hlo(printed)
    except xlapy.XlapyError as e:
        return wrong("printed module does not parse back", str(e))
    return None


def many_users(count: int = 40_000) -> str:
    """A module where one value has ``count`` users (the verifier must stay linear)."""
    lines = ["HloModule many_users", "ENTRY e {", "  p = f32[2] parameter(0)"]
    lines += [f"  n{i} = f32[2] negate(p)" for i in range(count)]
    lines += [f"  ROOT r = f32[2] add(n0, n{count - 1})", "}"]
    return "\n".join(lines)


def generate_verify(rng: random.Random) -> dict:
    if rng.random() < 0.005:
        return {"text": many_users()}
    return generate_hlo(rng)


def run_verify(case: dict) -> Outcome | None:
    import xlapy

    try:
        module = xlapy.parse_hlo(case["text"])
    except xlapy.XlapyError:
        return Outcome("clean_error", "unparsed")
    xlapy.verify(module)
    return None


# --- indexing maps ---

def generate_indexing_map(rng: random.Random) -> dict:
    if rng.random() < 0.05:
        return {"text": "(d0) -> (" + deep_nesting(rng) + "), domain: d0 in [0, 3]"}
    return {"text": mutated(rng, "indexing_maps")}


_DIVISION_BY_ZERO = re.compile(r"\b(mod|floordiv|ceildiv)\s+\(?\s*0\b", re.I)


def run_indexing_map(case: dict) -> Outcome | None:
    from xlapy.indexing import IndexingMap

    parsed = IndexingMap.parse(case["text"])
    if _DIVISION_BY_ZERO.search(case["text"]):
        return wrong("accepted division by zero in a map", case["text"])
    str(parsed.simplify())
    str(parsed)
    return None


# --- StableHLO ---

def generate_stablehlo(rng: random.Random) -> dict:
    return {"text": mutated(rng, "mlir_modules")}


def run_stablehlo(case: dict) -> Outcome | None:
    from xlapy.frontends.stablehlo import parse_module, print_module

    print_module(parse_module(case["text"]))
    return None
