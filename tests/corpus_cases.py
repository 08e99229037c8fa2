"""The HLO corpus (``tools/hlo_corpus.py``) for the tests: read and verified once per session, and as test
parameters. The programs with arrays so large that one run of the reference interpreter takes seconds
(``examples/gelu.hlo``: 12.6M elements, twenty times the next largest) run with the slow tests, so that the
passes' checks of the whole corpus stay quick in the default run."""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Iterable
from typing import Any

import pytest

from tools import hlo_corpus
from xlapy.hlo import HloModule, parse_module
from xlapy.shapes import Shape

LARGE_ARRAY_ELEMENTS = 1 << 22


@functools.cache
def verifying_corpus() -> tuple[tuple[str, str], ...]:
    """``tools.hlo_corpus.verifying_corpus()``, computed once: (path, text) of each corpus file that verifies."""
    return tuple(hlo_corpus.verifying_corpus())


def _arrays(shape: Shape) -> Iterable[Shape]:
    if shape.is_tuple:
        for element in shape.tuple_shapes:
            yield from _arrays(element)
    elif shape.is_array:
        yield shape


def _static_elements(array: Shape) -> int:
    return math.prod(size for size, dynamic in itertools.zip_longest(array.dimensions, array.dynamic_dimensions,
                                                                     fillvalue=False) if not dynamic)


def has_large_arrays(module: HloModule) -> bool:
    """Whether an instruction of ``module`` makes an array of more than LARGE_ARRAY_ELEMENTS elements (dynamic
    dimensions not counted)."""
    return any(_static_elements(array) > LARGE_ARRAY_ELEMENTS
               for instr in module.instructions for array in _arrays(instr.shape))


@functools.cache
def text_has_large_arrays(text: str) -> bool:
    """``has_large_arrays`` of the module ``text`` holds (parsed once per text)."""
    return has_large_arrays(parse_module(text))


def corpus_params(cases: Iterable[tuple[str, str]]) -> list[Any]:
    """``(path, text)`` cases as pytest parameters named by path, those with large arrays marked slow."""
    return [pytest.param(name, text, id=name, marks=[pytest.mark.slow] if text_has_large_arrays(text) else [])
            for name, text in cases]
