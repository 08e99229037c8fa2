"""Trip counts of while loops written into their ``backend_config``, as XLA's ``WhileLoopTripCountAnnotator``
(``xla/hlo/transforms/while_loop_trip_count_annotator.cc``), which XLA:CPU runs just before layout assignment so
that its runtime can run a loop's body that many times without evaluating the condition.

A loop whose condition compares a state element with a constant (``i < n`` or ``i <= n``) and whose body adds a
positive constant to that element gets ``known_induction_variable`` (the element's tuple index). When the
element also starts as a constant (``while_loop_simplifier.trip_count``), the loop gets ``known_trip_count`` and,
for a start and bound that are not negative, ``known_init_step``; the ``get-tuple-element``s reading the
element from the loop's result then become the constant it ends at. The config is printed as XLA prints the
``WhileLoopBackendConfig`` proto (JSON, 64-bit integers as strings):

    backend_config={"known_trip_count":{"n":"64"},"known_init_step":{"init":"0","step":"1"},
                    "known_induction_variable":{"tuple_index":"0"}}

Not annotated here: XLA's ``dynamic_variables`` (state elements read as offsets by host-offloading custom calls).
The runtime runs a loop's body without its condition only when it can check the count itself
(``runtime/thunks/control_flow.py``): a count read from a file is a claim, not a fact.
"""

from __future__ import annotations

import json

import numpy as np

from xlapy.hlo.ir import HloInstruction, HloModule, while_condition_and_body
from xlapy.transforms.hlo_pass import HloPass
from xlapy.transforms.hlo_rewrites import non_fusion_non_composite_computations
from xlapy.transforms.while_loop_analysis import (
    induction_bound,
    induction_start,
    induction_step,
    integer_constant,
    trip_count,
)


def induction_variable(loop: HloInstruction) -> int | None:
    """The tuple index of ``loop``'s induction variable (XLA's ``GetLoopInductionVarTupleIdx`` in its common
    case): compared with a constant by the condition, advanced by a positive constant by the body."""
    condition, body = while_condition_and_body(loop)
    bound = induction_bound(condition)
    if bound is None or induction_step(body, bound[0]) is None:
        return None
    return bound[0]


def trip_count_config(loop: HloInstruction) -> dict | None:
    """The ``WhileLoopBackendConfig`` fields XLA would give ``loop``, or None without an induction variable."""
    index = induction_variable(loop)
    if index is None:
        return None
    config: dict = {}
    trips = trip_count(loop)
    if trips is not None:
        config["known_trip_count"] = {"n": str(trips)}
        start, step = _start_and_step(loop, index)
        if trips > 0 and start >= 0:
            config["known_init_step"] = {"init": str(start), "step": str(step)}
    config["known_induction_variable"] = {"tuple_index": str(index)}
    return config


def _start_and_step(loop: HloInstruction, index: int) -> tuple[int, int]:
    _, body = while_condition_and_body(loop)
    initial = induction_start(loop, index)
    start = integer_constant(initial) if initial is not None else None
    step = induction_step(body, index)
    assert start is not None and step is not None  # trip_count found them
    return start, step


def _forward_final_value(loop: HloInstruction, index: int, final: int) -> bool:
    """Replaces the reads of the induction variable from ``loop``'s result by the constant it ends at."""
    reads = [user for user in loop.users if user.opcode == "get-tuple-element" and user.attr("index") == index]
    for read in reads:
        constant = HloInstruction("constant", "constant", read.shape)
        constant.literal = np.asarray(final, dtype=np.int64).astype(read.shape.dtype)  # wraps as the loop did
        read.parent.add_instruction(constant, before=read)
        read.replace_all_uses_with(constant)
    return bool(reads)


class WhileLoopTripCountAnnotator(HloPass):
    """Writes what is known of each while loop's trip count into its ``backend_config``."""

    name = "while-loop-trip-count-annotator"

    def run(self, module: HloModule) -> bool:
        changed = False
        for computation in non_fusion_non_composite_computations(module):
            for loop in [i for i in computation.instructions if i.opcode == "while"]:
                config = trip_count_config(loop)
                if config is None:
                    continue
                text = json.dumps(config, separators=(",", ":"))
                changed |= loop.attr("backend_config") != text
                loop.attributes["backend_config"] = text
                if "known_init_step" in config:
                    start, step = (int(config["known_init_step"][k]) for k in ("init", "step"))
                    final = start + step * int(config["known_trip_count"]["n"])
                    index = int(config["known_induction_variable"]["tuple_index"])
                    changed |= _forward_final_value(loop, index, final)
        return changed
