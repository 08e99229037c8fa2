"""The ways xlapy runs a convolution, timed against each other over a grid of shapes: the library thunk
(``xlapy/runtime/thunks/convolution.py``: its native direct kernel, ``xlapy/codegen/backends/cpu_convolution.py``,
or BLAS GEMMs over window positions, depthwise products) and generated code (the elemental rule of
``xlapy/codegen/elemental_convolution.py``, a kernel of one instruction). From these figures come the rule
``generated_code_is_faster`` with which the thunk emitter chooses between library and generated code, and the
library's choice of its direct kernel over its GEMMs (``DIRECT_MIN_OUT_FEATURES``; docs/runtime.md, "Convolution:
library or generated code").

Each shape is one 2-D convolution in XLA:CPU's canonical form (``b01f_01io->b01f``: NHWC input, HWIO kernel),
compiled once inside a kLoop fusion (its kernel is the generated path); the library path runs the same module,
buffers and runtime with the kernel thunk swapped for the library thunk over the same slices, so that both pay
the same per-call cost. The two executables then run alternately (``--rounds`` rounds after a warm-up) and the
best time of each is kept (the machine may be shared: the best is the least disturbed); their results are
checked against each other.

Printed per shape: batch, spatial size, input and output features, window, feature groups, stride, element type,
the multiply-adds per output element (``window positions x input features per group``), both times, the ratio
library / generated (above 1: generated code is faster), which path the rule picks, and whether that is the
faster one; where the library takes its direct kernel, the time of its GEMMs on the same shape and the ratio
GEMMs / direct (timed against each other the same way). The last lines count the shapes on which the rule picks
the faster path, the worst slowdown a wrong pick costs, and the range of GEMMs / direct.

    python -m benchmarks.convolution_paths               # the whole grid
    python -m benchmarks.convolution_paths --quick       # a few shapes
    python -m benchmarks.convolution_paths --rounds 20
"""

from __future__ import annotations

import argparse
import itertools
from dataclasses import dataclass

import ml_dtypes
import numpy as np

import xlapy
from benchmarks.timing import format_seconds, time_alternately
from tools.convolution_paths import with_library_convolutions
from tools.loop_fusion_corpus import single_fusion
from xlapy.hlo.ir import HloModule
from xlapy.hlo.shape_rules.inference import infer_shape
from xlapy.runtime.executable import Executable
from xlapy.runtime.thunks.convolution import generated_code_is_faster

_DTYPES = {"f32": np.float32, "bf16": ml_dtypes.bfloat16, "c64": np.complex64, "s32": np.int32}


@dataclass(frozen=True)
class ConvolutionShape:
    """One 2-D convolution: ``batch x spatial x spatial x in_features`` input, ``window x window x
    in_features / groups x out_features`` kernel, "SAME"-style padding at stride 1."""

    batch: int
    spatial: int
    in_features: int
    out_features: int
    window: int
    groups: int = 1
    stride: int = 1
    dtype: str = "f32"

    @property
    def multiply_adds_per_element(self) -> int:
        return self.window * self.window * (self.in_features // self.groups)

    def module(self) -> HloModule:
        """The convolution inside a kLoop fusion."""
        low = (self.window - 1) // 2
        high = self.window - 1 - low
        lhs = f"{self.dtype}[{self.batch},{self.spatial},{self.spatial},{self.in_features}]"
        rhs = f"{self.dtype}[{self.window},{self.window},{self.in_features // self.groups},{self.out_features}]"
        attributes = (f"window={{size={self.window}x{self.window} stride={self.stride}x{self.stride} "
                      f"pad={low}_{high}x{low}_{high}}}, dim_labels=b01f_01io->b01f, "
                      f"feature_group_count={self.groups}")
        probe = xlapy.parse_hlo(single_fusion([lhs, rhs], [f"ROOT c = {self.dtype}[1] convolution(p0, p1), "
                                                           f"{attributes}"], f"{self.dtype}[1]"))
        fused = probe.entry.root.fused_computation.root
        result = f"{self.dtype}{str(infer_shape(fused))[len(self.dtype):]}"
        result = result[:result.index("{")] if "{" in result else result
        return xlapy.parse_hlo(single_fusion([lhs, rhs], [f"ROOT c = {result} convolution(p0, p1), {attributes}"],
                                             result))

    def arguments(self, module: HloModule) -> list[np.ndarray]:
        rng = np.random.default_rng(0)
        dtype = _DTYPES[self.dtype]
        return [rng.integers(-3, 4, p.shape.dimensions).astype(dtype) for p in module.entry.parameters]


def both_paths(module: HloModule, direct: bool = True) -> tuple[Executable, Executable]:
    """The executable of ``module`` (one fusion of one convolution), whose kernel runs generated code, and the
    same executable with the library thunk in its place (GEMMs only unless ``direct``)."""
    generated = xlapy.compile(module, run_hlo_passes=False)
    return generated, with_library_convolutions(generated, direct)


def grid(quick: bool) -> list[ConvolutionShape]:
    """The shapes timed: small and large spatial extents, channel counts from 1 to 128, windows 1 to 5,
    depthwise and grouped convolutions, strides, and bf16, c64 and s32 next to f32."""
    if quick:
        return [ConvolutionShape(1, 8, 3, 8, 3), ConvolutionShape(8, 32, 32, 32, 3),
                ConvolutionShape(8, 32, 32, 32, 3, groups=32), ConvolutionShape(1, 32, 4, 4, 3),
                ConvolutionShape(8, 64, 32, 32, 3)]
    shapes = [ConvolutionShape(batch, spatial, features, features, window)
              for batch, spatial, features, window in itertools.product((1, 8), (8, 32), (1, 4, 16, 64), (1, 3, 5))]
    shapes += [ConvolutionShape(batch, spatial, features, out, 3)
               for batch, spatial, (features, out) in itertools.product((1, 8), (8, 32), ((3, 16), (3, 64), (128, 8),
                                                                                           (8, 128), (128, 128)))]
    shapes += [ConvolutionShape(batch, spatial, features, features, window, groups=features)  # depthwise
               for batch, spatial, features, window in itertools.product((1, 8), (8, 32), (8, 64), (3, 5))]
    shapes += [ConvolutionShape(batch, 32, 64, 64, 3, groups=groups) for batch in (1, 8) for groups in (4, 16)]
    shapes += [ConvolutionShape(batch, 32, features, features, 3, stride=2)
               for batch in (1, 8) for features in (4, 32)]
    shapes += [ConvolutionShape(8, 64, features, out, 3) for features, out in ((32, 32), (3, 8), (67, 33))]
    shapes += [ConvolutionShape(batch, spatial, features, features, 3, dtype=dtype)
               for batch, spatial, features, dtype in itertools.product((1, 8), (8, 32), (4, 32),
                                                                       ("bf16", "c64", "s32"))]
    return shapes


_COLUMNS = ("batch", "spatial", "in", "out", "window", "groups", "stride", "type", "MACs/elem", "library",
            "generated", "lib/gen", "rule", "right", "GEMMs", "GEMM/dir")
_WIDTHS = (5, 7, 4, 4, 6, 6, 6, 5, 9, 9, 9, 7, 9, 5, 9, 8)


def _line(cells) -> str:
    return " ".join(str(cell).rjust(width) for cell, width in zip(cells, _WIDTHS))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="a few shapes only")
    args = parser.parse_args()
    # One line per shape as soon as it is timed (the whole grid takes minutes).
    print("convolution: library thunk vs generated code (best of each)")
    print(_line(_COLUMNS), flush=True)
    right, worst, gains = 0, 1.0, []
    shapes = grid(args.quick)
    for shape in shapes:
        module = shape.module()
        generated, library = both_paths(module)
        arguments = shape.arguments(module)
        np.testing.assert_array_equal(np.asarray(generated(*arguments)), np.asarray(library(*arguments)))
        generated_times, library_times = time_alternately(lambda: generated(*arguments),  # noqa: B023
                                                          lambda: library(*arguments), args.rounds)  # noqa: B023
        generated_best, library_best = min(generated_times), min(library_times)
        picks_generated = generated_code_is_faster(module.entry.root.fused_computation.root)
        gemm_cells = ("", "")
        if [t.plan.method for t in library.thunks if t.kind == "library"] == ["direct"]:
            gemms = both_paths(module, direct=False)[1]
            direct_times, gemm_times = time_alternately(lambda: library(*arguments),  # noqa: B023
                                                        lambda: gemms(*arguments), args.rounds)  # noqa: B023
            gains.append(min(gemm_times) / min(direct_times))
            gemm_cells = (format_seconds(min(gemm_times)), f"{gains[-1]:.2f}")
        chosen, other = (generated_best, library_best) if picks_generated else (library_best, generated_best)
        right += chosen <= other
        worst = max(worst, chosen / other)
        print(_line((shape.batch, shape.spatial, shape.in_features, shape.out_features, shape.window, shape.groups,
                     shape.stride, shape.dtype, shape.multiply_adds_per_element, format_seconds(library_best),
                     format_seconds(generated_best), f"{library_best / generated_best:.2f}",
                     "generated" if picks_generated else "library", "yes" if chosen <= other else "no",
                     *gemm_cells)), flush=True)
    print(f"the rule picks the faster path for {right} of {len(shapes)} shapes; a wrong pick is at most "
          f"{worst:.2f}x slower than the other path")
    if gains:
        print(f"the direct kernel against the GEMMs on the {len(gains)} shapes it takes: {min(gains):.2f}x to "
              f"{max(gains):.2f}x (geometric mean {np.exp(np.mean(np.log(gains))):.2f}x)")


if __name__ == "__main__":
    main()
