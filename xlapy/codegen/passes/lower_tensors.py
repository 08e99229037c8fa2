"""`lower-tensors`: tensors become pointers, tensor accesses become LLVM loads and stores
(as in XLA's docs/emitters.md).

Input: the IR after flattening, vectorization, unrolling and apply-indexing lowering. Every tensor is 1-D
(or 0-D) and lives in a buffer passed to the entry function. Tensors are never created inside a kernel, so
every tensor SSA value — an `scf.for` iter_arg or result, an `scf.if` result, the result of a `tensor.insert`
or `vector.transfer_write` — is a new *version* of exactly one function argument, its root buffer. The pass:

- replaces every tensor-typed function argument by an `!llvm.ptr` argument (the root pointer);
- lowers `tensor.extract` to `arith.index_cast` (index → i64) + `llvm.getelementptr inbounds` + `llvm.load`,
  `tensor.insert` to the same address computation + `llvm.store`; `pred` (i1) and sub-byte integer (i2, i4)
  elements are bytes in memory, so they are loaded as i8 and truncated (`arith.trunci`, `llvm.trunc` for
  vectors) and zero-extended before a store (as ml_dtypes stores them: the value's bits, zeros above);
  complex elements are `!llvm.struct<(f32, f32)>` (`f64` for complex<f64>) in memory, the real part first as in
  numpy's complex arrays: the loaded struct becomes a complex value through `builtin.unrealized_conversion_cast`
  (and the other way before a store), as XLA's lower-tensors does;
- lowers `vector.transfer_read`/`vector.transfer_write` (in-bounds, unmasked, 1-D) to a vector load/store
  at the element address;
- lowers `xla.pure_call` whose operands include tensors to `func.call` with the root pointers;
- lowers `xla.allocate_shared` (the block's shared tile, GPU shared memory) to an `llvm.alloca` of the tile's
  elements in the entry function, and `xla.sync_threads` to the same op without operands or results: an ordering
  point between the phases of the block's threads (see "Shared memory on the CPU" below);
- drops every tensor SSA value: tensor iter_args/results of `scf.for`/`scf.if`, tensor operands of
  `scf.yield`/`func.return`; tensor results of functions disappear (the entry function returns nothing).

Loads and stores carry an explicit `alignment` of one element (of one part for complex numbers, as numpy aligns
them): buffers are only guaranteed element-aligned, and LLVM would otherwise assume the (larger) natural alignment
of a vector type. Loads from a root that is never stored to in the function get the discardable unit attribute
`invariant` (LLVM `!invariant.load`) — in the functions the entry calls too, unless the entry merged arguments: a
function then cannot tell whether a pointer it reads is one the entry writes.

Entry pointer arguments get the LLVM argument attributes `llvm.noalias` (the runtime passes distinct,
non-overlapping buffers) and `llvm.dereferenceable` (the byte size of the tensor; the CPU backend also uses it to
check the buffers it is given).

Duplicate buffers: when the same buffer slice is passed twice (XLA's `merge_pointers_to_same_slice`), the entry
function's tensor arguments carry the discardable argument attribute `xla.slice_index = N`. Arguments with the
same slice index are merged into one pointer argument — the first such argument wins, later ones are removed
from the signature, so the runtime passes each slice once, in the order of the remaining arguments. A merged
argument the entry stores to (an output written over an operand) is read without `invariant`. The entry's merged
pointer gets the discardable unit attribute `xla.aliased`: it stands for an operand as well as an output (what
`nontemporal-stores` needs to know: an in-place update keeps its lines in the cache).

Shared memory on the CPU (XLA's lower_tensors.cc turns `xla_gpu.allocate_shared` into a global of the GPU's
shared address space): a block's threads run one after another on one CPU thread, so the block's shared tile is a
scratch array on that thread's stack, `llvm.alloca` of the tile's element count, reused by every block the CPU
thread runs (the CPU backend hoists it to the kernel's entry). `xla.sync_threads` keeps no tensors: its results
are versions of its operands' buffers, and what remains is the barrier itself, at the top level of the entry
function (or of a loop there, which every thread of the block runs alike), where the CPU backend splits the loop
over the block's threads into phases (every thread runs the code before it, then every thread the code after
it). Before and after, for a 32x33 f32 tile written by one loop and read by the next:

    %shmem = xla.allocate_shared : tensor<1056xf32>
    %written = scf.for ... iter_args(%t = %shmem) -> (tensor<1056xf32>) { ... tensor.insert %v into %t[...] }
    %synced = xla.sync_threads %written : tensor<1056xf32>
    ... tensor.extract %synced[%i] : tensor<1056xf32>

    %c1056 = arith.constant 1056 : i64
    %shmem = llvm.alloca %c1056 x f32 {alignment = 64 : i64} : (i64) -> !llvm.ptr
    scf.for ... { ... llvm.store %v, %p {alignment = 4 : i64} : f32, !llvm.ptr }
    xla.sync_threads
    ... llvm.load %q {alignment = 4 : i64} : !llvm.ptr -> f32

Loads from the tile are never `invariant` (every block writes it again), and the tile is not passed to functions
(`xla.pure_call`): a function may not assume that memory stays unchanged across the barrier.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects import arith, builtin, func, llvm, scf, tensor, vector
from xdsl.dialects.builtin import (
    ArrayAttr,
    ComplexType,
    DictionaryAttr,
    FunctionType,
    IntegerAttr,
    IntegerType,
    TensorType,
    UnitAttr,
    UnrealizedConversionCastOp,
    VectorType,
    i8,
    i64,
)
from xdsl.ir import Attribute, Block, BlockArgument, Operation, Region, SSAValue
from xdsl.passes import ModulePass

from xlapy.codegen.dialect import AllocateSharedOp, SyncThreadsOp
from xlapy.codegen.mlir_text import verify_op
from xlapy.errors import UnimplementedError, VerifyError

SLICE_INDEX_ATTR = "xla.slice_index"
INVARIANT_ATTR = "invariant"
NOALIAS_ATTR = "llvm.noalias"
DEREFERENCEABLE_ATTR = "llvm.dereferenceable"
# On an entry pointer that stands for several tensor arguments of one slice (see "Duplicate buffers").
ALIASED_ATTR = "xla.aliased"
PURE_CALL = "xla.pure_call"
# Shared tiles start on a cache line: a row of the tile is then one vector access at most two lines wide.
SHARED_ALIGNMENT = 64


def _is_tensor(value: SSAValue) -> bool:
    return isinstance(value.type, TensorType)


def _is_pred(element: Attribute) -> bool:
    """pred and the sub-byte integers: narrower than the byte each takes in memory."""
    return isinstance(element, IntegerType) and element.width.data < 8


def _memory_type(element: Attribute) -> Attribute:
    """The type of one element in memory: pred and sub-byte integers are a byte (their bits zero-extended), a
    complex number the struct of its real and imaginary parts."""
    if isinstance(element, ComplexType):
        return llvm.LLVMStructType.from_type_list([element.element_type, element.element_type])
    return i8 if _is_pred(element) else element


def _scalar_byte_width(element: Attribute) -> int:
    width = getattr(element, "bitwidth", None)
    if width is None:
        width = element.width.data  # IntegerType
    return max(1, width // 8)


def _byte_width(element: Attribute) -> int:
    if isinstance(element, ComplexType):
        return 2 * _scalar_byte_width(element.element_type)
    return _scalar_byte_width(_memory_type(element))


def _alignment(element: Attribute) -> int:
    """Buffers are aligned to their elements' scalars (the parts of complex numbers, as numpy aligns them)."""
    if isinstance(element, ComplexType):
        return _scalar_byte_width(element.element_type)
    return _byte_width(element)


def _byte_size(tensor_type: TensorType) -> int:
    count = 1
    for dim in tensor_type.get_shape():
        count *= dim
    return count * _byte_width(tensor_type.element_type)


@dataclass
class _FunctionState:
    """Per-function lowering state."""

    roots: dict[SSAValue, SSAValue] = field(default_factory=dict)  # tensor value -> root pointer
    stored: set[SSAValue] = field(default_factory=set)  # roots written by the function
    loads: list[tuple[llvm.LoadOp, SSAValue]] = field(default_factory=list)
    shared: set[SSAValue] = field(default_factory=set)  # roots that are a block's shared tile
    function_block: Block | None = None  # the function's top-level block
    is_entry: bool = False
    offsets: dict[SSAValue, SSAValue] = field(default_factory=dict)  # index value -> its i64 cast

    def root(self, value: SSAValue, user: Operation) -> SSAValue:
        if value not in self.roots:
            raise UnimplementedError(f"lower-tensors: {user.name} uses a tensor that is not derived from a buffer")
        return self.roots[value]

    def offset(self, index: SSAValue) -> SSAValue:
        """`index` as i64, cast once, right after its definition (so the cast dominates every use)."""
        if index not in self.offsets:
            cast = arith.IndexCastOp(index, i64)
            if isinstance(index, BlockArgument):
                block = index.block
                if block.first_op is None:
                    block.add_op(cast)
                else:
                    block.insert_op_before(cast, block.first_op)
            else:
                index.owner.parent_block().insert_op_after(cast, index.owner)
            self.offsets[index] = cast.result
        return self.offsets[index]


def _address(
    state: _FunctionState, op: Operation, root: SSAValue, indices: Sequence[SSAValue], element: Attribute
) -> list[Operation]:
    """Ops computing the address of element `indices` (one index: tensors are flat) of `root`."""
    if len(indices) == 0:
        return []
    if len(indices) != 1:
        raise UnimplementedError(f"lower-tensors: {op.name} on a tensor of rank {len(indices)} (flatten first)")
    gep = llvm.GEPOp(
        root, [llvm.GEP_USE_SSA_VAL], _memory_type(element), ssa_indices=[state.offset(indices[0])], inbounds=True
    )
    return [gep]


def _pointer(root: SSAValue, ops: list[Operation]) -> SSAValue:
    return ops[-1].results[0] if ops else root


def _load(
    state: _FunctionState, op: Operation, root: SSAValue, indices: Sequence[SSAValue], result_type: Attribute
) -> SSAValue:
    """Load `result_type` (scalar or vector) at `indices` before `op`; returns the loaded value."""
    element = result_type.element_type if isinstance(result_type, VectorType) else result_type
    ops = _address(state, op, root, indices, element)
    memory_type = (
        VectorType(_memory_type(element), result_type.get_shape())
        if isinstance(result_type, VectorType)
        else _memory_type(element)
    )
    load = llvm.LoadOp(_pointer(root, ops), memory_type, alignment=_alignment(element))
    state.loads.append((load, root))
    ops.append(load)
    if isinstance(element, ComplexType):
        if isinstance(result_type, VectorType):
            raise UnimplementedError(f"lower-tensors: vectors of {element}")
        ops.append(UnrealizedConversionCastOp(operands=[load.dereferenced_value], result_types=[element]))
    if _is_pred(element):
        ops.append(
            llvm.TruncOp(load.dereferenced_value, result_type)
            if isinstance(result_type, VectorType)
            else arith.TruncIOp(load.dereferenced_value, result_type)
        )
    op.parent_block().insert_ops_before(ops, op)
    return ops[-1].results[0]


def _store(state: _FunctionState, op: Operation, value: SSAValue, root: SSAValue, indices: Sequence[SSAValue]) -> None:
    value_type = value.type
    element = value_type.element_type if isinstance(value_type, VectorType) else value_type
    ops = _address(state, op, root, indices, element)
    pointer = _pointer(root, ops)
    if isinstance(element, ComplexType):
        if isinstance(value_type, VectorType):
            raise UnimplementedError(f"lower-tensors: vectors of {element}")
        ops.append(UnrealizedConversionCastOp(operands=[value], result_types=[_memory_type(element)]))
        value = ops[-1].results[0]
    if _is_pred(element):
        if isinstance(value_type, VectorType):
            ops.append(llvm.ZExtOp(value, VectorType(i8, value_type.get_shape())))
        else:
            ops.append(arith.ExtUIOp(value, i8))
        value = ops[-1].results[0]
    ops.append(llvm.StoreOp(value, pointer, alignment=_alignment(element)))
    state.stored.add(root)
    op.parent_block().insert_ops_before(ops, op)


def _check_transfer(op: vector.TransferReadOp | vector.TransferWriteOp) -> None:
    if op.mask is not None:
        raise UnimplementedError(f"lower-tensors: masked {op.name}")
    if not all(bool(b.value.data) for b in op.in_bounds.data):
        raise UnimplementedError(f"lower-tensors: {op.name} that may be out of bounds")
    vector_type = op.result.type if isinstance(op, vector.TransferReadOp) else op.vector.type
    if vector_type.get_num_dims() != 1:
        raise UnimplementedError(f"lower-tensors: {op.name} of {vector_type} (only 1-D vectors)")
    results = op.permutation_map.data.results
    if len(op.indices) != 1 or len(results) != 1 or str(results[0]) != "d0":
        raise UnimplementedError(f"lower-tensors: {op.name} on a non-flat tensor or with a permutation")


# --- per-op lowerings (called in program order; nested regions handled by the walker) -------------------------


def _lower_extract(state: _FunctionState, op: tensor.ExtractOp) -> None:
    loaded = _load(state, op, state.root(op.tensor, op), op.indices, op.result.type)
    op.result.replace_all_uses_with(loaded)
    op.detach()
    op.erase()


def _lower_insert(state: _FunctionState, op: tensor.InsertOp) -> None:
    root = state.root(op.dest, op)
    _store(state, op, op.scalar, root, op.indices)
    state.roots[op.result] = root


def _lower_transfer_read(state: _FunctionState, op: vector.TransferReadOp) -> None:
    _check_transfer(op)
    loaded = _load(state, op, state.root(op.source, op), op.indices, op.result.type)
    op.result.replace_all_uses_with(loaded)
    op.detach()
    op.erase()


def _lower_transfer_write(state: _FunctionState, op: vector.TransferWriteOp) -> None:
    _check_transfer(op)
    root = state.root(op.source, op)
    _store(state, op, op.vector, root, op.indices)
    if op.result is not None:
        state.roots[op.result] = root


def _lower_allocate_shared(state: _FunctionState, op: AllocateSharedOp) -> None:
    if not state.is_entry or op.parent_block() is not state.function_block:
        raise UnimplementedError(f"lower-tensors: {op.name} outside of the top level of the entry function")
    tensor_type = op.result.type
    count = arith.ConstantOp(IntegerAttr(_byte_size(tensor_type) // _byte_width(tensor_type.element_type), i64))
    alloca = llvm.AllocaOp(count, _memory_type(tensor_type.element_type), alignment=SHARED_ALIGNMENT)
    if op.result.name_hint is not None:
        alloca.res.name_hint = op.result.name_hint
    op.parent_block().insert_ops_before([count, alloca], op)
    state.roots[op.result] = alloca.res
    state.shared.add(alloca.res)
    state.stored.add(alloca.res)  # its loads are never invariant


def _lower_sync_threads(state: _FunctionState, op: SyncThreadsOp) -> None:
    if not is_block_level(op, state.function_block):
        raise UnimplementedError(f"lower-tensors: {op.name} outside of the top level of the function and of the "
                                 "loops there")
    for operand, result in zip(op.tensors, op.synced):
        state.roots[result] = state.root(operand, op)


def is_block_level(op: Operation, function_block: Block) -> bool:
    """Whether ``op`` is where every thread of a block runs it alike: at the top level of the entry function, or
    at the top level of the body of an ``scf.for`` there (a loop all the block's threads run, as the rows of the
    reduction emitter's column-tile form)."""
    block = op.parent_block()
    if block is function_block:
        return True
    loop = block.parent_op() if block is not None else None
    return isinstance(loop, scf.ForOp) and loop.parent_block() is function_block


def _lower_pure_call(state: _FunctionState, op: Operation) -> None:
    if any(_is_tensor(r) for r in op.results):
        raise UnimplementedError(f"lower-tensors: {op.name} returning a tensor")
    operands = [state.root(v, op) if _is_tensor(v) else v for v in op.operands]
    if any(v in state.shared for v in operands):
        raise UnimplementedError(f"lower-tensors: {op.name} passed a shared tile (pass the elements it reads)")
    callee = op.properties.get("callee", op.attributes.get("callee"))
    call = func.CallOp(callee, operands, [r.type for r in op.results])
    op.parent_block().insert_op_before(call, op)
    for old, new in zip(op.results, call.results):
        old.replace_all_uses_with(new)
    op.detach()
    op.erase()


def _enter_for(state: _FunctionState, op: scf.ForOp) -> None:
    """Before the body: a tensor iter_arg is its init's buffer."""
    for init, arg in zip(op.iter_args, op.body.block.args[1:]):
        if _is_tensor(init):
            state.roots[arg] = state.root(init, op)


def _yielded_roots(state: _FunctionState, region: Region, user: Operation) -> list[SSAValue | None]:
    terminator = region.block.last_op
    return [state.root(v, user) if _is_tensor(v) else None for v in terminator.operands]


def _lower_for(state: _FunctionState, op: scf.ForOp) -> None:
    for init, result, yielded in zip(op.iter_args, op.results, _yielded_roots(state, op.body, op)):
        if _is_tensor(init):
            if yielded is not state.roots[init]:
                raise VerifyError("lower-tensors: scf.for yields a tensor of another buffer than its init")
            state.roots[result] = state.roots[init]


def _lower_if(state: _FunctionState, op: scf.IfOp) -> None:
    then_roots = _yielded_roots(state, op.true_region, op)
    else_roots = _yielded_roots(state, op.false_region, op) if op.false_region.blocks else then_roots
    for result, then_root, else_root in zip(op.results, then_roots, else_roots):
        if then_root is not else_root:
            raise VerifyError("lower-tensors: the branches of scf.if yield tensors of different buffers")
        if then_root is not None:
            state.roots[result] = then_root


def _pass_through(state: _FunctionState, op: Operation) -> None:
    """Terminators: their tensor operands are dropped by `_strip_block`."""


Lowering = Callable[[_FunctionState, Operation], None]
# Run before an op's regions are visited.
_ENTER: dict[type[Operation] | str, Lowering] = {scf.ForOp: _enter_for}
# Run after an op's regions were visited; an op with tensor operands or results needs an entry.
_LOWERINGS: dict[type[Operation] | str, Lowering] = {
    tensor.ExtractOp: _lower_extract,
    tensor.InsertOp: _lower_insert,
    vector.TransferReadOp: _lower_transfer_read,
    vector.TransferWriteOp: _lower_transfer_write,
    PURE_CALL: _lower_pure_call,
    AllocateSharedOp: _lower_allocate_shared,
    SyncThreadsOp: _lower_sync_threads,
    scf.ForOp: _lower_for,
    scf.IfOp: _lower_if,
    scf.YieldOp: _pass_through,
    func.ReturnOp: _pass_through,
}


def _lookup(table: dict[type[Operation] | str, Lowering], op: Operation) -> Lowering | None:
    return table.get(type(op)) or table.get(op.name)


def _lower_block(state: _FunctionState, block: Block) -> None:
    for op in list(block.ops):
        if (enter := _lookup(_ENTER, op)) is not None:
            enter(state, op)
        for region in op.regions:
            for inner in region.blocks:
                _lower_block(state, inner)
        lowering = _lookup(_LOWERINGS, op)
        if lowering is not None:
            lowering(state, op)
        elif any(_is_tensor(v) for v in (*op.operands, *op.results)):
            raise UnimplementedError(f"lower-tensors: {op.name} on tensors")


# --- dropping the tensor SSA values ---------------------------------------------------------------------------


def _without_tensors(values) -> list[SSAValue]:
    return [v for v in values if not _is_tensor(v)]


def _strip_for(op: scf.ForOp) -> None:
    if not any(_is_tensor(v) for v in op.iter_args):
        return
    kept = [i for i, init in enumerate(op.iter_args) if not _is_tensor(init)]
    body = op.detach_region(op.body)
    block = body.block
    for arg in [a for a in block.args[1:] if _is_tensor(a)]:
        block.erase_arg(arg)
    new = scf.ForOp(op.lb, op.ub, op.step, [op.iter_args[i] for i in kept], body)
    new.attributes |= op.attributes
    op.parent_block().insert_op_before(new, op)
    for position, i in enumerate(kept):
        op.results[i].replace_all_uses_with(new.results[position])
    op.detach()
    op.erase()


def _strip_if(op: scf.IfOp) -> None:
    if not any(_is_tensor(r) for r in op.results):
        return
    kept = [r for r in op.results if not _is_tensor(r)]
    then_region, else_region = op.true_region, op.false_region
    op.detach_region(then_region)
    op.detach_region(else_region)
    new = scf.IfOp(op.cond, [r.type for r in kept], then_region, else_region)
    new.attributes |= op.attributes
    op.parent_block().insert_op_before(new, op)
    for old, replacement in zip(kept, new.results):
        old.replace_all_uses_with(replacement)
    op.detach()
    op.erase()


def _strip_terminator(op: Operation) -> None:
    if not any(_is_tensor(v) for v in op.operands):
        return
    new = op.create(operands=_without_tensors(op.operands), attributes=dict(op.attributes))
    op.parent_block().insert_op_before(new, op)
    op.detach()
    op.erase()


def _strip_sync_threads(op: Operation) -> None:
    """The barrier stays, without the tensors it ordered."""
    if op.operands or op.results:
        op.parent_block().insert_op_before(SyncThreadsOp([]), op)
        op.detach()
        op.erase()


def _erase_tensor_producer(op: Operation) -> None:
    """tensor.insert, vector.transfer_write: their stores are emitted, their tensor results are unused by now."""
    if any(_is_tensor(r) for r in op.results):
        op.detach()
        op.erase()


_STRIP: dict[type[Operation], Callable[[Operation], None]] = {
    scf.ForOp: _strip_for,
    scf.IfOp: _strip_if,
    scf.YieldOp: _strip_terminator,
    func.ReturnOp: _strip_terminator,
    SyncThreadsOp: _strip_sync_threads,
}


def _strip_block(block: Block) -> None:
    """Remove tensor values, last op first: every use of a tensor value is then gone before its definition."""
    for op in reversed(list(block.ops)):
        for region in op.regions:
            for inner in region.blocks:
                _strip_block(inner)
        _STRIP.get(type(op), _erase_tensor_producer)(op)


# --- functions ------------------------------------------------------------------------------------------------


def _arg_attrs(function: func.FuncOp) -> list[dict[str, Attribute]]:
    if function.arg_attrs is None:
        return [{} for _ in function.args]
    return [dict(d.data) for d in function.arg_attrs.data]


def _pointer_arguments(
    function: func.FuncOp, state: _FunctionState, is_entry: bool
) -> tuple[list[BlockArgument], list[dict[str, Attribute]], bool]:
    """Adds a pointer argument before each tensor argument (one per slice) and records it as the tensor's root.
    Returns the tensor arguments (to erase once unused), the attributes of the arguments that stay, and whether
    any two tensor arguments were merged."""
    block = function.body.block
    attributes: list[dict[str, Attribute]] = []
    by_slice: dict[int, tuple[SSAValue, dict[str, Attribute]]] = {}  # slice index -> its pointer, attributes
    tensor_args = []
    merged = False
    for arg, attrs in zip(list(block.args), _arg_attrs(function)):
        if not _is_tensor(arg):
            attributes.append(attrs)
            continue
        tensor_args.append(arg)
        size = IntegerAttr(_byte_size(arg.type), i64)
        slice_attr = attrs.get(SLICE_INDEX_ATTR)
        slice_index = slice_attr.value.data if isinstance(slice_attr, IntegerAttr) else None
        if slice_index in by_slice:  # the same buffer again: the first argument of the slice wins
            pointer, first_attrs = by_slice[slice_index]
            state.roots[arg] = pointer
            merged = True
            if is_entry:
                first_attrs[ALIASED_ATTR] = UnitAttr()
                if size.value.data > first_attrs[DEREFERENCEABLE_ATTR].value.data:
                    first_attrs[DEREFERENCEABLE_ATTR] = size
            continue
        pointer = block.insert_arg(llvm.LLVMPointerType(), arg.index)
        pointer.name_hint = arg.name_hint
        state.roots[arg] = pointer
        if is_entry:
            attrs = {**attrs, NOALIAS_ATTR: UnitAttr(), DEREFERENCEABLE_ATTR: size}
        if slice_index is not None:
            by_slice[slice_index] = (pointer, attrs)
        attributes.append(attrs)
    return tensor_args, attributes, merged


def _lower_function(function: func.FuncOp, is_entry: bool, invariant_loads: bool = True) -> bool:
    """Lowers ``function``; loads from a root it never stores to are ``invariant`` when ``invariant_loads``.
    Returns whether tensor arguments were merged (same ``xla.slice_index``)."""
    if function.body.blocks.first is None:  # declaration
        if any(isinstance(t, TensorType) for t in function.function_type.inputs.data):
            raise UnimplementedError(f"lower-tensors: declaration @{function.sym_name.data} takes tensors")
        return False
    block = function.body.block
    state = _FunctionState(function_block=block, is_entry=is_entry)
    tensor_args, new_attrs, merged = _pointer_arguments(function, state, is_entry)

    _lower_block(state, block)
    _strip_block(block)
    for arg in tensor_args:
        block.erase_arg(arg)
    if invariant_loads:
        for load, root in state.loads:
            if root not in state.stored:
                load.attributes[INVARIANT_ATTR] = UnitAttr()

    outputs = function.function_type.outputs.data
    kept = [i for i, t in enumerate(outputs) if not isinstance(t, TensorType)]
    function.function_type = FunctionType.from_lists([a.type for a in block.args], [outputs[i] for i in kept])
    function.arg_attrs = ArrayAttr([DictionaryAttr(a) for a in new_attrs]) if any(new_attrs) else None
    if function.res_attrs is not None:
        res_attrs = [function.res_attrs.data[i] for i in kept]
        function.res_attrs = ArrayAttr(res_attrs) if res_attrs else None
    return merged


@dataclass(frozen=True)
class LowerTensorsPass(ModulePass):
    """Tensor arguments → `!llvm.ptr`; tensor.extract/insert and vector transfers → LLVM loads/stores."""

    name: ClassVar[str] = "lower-tensors"
    entry: str = "main"

    def apply(self, ctx: Context, op: builtin.ModuleOp) -> None:
        functions = [f for f in op.walk() if isinstance(f, func.FuncOp)]
        entries = [f for f in functions if f.sym_name.data == self.entry]
        # The entry first: whether it merged pointers decides what the functions it calls may assume.
        merged = any([_lower_function(f, is_entry=True) for f in entries])
        for function in functions:
            if function.sym_name.data != self.entry:
                _lower_function(function, is_entry=False, invariant_loads=not merged)
        verify_op(op)


__all__ = ["ALIASED_ATTR", "DEREFERENCEABLE_ATTR", "INVARIANT_ATTR", "NOALIAS_ATTR", "SLICE_INDEX_ATTR",
           "LowerTensorsPass"]
