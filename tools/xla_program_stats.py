"""What XLA:CPU and xlapy make of a JAX program, side by side.

For XLA:CPU (through jax, in this process): the optimised module text, how
many fusions it has in the computations that run as a sequence of operations
(the entry, loop bodies and conditions, branches, called computations; not
the fused computations themselves), by fusion kind, and the byte figures of
``compiled.memory_analysis()``. For xlapy: the figures of
``Executable.summary`` (kernels, library calls, buffer bytes, compile time)
after ``xlapy.compile`` of the module jax lowers the program to.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from xlapy.hlo import HloModule, parse_module


@dataclass(frozen=True)
class XlaProgramStats:
    """XLA:CPU's optimised module and its memory figures (bytes)."""

    optimized_text: str
    fusions: dict[str, int]  # fusion kind (kLoop, kInput, kOutput, kCustom) -> count
    argument_bytes: int
    output_bytes: int
    temp_bytes: int
    alias_bytes: int
    generated_code_bytes: int
    compile_seconds: float

    @property
    def fusion_count(self) -> int:
        return sum(self.fusions.values())

    @property
    def buffer_bytes(self) -> int:
        """Arguments, outputs and temporaries, less what outputs share with arguments: the bytes of the
        buffers the program touches, comparable with xlapy's allocations."""
        return self.argument_bytes + self.output_bytes + self.temp_bytes - self.alias_bytes


@dataclass(frozen=True)
class XlapyProgramStats:
    """What ``xlapy.compile`` made of the lowered program."""

    kernels: int
    library_calls: int
    buffer_bytes: int
    compile_seconds: float


def fused_computations(module: HloModule) -> set[int]:
    """The ids of the computations fusions call, and of those they call in turn (reducers inside fusions)."""
    pending = [instr.fused_computation for c in module.computations for instr in c.instructions
               if instr.opcode == "fusion"]
    seen: set[int] = set()
    while pending:
        computation = pending.pop()
        if id(computation) not in seen:
            seen.add(id(computation))
            pending.extend(called for instr in computation.instructions for called in instr.called_computations)
    return seen


def fusion_counts(module: HloModule) -> dict[str, int]:
    """Fusion instructions by kind, in every computation that is not itself fused."""
    inside_fusions = fused_computations(module)
    counts = Counter(instr.attr("kind", "kLoop") for c in module.computations if id(c) not in inside_fusions
                     for instr in c.instructions if instr.opcode == "fusion")
    return dict(sorted(counts.items()))


def xla_stats(fn: Callable[..., Any], *args: Any) -> XlaProgramStats:
    """Compile ``jax.jit(fn)`` for ``args`` with XLA:CPU and read its optimised module and memory analysis."""
    import jax

    lowered = jax.jit(fn, keep_unused=True).lower(*args)
    start = time.perf_counter()
    compiled = lowered.compile()
    seconds = time.perf_counter() - start
    text = compiled.as_text()
    memory = compiled.memory_analysis()
    return XlaProgramStats(
        optimized_text=text, fusions=fusion_counts(parse_module(text)),
        argument_bytes=memory.argument_size_in_bytes, output_bytes=memory.output_size_in_bytes,
        temp_bytes=memory.temp_size_in_bytes, alias_bytes=memory.alias_size_in_bytes,
        generated_code_bytes=memory.generated_code_size_in_bytes, compile_seconds=seconds)


def xlapy_stats(fn: Callable[..., Any], *args: Any, **compile_options: Any) -> XlapyProgramStats:
    """``xlapy.compile`` the module jax lowers ``fn`` to for ``args``; its summary's figures. Raises what the
    compile raises (``UnimplementedError`` for an op xlapy cannot run yet)."""
    import xlapy
    from xlapy.frontends.jax import from_jax

    executable = xlapy.compile(from_jax(fn, *args), backend="cpu", **compile_options)
    summary = executable.summary
    return XlapyProgramStats(kernels=summary.kernels, library_calls=summary.library_calls,
                             buffer_bytes=summary.buffer_bytes, compile_seconds=summary.compile_seconds)


def describe_fusions(fusions: dict[str, int]) -> str:
    """``3 (2 kLoop, 1 kInput)``, or ``0``."""
    total = sum(fusions.values())
    if not total:
        return "0"
    return f"{total} ({', '.join(f'{n} {kind}' for kind, n in fusions.items())})"


ProgramRow = tuple[str, XlaProgramStats, "XlapyProgramStats | str"]


def program_table_rows(programs: dict[str, tuple[Callable[..., Any], Sequence[Any]]],
                       names: Sequence[str] | None = None) -> list[ProgramRow]:
    """For each program (all by default): XLA:CPU's figures and xlapy's, or the reason xlapy could not compile
    it (the error's message)."""
    from xlapy.errors import XlapyError

    rows: list[ProgramRow] = []
    for name in names or sorted(programs):
        fn, args = programs[name]
        xla = xla_stats(fn, *args)
        try:
            ours: XlapyProgramStats | str = xlapy_stats(fn, *args)
        except XlapyError as error:
            ours = f"{type(error).__name__}: {error}"
        rows.append((name, xla, ours))
    return rows
