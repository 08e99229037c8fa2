"""``custom-call`` as library calls, by target: XLA:CPU's ``TopK`` and the CPU library calls JAX emits
(``lapack_<t><routine>_ffi`` with ``t`` one of s, d, c, z, and ``tridiagonal_solve_perturbed_ffi``: the
kernels of ``jaxlib/cpu/lapack_kernels.cc`` and ``jaxlib/tridiagonal_solve_perturbed.h``).

Which routines there are, what they compute and how their calls are checked is
``xlapy.interpreter.lapack``, shared with the interpreter; a thunk here reads its operands' logical arrays
from their slices (the column-major layouts JAX asks for make a matrix slice the Fortran-ordered array
LAPACK takes), runs the computation and writes each result to its slice. Anything else is refused at
compile time.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from xlapy.interpreter.lapack import LibraryCall, library_call
from xlapy.runtime.thunks.base import ExecutionContext, Thunk
from xlapy.runtime.thunks.library import check_layout, read, result_shapes, write
from xlapy.runtime.thunks.registry import thunk_rule
from xlapy.runtime.thunks.top_k import top_k_custom_call_thunk
from xlapy.shapes import Shape

if TYPE_CHECKING:
    from xlapy.buffers.assignment import BufferSlice
    from xlapy.hlo.ir import HloInstruction
    from xlapy.runtime.thunk_emitter import ThunkEmitter


@dataclass
class LapackThunk(Thunk):
    """One library custom call (LAPACK, BLAS or jaxlib's own) over the slices of its operands and results."""

    name: str
    call: LibraryCall
    operands: list[tuple[BufferSlice, Shape]]
    results: list[tuple[BufferSlice, Shape]]
    kind: str = "library"

    def run(self, context: ExecutionContext) -> None:
        values = [read(context, s, shape) for s, shape in self.operands]
        outputs = self.call.run(values, [shape for _, shape in self.results])
        for (s, shape), value in zip(self.results, outputs):
            write(context, s, shape, value)


def _lapack_thunk(instr: HloInstruction, emitter: ThunkEmitter) -> list[Thunk]:
    call = library_call(instr)
    shapes = result_shapes(instr)
    for shape in [*(o.shape for o in instr.operands), *shapes]:
        check_layout(instr, shape)
    operands = [(emitter.slice(o), o.shape) for o in instr.operands]
    results = [(emitter.slice(instr, (i,) if instr.shape.is_tuple else ()), s) for i, s in enumerate(shapes)]
    return [LapackThunk(instr.name, call, operands, results)]


# Targets with their own thunk builder; every other target goes through ``_lapack_thunk``, which refuses
# the ones that are not library calls.
CUSTOM_CALL_THUNKS: dict[str, Callable[[HloInstruction, ThunkEmitter], list[Thunk]]] = {
    "TopK": top_k_custom_call_thunk,
}


@thunk_rule("custom-call")
def _custom_call(instr: HloInstruction, emitter: ThunkEmitter) -> list[Thunk]:
    target = instr.attr("custom_call_target")
    builder = CUSTOM_CALL_THUNKS.get(target)
    if builder is not None:
        return builder(instr, emitter)
    return _lapack_thunk(instr, emitter)
