"""The pass interface and the pipeline that runs passes in order.

A pass rewrites an ``HloModule`` in place and says whether it changed it, as
XLA's ``HloPassInterface::Run`` does (``xla/hlo/pass/hlo_pass_interface.h``).
A pipeline (``xla/hlo/pass/hlo_pass_pipeline.h``) runs its passes in order,
skipping the disabled ones, optionally verifying the module after each pass and
writing it to a dump folder after each pass that changed it, numbered and
named after the pass, as ``--xla_dump_hlo_pass_re`` does.
"""

from __future__ import annotations

import itertools
import re
from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import ClassVar

from xlapy.errors import VerifyError
from xlapy.hlo.ir import HloModule
from xlapy.hlo.verifier import verify


class HloPass(ABC):
    """One rewrite of a module. Subclasses set ``name`` (XLA's spelling, e.g.
    ``"dce"``, ``"tuple-simplifier"``) and implement ``run``."""

    name: ClassVar[str]

    @abstractmethod
    def run(self, module: HloModule) -> bool:
        """Rewrites ``module`` in place; returns whether anything changed."""

    def __call__(self, module: HloModule) -> HloModule:
        """Runs the pass and returns the (same, rewritten) module."""
        self.run(module)
        return module

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class HloPassFix(HloPass):
    """Runs ``inner`` until it changes nothing (at most ``max_iterations``
    times), as XLA's ``HloPassFix`` does."""

    def __init__(self, inner: HloPass, max_iterations: int = 25) -> None:
        self.inner = inner
        self.max_iterations = max_iterations
        self.name = inner.name  # type: ignore[misc]

    def run(self, module: HloModule) -> bool:
        changed = False
        for _ in range(self.max_iterations):
            if not self.inner.run(module):
                break
            changed = True
        return changed


def _file_part(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


class HloPassPipeline(HloPass):
    """Passes run in order. ``disabled`` names passes to skip (XLA's
    ``--xla_disable_hlo_passes``); with ``verify_each`` the module is verified
    after every pass that changed it, and a failure names the pass; with
    ``dump_to`` the module's text is written before the first pass and after
    every pass that changed it, as ``NNNN.<pipeline>.<pass>.hlo``.

    A pipeline run as a pass of another (alone or inside ``HloPassFix``) takes
    on the outer one's disabled passes, verification and dump folder, and
    numbers its dumps in the same sequence, as XLA's nested pipelines share the
    module's debug options and dump step counter."""

    def __init__(self, name: str, passes: Sequence[HloPass], *, disabled: Iterable[str] = (),
                 verify_each: bool = False, dump_to: str | Path | None = None) -> None:
        self.name = name  # type: ignore[misc]
        self.passes = list(passes)
        self.disabled = frozenset(disabled)
        self.verify_each = verify_each
        self.dump_to = Path(dump_to) if dump_to is not None else None
        self._dump_numbers = itertools.count()
        self._nested = False

    def _dump(self, module: HloModule, stage: str) -> None:
        if self.dump_to is None:
            return
        self.dump_to.mkdir(parents=True, exist_ok=True)
        path = self.dump_to / f"{next(self._dump_numbers):04d}.{_file_part(self.name)}.{_file_part(stage)}.hlo"
        path.write_text(module.to_text())

    def _adopt(self, hlo_pass: HloPass) -> bool:
        """Hands this pipeline's settings to ``hlo_pass`` if it is a pipeline;
        returns whether it is."""
        nested = hlo_pass.inner if isinstance(hlo_pass, HloPassFix) else hlo_pass
        if not isinstance(nested, HloPassPipeline):
            return False
        nested.disabled = nested.disabled | self.disabled
        nested.verify_each = nested.verify_each or self.verify_each
        if self.dump_to is not None:
            nested.dump_to, nested._dump_numbers = self.dump_to, self._dump_numbers
        nested._nested = True
        return True

    def run(self, module: HloModule) -> bool:
        changed = False
        if not self._nested:
            self._dump(module, "before")
        for hlo_pass in self.passes:
            if hlo_pass.name in self.disabled:
                continue
            is_pipeline = self._adopt(hlo_pass)
            if not hlo_pass.run(module):
                continue
            changed = True
            if is_pipeline:  # verified and dumped after each of its own passes
                continue
            if self.verify_each:
                try:
                    verify(module)
                except VerifyError as error:
                    raise VerifyError(f"after HLO pass {hlo_pass.name}: {error}") from error
            self._dump(module, f"after_{hlo_pass.name}")
        return changed
