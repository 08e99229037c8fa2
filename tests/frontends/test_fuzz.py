"""Random edits of valid modules: the frontend either reads the result (and
can print it) or reports an XlapyError (ParseError, VerifyError), never
another exception."""

from __future__ import annotations

import pathlib

from tests.text_edits import (
    check_drawn,
    edit_budgets,
    edited_text,
    refused_or_round_trips,
)
from xlapy.frontends.stablehlo import parse_module, print_module, split_input_file

DATA = pathlib.Path(__file__).parent / "data"
SOURCES = [text for text, _ in split_input_file((DATA / "hand_written.mlir").read_text()) if "func" in text]
SOURCES += [text for text, _ in split_input_file((DATA / "hand_written.generic.mlir").read_text())][:4]
SOURCES += [(DATA / "jax_argmax.mlir").read_text(), (DATA / "jax_shard_map.mlir").read_text()]
TOKENS = ["%", "#", "@", "<", ">", "{", "}", "(", ")", "[", "]", ",", ":", "=", "?", '"', "x", "0", "-1", "->",
          "%0", "%arg0", "tensor<f32>", "dense<", "sdy.sharding = ", "#sdy.sharding<@mesh, [{}]>", "^bb0", "\n",
          "stablehlo.return", "func.func", "0x", "1.5e", "loc(", "\\", " ", "()", "largest = false", "k = ",
          "stablehlo.optimization_barrier", 'mhlo.sharding = "{replicated}"', "split_count = 3 : i64"]


@edit_budgets(100, 400)
def test_edits_parse_or_raise_xlapy_errors(budget: int) -> None:
    check_drawn(budget, edited_text(SOURCES, TOKENS, max_span=12), refused_or_round_trips(parse_module, print_module))
