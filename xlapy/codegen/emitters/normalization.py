"""The normalization emitter: softmax, layer norm, RMS norm and other chains of "normalization diamonds" (a row
reduce broadcast back along the row into an elementwise consumer) in one kernel that walks each row a few times
while it is in the cache. ``xlapy/transforms/normalization_fusion.py`` forms the fusions (after XLA's
``SoftmaxRewriterTriton``) and ``fusion_kind_of`` calls them ``"normalization"`` (``normalization_computation``).
XLA:GPU emits them with Triton, a block per row; here a thread handles a whole row.

``@main``'s ``xla.loop`` gives each thread of a block one row (the indices ``d0, ...`` of the row-space arrays; about
``ROW_BLOCK_ELEMENTS`` elements per block, as the reduction emitter's ``row`` variant), and for that row:

1. one phase per row reduce, in dependency order: ``@<computation>_<reduce>`` computes the reduce at the row and
   the row values that broadcasts back read and that need no later reduce (the mean ``sum / n``, ``rsqrt(var +
   eps)``), from the row values of the phases before, which it takes as scalar arguments (XLA's epilogue functions
   take their heroes' values alike). The reduce is the elemental one (``xlapy/codegen/elemental_reduce.py``): a
   vectorized row reduction with partial accumulators for add, maximum and the other one-op reducers of long enough
   rows, the elements in order otherwise; the values it reduces are computed in its loop;
2. an ``xla.loop`` over the row's elements, ``V`` SIMD lanes at a time (``OUTPUT_REGISTERS`` registers of the
   widest output type, as the loop emitter's widened vectors, halved until ``V`` divides the row), calls
   ``@<computation>`` at each element with every row value and inserts the roots into the outputs.

Each function computes its values from the fusion's parameters itself (no partition into subgraphs: inside a
function every value is needed at one index, and the row values, the only ones the phases share, are arguments).
So an elementwise producer read by several walks (``x - mean`` in layer norm) is computed again in each: the row
stays in the first- or second-level cache between its walks, and a few operations cost less than writing and
reading it back. Not so for a reduce's input computed with a math library function (dozens of instructions per
element) and read again afterwards, ``exp(x - max)`` in softmax (``stored_value``): a loop before its phase
writes it into the output row (``@<computation>_<value>``), the phase and the last walk read it from there, and
the last walk overwrites it with the outputs. For softmax over ``f32[4096,1024]``::

    %xla_loop = xla.loop (%thread_id_x, %block_id_x)[%vector_index] -> (%dim0) in #rows
        iter_args(%iter = %output) -> (tensor<4096x1024xf32>) {
      %max = xla.pure_call @fused_computation_max(%input, %dim0) : (tensor<4096x1024xf32>, index) -> f32
      %stored_exp = xla.loop ()[%chunk, %lane] -> (%c, %l) in #chunks iter_args(%o = %iter) -> (...) {
        %i, %j = xla.apply_indexing #element(%dim0)[%c, %l]
        %e = xla.pure_call @fused_computation_exp(%input, %i, %j, %max) : (...) -> f32
        %inserted = tensor.insert %e into %o[%i, %j] : tensor<4096x1024xf32>
        ...
      %sum = xla.pure_call @fused_computation_sum(%input, %stored_exp, %dim0, %max) : (...) -> f32
      %row = xla.loop ()[%chunk_1, %lane_1] -> (...) in #chunks iter_args(%o_1 = %stored_exp) -> (...) {
        ...
        %v = xla.pure_call @fused_computation(%input, %stored_exp, %i_1, %j_1, %max, %sum) : (...) -> f32
        ...

The output row can hold the stored value only when the fusion has a single output of that value's element type in
a buffer of its own (not written over an operand, whose row later walks may still read).

On the CPU a row's first walk reads it from memory and the later ones from the first-level cache, so every vector
load also prefetches the line ``PREFETCH_ROWS`` row ahead (``xla.prefetch_bytes`` on ``@main``, for
``prefetch-loads``): the next row arrives while this one's walks compute.

Results are those of the interpreter bit for bit where every reduce is exact in any order (maximum, minimum, the
integer and logical reducers); float sums are in the row reduction's order (``xlapy/codegen/emitters/
reduction.py`` gives it and its bound), fixed by the shapes alone, so results are bitwise the same on any
number of threads and cores, and each value computed from them (``e / sum``) is rounded once as the interpreter
rounds it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from xdsl.builder import Builder
from xdsl.dialects import func, tensor
from xdsl.dialects.builtin import IndexType, ModuleOp
from xdsl.ir import Block, Region, SSAValue
from xdsl.rewriter import InsertPoint

from xlapy.codegen.dialect import ApplyIndexingOp, LoopOp, PureCallOp, YieldOp
from xlapy.codegen.elemental import FunctionEmitter
from xlapy.codegen.elemental_rules import CalledFunctions, buffer_arguments, result_types
from xlapy.codegen.emitters.common import (
    ENTRY_NAME,
    MATH_LIBRARY_OPCODES,
    entry_function,
    finish_entry,
    fusion_output_shapes,
    start_entry,
    symbol_name,
)
from xlapy.codegen.emitters.reduction import ROW_BLOCK_ELEMENTS
from xlapy.codegen.launch import Device, LaunchDimensions, loop_launch_dimensions, thread_id_to_output_map
from xlapy.codegen.partitioner import PartitionedComputation, Subgraph, computation_roots
from xlapy.codegen.passes.prefetch_loads import mark_prefetch
from xlapy.codegen.types import tensor_type
from xlapy.errors import VerifyError
from xlapy.hlo.ir import HloComputation, HloInstruction
from xlapy.indexing import IndexingMap
from xlapy.indexing.affine import add, const, dim, floordiv, mod, mul, sym
from xlapy.indexing.indexing_map import Variable
from xlapy.indexing.interval import Interval
from xlapy.shapes import ELEMENT_TYPES
from xlapy.transforms.fusion_hero import fusion_kind_of
from xlapy.transforms.normalization_fusion import NormalizationComputation, normalization_computation

# SIMD registers of the output loop's vectors: two independent register-wide chains. Measured on f32[4096,1024]
# (CPU time, medians of 40 runs): softmax 5.0 ms with 2, 5.5 ms with 4 (an f64 exp of 4 registers of f32 lanes
# keeps 8 vectors in flight and spills its constants), 5.1-5.6 ms with 1; layer norm and RMS norm alike with all.
OUTPUT_REGISTERS = 2
# How many rows ahead of its vector loads a thread prefetches (``prefetch-loads``, on the CPU). A row's first walk
# (its first reduce) reads it from memory, a page at a time (rows of 4 KiB: the hardware prefetchers start over at
# every row), and the walks after it compute from the first-level cache while the memory bus idles; prefetching
# the next row during them overlaps the two. Measured on f32[4096,1024] (bf16 for RMS norm) on an AMD Zen 3,
# medians of 9 alternating rounds against XLA:CPU, input in the cache / evicted before each run: softmax 1.21 ->
# 1.64 / 1.47 -> 1.86x, layer norm 7.1 -> 10.3 / 2.18 -> 2.59x, RMS norm 1.16 -> 1.41 / 1.73 -> 2.05x; two rows
# ahead measured between the two.
PREFETCH_ROWS = 1


@dataclass(frozen=True)
class Phase:
    """One walk over a row: ``reduce`` and the row values computed with it (``values``, the reduce first), from the
    row values of the phases before."""

    reduce: HloInstruction
    values: tuple[HloInstruction, ...]


def normalization_fusion(fusion: HloInstruction) -> NormalizationComputation | None:
    """``fusion``'s computation as the emitter sees it, or None when the emitter does not write ``fusion``:
    ``fusion_kind_of`` calls it a normalization and its outputs have the roots' row-major shape."""
    if fusion.opcode != "fusion" or fusion.attr("kind") not in ("kLoop", None):
        return None
    if fusion_kind_of(fusion) != "normalization":
        return None
    info = normalization_computation(fusion.fused_computation)
    if info is None or not all(info.shape.is_row_shaped(s) for s in fusion_output_shapes(fusion)):
        return None
    return info


def is_normalization_fusion(fusion: HloInstruction) -> bool:
    """Whether the normalization emitter writes ``fusion`` (see ``normalization_fusion``)."""
    return normalization_fusion(fusion) is not None


def phases(info: NormalizationComputation) -> list[Phase]:
    """The phases of ``info``'s rows: one per reduce in dependency order, each with the row values that broadcasts
    back read and whose last reduce is that one."""
    order = {r: k for k, r in enumerate(info.reduces)}
    result = []
    for k, reduce in enumerate(info.reduces):
        values = [reduce, *(v for v in info.broadcast_back
                            if v is not reduce and max(order[r] for r in info.row_values[v]) == k)]
        result.append(Phase(reduce, tuple(values)))
    return result


def rows_launch(info: NormalizationComputation, device: Device) -> LaunchDimensions:
    """A thread per row, as many rows per block as make ``ROW_BLOCK_ELEMENTS`` elements (at least one; the reduction
    emitter's blocks of rows)."""
    rows = max(1, ROW_BLOCK_ELEMENTS // max(1, info.shape.row_elements))
    row_space = info.reduces[0].shape
    return loop_launch_dimensions(row_space, replace(device, threads_per_block=rows, max_vector=1))


def output_lanes(info: NormalizationComputation, fusion: HloInstruction, device: Device) -> int:
    """The SIMD lanes of the loop over a row's elements: ``OUTPUT_REGISTERS`` of the device's vectors of the widest
    output type (at least 4 bytes, as the loop emitter's), halved until they divide the row."""
    bits = max(32, *(ELEMENT_TYPES[s.element_type].bit_width for s in fusion_output_shapes(fusion)))
    lanes = max(1, min(device.max_vector, OUTPUT_REGISTERS * device.vector_bytes * 8 // bits))
    while lanes > 1 and info.shape.row_elements % lanes:
        lanes //= 2
    return lanes


def element_map(info: NormalizationComputation, lanes: int) -> IndexingMap:
    """``(d0, ...)[chunk, lane] -> (d0, ..., row indices)``: element ``chunk * lanes + lane`` of row ``(d0, ...)``,
    the row's dimensions in row-major order."""
    dimensions = info.shape.dimensions
    kept = info.shape.kept
    linear = add(mul(sym(0), const(lanes)), sym(1))
    row = info.shape.row_elements
    inner = []
    stride = row
    for size in dimensions[kept:]:
        stride //= size
        part = floordiv(linear, const(stride)) if stride > 1 else linear
        inner.append(mod(part, const(size)) if stride * size < row else part)
    return IndexingMap.from_exprs(
        [*(dim(d) for d in range(kept)), *inner],
        [Variable(Interval(0, size - 1), f"d{d}") for d, size in enumerate(dimensions[:kept])],
        [Variable(Interval(0, row // lanes - 1), "chunk"), Variable(Interval(0, lanes - 1), "lane")],
    ).simplify()


def stored_value(info: NormalizationComputation, fusion: HloInstruction,
                 slice_indices: Sequence[int] | None = None) -> HloInstruction | None:
    """The row-shaped value the kernel writes into its output row before a reduce reads it, so that the later walks
    read it back instead of computing it again (``exp(x - max)`` in softmax), or None. It is the input of a row
    reduce that is computed with a math library function and that the roots read after the reduce; the fusion has
    one output of its element type, in a buffer of its own (written over an operand, the output's row could not
    hold other values before the roots are written)."""
    computation = fusion.fused_computation
    root = computation.root
    if root.opcode == "tuple" or fusion.shape.is_tuple:
        return None
    if slice_indices is not None and slice_indices[-1] in slice_indices[:-1]:
        return None
    found = None
    for reduce in info.reduces:
        value = reduce.operands[0]
        if (value.opcode == "parameter" or value in info.row_values
                or value.shape.element_type != fusion.shape.element_type or not info.shape.is_row_shaped(value.shape)):
            continue
        if _computes_expensive(value, info) and any(u is not reduce for u in value.users):
            found = value
    return found


def _computes_expensive(value: HloInstruction, info: NormalizationComputation) -> bool:
    """Whether computing ``value`` at an element (row values given) calls a math library function."""
    pending, seen = [value], set()
    while pending:
        instr = pending.pop()
        if instr in seen or instr in info.row_values or instr.opcode == "parameter":
            continue
        seen.add(instr)
        if instr.opcode in MATH_LIBRARY_OPCODES:
            return True
        pending.extend(instr.operands)
    return False


def _hint(value: SSAValue, name: str) -> None:
    hint = symbol_name(name).replace(".", "_").replace("$", "_")
    if SSAValue.is_valid_name(hint):
        value.name_hint = hint


def _whole(computation: HloComputation, name: str, roots: Sequence[HloInstruction]) -> PartitionedComputation:
    """``computation`` as one subgraph computing ``roots``: every instruction is emitted in the function itself."""
    subgraph = Subgraph(name, list(roots))
    return PartitionedComputation(computation, [subgraph], {i: subgraph for i in computation.instructions})


class _RowFunctionEmitter(FunctionEmitter):
    """A function's emitter that reads the ``stored`` instruction from the tensor holding it (the output row)."""

    def __init__(self, *args, stored: tuple[HloInstruction, SSAValue] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.stored = stored

    def emit(self, instr: HloInstruction, indices: tuple[SSAValue, ...]):
        if self.stored is not None and instr is self.stored[0]:
            return self.extract(self.stored[1], indices)
        return super().emit(instr, indices)


@dataclass(frozen=True)
class _Signature:
    """What a row function takes: the fusion's buffers, the stored value's tensor if any, the indices, the row values
    of ``injected``."""

    stored: HloInstruction | None
    stored_type: object
    rank: int
    injected: tuple[HloInstruction, ...]


def _function(computation: HloComputation, name: str, roots: Sequence[HloInstruction], signature: _Signature,
              called: CalledFunctions) -> func.FuncOp:
    """``func.func private @name(buffers..., [stored], indices..., injected values...) -> (roots' values)``: the roots
    at the indices, every instruction computed in the function except the injected row values and the stored
    value (read from its tensor)."""
    whole = _whole(computation, name, roots)
    buffers = buffer_arguments(whole)
    param_types = [tensor_type(p.shape, p.name) for p in buffers]
    stored_types = [signature.stored_type] if signature.stored is not None else []
    injected_types = [t for v in signature.injected for t in result_types(v)]
    types = [*param_types, *stored_types, *([IndexType()] * signature.rank), *injected_types]
    block = Block(arg_types=types)
    args = list(block.args)
    params, args = args[:len(param_types)], args[len(param_types):]
    stored_args, args = args[:len(stored_types)], args[len(stored_types):]
    indices, values = tuple(args[:signature.rank]), args[signature.rank:]
    for arg, p in zip(params, buffers):
        _hint(arg, p.name)
    for i, arg in enumerate(indices):
        arg.name_hint = f"i{i}"
    for arg, v in zip(values, signature.injected):
        _hint(arg, v.name)
    stored = None
    if signature.stored is not None:
        _hint(stored_args[0], f"stored_{signature.stored.name}")
        stored = (signature.stored, stored_args[0])
    emitter = _RowFunctionEmitter(whole, whole.root_subgraph, block, params, indices, called,
                                  dict(zip(signature.injected, values)), stored=stored)
    results = [emitter.emit_scalar(r, indices) for r in roots]
    emitter.insert(func.ReturnOp(*results))
    return func.FuncOp(name, (types, [v.type for v in results]), Region(block), visibility="private")


def emit_normalization_fusion(fusion: HloInstruction, device: Device, slice_indices: Sequence[int] | None = None) \
        -> tuple[ModuleOp, LaunchDimensions]:
    """The MLIR module of a normalization fusion: ``@main`` with an ``xla.loop`` over the rows of each block, the
    phases' functions and the function of the roots (see the module docstring)."""
    info = normalization_fusion(fusion)
    if info is None:
        raise VerifyError(f"fusion {fusion.name} is not a normalization fusion the normalization emitter handles")
    computation = fusion.fused_computation
    roots = computation_roots(computation)
    for root in roots:
        result_types(root)
    kept, rank = info.shape.kept, len(info.shape.dimensions)
    row_launch = rows_launch(info, device)
    lanes = output_lanes(info, fusion, device)
    launch = LaunchDimensions(row_launch.threads_per_block, row_launch.blocks, lanes)
    root_name = symbol_name(computation.name)
    row_phases = phases(info)
    phase_names = [symbol_name(f"{computation.name}_{p.reduce.name}") for p in row_phases]
    stored = stored_value(info, fusion, slice_indices)
    stored_name = symbol_name(f"{computation.name}_{stored.name}") if stored is not None else None
    store_phase = next((k for k, p in enumerate(row_phases) if p.reduce.operands[0] is stored), None)
    called = CalledFunctions([ENTRY_NAME, root_name, *phase_names, *([stored_name] if stored_name else [])])
    output_type = tensor_type(fusion_output_shapes(fusion)[0], fusion.name)

    def signature(rank: int, injected: Sequence[HloInstruction], reads_stored: bool) -> _Signature:
        return _Signature(stored if reads_stored else None, output_type, rank, tuple(injected))

    functions: dict[str, func.FuncOp] = {}
    injected: list[HloInstruction] = []
    for k, (phase, name) in enumerate(zip(row_phases, phase_names)):
        if k == store_phase:
            functions[stored_name] = _function(computation, stored_name, [stored],  # type: ignore[index]
                                               signature(rank, injected, False), called)
        reads_stored = store_phase is not None and k >= store_phase
        functions[name] = _function(computation, name, phase.values, signature(kept, injected, reads_stored), called)
        injected.extend(phase.values)
    functions[root_name] = _function(computation, root_name, roots, signature(rank, injected, stored is not None),
                                     called)

    whole = _whole(computation, root_name, roots)
    block, params, outputs, builder, thread_id, block_id = start_entry(whole, fusion, launch)
    row_map = thread_id_to_output_map(row_launch, info.reduces[0].shape)
    rows = builder.insert(LoopOp([thread_id, block_id], row_map, outputs))
    rows.results[0].name_hint = "xla_loop"
    body = Builder(InsertPoint.at_end(rows.body.block))
    symbols = len(row_map.range_vars)
    row = list(rows.body.block.args[symbols:symbols + kept])
    current = list(rows.body.block.args[symbols + kept:])
    values: list[SSAValue] = []
    stored_tensor: list[SSAValue] = []
    for k, (phase, name) in enumerate(zip(row_phases, phase_names)):
        if k == store_phase:
            current = _row_loop(body, info, lanes, functions[stored_name], params, row, values, current, [0])
            current[0].name_hint = f"stored_{symbol_name(stored.name)}".replace(".", "_")  # type: ignore[union-attr]
            stored_tensor = [current[0]]
        function = functions[name]
        call = body.insert(PureCallOp(name, [*params, *stored_tensor, *row, *values],
                                      function.function_type.outputs.data))
        for result, value in zip(call.results, phase.values):
            _hint(result, value.name)
        values.extend(call.results)
    written = _row_loop(body, info, lanes, functions[root_name], [*params, *stored_tensor], row, values, current,
                        _output_positions(computation, roots))
    body.insert(YieldOp(written))
    builder.insert(func.ReturnOp(*rows.results))
    entry = entry_function(block, outputs)
    if device.name == "cpu":
        mark_prefetch(entry, PREFETCH_ROWS * _input_row_bytes(info, computation))
    finish_entry(entry, fusion, device, slice_indices)
    return ModuleOp([entry, *functions.values(), *called.functions]), launch


def _input_row_bytes(info: NormalizationComputation, computation: HloComputation) -> int:
    """The bytes of a row of the widest row-shaped parameter (the distance from a row to the next in memory)."""
    widths = [ELEMENT_TYPES[p.shape.element_type].byte_width for p in computation.parameters
              if info.shape.is_row_shaped(p.shape)]
    return info.shape.row_elements * max(widths, default=4)


def _row_loop(builder: Builder, info: NormalizationComputation, lanes: int, function: func.FuncOp,
              buffers: Sequence[SSAValue], row: Sequence[SSAValue], values: Sequence[SSAValue],
              iters: Sequence[SSAValue], positions: Sequence[int]) -> list[SSAValue]:
    """A loop over the elements of ``row`` inserting result ``positions[k]`` of ``function`` (called with
    ``buffers``, the element's indices and the row ``values``) into ``iters[k]``; returns the tensors after it. The
    loop runs over its range variables alone (every element of the row is in bounds): lowering adds no check."""
    indexing_map = element_map(info, lanes)
    chunks = IndexingMap.from_exprs([sym(0), sym(1)], [], indexing_map.range_vars)
    loop = builder.insert(LoopOp([], chunks, list(iters)))
    loop.results[0].name_hint = "row"
    inner = Builder(InsertPoint.at_end(loop.body.block))
    indices = list(inner.insert(ApplyIndexingOp(list(row), list(loop.index_args), indexing_map)).results)
    call = inner.insert(PureCallOp(function.sym_name.data, [*buffers, *indices, *values],
                                   function.function_type.outputs.data))
    call.results[0].name_hint = "pure_call"
    inserted = []
    for position, into in zip(positions, loop.iter_args):
        op = inner.insert(tensor.InsertOp(call.results[position], into, indices))
        op.result.name_hint = "inserted"
        inserted.append(op.result)
    inner.insert(YieldOp(inserted))
    return list(loop.results)


def _output_positions(computation: HloComputation, roots: Sequence[HloInstruction]) -> list[int]:
    """For each output of the fusion, the position of its root among ``roots`` (the root function's results)."""
    root = computation.root
    return [roots.index(r) for r in root.operands] if root.opcode == "tuple" else [0]


__all__ = ["Phase", "element_map", "emit_normalization_fusion", "is_normalization_fusion", "normalization_fusion",
           "output_lanes", "phases", "rows_launch", "stored_value"]
