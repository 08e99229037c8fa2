"""Random arguments for StableHLO programs: parameters that StableHLO's own
forms read as indices (``stablehlo.case``'s branch index) or pass on to an
index (``stablehlo.broadcast_in_dim``, ``stablehlo.optimization_barrier``) are
drawn in range, as XLA's ``run_hlo_module`` draws them for HLO's ops."""

from __future__ import annotations

import pathlib

import numpy as np

from xlapy.cli import main
from xlapy.frontends.stablehlo import parse_module
from xlapy.hlo.fake_arguments import index_bound, make_fake_arguments

# main(x: f32[8], branch: s32[], start: s32[1,1], offset: s32[], pred: i1):
# a three-way case on branch; a gather of 3 elements of x from the start
# indices broadcast_in_dim stretches to 2x1; a dynamic slice of 5 elements
# of x at offset, passed through an optimization barrier; an if on pred.
PATH = pathlib.Path(__file__).parent / "data" / "stablehlo_indices.mlir"


def test_index_bounds_of_stablehlo_forms() -> None:
    module = parse_module(PATH.read_text())
    # Branches 0..2; gather starts 0..8-3; dynamic-slice starts 0..8-5; x and the pred are no indices.
    assert [index_bound(p) for p in module.entry.parameters] == [None, 3, 6, 4, None]


def test_case_indices_are_drawn_among_the_branches() -> None:
    module = parse_module(PATH.read_text())
    for seed in range(30):
        _, branch, start, offset, _ = make_fake_arguments(module, seed)
        assert 0 <= branch < 3 and np.all((start >= 0) & (start < 6)) and 0 <= offset < 4


def test_run_takes_the_drawn_branch(tmp_path, capsys) -> None:
    saved = tmp_path / "out.npz"
    assert main(["run", str(PATH), "--backend", "interpreter", "--seed", "5", "--output", str(saved)]) == 0
    capsys.readouterr()
    x, branch, _, _, _ = make_fake_arguments(parse_module(PATH.read_text()), 5)
    with np.load(saved) as outputs:
        np.testing.assert_array_equal(outputs["out0"], [x, -x, np.abs(x)][int(branch)])
