"""What the code generator's tests share: the host the FileCheck expectations are written for, the directives and
checks of a test program, exactly representable arguments, the kernels of a compiled module, and the error bound
of a floating-point sum."""

from __future__ import annotations

import re

import numpy as np

import xlapy
from xlapy.codegen.launch import Device
from xlapy.hlo.ir import HloInstruction
from xlapy.runtime.thunks.kernel import KernelThunk
from xlapy.shapes import ELEMENT_TYPES, parse_shape

# The device the FileCheck expectations are written for: a host with 512-bit SIMD registers.
WIDE_HOST = Device("cpu", threads_per_block=64, vector_bytes=64, max_vector=64, exact_blocks=True,
                   rows_hold_vectors=True)


def only_fusion(module: xlapy.HloModule) -> HloInstruction:
    """The one fusion of ``module``'s entry computation."""
    (fusion,) = [i for i in module.entry.instructions if i.opcode == "fusion"]
    return fusion


def directive(text: str, name: str) -> str | None:
    """The value of a test program's ``// NAME: value`` line, if it has one."""
    match = re.search(rf"^// {name}: (.*)$", text, re.MULTILINE)
    return match.group(1).strip() if match else None


def check_lines(text: str) -> str:
    """A test program's FileCheck lines."""
    return "\n".join(line for line in text.splitlines() if re.match(r"// CHECK", line))


def exact_values(shape: str, seed: int, integer_bound: int = 100, steps: int = 16, denominator: int = 8) \
        -> np.ndarray:
    """Seeded values of ``shape``: booleans, integers in ``[-integer_bound, integer_bound]``, or multiples of
    ``1 / denominator`` up to ``steps`` of them either side of 0 (few significant bits: exact in every type
    here, and in every sum of a few of them)."""
    parsed = parse_shape(shape)
    dtype = ELEMENT_TYPES[parsed.element_type].dtype
    rng = np.random.default_rng(seed)
    if parsed.element_type == "pred":
        return rng.integers(0, 2, size=parsed.dimensions).astype(bool)
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-integer_bound, integer_bound + 1, size=parsed.dimensions).astype(dtype)
    return (rng.integers(-steps, steps + 1, size=parsed.dimensions) / denominator).astype(dtype)


def kernel_thunks(executable: xlapy.Executable) -> list[KernelThunk]:
    """The kernel thunks of ``executable``, nested ones included, in order."""
    return [t for t in executable.thunks.walk() if isinstance(t, KernelThunk)]


def assert_sum_within_bound(got: np.ndarray, expected: np.ndarray, x: np.ndarray, init: float,
                            axes: tuple[int, ...]) -> None:
    """That sums of ``x`` over ``axes`` (and ``init``) in two orders, ``got`` and ``expected``, differ by at most
    ``2 * gamma(n) * sum(|x|)``, ``n`` the number of terms: each order is within ``gamma(n) * sum(|x|)`` of the
    exact sum (Higham, Accuracy and Stability of Numerical Algorithms, 4.2)."""
    n = int(np.prod([x.shape[d] for d in axes])) + 1
    u = np.finfo(x.dtype).eps / 2
    gamma = n * u / (1 - n * u)
    magnitude = np.sum(np.abs(x.astype(np.float64)), axis=axes) + abs(init)
    error = np.abs(got.astype(np.float64) - np.asarray(expected, np.float64))
    assert np.all(error <= 2 * gamma * magnitude), f"largest error {np.max(error - 2 * gamma * magnitude)} over bound"
