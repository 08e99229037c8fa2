"""Kernels whose buffers are the same slice: the buffer assignment writes an output over an operand that dies
there (in-place elementwise and dynamic-update-slice fusions, loop state in a scan), and the kernel takes that
slice as one pointer (``xla.slice_index``), as XLA's ``merge_pointers_to_same_slice``. Results are compared
with the reference interpreter bit for bit (the ops here round once each, in both)."""

from __future__ import annotations

import numpy as np
import pytest
from xdsl.dialects import llvm

import xlapy
from tools.compare import assert_same
from xlapy.buffers.assignment import BufferSlice
from xlapy.codegen.backends.cpu import translate_module
from xlapy.codegen.launch import Device
from xlapy.codegen.mlir_text import parse_mlir
from xlapy.codegen.passes.lower_tensors import INVARIANT_ATTR, LowerTensorsPass
from xlapy.errors import VerifyError
from xlapy.hlo.ir import HloInstruction
from xlapy.runtime import kernel_cache
from xlapy.runtime.thunks.kernel import KernelThunk, shared_slice_indices
from xlapy.shapes import ELEMENT_TYPES, parse_shape


def _kernel_thunks(executable: xlapy.Executable) -> dict[str, KernelThunk]:
    return {t.name: t for t in executable.thunks.walk() if isinstance(t, KernelThunk)}


def _entry_instruction(executable: xlapy.Executable, opcode: str) -> HloInstruction:
    (found,) = [i for i in executable.module.entry.instructions if i.opcode == opcode]
    return found


def _values(shape: str, seed: int) -> np.ndarray:
    """Small multiples of 1/8: sums and products of a few of them are exact in every float type here."""
    parsed = parse_shape(shape)
    dtype = ELEMENT_TYPES[parsed.element_type].dtype
    rng = np.random.default_rng(seed)
    return (rng.integers(-16, 17, size=parsed.dimensions) / 8).astype(dtype)


# The fusion reads its parameter x only to compute the same element of its result: it may write over x's
# buffer, which is the temporary `a` dying there. y is read as a row broadcast in the 2-D cases.
ELEMENTWISE = """HloModule in_place
f {{ x = {shape} parameter(0)  y = {shape} parameter(1)  m = {shape} multiply(x, y)
     s = {shape} subtract(m, x)  ROOT r = {shape} add(s, y) }}
ENTRY e {{ p = {shape} parameter(0)  q = {shape} parameter(1)  a = {shape} negate(p)
          ROOT fusion = {shape} fusion(a, q), kind=kLoop, calls=f }}
"""


@pytest.mark.parametrize("shape", ["f32[4096]", "f32[1001]", "bf16[33,65]", "s32[8,129]"])
def test_an_elementwise_fusion_writes_over_its_operand(shape: str) -> None:
    module = xlapy.parse_hlo(ELEMENTWISE.format(shape=shape))
    x, y = _values(shape, 0), _values(shape, 1)
    executable = xlapy.compile(module, run_hlo_passes=False)
    assignment = executable.assignment
    fusion, negate = _entry_instruction(executable, "fusion"), _entry_instruction(executable, "negate")
    assert assignment.slice(fusion) == assignment.slice(negate)
    thunk = _kernel_thunks(executable)["fusion"]
    assert thunk.slice_indices == (0, 1, 0)
    assert len(thunk.kernel.signature.buffer_sizes) == 2
    assert_same(executable(x, y), xlapy.evaluate(module, x, y), exact_bits=True)


def test_an_operand_read_twice_and_written_over_is_one_pointer() -> None:
    module = xlapy.parse_hlo("""HloModule twice
ENTRY e { p = f32[1031] parameter(0)  a = f32[1031] negate(p)  ROOT r = f32[1031] multiply(a, a) }""")
    x = _values("f32[1031]", 2)
    executable = xlapy.compile(module, run_hlo_passes=False)
    thunk = _kernel_thunks(executable)["r"]
    assert thunk.slice_indices == (0, 0, 0)
    assert thunk.kernel.signature.buffer_sizes == (1031 * 4,)
    assert_same(executable(x), xlapy.evaluate(module, x), exact_bits=True)


DYNAMIC_UPDATE_SLICE = """HloModule dus
f {{ x = {shape} parameter(0)  u = {update} parameter(1)  i = s32[] parameter(2)  j = s32[] parameter(3)
     ROOT d = {shape} dynamic-update-slice(x, u, {starts}) }}
ENTRY e {{ p = {shape} parameter(0)  v = {update} parameter(1)  s = s32[] parameter(2)  t = s32[] parameter(3)
          a = {shape} negate(p)  ROOT fusion = {shape} fusion(a, v, s, t), kind=kLoop, calls=f }}
"""


@pytest.mark.parametrize(("shape", "update", "starts"), [
    ("f32[4096]", "f32[128]", "i"),
    ("f32[1001]", "f32[37]", "j"),
    ("f32[64,72]", "f32[8,72]", "i, j"),
    ("f16[17,33]", "f16[5,7]", "j, i"),
])
@pytest.mark.parametrize(("first", "second"), [(3, 5), (-4, 2000)])  # in range, then clamped at both ends
def test_a_dynamic_update_slice_fusion_updates_in_place(shape: str, update: str, starts: str, first: int,
                                                        second: int) -> None:
    module = xlapy.parse_hlo(DYNAMIC_UPDATE_SLICE.format(shape=shape, update=update, starts=starts))
    args = (_values(shape, 3), _values(update, 4), np.int32(first), np.int32(second))
    executable = xlapy.compile(module, run_hlo_passes=False)
    assignment = executable.assignment
    assert assignment.slice(_entry_instruction(executable, "fusion")) == \
        assignment.slice(_entry_instruction(executable, "negate"))
    assert _kernel_thunks(executable)["fusion"].slice_indices == (0, 1, 2, 3, 0)
    assert_same(executable(*args), xlapy.evaluate(module, *args), exact_bits=True)


def test_the_kernel_takes_the_shared_slice_as_one_pointer_never_read_as_invariant(tmp_path) -> None:
    module = xlapy.parse_hlo(ELEMENTWISE.format(shape="f32[4096]"))
    executable = xlapy.compile(module, run_hlo_passes=False, dump_to=tmp_path)
    (dumped,) = tmp_path.glob("fusion.*.lower-tensors.mlir")
    lowered = parse_mlir(dumped.read_text())
    main = next(f for f in lowered.ops if f.sym_name.data == "main")
    shared, other = main.body.block.args  # x and the output are one pointer; y the other
    assert [a.type for a in (shared, other)] == [llvm.LLVMPointerType(), llvm.LLVMPointerType()]
    assert [d.data["xla.slice_index"].value.data for d in main.arg_attrs.data] == [0, 1]
    invariant = {shared: set(), other: set()}
    for load in (op for op in main.walk() if isinstance(op, llvm.LoadOp)):
        invariant[load.ptr.owner.ptr].add(INVARIANT_ATTR in load.attributes)
    assert invariant == {shared: {False}, other: {True}}
    # In LLVM IR: the kernel function takes the two pointers (and its block range), both still `noalias`.
    ir_module, signature = translate_module(lowered)
    assert signature.buffer_sizes == (4096 * 4, 4096 * 4)
    (definition,) = [line for line in str(ir_module).splitlines()
                     if line.startswith('define internal void @"main.kernel"')]
    assert definition.count("ptr noalias") == 2 and definition.count("ptr") == 2
    x, y = _values("f32[4096]", 5), _values("f32[4096]", 6)
    assert_same(executable(x, y), xlapy.evaluate(module, x, y), exact_bits=True)


def test_functions_the_entry_calls_do_not_read_a_written_slice_as_invariant() -> None:
    # @square stays a function (lower-tensors runs after inlining); it reads %a, which the entry writes through
    # %out (the same slice).
    module = parse_mlir("""
func.func private @square(%t: tensor<8xf32>, %i: index) -> f32 {
  %x = tensor.extract %t[%i] : tensor<8xf32>
  %y = arith.mulf %x, %x : f32
  return %y : f32
}
func.func @main(%a: tensor<8xf32> {xla.slice_index = 0 : index}, %out: tensor<8xf32> {xla.slice_index = 0 : index})
    -> tensor<8xf32> {
  %th = gpu.thread_id x {xla.range = [0 : index, 7 : index]}
  %y = xla.pure_call @square(%a, %th) : (tensor<8xf32>, index) -> f32
  %w = tensor.insert %y into %out[%th] : tensor<8xf32>
  return %w : tensor<8xf32>
}
""")
    LowerTensorsPass().apply(None, module)  # type: ignore[arg-type]
    loads = [op for op in module.walk() if isinstance(op, llvm.LoadOp)]
    assert len(loads) == 1 and INVARIANT_ATTR not in loads[0].attributes


def test_a_scan_writes_its_outputs_in_place_inside_the_loop() -> None:
    jax = pytest.importorskip("jax")
    from xlapy.frontends.jax import from_jax

    def scan(xs, carry):
        def step(c, x):
            c = c * 0.5 + x
            return c, c * 2.0
        return jax.lax.scan(step, carry, xs)

    xs = (np.arange(16 * 1001, dtype=np.float32).reshape(16, 1001) % 29 - 14) / 4
    carry = np.ones(1001, np.float32)
    module = from_jax(scan, xs, carry)
    executable = xlapy.compile(module)
    updates = [t for t in _kernel_thunks(executable).values()
               if any(i.opcode == "dynamic-update-slice" for i in t.fusion.fused_computation.instructions)]
    assert updates and all(t.outputs[0][0] == t.operands[0][0] and t.slice_indices is not None for t in updates)
    assert_same(executable(xs, carry), xlapy.evaluate(module, xs, carry), exact_bits=True)


def test_the_kernel_cache_tells_shared_buffers_apart(tmp_path, monkeypatch) -> None:
    # The same fusion on two parameters (two buffers) and over a dying temporary (one buffer for two): one
    # kernel each, whichever is compiled first.
    monkeypatch.setenv("XLAPY_CACHE_DIR", str(tmp_path))
    kernel_cache.clear_memory_cache()
    separate = xlapy.parse_hlo(ELEMENTWISE.format(shape="f32[1001]").replace(
        "a = f32[1001] negate(p)  ROOT fusion = f32[1001] fusion(a, q)", "ROOT fusion = f32[1001] fusion(p, q)"))
    shared = xlapy.parse_hlo(ELEMENTWISE.format(shape="f32[1001]"))
    x, y = _values("f32[1001]", 7), _values("f32[1001]", 8)
    for module in (separate, shared):
        executable = xlapy.compile(module, run_hlo_passes=False)
        assert_same(executable(x, y), xlapy.evaluate(module, x, y), exact_bits=True)
    assert _kernel_thunks(executable)["fusion"].slice_indices == (0, 1, 0)
    fusion = _entry_instruction(executable, "fusion")
    device = Device.host()
    assert kernel_cache.fingerprint(fusion, device, "", (0, 1, 0)) != kernel_cache.fingerprint(fusion, device, "")


def test_slice_indices_number_the_pointers_a_kernel_takes() -> None:
    a, b = BufferSlice(0, 0, 64), BufferSlice(0, 64, 64)
    assert shared_slice_indices([a, b, None, BufferSlice(1, 0, 64)], "k") is None
    assert shared_slice_indices([a, None, b, a], "k") == (0, 1, 2, 0)
    assert shared_slice_indices([b, b, b], "k") == (0, 0, 0)
    assert shared_slice_indices([BufferSlice(0, 0, 0), BufferSlice(0, 0, 8)], "k") is None  # no byte in common


@pytest.mark.parametrize("output", [BufferSlice(0, 32, 64), BufferSlice(0, 0, 32), BufferSlice(0, 0, 128)])
def test_slices_that_overlap_without_being_equal_never_reach_a_kernel(output: BufferSlice) -> None:
    shape = parse_shape("f32[8]")
    with pytest.raises(VerifyError, match="overlap without being equal"):
        KernelThunk(name="k", fusion=None, operands=[(BufferSlice(0, 0, 64), shape)], constants=[],  # type: ignore
                    outputs=[(output, shape)], elements=8)


def test_a_kernel_refuses_slices_shared_otherwise_than_it_was_compiled_for() -> None:
    module = xlapy.parse_hlo(ELEMENTWISE.format(shape="f32[64]"))
    executable = xlapy.compile(module, run_hlo_passes=False)
    thunk = _kernel_thunks(executable)["fusion"]
    ((_, shape),) = thunk.outputs
    thunk.outputs = [(thunk.operands[1][0], shape)]  # over the parameter q: not the slice the kernel writes over
    thunk.refresh()
    x = _values("f32[64]", 9)
    with pytest.raises(VerifyError, match=r"share slices as slice indices \[0, 1, 1\], its kernel was compiled for "
                                          r"slice indices \[0, 1, 0\]"):
        executable(x, x)
