"""HLO text: parse -> print -> parse -> print is a fixed point, and xlapy
prints a module exactly as XLA's printer does (checked through jaxlib)."""

import pytest

from tests.hlo.jax_programs import PROGRAMS, hlo_texts
from tests.hlo.xla import without_stack_frames, xla_reprint
from xlapy.hlo import parse_module


@pytest.mark.parametrize("stage", ["lowered", "optimized"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_jax_programs(name, stage):
    text = hlo_texts(name)[stage == "optimized"]
    printed = parse_module(text).to_text()
    assert parse_module(printed).to_text() == printed
    xla = xla_reprint(printed)
    if stage == "lowered":
        assert printed == xla
    else:
        assert without_stack_frames(printed) == without_stack_frames(xla)
