"""XLA's own HLO parser and printer, through jaxlib (private API; kept here only)."""

from __future__ import annotations

import re

from jaxlib import _hlo


def xla_reprint(text: str) -> str:
    """Parse ``text`` with XLA and print it back with ``HloModule::ToString``
    (large constants in full, as xlapy prints them)."""
    options = _hlo.HloPrintOptions()
    options.print_large_constants = True
    return _hlo.hlo_module_from_text(text).to_string(options)


def without_stack_frames(text: str) -> str:
    """The computations of a module text; XLA renumbers stack frames when it prints."""
    body = text.split("\n\n\n")[-1] if "\nFileNames" in text else text.split("\n\n", 1)[1]
    return re.sub(r"stack_frame_id=\d+", "stack_frame_id=_", body)
