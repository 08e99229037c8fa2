"""The code generator against XLA:CPU on the loop-fusion corpus.

Each corpus module is compiled by xlapy (``xlapy.compile(..., backend="cpu")``)
and by XLA:CPU through jaxlib (the module with its fusion inlined, which XLA
fuses again itself; see tools/xla_reference.py), and both run on the same
seeded random arguments. Integers and pred must match bit for bit; floats
within the ulps measured for the pair of implementations, with NaN in the
same places; complex numbers part by part.

Two things XLA:CPU does are not HLO's semantics of the ops, and the
comparison leaves them out rather than loosening every bound:

- it runs with denormals flushed to zero (inputs, intermediate values and
  results of the f32 and f64 arithmetic it computes in; narrower floats are
  computed in f32). Arguments get no value whose square would be denormal,
  so that no intermediate value becomes one, and denormal results of either
  side are compared as zeros;
- its LLVM backend contracts a multiply feeding an add into one fused
  multiply-add (one rounding, where HLO rounds both ops as xlapy does); the
  modules where this shows have their own measured bound.

The default run compares a subset that covers every family of the corpus on
one seed; the rest of the corpus, and more seeds, run with ``-m slow``.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import xlapy
from tests.hlo.xla import XlaRefuses, XlaVerdict, assert_xla_verdict
from tools.compare import leaves
from tools.loop_fusion_compare import TRANSCENDENTAL_OPCODES, random_arguments, result_element_types, result_names
from tools.loop_fusion_corpus import Case, corpus_cases
from tools.xla_cpu import run_on_xla_cpu
from tools.xla_reference import unfused_text
from xlapy.hlo import HloModule
from xlapy.runtime.ulps import NAN_DISTANCE, ulp_distance

# Results of modules with a transcendental op on real numbers: XLA:CPU's approximations and xlapy's are each
# within a few ulps of the exact value, not always the same ones. Measured maximum over the corpus, seeds 0-4:
TRANSCENDENTAL_ULPS = {
    "bf16": 1,  # measured: 1
    "f16": 2,  # measured: 2
    "f32": 4,  # measured: 4 (exponential-minus-one; log then add in log_transpose_add: 4)
    "f64": 119,  # measured: 119 (log-plus-one near -1; every other op 3 or less)
}

# Exact modules where XLA:CPU's multiply-add contraction shows, with the bound measured over seeds 0-4 (the
# distance grows where the add cancels the product, so it is the seeds' and not a general bound).
CONTRACTED_ULPS = {
    "broadcast_scalar_vector": 4096,  # measured: 4096 (multiply then add, cancelling)
    "iota_multi_output": 64,  # measured: 64
    "complex_constant_operands": 96,  # measured: 96 (complex multiply: sums of products of the parts)
}

# Cases where xlapy and XLA:CPU give different results; each is a finding, marked xfail(strict=True).
DIFFERENCES = {
    "complex_parts_of_real_numbers": "XLA:CPU returns the c64 result complex(real(x), imag(x)) of an f32 x as an "
                                     "f32 array",
    "f8e3m4_arithmetic": "XLA:CPU rounds f8e3m4 sqrt twice (sqrt(3.875) = 1.96850... gives 2, the tie of its "
                         "f16 rounding 1.96875; xlapy rounds once to 1.9375)",
    "complex_transcendental_c64": "XLA:CPU's complex functions: sqrt(-x - 0i) is +i*sqrt(x) (xlapy: -i*sqrt(x), "
                                  "as C's csqrt), sin loses tiny imaginary parts (sin(0.1049 - 1.44e-10i) has "
                                  "imaginary part +0), NaN where xlapy has numbers, most others 1-8960 ulps apart",
    "complex_transcendental_c128": "XLA:CPU's complex functions, as for c64: the sign of sqrt's imaginary part on "
                                   "the negative real axis, NaN where xlapy has numbers, log-plus-one 98 ulps apart",
}

# Cases XLA:CPU cannot run, with its own reason (checked, not skipped).
XLA_CANNOT_RUN = {
    "sub_byte_one_bit": XlaRefuses("'stablehlo.xor' op operand #0 must be ranked tensor of bool or "
                                   "2/4/8/16/32/64-bit integer values, but got 'tensor<6x40xui1>'"),
}

# One module of each family of the corpus, for the default run.
DEFAULT_RUN = {
    "bitcast", "broadcast_vector_several_dims", "clamp_scalar_bounds", "compare_select_float",
    "compare_select_integer", "complex_arithmetic_c64", "complex_constant_operands", "complex_index_ops_c64",
    "concatenate_three", "convert_to_float", "convert_to_integer", "dynamic_slice_clamped", "f8_converts",
    "f8e4m3fn_arithmetic", "f8e8m0fnu_f4e2m1fn", "float_exact_bf16", "float_exact_f32", "float_transcendental_f32",
    "gather_canonical", "integer_arithmetic", "integer_divide_remainder", "integer_shifts",
    "layout_output_non_default", "layout_parameter_column_major", "multi_output_entry_tuple", "pad_interior_negative",
    "reshape_generic", "reverse", "slice_strided", "sub_byte_integers", "transpose_3d",
}

CASES = {case.name: case for case in corpus_cases()}
SEEDS = (0,)
MORE_SEEDS = (1, 2, 3, 4)


def _computation_dtype(dtype: np.dtype) -> np.dtype:
    """The float type XLA:CPU computes ``dtype`` in: f64 for f64, f32 for every narrower float."""
    return np.dtype(np.float64) if dtype.itemsize == 8 or dtype == np.complex128 else np.dtype(np.float32)


def _is_float(dtype: np.dtype) -> bool:
    if dtype.kind == "f":
        return True
    try:
        ml_dtypes.finfo(dtype)
    except (TypeError, ValueError):
        return False
    return dtype.kind == "V"


def _zero_below(array: np.ndarray, limit: float) -> np.ndarray:
    """``array`` (real floats) with the nonzero values of magnitude below ``limit`` replaced by zeros of their sign."""
    wide = array.astype(np.float64)
    small = (np.abs(wide) < limit) & (wide != 0)
    return np.where(small, np.copysign(0.0, wide), wide).astype(array.dtype) if small.any() else array


def _by_parts(array: np.ndarray, limit_of) -> np.ndarray:
    """Apply ``_zero_below`` to a float array, or to each part of a complex one (other arrays unchanged)."""
    array = np.asarray(array)
    if array.dtype.kind == "c":
        result = np.empty_like(array)
        result.real = _by_parts(np.ascontiguousarray(array.real), limit_of)
        result.imag = _by_parts(np.ascontiguousarray(array.imag), limit_of)
        return result
    if not _is_float(array.dtype):
        return array
    return _zero_below(array, limit_of(_computation_dtype(array.dtype)))


def xla_cpu_arguments(module: HloModule, seed: int) -> list[np.ndarray]:
    """``random_arguments`` without the values whose square XLA:CPU would flush to zero."""
    return [_by_parts(a, lambda dtype: float(np.sqrt(np.finfo(dtype).tiny))) for a in random_arguments(module, seed)]


def flushed(array: np.ndarray) -> np.ndarray:
    """``array`` with its denormals (of XLA:CPU's computation type) replaced by zeros of their sign."""
    return _by_parts(array, lambda dtype: float(np.finfo(dtype).tiny))


def has_real_transcendental(module: HloModule) -> bool:
    return any(i.opcode in TRANSCENDENTAL_OPCODES and not any(o.shape.element_type in ("c64", "c128")
                                                                for o in i.operands)
               for c in module.computations for i in c.instructions)


def allowed_ulps(case: Case, module: HloModule, element_type: str) -> int:
    if case.name in CONTRACTED_ULPS:
        return CONTRACTED_ULPS[case.name]
    if has_real_transcendental(module):
        return TRANSCENDENTAL_ULPS.get(element_type, 0)
    return 0


def _mismatches(got: np.ndarray, want: np.ndarray, allowed: int) -> np.ndarray:
    """Where ``got`` is farther from ``want`` than ``allowed``: in ulps (NaN only against NaN) for floats and
    complex parts, real floats with the same sign of zero when nothing is allowed; bit for bit otherwise."""
    if got.dtype.kind == "c" or _is_float(got.dtype):
        distance = ulp_distance(got, want)
        far = (distance == NAN_DISTANCE) | (distance > allowed)
        # Not for complex parts: where XLA:CPU's complex division or multiply flushes a product, the sum of the
        # products is a zero whose sign is the flushed product's.
        if allowed == 0 and got.dtype.kind != "c":
            g64, w64 = got.astype(np.float64), want.astype(np.float64)
            far |= (g64 == 0) & (w64 == 0) & (np.signbit(g64) != np.signbit(w64))
        return far
    return np.asarray(got != want)


def compare_with_xla_cpu(case: Case, seed: int) -> None:
    module = case.module()
    args = xla_cpu_arguments(module, seed)
    got = leaves(xlapy.compile(case.module(), backend="cpu")(*args))
    want = leaves(run_on_xla_cpu(unfused_text(case.text), *args))
    types, names = result_element_types(module), result_names(module)
    assert len(got) == len(want) == len(types), f"{len(got)} results from xlapy, {len(want)} from XLA:CPU"
    problems = []
    for g, w, element_type, name in zip(got, want, types, names):
        if g.dtype != w.dtype or g.shape != w.shape:
            problems.append(f"{name}: xlapy gives {g.dtype}{list(g.shape)}, XLA:CPU {w.dtype}{list(w.shape)}")
            continue
        allowed = allowed_ulps(case, module, element_type)
        far = _mismatches(flushed(g), flushed(w), allowed)
        if far.any():
            index = tuple(int(i) for i in np.argwhere(far)[0])
            arguments = [repr(a[index]) for a in args if a.shape == g.shape]
            problems.append(f"{name} ({element_type}, {allowed} ulps allowed): {int(far.sum())} of {g.size} differ; "
                            f"first at {index}: xlapy {g[index]!r}, XLA:CPU {w[index]!r} (arguments there: "
                            f"{', '.join(arguments) or 'of other shapes'})")
    assert not problems, f"{case.name}, seed {seed}:\n" + "\n".join(problems)


def _param(name: str, marks: tuple = ()) -> pytest.param:
    if name in DIFFERENCES:
        marks = (*marks, pytest.mark.xfail(strict=True, reason=DIFFERENCES[name]))
    return pytest.param(name, marks=marks, id=name)


COMPARED = [name for name in CASES if name not in XLA_CANNOT_RUN]


@pytest.mark.parametrize("name", [_param(n) if n in DEFAULT_RUN else _param(n, (pytest.mark.slow,))
                                  for n in COMPARED])
def test_compiled_module_matches_xla_cpu(name: str) -> None:
    for seed in SEEDS:
        compare_with_xla_cpu(CASES[name], seed)


@pytest.mark.slow
@pytest.mark.parametrize("name", [n for n in COMPARED if n not in DIFFERENCES])
def test_compiled_module_matches_xla_cpu_on_more_seeds(name: str) -> None:
    for seed in MORE_SEEDS:
        compare_with_xla_cpu(CASES[name], seed)


@pytest.mark.parametrize("name", XLA_CANNOT_RUN)
def test_xla_cpu_refuses_what_it_cannot_run(name: str) -> None:
    try:
        run_on_xla_cpu(unfused_text(CASES[name].text), *random_arguments(CASES[name].module(), 0))
    except Exception as error:  # jaxlib raises its own error types
        verdict = XlaVerdict(error=" ".join(str(error).split()))
    else:
        verdict = XlaVerdict()
    assert_xla_verdict(verdict, XLA_CANNOT_RUN[name])


def test_the_lists_name_corpus_modules() -> None:
    listed = DEFAULT_RUN | CONTRACTED_ULPS.keys() | DIFFERENCES.keys() | XLA_CANNOT_RUN.keys()
    assert listed <= CASES.keys(), sorted(listed - CASES.keys())
