"""StableHLO's control flow as the frontend imports it (several loop values,
branches without parameters that use the enclosing computations' values,
regions returning an outer value) run by the interpreter, compared with XLA:CPU
running the same StableHLO; and the broadcast that stretches a size-1 dimension."""

from __future__ import annotations

import pathlib

import numpy as np
import pytest

import xlapy
from tools.oracles import require_jax
from xlapy.frontends.stablehlo import parse_module, print_module

require_jax()

from tests.hlo.xla import run_mlir_on_xla_cpu  # noqa: E402

# A two-value while whose body holds an if using the body's and main's values (one
# branch returns main's value itself), a one-value while, a three-way case
# returning two values (branch 0 returns main's value), as MLIR prints them.
REGIONS = (pathlib.Path(__file__).parent / "data" / "stablehlo_regions.mlir").read_text()


def test_the_program_is_as_mlir_prints_it() -> None:
    assert print_module(parse_module(REGIONS)) == REGIONS


@pytest.mark.parametrize("index", [-1, 0, 1, 2, 7])
def test_loops_and_branches_match_xla(index: int) -> None:
    x = np.array([1.0, -2.0, 0.5, 4.0], np.float32)
    got = xlapy.evaluate(parse_module(REGIONS), x, np.int32(index))
    want = run_mlir_on_xla_cpu(REGIONS, x, np.int32(index))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_array_equal(g, w)


STRETCH = """module @stretch {
  func.func public @main(%arg0: tensor<1x3xf32>, %arg1: tensor<1xi32>) -> (tensor<2x4x3xf32>, tensor<3x5xi32>) {
    %0 = stablehlo.broadcast_in_dim %arg0, dims = [1, 2] : (tensor<1x3xf32>) -> tensor<2x4x3xf32>
    %1 = stablehlo.broadcast_in_dim %arg1, dims = [1] : (tensor<1xi32>) -> tensor<3x5xi32>
    return %0, %1 : tensor<2x4x3xf32>, tensor<3x5xi32>
  }
}
"""


def test_broadcast_stretches_size_one_dimensions_as_xla_does() -> None:
    args = (np.array([[1.5, -2.0, 3.25]], np.float32), np.array([7], np.int32))
    got = xlapy.evaluate(parse_module(STRETCH), *args)
    for g, w in zip(got, run_mlir_on_xla_cpu(STRETCH, *args)):
        np.testing.assert_array_equal(g, w)
