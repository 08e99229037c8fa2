"""A native direct convolution for the CPU: register-blocked LLVM IR (llvmlite) for f32 and f64 convolutions with
features last, compiled by the CPU backend (``CpuKernel``) and run by the convolution library thunk
(``xlapy/runtime/thunks/convolution.py``) where XLA:CPU calls Eigen's spatial convolution
(``xla/backends/cpu/runtime/convolution_thunk.cc``).

Buffers (row-major, contiguous):

- input ``[batch, input spatial..., group * in feature]``;
- kernel ``[group, window position, in feature, out feature padded to whole vectors]`` (the window positions
  row-major, reversed dimensions already flipped, the padding lanes zero);
- output ``[batch, output spatial..., group * out feature]``.

One block is one output line (a batch element and a position in every spatial dimension but the last) of one
feature group. Along the line, a tile of ``positions`` consecutive outputs times ``vectors`` SIMD vectors of output
features is held in registers: for every window position and every input feature, the tile's weight vectors are
loaded once, the input element of each output position is broadcast, and one fused multiply-add per accumulator
adds the product; the tile is stored once at the end. Vectors are as wide as the host's (AVX-512: 16 f32, AVX:
8, else 4) or, for few output features, as narrow as holds them (down to 128 bits); the tile is as large as the
registers allow.

Padding costs no copy: a window position that falls outside the input reads its elements from a block of zeros
(so it adds ``0 * weight``, as XLA's zero padding does, infinities and NaNs of the weights included). Strides
and window dilations only change which input element is broadcast. Output features that do not fill the last
vector are computed on the kernel's zero padding and left out by a masked store.

Each output element is one sum in a fixed order (window positions row-major, input features ascending within
each), whatever the blocks and threads: results are identical from run to run.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

from llvmlite import ir

from xlapy.codegen.backends.cpu import (
    I64,
    PTR,
    CpuKernel,
    KernelSignature,
    embed_signature,
    host_target,
    vector_bits,
)
from xlapy.errors import UnimplementedError

_ELEMENTS = {"f32": (ir.FloatType(), 4), "f64": (ir.DoubleType(), 8)}

# The longest tile along the output line: longer tiles save weight loads per multiply-add but leave fewer
# registers spare and more outputs to a shorter tile at the end of each line.
MAX_POSITIONS = 12


@dataclass(frozen=True)
class DirectConvolution:
    """One convolution as the direct kernel computes it (see the module's docstring for the buffers)."""

    element: str                    # "f32" | "f64"
    batch: int
    groups: int                     # feature groups
    in_features: int                # per group
    out_features: int               # per group
    input_spatial: tuple[int, ...]
    output_spatial: tuple[int, ...]
    window: tuple[int, ...]
    strides: tuple[int, ...]
    padding_low: tuple[int, ...]
    dilations: tuple[int, ...]      # of the window

    @functools.cached_property
    def lanes(self) -> int:
        """Elements per SIMD vector: the host's widest vectors, narrower (down to 128 bits) when a group's output
        features fit in half of one, so that few features leave few lanes idle."""
        bits = 8 * _ELEMENTS[self.element][1]
        lanes, narrowest = vector_bits() // bits, 128 // bits
        while lanes // 2 >= max(self.out_features, narrowest):
            lanes //= 2
        return lanes

    @functools.cached_property
    def padded_out_features(self) -> int:
        """Output features per group in the kernel buffer: whole vectors."""
        return -(-self.out_features // self.lanes) * self.lanes

    @functools.cached_property
    def blocks(self) -> int:
        return self.batch * math.prod(self.output_spatial[:-1]) * self.groups

    def tile(self) -> tuple[int, int]:
        """(output positions, vectors of output features) held in registers at once."""
        registers = 32 if vector_bits() == 512 else 16
        vectors = min(-(-self.out_features // self.lanes), 4 if registers == 32 else 2)
        positions = min(MAX_POSITIONS, self.output_spatial[-1], (registers - 1 - vectors) // vectors)
        return max(positions, 1), vectors

    def buffer_bytes(self) -> tuple[int, int, int]:
        """Byte sizes of the input, kernel and output buffers."""
        size = _ELEMENTS[self.element][1]
        features = self.groups * self.in_features
        taps = math.prod(self.window)
        return (self.batch * math.prod(self.input_spatial) * features * size,
                self.groups * taps * self.in_features * self.padded_out_features * size,
                self.batch * math.prod(self.output_spatial) * self.groups * self.out_features * size)

    def llvm_ir(self) -> str:
        """The LLVM module: ``void @main(ptr buffers, i64 block_begin, i64 block_end)`` and its signature, as
        ``CpuKernel`` runs them. ``UnimplementedError`` for an element type other than f32 and f64, no spatial
        dimension, or an empty dimension."""
        if self.element not in _ELEMENTS or not self.window or \
                0 in (self.batch, self.groups, self.in_features, self.out_features, *self.output_spatial):
            raise UnimplementedError(f"direct convolution: no kernel for {self}")
        return str(_Emitter(self).module)

    def compile(self) -> CpuKernel:
        """The compiled kernel (the same convolution compiled before in this process is not compiled again)."""
        return CpuKernel.from_llvm_ir(self.llvm_ir())


def _const(value: int) -> ir.Constant:
    return ir.Constant(I64, value)


class _Emitter:
    """Builds the module of one ``DirectConvolution``."""

    def __init__(self, conv: DirectConvolution):
        self.conv = conv
        self.element, self.size = _ELEMENTS[conv.element]
        self.lanes = conv.lanes
        self.vector = ir.VectorType(self.element, self.lanes)
        self.module = ir.Module(name="xlapy_convolution")
        self.module.triple = host_target()[0]
        zeros_type = ir.ArrayType(self.element, max(conv.in_features, 1))
        self.zeros = ir.GlobalVariable(self.module, zeros_type, name="zeros")
        self.zeros.global_constant = True
        self.zeros.linkage = "internal"
        self.zeros.initializer = ir.Constant(zeros_type, None)
        suffix = f"v{self.lanes}{conv.element}"
        self.fma = ir.Function(self.module, ir.FunctionType(self.vector, [self.vector] * 3), name=f"llvm.fma.{suffix}")
        mask_type = ir.VectorType(ir.IntType(1), self.lanes)
        self.masked_store = ir.Function(self.module, ir.FunctionType(
            ir.VoidType(), [self.vector, PTR, ir.IntType(32), mask_type]), name=f"llvm.masked.store.{suffix}.p0")
        kernel = self._kernel()
        self._entry(kernel)
        embed_signature(self.module, "main", KernelSignature(conv.buffer_bytes(), 1, conv.blocks))

    # -- structure ---------------------------------------------------------------------------------------------

    def _entry(self, kernel: ir.Function) -> None:
        main = ir.Function(self.module, ir.FunctionType(ir.VoidType(), [PTR, I64, I64]), name="main")
        buffers, begin, end = main.args
        b = ir.IRBuilder(main.append_basic_block("entry"))
        pointers = [b.load(b.gep(buffers, [_const(i)], inbounds=True, source_etype=PTR), typ=PTR) for i in range(3)]
        b.call(kernel, [*pointers, begin, end])
        b.ret_void()

    def _kernel(self) -> ir.Function:
        """``void @main.kernel(ptr noalias x, ptr noalias w, ptr noalias out, i64 block_begin, i64 block_end)``:
        the lines of blocks [begin, end). The caller never passes an output overlapping an input, so stores to it
        cannot change what the loops read."""
        conv = self.conv
        kernel = ir.Function(self.module, ir.FunctionType(ir.VoidType(), [PTR, PTR, PTR, I64, I64]),
                             name="main.kernel")
        kernel.linkage = "internal"
        kernel.attributes.add("noinline")
        kernel.attributes.add("nounwind")
        for arg in kernel.args[:3]:
            arg.add_attribute("noalias")
        self.x, self.w, self.out = kernel.args[:3]
        begin, end = kernel.args[3:]
        self.b = b = ir.IRBuilder(kernel.append_basic_block("entry"))
        self.function = kernel

        def block(index: ir.Value, _: list[ir.Value]) -> list[ir.Value]:
            self.group = b.urem(index, _const(conv.groups))
            rest = b.udiv(index, _const(conv.groups))
            lead = []
            for extent in reversed(conv.output_spatial[:-1]):
                lead.append(b.urem(rest, _const(extent)))
                rest = b.udiv(rest, _const(extent))
            self.batch, self.lead = rest, lead[::-1]
            self._line()
            return []

        self._loop(b.sub(end, begin), [], lambda i, carried: block(b.add(begin, i), carried))
        b.ret_void()
        return kernel

    def _line(self) -> None:
        """One output line of one group: full tiles, then what is left of the line in one shorter tile."""
        b, conv = self.b, self.conv
        positions, vectors = conv.tile()
        width = conv.output_spatial[-1]
        vector_count = -(-conv.out_features // self.lanes)
        full_chunks, tail = divmod(vector_count, vectors)

        def tiles(first: ir.Value, count: int) -> None:
            if full_chunks:
                self._loop(_const(full_chunks), [], lambda c, _: self._tile(
                    first, count, b.mul(c, _const(vectors)), vectors) or [])
            if tail:
                self._tile(first, count, _const(full_chunks * vectors), tail)

        if width // positions:
            self._loop(_const(width // positions), [], lambda i, _: tiles(b.mul(i, _const(positions)), positions)
                       or [])
        if width % positions:
            tiles(_const(width - width % positions), width % positions)

    def _tile(self, first: ir.Value, positions: int, first_vector: ir.Value, vectors: int) -> None:
        """Outputs ``first ..`` ``first + positions - 1`` of the line, output feature vectors ``first_vector ..``
        ``first_vector + vectors - 1`` of the group."""
        b, conv = self.b, self.conv
        taps = math.prod(conv.window)
        cin, padded = conv.in_features, conv.padded_out_features
        zero = ir.Constant(self.vector, [0.0] * self.lanes)
        accumulators = [zero] * (positions * vectors)

        def tap(t: ir.Value, sums: list[ir.Value]) -> list[ir.Value]:
            inputs = self._tap_inputs(t, first, positions)
            weights = b.gep(self.w, [b.add(b.mul(b.add(b.mul(self.group, _const(taps)), t), _const(cin * padded)),
                                           b.mul(first_vector, _const(self.lanes)))], source_etype=self.element)

            def feature(c: ir.Value, sums: list[ir.Value]) -> list[ir.Value]:
                row = b.gep(weights, [b.mul(c, _const(padded))], source_etype=self.element)
                w = [b.load(b.gep(row, [_const(v * self.lanes)], source_etype=self.element), typ=self.vector,
                            align=self.size) for v in range(vectors)]
                new = []
                for p in range(positions):
                    scalar = b.load(b.gep(inputs[p], [c], source_etype=self.element), typ=self.element,
                                    align=self.size)
                    splat = b.shuffle_vector(b.insert_element(ir.Constant(self.vector, ir.Undefined), scalar,
                                                              ir.Constant(ir.IntType(32), 0)),
                                             ir.Constant(self.vector, ir.Undefined),
                                             ir.Constant(ir.VectorType(ir.IntType(32), self.lanes), None))
                    new += [b.call(self.fma, [splat, w[v], sums[p * vectors + v]]) for v in range(vectors)]
                return new

            return self._loop(_const(cin), sums, feature)

        sums = self._loop(_const(taps), accumulators, tap)
        self._store(sums, first, positions, first_vector, vectors)

    def _tap_inputs(self, t: ir.Value, first: ir.Value, positions: int) -> list[ir.Value]:
        """For window position ``t``, where each output of the tile reads its input features: in the input
        buffer, or the block of zeros when the window position falls in the padding."""
        b, conv = self.b, self.conv
        rank = len(conv.window)
        offsets, rest = [], t
        for extent in reversed(conv.window):
            offsets.append(b.urem(rest, _const(extent)))
            rest = b.udiv(rest, _const(extent))
        offsets.reverse()
        valid = ir.Constant(ir.IntType(1), 1)
        row = self.batch
        for d in range(rank - 1):
            coordinate = b.sub(b.add(b.mul(self.lead[d], _const(conv.strides[d])),
                                     b.mul(offsets[d], _const(conv.dilations[d]))), _const(conv.padding_low[d]))
            valid = b.and_(valid, self._inside(coordinate, conv.input_spatial[d]))
            row = b.add(b.mul(row, _const(conv.input_spatial[d])), coordinate)
        features = conv.groups * conv.in_features
        line_start = b.sub(b.mul(offsets[-1], _const(conv.dilations[-1])), _const(conv.padding_low[-1]))
        row = b.mul(row, _const(conv.input_spatial[-1]))
        group_offset = b.mul(self.group, _const(conv.in_features))
        zeros = b.bitcast(self.zeros, PTR)
        inputs = []
        for p in range(positions):
            coordinate = b.add(b.mul(b.add(first, _const(p)), _const(conv.strides[-1])), line_start)
            inside = b.and_(valid, self._inside(coordinate, conv.input_spatial[-1]))
            element = b.add(b.mul(b.add(row, coordinate), _const(features)), group_offset)
            inputs.append(b.select(inside, b.gep(self.x, [element], source_etype=self.element), zeros))
        return inputs

    def _inside(self, coordinate: ir.Value, extent: int) -> ir.Value:
        """0 <= coordinate < extent (one unsigned comparison)."""
        return self.b.icmp_unsigned("<", coordinate, _const(extent))

    def _store(self, sums: list[ir.Value], first: ir.Value, positions: int, first_vector: ir.Value,
               vectors: int) -> None:
        b, conv = self.b, self.conv
        line = self.batch
        for d in range(len(conv.output_spatial) - 1):
            line = b.add(b.mul(line, _const(conv.output_spatial[d])), self.lead[d])
        features = conv.groups * conv.out_features
        start = b.add(b.mul(b.add(b.mul(line, _const(conv.output_spatial[-1])), first), _const(features)),
                      b.add(b.mul(self.group, _const(conv.out_features)), b.mul(first_vector, _const(self.lanes))))
        partial = conv.out_features % self.lanes != 0
        masks = []
        if partial:  # lanes past the group's output features are not stored
            lane_numbers = ir.Constant(ir.VectorType(I64, self.lanes), list(range(self.lanes)))
            for v in range(vectors):
                base = b.mul(b.add(first_vector, _const(v)), _const(self.lanes))
                splat = b.shuffle_vector(
                    b.insert_element(ir.Constant(ir.VectorType(I64, self.lanes), ir.Undefined), base,
                                     ir.Constant(ir.IntType(32), 0)),
                    ir.Constant(ir.VectorType(I64, self.lanes), ir.Undefined),
                    ir.Constant(ir.VectorType(ir.IntType(32), self.lanes), None))
                limit = ir.Constant(ir.VectorType(I64, self.lanes), [conv.out_features] * self.lanes)
                masks.append(b.icmp_signed("<", b.add(splat, lane_numbers), limit))
        for p in range(positions):
            for v in range(vectors):
                address = b.gep(self.out, [b.add(start, _const(p * features + v * self.lanes))],
                                source_etype=self.element)
                value = sums[p * vectors + v]
                if partial:
                    b.call(self.masked_store, [value, address, ir.Constant(ir.IntType(32), self.size), masks[v]])
                else:
                    b.store(value, address, align=self.size)

    # -- loops -------------------------------------------------------------------------------------------------

    def _loop(self, count: ir.Value, carried: list[ir.Value],
              body: Callable[[ir.Value, list[ir.Value]], list[ir.Value]]) -> list[ir.Value]:
        """``for i in [0, count)`` carrying ``carried`` through ``body(i, values) -> values``; the values after."""
        b = self.b
        before = b.block
        header = self.function.append_basic_block("loop")
        inside = self.function.append_basic_block("body")
        after = self.function.append_basic_block("after")
        b.branch(header)
        b.position_at_end(header)
        index = b.phi(I64)
        index.add_incoming(_const(0), before)
        values = []
        for value in carried:
            phi = b.phi(value.type)
            phi.add_incoming(value, before)
            values.append(phi)
        b.cbranch(b.icmp_signed("<", index, count), inside, after)
        b.position_at_end(inside)
        updated = body(index, values)
        latch = b.block
        index.add_incoming(b.add(index, _const(1)), latch)
        for phi, value in zip(values, updated):
            phi.add_incoming(value, latch)
        b.branch(header)
        b.position_at_end(after)
        return values
