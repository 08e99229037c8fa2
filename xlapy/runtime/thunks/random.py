"""The state of XLA's stateful random numbers, as XLA:CPU's ``RngGetAndUpdateStateThunk``
(``xla/backends/cpu/runtime/rng_state_thunk.cc``).

Each ``rng-get-and-update-state`` (which the rng expander puts where an ``rng`` was) becomes a thunk that
keeps a 128-bit counter, starting at XLA:CPU's initial value: a run writes it into the instruction's u64[2]
buffer, low word first, and then advances it by ``delta``. The counter lives in the thunk, so each compiled
executable (and each instruction in it) has its own, shared by the threads that run the executable."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from xlapy.errors import VerifyError
from xlapy.interpreter.random import RNG_STATE_INITIAL_VALUE, rng_state_words
from xlapy.runtime.thunks.base import ExecutionContext, Thunk
from xlapy.runtime.thunks.registry import thunk_rule
from xlapy.shapes import Shape

if TYPE_CHECKING:
    from xlapy.buffers.assignment import BufferSlice
    from xlapy.hlo.ir import HloInstruction
    from xlapy.runtime.thunk_emitter import ThunkEmitter

_STATE_MASK = (1 << 128) - 1


@dataclass(eq=False)
class RngGetAndUpdateStateThunk(Thunk):
    """Writes the counter into ``out`` (u64[2]) and advances it by ``delta``."""

    name: str
    out: BufferSlice
    shape: Shape
    delta: int
    kind: str = field(default="copy", init=False)
    state: int = field(default=RNG_STATE_INITIAL_VALUE, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def run(self, context: ExecutionContext) -> None:
        out = context.array(self.out, self.shape)
        with self._lock:
            state, self.state = self.state, (self.state + self.delta) & _STATE_MASK
        out[...] = rng_state_words(state)


@thunk_rule("rng-get-and-update-state")
def _rng_get_and_update_state(instr: HloInstruction, emitter: ThunkEmitter) -> list[Thunk]:
    try:
        delta = int(instr.attr("delta", 0))
    except ValueError:
        raise VerifyError(f"{instr.name}: delta must be an integer, got {instr.attr('delta')!r}") from None
    return [RngGetAndUpdateStateThunk(instr.name, emitter.slice(instr), instr.shape, delta)]
