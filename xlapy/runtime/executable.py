"""``xlapy.compile``: a whole HLO module for the CPU, in the order XLA:CPU compiles one
(``xla/service/cpu/cpu_compiler.cc``): the HLO pass pipeline, a schedule of every computation that runs as
thunks, buffer assignment, then thunks (generated kernels for loop fusions, library calls, copies and
control flow) over slices of the assigned allocations.

Values live in raw byte allocations in the physical layout of their shapes, so bitcasts are free and kernels
see memory exactly as XLA lays it out. As XLA runs on its caller's buffers, a large argument that already is
its parameter's buffer (a C-contiguous array of the element type, row-major layout, elements aligned) is read
where it is, and a large entry result that has an allocation of its own is computed into memory handed to
the caller (memory of an earlier result when the caller holds nothing of it any more, see
``xlapy.runtime.result_blocks``); other arguments are copied in and other results copied out
(``IN_PLACE_BYTES``). Constants are allocations filled once per executable. The other allocations are made
on the first call and kept for the next ones, with every view of a slice, check of a buffer and prepared
thunk worked out over them (``ExecutionContext.prepared``): a call, and each iteration of a loop in it, then
only does the work, and only what depends on an argument that moved or on new result memory is worked out
again.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from xlapy.buffers.assignment import BufferAllocation, BufferAssignment, BufferSlice, assign_buffers
from xlapy.buffers.liveness import FORWARDING_OPCODES, array_leaves
from xlapy.buffers.schedule import SEQUENCED_CALLERS, schedule_module, sequenced_computations
from xlapy.buffers.sharing import parse_input_output_alias
from xlapy.errors import UnimplementedError, VerifyError, XlapyError
from xlapy.hlo.arguments import check_argument, check_arguments
from xlapy.hlo.ir import HloComputation, HloInstruction, HloModule, require_module
from xlapy.hlo.opcodes import OPCODES
from xlapy.memory import buffer_bytes, check_available_bytes, check_bytes
from xlapy.runtime.result_blocks import ResultBlock
from xlapy.runtime.thunk_emitter import check_runnable_computations, emit_thunks
from xlapy.runtime.thunks.base import (
    ExecutionContext,
    ThunkSequence,
    address_of,
    allocate,
    dtype_of,
    from_buffer,
    is_default_layout,
    to_buffer,
)
from xlapy.runtime.thunks.kernel import KernelThunk
from xlapy.shapes import Shape
from xlapy.shapes.indexing import major_to_minor_permutation
from xlapy.transforms.call_graph import clone_module


@dataclass(frozen=True)
class CompileSummary:
    """What a compilation produced: kernels (generated code), library calls (BLAS, LAPACK, sorts...), the
    bytes of every buffer allocation, and how long it took."""

    kernels: int
    library_calls: int
    buffer_bytes: int
    compile_seconds: float
    module: str = ""

    def __str__(self) -> str:
        return (f"compiled {self.module}: {_count(self.kernels, 'kernel')}, "
                f"{_count(self.library_calls, 'library call')}, {self.buffer_bytes:,} buffer bytes, "
                f"{self.compile_seconds:.2f} s")


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'s' * (number != 1)}"


class Executable:
    """A compiled module; ``executable(*args)`` runs its entry computation and returns numpy arrays (a tuple
    for a tuple result). ``module`` is the module as compiled (after the HLO passes)."""

    def __init__(self, module: HloModule, assignment: BufferAssignment, thunks: ThunkSequence,
                 compile_seconds: float):
        self.module = module
        self.assignment = assignment
        self.thunks = thunks
        self._owners = _allocation_owners(module, assignment)
        # Constants are filled once; the thunks never write their allocations.
        self._constants = {a.index: self._constant_allocation(a) for a in assignment.allocations
                           if a.kind == "constant" and a.constant is not None}
        entry = module.entry
        aliased = {(number, index) for _, number, index in
                   parse_input_output_alias(str(module.attributes.get("input_output_alias") or ""))}
        self._parameters = [_ParameterLeaf.of(assignment, parameter, index, shape, aliased)
                            for parameter in entry.parameters for index, shape in array_leaves(parameter.shape)]
        self._exact = _exact_arguments(entry.parameters)
        handed: set[int] = set()
        self._result = _result_leaves(assignment, entry.root, entry.root.shape, (), handed)
        # Allocations whose bytes each call makes afresh and gives to its caller as (part of) the result.
        self._handed = [(index, assignment.allocations[index].size, self._describe(assignment.allocations[index]))
                        for index in sorted(handed)]
        kernel_thunks = [t for t in thunks.walk() if isinstance(t, KernelThunk)]
        self._kernels = {t.name: t.kernel for t in kernel_thunks}
        # Runs not in use. A list's pop and append are atomic: taking and giving back need no lock (an idle run
        # too many when two calls give back at once is dropped by the next ``_give_back``, or never matters).
        self._idle: list[_Run] = []
        # Prepared runs refer back to their context: the cycle is broken as soon as the executable goes, so
        # that its allocations are freed then rather than at the next garbage collection.
        weakref.finalize(self, _forget_runs, self._idle)
        self.summary = CompileSummary(len(kernel_thunks), sum(t.kind == "library" for t in thunks.walk()),
                                      assignment.total_bytes, compile_seconds, module.name)

    def _constant_allocation(self, allocation: BufferAllocation) -> np.ndarray:
        """The bytes of a constant allocation: each leaf of its constant's literal that lives there."""
        constant = allocation.constant
        data = allocate(allocation.size, f"constant {constant.name}")
        context = ExecutionContext([data if i == allocation.index else None
                                    for i in range(len(self.assignment.allocations))])
        literal = check_argument(constant.literal, constant.shape, f"constant {constant.name}")
        for index, shape in array_leaves(constant.shape):
            piece = self.assignment.slice(constant, index)
            if piece.allocation == allocation.index:
                to_buffer(np.asarray(_element(literal, index)), shape, context.array(piece, shape))
        return data

    @property
    def kernels(self) -> dict[str, object]:
        """The native kernel of each kernel thunk, by the name of the fusion (or lone op) it runs."""
        return dict(self._kernels)

    def __call__(self, *args) -> np.ndarray | tuple:
        # Every argument is checked before anything runs (see xlapy.hlo.arguments); numpy arrays that already
        # are their parameters' arrays, the common case, are recognised without the general rules' work.
        checked = args if _exactly(args, self._exact) else \
            check_arguments(args, self.module.entry.parameters, self.module.name)
        run = self._take_run()
        try:
            return run(self, checked)
        finally:
            self._give_back(run)

    def _take_run(self) -> _Run:
        """A set of allocations (with what was prepared over them) that no other call is using."""
        try:
            return self._idle.pop()
        except IndexError:
            return _Run(self._allocate(), len(self._parameters))

    def _give_back(self, run: _Run) -> None:
        if len(self._idle) < _IDLE_RUNS:
            self._idle.append(run)
        else:
            run.context.forget()

    def _allocate(self) -> list[np.ndarray | None]:
        """A run's allocations: constants shared, the parameters arguments may stand for and the results handed
        over bound by each call, the others made now. Every size is checked against the limit here; the results
        made on each call are checked against the available memory there."""
        handed = {index: what for index, _, what in self._handed}
        bindable = {leaf.allocation for leaf in self._parameters if leaf.bindable}
        allocations = []
        for allocation in self.assignment.allocations:
            constant = self._constants.get(allocation.index)
            if constant is not None:
                allocations.append(constant)
                continue
            if allocation.index in bindable:  # the caller's memory, or made when an argument has to be copied
                allocations.append(None)
                continue
            what = handed.get(allocation.index) or self._describe(allocation)
            check_bytes(allocation.size, what)
            allocations.append(None if allocation.index in handed else allocate(allocation.size, what))
        return allocations

    def _describe(self, allocation: BufferAllocation) -> str:
        owner = self._owners.get(allocation.index)
        if allocation.kind == "parameter":
            return f"the buffer of parameter {allocation.parameter_number}"
        role = "output" if allocation.is_output else "temporary buffer"
        return f"the {role} of {owner.opcode} {owner.name}" if owner is not None else f"the {role} {allocation.index}"


# Sets of allocations kept between calls (each call takes one; concurrent calls make more, dropped afterwards).
_IDLE_RUNS = 2


def _exact_arguments(parameters: list[HloInstruction]) -> tuple[tuple[np.dtype, tuple[int, ...]], ...] | None:
    """The dtype and shape of each parameter's array, when every parameter is an array."""
    if not all(parameter.shape.is_array for parameter in parameters):
        return None
    return tuple((dtype_of(parameter.shape), tuple(parameter.shape.dimensions)) for parameter in parameters)


def _exactly(args: tuple, exact: tuple[tuple[np.dtype, tuple[int, ...]], ...] | None) -> bool:
    """Whether ``args`` are numpy arrays of exactly the dtypes and shapes ``exact`` lists: what
    ``check_arguments`` would return as they are."""
    if exact is None or len(args) != len(exact):
        return False
    for arg, (dtype, dimensions) in zip(args, exact):
        # Arrays of a native dtype share numpy's one object of it: ``is`` skips the comparison's code.
        if type(arg) is not np.ndarray or (arg.dtype is not dtype and arg.dtype != dtype) or arg.shape != dimensions:
            return False
    return True


# Result blocks kept per handed allocation: two, so that a loop assigning each call's result to the variable
# that holds the last one (the last one still alive during the call) alternates between two blocks.
_KEPT_RESULTS = 2


# Arguments and results of at least this many bytes are used where they are; smaller ones are copied, which
# costs less than preparing the thunks that use them over new memory again (a few microseconds each).
IN_PLACE_BYTES = 1 << 18


class _Run:
    """One set of allocations for calls of an executable, with its thunks prepared over it
    (``ExecutionContext.prepared``): made on the first call, reused by the next ones. Allocations hold nothing
    from one call to the next: every call binds (or writes) its arguments, and results are handed over (in
    memory the caller no longer holds anything of) or copied out."""

    def __init__(self, allocations: list[np.ndarray | None], leaves: int):
        # No reference back to the executable: its idle runs must not keep it alive.
        self.context = ExecutionContext(allocations)
        # The run's own buffer of each parameter allocation arguments are copied into (of those an argument may
        # stand for, made the first time one has to be copied), and per parameter leaf copied in, its view of
        # that buffer in the leaf's logical shape.
        self._own: dict[int, np.ndarray] = {index: data for index, data in enumerate(allocations) if data is not None}
        self._destinations: dict[int, np.ndarray] = {}
        # Per parameter leaf, the argument its allocation is bound to (None: it was copied). An array's memory
        # never moves (numpy 2 does not let ``data`` be set, and this reference keeps ``resize`` from moving
        # it), so the same array again, with the same strides, is the same memory already bound: a call that
        # passes the arrays of the one before does no work for them.
        self._bound: list[np.ndarray | None] = [None] * leaves
        # Per allocation handed to the caller, the memory of the last results made there (newest first): used
        # again once the caller has dropped every array of one (``ResultBlock.free``), so that calls in a loop
        # neither allocate nor touch fresh pages.
        self._blocks: dict[int, list[ResultBlock]] = {}
        # Per result leaf copied out (by id), the memory its allocation was bound to and the leaf's view of it.
        self._sources: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def __call__(self, executable: Executable, checked: Sequence) -> np.ndarray | tuple:
        context = self.context
        bound = self._bound
        for position, leaf in enumerate(executable._parameters):
            value = checked[leaf.number]
            if leaf.index:
                value = _element(value, leaf.index)
            if value is bound[position] and value.strides == leaf.strides:
                continue
            address = leaf.caller_address(value)
            if address is not None:
                context.bind(leaf.allocation, value.reshape(-1).view(np.uint8), address)
                bound[position] = value
            else:
                bound[position] = None
                self._copy_in(executable, position, leaf, value)
        handed = {}
        for index, size, what in executable._handed:
            block = handed[index] = self._result_block(index, size, what)
            context.bind(index, block.data, block.address)  # nothing to do when it is bound already
        context.prepared(executable.thunks)()
        return self._read(executable._result, handed)

    def _read(self, node: _ResultLeaf | tuple | None, handed: dict[int, ResultBlock]) -> np.ndarray | tuple:
        """The result ``node`` describes; ``handed`` holds the memory of this call's handed allocations."""
        if node is None:
            return ()  # a token
        if isinstance(node, tuple):
            return tuple(self._read(element, handed) for element in node)
        if node.handed:
            # A plain order of the dimensions is handed over as a strided view of the caller's memory, as XLA
            # leaves results in their layout.
            return handed[node.slice.allocation].hand(node.nbytes, node.dtype, node.major_to_minor, node.order)
        if not node.in_order:
            return from_buffer(self.context.array(node.slice, node.shape), node.shape)
        # The logical view of a result copied out is made once per memory its allocation is bound to: a call
        # copies it, one numpy operation.
        data = self.context.allocations[node.slice.allocation]
        source = self._sources.get(id(node))
        if source is None or source[0] is not data:
            start = node.slice.offset
            view = data[start:start + node.nbytes].view(node.dtype).reshape(node.shape.dimensions)
            source = self._sources[id(node)] = (data, view)
        return source[1].copy()

    def _result_block(self, index: int, size: int, what: str) -> ResultBlock:
        """Memory for handed allocation ``index``: one of the last two made for it that the caller holds nothing
        of, else new memory."""
        kept = self._blocks.get(index)
        if kept is None:
            kept = self._blocks[index] = []
        for block in kept:
            if block.free():
                return block
        check_available_bytes(size, what)
        block = ResultBlock(size, what)
        kept.insert(0, block)
        del kept[_KEPT_RESULTS:]
        return block

    def _copy_in(self, executable: Executable, position: int, leaf: _ParameterLeaf, value: np.ndarray) -> None:
        """Writes the argument ``value`` of parameter leaf ``position`` into the run's own buffer of its
        allocation."""
        own = self._own.get(leaf.allocation)
        if own is None:
            size = executable.assignment.allocations[leaf.allocation].size
            what = f"the buffer of parameter {leaf.number}"
            check_bytes(size, what)
            own = self._own[leaf.allocation] = allocate(size, what)
        self.context.bind(leaf.allocation, own)
        if not leaf.in_order:
            to_buffer(value, leaf.shape, self.context.array(leaf.slice, leaf.shape))
            return
        destination = self._destinations.get(position)
        if destination is None:
            start = leaf.slice.offset
            destination = self._destinations[position] = \
                own[start:start + leaf.nbytes].view(leaf.dtype).reshape(leaf.shape.dimensions)
        destination[...] = value


def _forget_runs(runs: list[_Run]) -> None:
    for run in runs:
        run.context.forget()
    runs.clear()


@dataclass(frozen=True)
class _ParameterLeaf:
    """An array leaf of an entry parameter: where it lives, and whether an argument can be that memory itself
    (``bindable``: its allocation holds only the parameter, which nothing writes, in row-major layout, and is
    worth not copying: ``IN_PLACE_BYTES`` at least)."""

    number: int
    index: tuple[int, ...]
    shape: Shape
    allocation: int
    slice: BufferSlice
    dtype: np.dtype
    nbytes: int
    bindable: bool
    # The strides of the arrays that can be its buffer as they are, and whether its layout is row-major.
    strides: tuple[int, ...]
    in_order: bool

    @staticmethod
    def of(assignment: BufferAssignment, parameter: HloInstruction, index: tuple[int, ...], shape: Shape,
           aliased: set[tuple[int, tuple[int, ...]]]) -> _ParameterLeaf:
        piece = assignment.slice(parameter, index)
        allocation = assignment.allocations[piece.allocation]
        nbytes = buffer_bytes(shape)
        # A result the module's input_output_alias lets live in the parameter's buffer is written there: the
        # caller's array must not be, so it is copied in. (A parameter that merely is a result is read out.)
        written = allocation.is_output and (parameter.parameter_number, index) in aliased
        in_order = is_default_layout(shape)
        bindable = (allocation.kind == "parameter" and not written and piece.offset == 0
                    and allocation.size == nbytes >= IN_PLACE_BYTES and in_order)
        dtype = dtype_of(shape)
        return _ParameterLeaf(parameter.parameter_number, index, shape, piece.allocation, piece, dtype, nbytes,
                              bindable, _row_major_strides(shape.dimensions, dtype.itemsize), in_order)

    def usable(self, value: np.ndarray) -> bool:
        """Whether ``value`` (an array whose address is aligned) can serve as this parameter's buffer as it is."""
        return self.bindable and isinstance(value, np.ndarray) and value.dtype == self.dtype \
            and value.nbytes == self.nbytes and value.flags.c_contiguous

    def caller_address(self, value: np.ndarray) -> int | None:
        """The address of ``value``'s first byte when its bytes can serve as this parameter's buffer as they are,
        else None."""
        if not self.usable(value):
            return None
        address = address_of(value)
        return None if address % self.dtype.alignment else address


def _row_major_strides(dimensions: Sequence[int], itemsize: int) -> tuple[int, ...]:
    """The strides numpy gives a new C-contiguous array of ``dimensions``."""
    strides = []
    step = itemsize
    for size in reversed(dimensions):
        strides.append(step)
        step *= size
    return tuple(reversed(strides))


@dataclass(frozen=True)
class _ResultLeaf:
    """An array of the entry result: read out of ``slice`` (a copy), or, when ``handed``, the memory of its
    allocation itself (the caller's from then on), seen as ``dtype`` elements of ``major_to_minor`` dimensions
    and transposed by ``order`` (None: in order), all worked out once. ``in_order``: its layout is row-major
    (a copy is then of ``nbytes`` bytes of ``dtype`` elements, reshaped)."""

    shape: Shape
    slice: BufferSlice
    handed: bool
    nbytes: int
    dtype: np.dtype
    in_order: bool
    major_to_minor: tuple[int, ...] = ()
    order: tuple[int, ...] | None = None

    @staticmethod
    def of(shape: Shape, piece: BufferSlice, handed: bool) -> _ResultLeaf:
        nbytes, dtype, in_order = buffer_bytes(shape), dtype_of(shape), is_default_layout(shape)
        if not handed:
            return _ResultLeaf(shape, piece, False, nbytes, dtype, in_order)
        permutation = major_to_minor_permutation(shape)
        order = tuple(int(d) for d in np.argsort(permutation))
        return _ResultLeaf(shape, piece, True, nbytes, dtype, in_order, tuple(shape.dimensions[d] for d in permutation),
                           None if order == tuple(range(len(order))) else order)


def _result_leaves(assignment: BufferAssignment, root: HloInstruction, shape: Shape, index: tuple[int, ...],
                   handed: set[int]) -> _ResultLeaf | tuple | None:
    """The entry result's leaves, as nested tuples (None for a token). An allocation of its own (kind "output",
    ``IN_PLACE_BYTES`` at least) holding an array in a plain order of its dimensions is handed to the caller,
    once: a second leaf in the same bytes is a copy, as are results that are parameters or constants (their
    bytes are the caller's or the executable's)."""
    if shape.is_tuple:
        return tuple(_result_leaves(assignment, root, element, (*index, i), handed)
                     for i, element in enumerate(shape.tuple_shapes))
    if not shape.is_array:
        return None
    piece = assignment.slice(root, index)
    allocation = assignment.allocations[piece.allocation]
    hand = (allocation.kind == "output" and piece.offset == 0 and major_to_minor_permutation(shape) is not None
            and allocation.size >= IN_PLACE_BYTES and piece.allocation not in handed)
    if hand:
        handed.add(piece.allocation)
    return _ResultLeaf.of(shape, piece, hand)


def _element(value, index: tuple[int, ...]) -> np.ndarray:
    for i in index:
        value = value[i]
    return value


def _allocation_owners(module: HloModule, assignment: BufferAssignment) -> dict[int, HloInstruction]:
    """The instruction that first defines a value in each allocation (to name it in messages)."""
    owners: dict[int, HloInstruction] = {}
    for computation in sequenced_computations(module):
        for instr in computation.instructions:
            if instr.opcode in FORWARDING_OPCODES:
                continue
            for _, piece in assignment.leaf_slices(instr):
                owners.setdefault(piece.allocation, instr)
    return owners


def compile(module: HloModule, backend: str = "cpu", *, dump_to: str | None = None,
            dump_pass_re: str | None = None, verify: bool = True, run_hlo_passes: bool = True,
            disabled_hlo_passes: Sequence[str] = (), progress: Callable[[str], None] | None = None) -> Executable:
    """Compiles ``module`` for the CPU; the caller's module is left as it is (a copy is compiled).

    The module is verified first (``verify=False`` skips that; the checks that keep the generated code inside
    its buffers run regardless). With ``run_hlo_passes`` the CPU pass pipeline optimises it (skipping the
    passes named in ``disabled_hlo_passes``); without, it runs as given (an XLA:CPU-optimised dump, say), only
    flattened so that a computation control flow runs has one call site.
    ``dump_to`` receives the module after each pass, the kernels' MLIR (stages matching ``dump_pass_re``),
    the optimised module and its buffer assignment. ``progress`` is called with a short description of each
    stage as it starts. An ``UnimplementedError`` names every op that stops the module from running, before
    any kernel is compiled (there is no silent fallback)."""
    started = time.perf_counter()
    require_module(module, "compile")
    if backend != "cpu":
        raise XlapyError(f"unknown backend {backend!r}; xlapy compiles for 'cpu'")
    report = progress if progress is not None else (lambda stage: None)
    if verify:
        from xlapy.hlo.verifier import verify as verify_module

        report("verifying")
        verify_module(module)
    from xlapy.codegen.pipeline import Dumper

    dumper = Dumper.create(dump_to, dump_pass_re)
    if module.entry is None:
        raise VerifyError(f"module {module.name} has no entry computation")
    _refuse_non_hlo_ops(module)
    module = clone_module(module)
    if run_hlo_passes:
        if not verify:
            # The passes read shapes and operands; an unverified module is checked as far as they rely on it.
            check_runnable_computations(module, _control_flow_computations(module))
        report("HLO passes")
        _optimize(module, disabled_hlo_passes, dump_to)
    else:
        # Each computation control flow runs gets one place in memory, so one call site: as the pipeline
        # leaves a module (a no-op on what XLA dumps).
        from xlapy.transforms.flatten_call_graph import FlattenCallGraph

        FlattenCallGraph().run(module)
    computations = sequenced_computations(module)
    check_runnable_computations(module, computations)
    report("scheduling and buffer assignment")
    schedule = schedule_module(module)
    assignment = assign_buffers(module, schedule)
    if dumper is not None:
        _write_dump(dumper.directory / f"{module.name}.after_optimizations.hlo", module.to_text())
        _write_dump(dumper.directory / f"{module.name}.buffer_assignment.txt", str(assignment) + "\n")
    report("thunks")
    thunks = emit_thunks(module, schedule, assignment, dumper, progress)
    return Executable(module, assignment, thunks, time.perf_counter() - started)


def _control_flow_computations(module: HloModule) -> list[HloComputation]:
    """The entry and every computation control flow runs from it (a computation may be called from several
    places before flatten-call-graph has run)."""
    found: dict[int, HloComputation] = {}
    pending = [module.entry]
    while pending:
        computation = pending.pop()
        if id(computation) in found:
            continue
        found[id(computation)] = computation
        pending.extend(callee for instr in computation.instructions if instr.opcode in SEQUENCED_CALLERS
                       for callee in instr.called_computations)
    return list(found.values())


def _optimize(module: HloModule, disabled: Sequence[str], dump_to: str | None) -> None:
    from xlapy.transforms.cpu_pipeline import optimize

    optimize(module, disabled=tuple(disabled), dump_to=dump_to)


def _refuse_non_hlo_ops(module: HloModule) -> None:
    """StableHLO-only forms (``stablehlo.while``, ``sdy.*``, ...) have no HLO meaning the passes and thunks
    know: they are refused, all at once, before anything runs on the module."""
    found = [f"{instr.opcode} ({instr.name})" for computation in module.computations
             for instr in computation.instructions if instr.opcode not in OPCODES]
    if found:
        raise UnimplementedError(f"the CPU backend cannot run {module.name}: {', '.join(found)}; run it with the "
                                 "interpreter (--backend interpreter)")


def _write_dump(path, text: str) -> None:
    try:
        path.write_text(text)
    except OSError as error:
        raise XlapyError(f"cannot write {path}: {error.strerror}") from None
