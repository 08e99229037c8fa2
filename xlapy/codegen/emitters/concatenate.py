"""The concatenate emitter (XLA's concatenate emitter, ``xla/backends/gpu/codegen/emitters/concatenate.cc``, in a
form for the CPU): one ``xla.loop`` per operand of the hero concatenate, each over that operand's slice of the
output. The loop emitter walks the whole output and chooses the operand of every element with ``scf.if``s (lane
by lane, so a CPU kernel falls back to one element per thread); here each loop writes one operand's slice, whose
position along the concatenated dimension is known from the loop's map, so ``simplify-arith`` folds the choice
away and the slice is read and written as contiguous vectors.

Every loop calls the fusion's root function at output indices, exactly as the loop emitter does (an elementwise
epilogue on the concatenate included), so each element is computed by the same code; only the order in which the
elements are visited differs.

Work split: a thread of a block is one work item; all ``W`` work items of the launch get an equal share of every
operand's slice. Operand ``k`` is cut into ``C_k`` vectors of ``V_k`` elements (``V_k`` a power of two dividing
the slice's rows, and its offset when the concatenated dimension is the minor one, so that the vectors are aligned
in the output), ``W`` is the greatest common divisor of the ``C_k`` (so no loop needs a bounds check) and work
item ``w`` writes the ``C_k / W`` consecutive vectors of operand ``k`` from vector ``w * C_k / W``, in the output's
physical order."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from xdsl.builder import Builder
from xdsl.dialects import func, tensor
from xdsl.dialects.builtin import ModuleOp, StringAttr, SymbolRefAttr
from xdsl.ir import Region
from xdsl.rewriter import InsertPoint

from xlapy.codegen.dialect import LoopOp, PureCallOp, YieldOp
from xlapy.codegen.elemental_rules import CalledFunctions, buffer_arguments, emit_subgraph_function, result_types
from xlapy.codegen.emitters.common import ENTRY_NAME, entry_block, finish_entry, launch_ids
from xlapy.codegen.launch import Device, LaunchDimensions
from xlapy.codegen.partitioner import partition
from xlapy.codegen.types import tensor_type
from xlapy.errors import VerifyError
from xlapy.hlo.ir import HloInstruction
from xlapy.indexing import IndexingMap
from xlapy.indexing.affine import add, const, dim, floordiv, mod, mul, sym
from xlapy.indexing.indexing_map import Variable
from xlapy.indexing.interval import Interval
from xlapy.shapes import ELEMENT_TYPES, Shape
from xlapy.transforms.fusion_hero import find_non_trivial_hero, fusion_kind_of

# Below this many work items (the greatest common divisor of the operands' element counts) the loop emitter keeps
# the fusion: a launch of fewer work items would leave cores idle on a large concatenation.
MIN_WORK_ITEMS = 64


@dataclass(frozen=True)
class OperandSlice:
    """Where operand ``k`` of the concatenate lands in the output: ``offset`` along the concatenated dimension,
    its ``dimensions``, and the split into ``vectors`` of ``vector_size`` elements."""

    offset: int
    dimensions: tuple[int, ...]
    vector_size: int

    @property
    def elements(self) -> int:
        return math.prod(self.dimensions)

    @property
    def vectors(self) -> int:
        return self.elements // self.vector_size


def concatenate_hero(fusion: HloInstruction) -> HloInstruction | None:
    """The concatenate the concatenate emitter writes ``fusion`` around (XLA picks that emitter by
    ``fusion_kind_of``), or None when the loop emitter keeps the fusion: another kind, or operands whose element
    counts share too small a divisor to split the work (``MIN_WORK_ITEMS``)."""
    if fusion.opcode != "fusion" or fusion.fused_computation.root.opcode == "tuple" or fusion.shape.is_tuple:
        return None
    if fusion_kind_of(fusion) != "concatenate":
        return None
    hero = find_non_trivial_hero(fusion.fused_computation.root)
    if hero.shape.dimensions != fusion.shape.dimensions:
        return None
    counts = [math.prod(o.shape.dimensions) for o in hero.operands]
    return hero if math.gcd(*counts) >= MIN_WORK_ITEMS else None


def is_concatenate_fusion(fusion: HloInstruction) -> bool:
    return concatenate_hero(fusion) is not None


def _minor_to_major(shape: Shape) -> tuple[int, ...]:
    rank = len(shape.dimensions)
    return tuple(shape.layout.minor_to_major) if shape.layout is not None else tuple(range(rank - 1, -1, -1))


def operand_slices(hero: HloInstruction, output: Shape, max_lanes: int) -> list[OperandSlice]:
    """The output slice of each operand of ``hero`` with at most ``max_lanes`` lanes per vector; operands without
    elements write nothing and are left out."""
    concatenated = hero.attr("dimensions")[0]
    minor = _minor_to_major(output)[0] if output.dimensions else None
    slices, offset = [], 0
    for operand in hero.operands:
        dims = tuple(operand.shape.dimensions)
        if math.prod(dims):
            row = dims[minor] if minor is not None else 1
            lanes = max_lanes
            while lanes > 1 and (row % lanes or (minor == concatenated and offset % lanes)):
                lanes //= 2
            slices.append(OperandSlice(offset, dims, lanes))
        offset += dims[concatenated]
    return slices


def _launch(slices: Sequence[OperandSlice], device: Device) -> tuple[int, int, int]:
    """Threads per block, blocks, and elements per work item: a block covers about as many elements as the loop
    emitter's (``threads_per_block * max_vector`` of the device)."""
    work_items = math.gcd(*(s.vectors for s in slices))
    per_item = sum(s.elements for s in slices) // work_items
    target = max(1, device.threads_per_block * _lanes(device, 32) // per_item)
    threads = max(t for t in range(1, min(target, work_items) + 1) if work_items % t == 0)
    return threads, work_items // threads, per_item


def _lanes(device: Device, bits: int) -> int:
    """The lanes of a thread's vector for elements computed in ``bits`` bits (as ``loop_launch_dimensions``)."""
    return max(1, min(device.max_vector, device.vector_bytes * 8 // max(32, bits)))


def slice_map(piece: OperandSlice, concatenated: int, output: Shape, threads: int, blocks: int,
              work_items: int) -> IndexingMap:
    """``(th_x, bl_x)[chunk, vector_index] -> (output indices)`` of ``piece``: with ``n = vectors / work_items``,
    block ``bl_x`` writes the ``threads * n`` consecutive vectors from ``bl_x * threads * n`` of the slice in the
    output's physical order, ``n`` rounds in which consecutive threads write consecutive vectors."""
    chunks = piece.vectors // work_items
    vector = add(mul(add(mul(dim(1), const(chunks)), sym(0)), const(threads)), dim(0))
    linear = add(mul(vector, const(piece.vector_size)), sym(1))
    results = [const(0)] * len(piece.dimensions)
    stride = 1
    for d in _minor_to_major(output):
        part = floordiv(linear, const(stride)) if stride > 1 else linear
        size = piece.dimensions[d]
        index = mod(part, const(size)) if stride * size < piece.elements else part
        results[d] = add(index, const(piece.offset)) if d == concatenated and piece.offset else index
        stride *= size
    indexing_map = IndexingMap.from_exprs(
        results,
        [Variable(Interval(0, threads - 1), "th_x"), Variable(Interval(0, blocks - 1), "bl_x")],
        [Variable(Interval(0, chunks - 1), "chunk"), Variable(Interval(0, piece.vector_size - 1), "vector_index")],
    )
    return indexing_map.simplify().sort_summands()


def emit_concatenate_fusion(fusion: HloInstruction, device: Device, slice_indices: Sequence[int] | None = None) \
        -> tuple[ModuleOp, LaunchDimensions]:
    """The MLIR module of a concatenate fusion: ``@main`` with one ``xla.loop`` per operand slice, each calling
    the root subgraph's function, and the subgraphs' functions. The launch's vector size is the number of
    elements a work item writes over all loops."""
    hero = concatenate_hero(fusion)
    if hero is None:
        raise VerifyError(f"fusion {fusion.name} is not a concatenate fusion")
    computation = fusion.fused_computation
    root = computation.root
    output = fusion.shape
    slices = operand_slices(hero, output, _lanes(device, ELEMENT_TYPES[output.element_type].bit_width))
    threads, blocks, per_item = _launch(slices, device)
    launch = LaunchDimensions(threads, blocks, per_item)

    partitioned = partition(computation)
    called = CalledFunctions([ENTRY_NAME, *(s.name for s in partitioned.subgraphs)])
    functions = [emit_subgraph_function(partitioned, s, called) for s in partitioned.subgraphs]
    functions += called.functions
    # One copy of the functions per loop: the inliner inlines functions called once only, and each copy folds to
    # its operand's branch.
    root_position = [s.name for s in partitioned.subgraphs].index(partitioned.root_subgraph.name)
    copies = [functions] + [_renamed_copies(functions, f"_{k}") for k in range(1, len(slices))]

    param_types = [tensor_type(p.shape, p.name) for p in buffer_arguments(partitioned)]
    output_type = tensor_type(output, fusion.name)
    block, params, (result,) = entry_block(param_types, [output_type])
    if len(params) == 1:
        params[0].name_hint = "input"
    builder = Builder(InsertPoint.at_end(block))
    thread_id, block_id = launch_ids(builder, threads, blocks)
    concatenated = hero.attr("dimensions")[0]
    work_items = threads * blocks
    current = result
    for piece, copy in zip(slices, copies):
        root_function = copy[root_position].sym_name.data
        loop = builder.insert(LoopOp([thread_id, block_id], slice_map(piece, concatenated, output, threads, blocks,
                                                                      work_items), [current]))
        loop.results[0].name_hint = "xla_loop"
        body = loop.body.block
        indices = list(body.args[2:2 + len(output.dimensions)])
        inner = Builder(InsertPoint.at_end(body))
        call = inner.insert(PureCallOp(root_function, [*params, *indices], result_types(root)))
        call.results[0].name_hint = "pure_call"
        inserted = inner.insert(tensor.InsertOp(call.results[0], body.args[-1], indices))
        inserted.result.name_hint = "inserted"
        inner.insert(YieldOp([inserted.result]))
        current = loop.results[0]
    builder.insert(func.ReturnOp(current))
    entry = func.FuncOp(ENTRY_NAME, ([*param_types, output_type], [output_type]), Region(block))
    finish_entry(entry, fusion, device, slice_indices)
    return ModuleOp([entry, *(f for copy in copies for f in copy)]), launch


def _renamed_copies(functions: Sequence[func.FuncOp], suffix: str) -> list[func.FuncOp]:
    """Clones of ``functions`` named with ``suffix``, calling each other's clones."""
    names = {f.sym_name.data: f.sym_name.data + suffix for f in functions}
    clones = []
    for function in functions:
        clone = function.clone()
        clone.sym_name = StringAttr(names[function.sym_name.data])
        for op in clone.walk():
            if isinstance(op, (PureCallOp, func.CallOp)) and op.callee.string_value() in names:
                op.callee = SymbolRefAttr(names[op.callee.string_value()])
        clones.append(clone)
    return clones
