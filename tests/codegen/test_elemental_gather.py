"""The loop emitter's gather against the interpreter on gathers of every form (batching, collapsed and offset
dimensions anywhere, any index vector dimension and start index map, starts out of bounds on either side), as
an XLA-optimised module brings them in fusions when the HLO passes do not run."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, assume, given, settings

import xlapy
from tools.compare import assert_same
from tools.random_gather_scatter import gather_texts, index_arguments


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gather_texts(fused=True))
def test_gathers_of_every_form_match_the_interpreter(text: str) -> None:
    module = xlapy.parse_hlo(text)
    # Empty results never reach the emitter: the zero-sized HLO elimination replaces them before fusion.
    assume(module.entry.root.shape.element_count > 0)
    executable = xlapy.compile(module, run_hlo_passes=False)
    for seed in (0, 1):
        arguments = index_arguments(module, seed)
        assert_same(executable(*arguments), xlapy.evaluate(module, *arguments), context=text)


def test_starts_are_clamped_so_the_slice_stays_inside_the_operand() -> None:
    module = xlapy.parse_hlo("""HloModule m
fused {
  operand = f32[5,6] parameter(0)
  indices = s32[4] parameter(1)
  ROOT gather = f32[4,3] gather(operand, indices), offset_dims={1}, collapsed_slice_dims={0},
    start_index_map={1}, index_vector_dim=1, slice_sizes={1,3}
}
ENTRY main {
  operand = f32[5,6] parameter(0)
  indices = s32[4] parameter(1)
  ROOT fusion = f32[4,3] fusion(operand, indices), kind=kLoop, calls=fused
}
""")
    operand = np.arange(30, dtype=np.float32).reshape(5, 6)
    got = xlapy.compile(module, run_hlo_passes=False)(operand, np.array([-7, 0, 2, 9], np.int32))
    # Row 0 (the collapsed dimension starts at 0); columns start at 0, 0, 2 and 3 (6 - 3).
    np.testing.assert_array_equal(got, [[0, 1, 2], [0, 1, 2], [2, 3, 4], [3, 4, 5]])
