"""JIT helpers for the math library tests: a loop `void kernel(T* in0, [T* in1,] T* out, i64 n)` applying one
math function elementwise (one element, or with `lanes` one vector of the function's vector form, per
iteration), optimised at O3 for the host CPU and called through ctypes."""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable

import llvmlite.binding as llvm
import ml_dtypes
import numpy as np
from llvmlite import ir

from xlapy.codegen.backends.cpu import BFloatType
from xlapy.codegen.backends.math_library import math_function

BF16 = BFloatType()

_TYPES = {
    np.dtype(np.float64): ir.DoubleType(),
    np.dtype(np.float32): ir.FloatType(),
    np.dtype(np.float16): ir.HalfType(),
    np.dtype(ml_dtypes.bfloat16): BF16,
}


@functools.cache
def host_target_machine() -> llvm.TargetMachine:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(
        cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=3, jit=True
    )


def loop_module(op: str, dtype: np.dtype, arity: int = 1, lanes: int | None = None) -> ir.Module:
    """An LLVM module with `void kernel(in..., out, n)`: out[i] = op(in0[i], ...) for i < n; with `lanes`,
    `lanes` elements at a time with the vector form of the function (n a multiple of `lanes`)."""
    element = _TYPES[np.dtype(dtype)]
    if lanes is not None:
        element = ir.VectorType(element, lanes)
    module = ir.Module(name=f"{op}_{np.dtype(dtype).name}")
    ptr = ir.PointerType()
    i64 = ir.IntType(64)
    kernel = ir.Function(module, ir.FunctionType(ir.VoidType(), [ptr] * (arity + 1) + [i64]), "kernel")
    for arg in kernel.args[:-1]:
        arg.add_attribute("noalias")
    *inputs, out, n = kernel.args
    function = math_function(module, op, element)
    entry, body, done = (kernel.append_basic_block(name) for name in ("entry", "body", "done"))
    b = ir.IRBuilder(entry)
    b.cbranch(b.icmp_signed(">", n, ir.Constant(i64, 0)), body, done)
    b.position_at_end(body)
    i = b.phi(i64)
    i.add_incoming(ir.Constant(i64, 0), entry)
    align = np.dtype(dtype).itemsize  # numpy aligns arrays to their elements only
    values = [b.load(b.gep(p, [i], inbounds=True, source_etype=element), typ=element, align=align) for p in inputs]
    b.store(b.call(function, values), b.gep(out, [i], inbounds=True, source_etype=element), align=align)
    next_i = b.add(i, ir.Constant(i64, 1))
    i.add_incoming(next_i, body)
    b.cbranch(b.icmp_signed("<", next_i, n), body, done)
    b.position_at_end(done)
    b.ret_void()
    return module


def optimize(module: ir.Module) -> llvm.ModuleRef:
    """Parse, verify and optimise `module` at O3 for the host (new pass manager)."""
    tm = host_target_machine()
    ref = llvm.parse_assembly(str(module))
    ref.triple = tm.triple
    ref.data_layout = str(tm.target_data)
    ref.verify()
    pb = llvm.create_pass_builder(tm, llvm.create_pipeline_tuning_options(3))
    pb.getModulePassManager().run(ref, pb)
    return ref


_ENGINES: list[llvm.ExecutionEngine] = []  # keep the JIT-ed code alive


@functools.cache
def compiled(op: str, dtype: np.dtype, arity: int = 1, lanes: int | None = None) -> Callable[..., np.ndarray]:
    """op applied elementwise by JIT-compiled code: f(*arrays) -> array (same dtype). With `lanes`, by the
    function's vector form on `lanes` elements at a time (the arrays are padded to a multiple)."""
    dtype = np.dtype(dtype)
    ref = optimize(loop_module(op, dtype, arity, lanes))
    # The O3 result, before code generation rewrites the module in place (on CPUs whose gathers LLVM deems slow,
    # such as AMD's Zen 3, it turns each masked gather into a load per lane there)
    text = str(ref)
    engine = llvm.create_mcjit_compiler(ref, host_target_machine())
    engine.finalize_object()
    _ENGINES.append(engine)
    address = engine.get_function_address("kernel")
    kernel = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * (arity + 1)), ctypes.c_int64)(address)

    def run(*arrays: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        shape = np.broadcast_shapes(*(a.shape for a in arrays))
        inputs = [np.ascontiguousarray(np.broadcast_to(a, shape), dtype) for a in arrays]
        out = np.empty(shape, dtype) if out is None else out
        assert out.dtype == dtype and out.flags.c_contiguous and out.shape == shape
        if lanes is None:
            kernel(*(a.ctypes.data for a in inputs), out.ctypes.data, out.size)
            return out
        padded = -(-out.size // lanes) * lanes
        inputs = [np.resize(a.ravel(), padded) for a in inputs]
        result = np.empty(padded, dtype)
        kernel(*(a.ctypes.data for a in inputs), result.ctypes.data, padded // lanes)
        out[...] = result[:out.size].reshape(shape)
        return out

    run.optimized_ir = text  # type: ignore[attr-defined]
    return run
