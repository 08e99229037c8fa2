"""Instruction attributes print in XLA's order whatever order the text (or a
pass) gave them: each case below is checked against XLA's own printer
(through jaxlib) with its attributes shuffled."""

from __future__ import annotations

import functools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.hlo.xla import without_stack_frames, xla_reprint
from xlapy.hlo import parse_module
from xlapy.hlo.attribute_order import COMMON, attribute_order, attribute_rank, own_attributes
from xlapy.hlo.attributes import Verbatim
from xlapy.hlo.ir import HloComputation, HloInstruction, HloModule
from xlapy.hlo.opcodes import OPCODES
from xlapy.shapes import parse_shape

_COMPUTATIONS = """
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ge {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT g = pred[] compare(a, b), direction=GE
}

negate4 {
  p = f32[4] parameter(0)
  ROOT n = f32[4] negate(p)
}

sine4 {
  p = f32[4] parameter(0)
  ROOT s = f32[4] sine(p)
}

exp4 {
  p = f32[4] parameter(0)
  ROOT e = f32[4] exponential(p)
}

loop_cond {
  p = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}

sine_negate4 {
  p = f32[4] parameter(0)
  n = f32[4] negate(p)
  ROOT s = f32[4] sine(n)
}

loop_body {
  p = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = f32[4] get-tuple-element(p), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  y = f32[4] negate(x)
  ROOT t = (s32[], f32[4]) tuple(j, y)
}
"""

# Attributes every instruction may have, in canonical values (XLA normalises
# some values: sorted frontend attributes, tuple shardings per element).
_SHARDING = "sharding={replicated}"
_FRONTEND = 'frontend_attributes={a="1",b="x y"}'
_CONTROL = "control-predecessors={%p0}"
_STATISTICS = "statistics={visualizing_index=1,stat-1=33}"
_ORIGIN = 'origin={{"x"}}'
_METADATA = 'metadata={op_type="t" op_name="jit(f)/t" source_file="f.py" source_line=7}'
_BACKEND = 'backend_config={"key":1}'
_COMMON = [_SHARDING, _FRONTEND, _CONTROL, _STATISTICS, _ORIGIN, _METADATA, _BACKEND]

# name -> (entry lines before the root, the root without attributes, the
# attributes of the root in XLA's order). p0 is always the entry's first
# parameter, f32[4], for control predecessors.
_P0 = "p0 = f32[4] parameter(0)"
CASES: dict[str, tuple[str, str, list[str]]] = {
    "dot": (
        f"{_P0}\n a = f32[2,4,8] parameter(1)\n b = f32[2,8,4] parameter(2)",
        "f32[2,4,4] dot(a, b)",
        ["lhs_batch_dims={0}", "lhs_contracting_dims={2}", "rhs_batch_dims={0}", "rhs_contracting_dims={1}",
         "operand_precision={high,highest}", "algorithm=dot_f32_f32_f32", *_COMMON]),
    "ragged-dot": (
        f"{_P0}\n a = f32[4,8] parameter(1)\n b = f32[2,8,4] parameter(2)\n g = s64[2] parameter(3)",
        "f32[4,4] ragged-dot(a, b, g)",
        ["lhs_contracting_dims={1}", "rhs_contracting_dims={1}", "lhs_ragged_dims={0}", "rhs_group_dims={0}",
         "operand_precision={high,high}", *_COMMON]),
    "convolution": (
        f"{_P0}\n x = f32[2,6,6,4] parameter(1)\n w = f32[3,3,2,4] parameter(2)",
        "f32[2,3,3,4] convolution(x, w)",
        ["window={size=3x3 stride=2x2 pad=1_1x1_1 lhs_dilate=1x2 rhs_dilate=2x1 rhs_reversal=0x1}",
         "dim_labels=b01f_01io->b01f", "feature_group_count=2", "batch_group_count=2", "convolution_kind=fprop",
         "operand_precision={high,default}", "sparsity_config={lhs={sparsity=1x2 dimension=0 stride=0}}",
         *_COMMON]),
    "gather": (
        f"{_P0}\n x = f32[2,5,6] parameter(1)\n i = s32[2,3,2] parameter(2)",
        "f32[2,3,6] gather(x, i)",
        ["offset_dims={2}", "collapsed_slice_dims={1}", "start_index_map={1}", "operand_batching_dims={0}",
         "start_indices_batching_dims={0}", "index_vector_dim=2", "slice_sizes={1,1,6}", "indices_are_sorted=true",
         *_COMMON]),
    "scatter": (
        f"{_P0}\n x = f32[2,5] parameter(1)\n i = s32[2,3,1] parameter(2)\n u = f32[2,3] parameter(3)",
        "f32[2,5] scatter(x, i, u)",
        ["update_window_dims={}", "inserted_window_dims={1}", "scatter_dims_to_operand_dims={1}",
         "input_batching_dims={0}", "scatter_indices_batching_dims={0}", "index_vector_dim=2",
         "indices_are_sorted=true", "unique_indices=true", "to_apply=%add", *_COMMON]),
    "reduce": (
        f"{_P0}\n x = f32[4,8] parameter(1)\n c = f32[] constant(0)",
        "f32[8] reduce(x, c)",
        ["dimensions={0}", "to_apply=%add", *_COMMON]),
    "reduce-window": (
        f"{_P0}\n x = f32[4,8] parameter(1)\n c = f32[] constant(0)",
        "f32[2,4] reduce-window(x, c)",
        ["window={size=2x2 stride=2x2}", "to_apply=%add", *_COMMON]),
    "select-and-scatter": (
        f"{_P0}\n x = f32[4,8] parameter(1)\n s = f32[2,4] parameter(2)\n c = f32[] constant(0)",
        "f32[4,8] select-and-scatter(x, s, c)",
        ["window={size=2x2 stride=2x2}", "select=%ge", "scatter=%add", *_COMMON]),
    "sort": (
        f"{_P0}\n x = f32[4,8] parameter(1)",
        "f32[4,8] sort(x)",
        ["dimensions={1}", "is_stable=true", "to_apply=%ge", *_COMMON]),
    "map": (
        f"{_P0}\n x = f32[4] parameter(1)",
        "f32[4] map(p0, x)",
        ["dimensions={0}", "to_apply=%add", *_COMMON]),
    "while": (
        f"{_P0}\n i = s32[] constant(0)\n t = (s32[], f32[4]) tuple(i, p0)",
        "(s32[], f32[4]) while(t)",
        ["condition=%loop_cond", "body=%loop_body", "sharding={{replicated}, {replicated}}", _FRONTEND, _CONTROL,
         _STATISTICS, 'origin={({"x"}, {"y"})}', _METADATA, 'backend_config={"known_trip_count":{"n":"3"}}']),
    "conditional-pred": (
        f"{_P0}\n c = pred[] parameter(1)",
        "f32[4] conditional(c, p0, p0)",
        ["true_computation=%negate4", "false_computation=%sine4", *_COMMON]),
    "conditional-index": (
        f"{_P0}\n c = s32[] parameter(1)",
        "f32[4] conditional(c, p0, p0, p0)",
        ["branch_computations={%negate4, %sine4, %exp4}", *_COMMON]),
    "call": (
        _P0,
        "f32[4] call(p0)",
        ["to_apply=%negate4", "is_composite=true", _SHARDING,
         'frontend_attributes={composite.attributes={n = 1 : i32},composite.name="foo.bar",composite.version="1"}',
         _CONTROL, _STATISTICS, _ORIGIN, _METADATA, _BACKEND]),
    "fusion": (
        f"{_P0}\n q = f32[4] parameter(1)",
        "f32[4] fusion(q)",
        ["kind=kLoop", "output_to_operand_aliasing={{}: (0, {})}", "calls=%exp4", *_COMMON]),
    "custom-call": (
        f"{_P0}\n x = f32[2,6,6,4] parameter(1)\n w = f32[3,3,4,4] parameter(2)",
        "f32[2,3,3,4] custom-call(x, w)",
        ["window={size=3x3 stride=2x2}", "dim_labels=b01f_01io->b01f", "feature_group_count=2",
         "batch_group_count=2", "operand_precision={high,high}", "padding_type=PADDING_SAME",
         "custom_call_target=\"my_conv\"",
         "operand_layout_constraints={f32[2,6,6,4]{3,2,1,0}, f32[3,3,4,4]{0,1,2,3}}",
         "custom_call_has_side_effect=true", "output_to_operand_aliasing={{}: (0, {})}",
         "schedule=SCHEDULE_LATEST", "api_version=API_VERSION_STATUS_RETURNING", *_COMMON]),
    "custom-call-literal": (
        _P0,
        "f32[4] custom-call(p0)",
        ["custom_call_target=\"with_literal\"", "literal=s32[2]{0} {1, 2}",
         "called_computations={%negate4, %sine4}", *_COMMON]),
    "all-reduce": (
        _P0,
        "f32[4] all-reduce(p0)",
        ["channel_id=1", "replica_groups={{0,1}}", "constrain_layout=true", "use_global_device_ids=true",
         "to_apply=%add", *_COMMON]),
    "all-reduce-start": (
        _P0,
        "f32[4] all-reduce-start(p0)",
        ["channel_id=1", "replica_groups=[1,2]<=[2]", "use_global_device_ids=true", "to_apply=%add", *_COMMON]),
    "all-gather": (
        _P0,
        "f32[8] all-gather(p0)",
        ["channel_id=2", "replica_groups={{0,1}}", "constrain_layout=true", "dimensions={0}",
         "use_global_device_ids=true", *_COMMON]),
    "all-gather-start": (
        _P0,
        "(f32[4], f32[8]) all-gather-start(p0)",
        ["channel_id=2", "replica_groups={{0,1}}", "dimensions={0}", "use_global_device_ids=true",
         "sharding={{replicated}, {replicated}}", _FRONTEND, _CONTROL, _STATISTICS, _METADATA, _BACKEND]),
    "reduce-scatter": (
        _P0,
        "f32[2] reduce-scatter(p0)",
        ["channel_id=3", "replica_groups={{0,1}}", "constrain_layout=true", "use_global_device_ids=true",
         "dimensions={0}", "to_apply=%add", *_COMMON]),
    "reduce-scatter-start": (
        _P0,
        "((f32[4]), f32[2]) reduce-scatter-start(p0)",
        ["channel_id=3", "replica_groups={{0,1}}", "dimensions={0}",
         "to_apply=%add", "sharding={{replicated}, {replicated}}", _FRONTEND, _CONTROL, _METADATA, _BACKEND]),
    "all-to-all": (
        _P0,
        "f32[4] all-to-all(p0)",
        ["channel_id=4", "replica_groups={{0,1}}", "constrain_layout=true", "dimensions={0}", *_COMMON]),
    "ragged-all-to-all": (
        f"{_P0}\n o = f32[4] parameter(1)\n s = s64[2] parameter(2)",
        "f32[4] ragged-all-to-all(p0, o, s, s, s, s)",
        ["channel_id=5", "replica_groups={{0,1}}", *_COMMON]),
    "collective-broadcast": (
        _P0,
        "f32[4] collective-broadcast(p0)",
        ["channel_id=6", "replica_groups={{0,1}}", *_COMMON]),
    "collective-permute": (
        _P0,
        "f32[4] collective-permute(p0)",
        ["channel_id=7", "source_target_pairs={{0,1},{1,0}}", *_COMMON]),
    "collective-permute-start": (
        _P0,
        "(f32[4], f32[4]) collective-permute-start(p0)",
        ["channel_id=7", "source_target_pairs={{0,1},{1,0}}", "sharding={{replicated}, {replicated}}", _FRONTEND,
         _CONTROL, _STATISTICS, _METADATA, _BACKEND]),
    "async-start": (
        _P0,
        "((f32[4]), f32[4], s32[]) async-start(p0)",
        ["calls=%sine_negate4", "sharding={{replicated}, {replicated}, {replicated}}", _FRONTEND, _CONTROL,
         _STATISTICS, _METADATA, _BACKEND]),
    "send-done": (
        f"{_P0}\n tok = token[] after-all()\n s = (f32[4], u32[], token[]) send(p0, tok), channel_id=8",
        "token[] send-done(s)",
        ["channel_id=8", "is_host_transfer=true", _FRONTEND, _CONTROL, _STATISTICS, _METADATA, _BACKEND]),
    "domain": (
        _P0,
        "f32[4] domain(p0)",
        ['domain={kind="sharding", entry={maximal device=0}, exit={replicated}}', _FRONTEND, _CONTROL,
         _STATISTICS, _ORIGIN, _METADATA, _BACKEND]),
    "constant": (_P0, "f32[2] constant({1, 2})", _COMMON),
    "tuple": (
        _P0,
        "(f32[4], f32[4]) tuple(p0, p0)",
        ["sharding={{replicated}, {maximal device=0}}", _FRONTEND, _CONTROL, _STATISTICS, 'origin={({"x"}, {"y"})}',
         _METADATA, _BACKEND]),
    "send": (
        f"{_P0}\n tok = token[] after-all()",
        "(f32[4], u32[], token[]) send(p0, tok)",
        ["channel_id=8", "is_host_transfer=true", _FRONTEND, _CONTROL, _STATISTICS, _METADATA, _BACKEND]),
    "recv": (
        f"{_P0}\n tok = token[] after-all()",
        "(f32[4], u32[], token[]) recv(tok)",
        ["channel_id=9", "is_host_transfer=true", _FRONTEND, _CONTROL, _STATISTICS, _METADATA, _BACKEND]),
    "slice": (
        f"{_P0}\n x = f32[4,8] parameter(1)",
        "f32[2,4] slice(x)",
        ["slice={[0:2:1], [0:8:2]}", *_COMMON]),
    "pad": (
        f"{_P0}\n c = f32[] constant(0)",
        "f32[9] pad(p0, c)",
        ["padding=1_1_1", *_COMMON]),
    "dynamic-slice": (
        f"{_P0}\n i = s32[] parameter(1)",
        "f32[2] dynamic-slice(p0, i)",
        ["dynamic_slice_sizes={2}", *_COMMON]),
    "iota": (_P0, "s32[4,8] iota()", ["iota_dimension=1", *_COMMON]),
    "broadcast": (_P0, "f32[4,3] broadcast(p0)", ["dimensions={0}", *_COMMON]),
    "transpose": (f"{_P0}\n x = f32[4,8] parameter(1)", "f32[8,4] transpose(x)", ["dimensions={1,0}", *_COMMON]),
    "concatenate": (_P0, "f32[8] concatenate(p0, p0)", ["dimensions={0}", *_COMMON]),
    "compare": (
        f"{_P0}\n x = f32[4] parameter(1)",
        "pred[4] compare(p0, x)",
        ["direction=LT", "type=TOTALORDER", *_COMMON]),
    "rng": (
        f"{_P0}\n a = f32[] constant(0)\n b = f32[] constant(1)",
        "f32[4] rng(a, b)",
        ["distribution=rng_uniform", *_COMMON]),
    "rng-bit-generator": (
        f"{_P0}\n s = u64[2] parameter(1)",
        "(u64[2], u32[4]) rng-bit-generator(s)",
        ["algorithm=rng_philox", "sharding={{replicated}, {replicated}}", _FRONTEND, _CONTROL, _STATISTICS,
         _METADATA, _BACKEND]),
    "reduce-precision": (_P0, "f32[4] reduce-precision(p0)", ["exponent_bits=5", "mantissa_bits=10", *_COMMON]),
    "bitcast-convert": (_P0, "s32[4] bitcast-convert(p0)", _COMMON),
    "exponential": (
        _P0,
        "f32[4] exponential(p0)",
        [_SHARDING, _FRONTEND, _CONTROL, _STATISTICS, "result_accuracy={tolerance={atol=0.5,rtol=0,ulps=2}}",
         _ORIGIN, _METADATA, _BACKEND]),
    "topk": (
        f"{_P0}\n x = f32[3,8] parameter(1)",
        "(f32[3,2], s32[3,2]) topk(x)",
        ["k=2", "largest=true", "sharding={{replicated}, {replicated}}", _FRONTEND, _CONTROL, _STATISTICS,
         _METADATA, _BACKEND]),
    "fft": (
        f"{_P0}\n x = c64[8,4] parameter(1)",
        "c64[8,4] fft(x)",
        ["fft_type=FFT", "fft_length={4}", *_COMMON]),
    "batch-norm-training": (
        f"{_P0}\n x = f32[2,4] parameter(1)",
        "(f32[2,4], f32[4], f32[4]) batch-norm-training(x, p0, p0)",
        ["epsilon=0.001", "feature_index=1", _FRONTEND, _CONTROL, _STATISTICS, _METADATA, _BACKEND]),
    "triangular-solve": (
        f"{_P0}\n a = f32[4,4] parameter(1)\n b = f32[4,3] parameter(2)",
        "f32[4,3] triangular-solve(a, b)",
        ["left_side=true", "lower=true", "unit_diagonal=true", "transpose_a=TRANSPOSE", *_COMMON]),
    "cholesky": (f"{_P0}\n a = f32[4,4] parameter(1)", "f32[4,4] cholesky(a)", ["lower=true", *_COMMON]),
    "get-tuple-element": (
        f"{_P0}\n t = (f32[4], f32[4]) tuple(p0, p0)",
        "f32[4] get-tuple-element(t)",
        ["index=1", *_COMMON]),
    "reshape": (
        f"{_P0}\n x = f32[4,8] parameter(1)",
        "f32[32] reshape(x)",
        ["inferred_dimension=0", *_COMMON]),
    "parameter": (
        "",
        "f32[4] parameter(0)",
        ["parameter_replication={true}", _SHARDING, _FRONTEND, _STATISTICS, _ORIGIN, _METADATA, _BACKEND]),
    "outfeed": (
        f"{_P0}\n tok = token[] after-all()",
        "token[] outfeed(p0, tok)",
        ["outfeed_shape=f32[4]{0}", 'outfeed_config="cfg"', _FRONTEND, _CONTROL, _STATISTICS, _METADATA,
         _BACKEND]),
    "infeed": (
        f"{_P0}\n tok = token[] after-all()",
        "(f32[4], token[]) infeed(tok)",
        ['infeed_config="cfg"', _FRONTEND, _CONTROL, _STATISTICS, _METADATA, _BACKEND]),
    "copy-start": (
        _P0,
        "(f32[4], f32[4], u32[]) copy-start(p0)",
        ["cross_program_prefetch_index=0", _FRONTEND, _CONTROL, _STATISTICS, _METADATA, _BACKEND]),
    "get-dimension-size": (_P0, "s32[] get-dimension-size(p0)", ["dimensions={0}", *_COMMON]),
    "set-dimension-size": (
        f"{_P0}\n n = s32[] parameter(1)",
        "f32[<=4] set-dimension-size(p0, n)",
        ["dimensions={0}", *_COMMON]),
    "rng-get-and-update-state": (_P0, "u64[2] rng-get-and-update-state()", ["delta=4", *_COMMON]),
}


def _module(case: str, attributes: list[str]) -> str:
    setup, root, _ = CASES[case]
    lines = "".join(f"  {line.strip()}\n" for line in setup.splitlines() if line.strip())
    attrs = "".join(f", {a}" for a in attributes)
    return f"HloModule m\n{_COMPUTATIONS}\nENTRY main {{\n{lines}  ROOT r = {root}{attrs}\n}}\n"


@functools.cache
def _xla_text(case: str) -> tuple[str, str]:
    """XLA's print of ``case`` split around its root's attributes (which XLA
    prints exactly as the case lists them)."""
    text = xla_reprint(_module(case, CASES[case][2]))
    attributes = "".join(f", {a}" for a in CASES[case][2])
    end_of_root = text.index("\n", text.index("ROOT %r = "))
    assert text[:end_of_root].endswith(attributes), text[:end_of_root]
    return text[:end_of_root - len(attributes)], text[end_of_root:]


def _with_attributes(case: str, attributes: list[str]) -> str:
    """XLA's text of ``case`` with the root's attributes in the given order."""
    head, tail = _xla_text(case)
    return head + "".join(f", {a}" for a in attributes) + tail


def _assert_prints_as_xla(text: str) -> None:
    assert without_stack_frames(parse_module(text).to_text()) == without_stack_frames(xla_reprint(text))


@pytest.mark.parametrize("case", sorted(CASES))
def test_xla_order_is_kept(case):
    _assert_prints_as_xla(_with_attributes(case, CASES[case][2]))


@pytest.mark.parametrize("case", sorted(CASES))
def test_reversed_order_prints_as_xla(case):
    _assert_prints_as_xla(_with_attributes(case, CASES[case][2][::-1]))


@pytest.mark.parametrize("case", sorted(CASES))
def test_hand_written_text_prints_in_xlas_order(case):
    # Names without `%`, shapes without layouts (which xlapy keeps, so the
    # text is not XLA's), attributes reversed: XLA's order still, and the
    # table knows every attribute XLA prints.
    text = _module(case, CASES[case][2][::-1])
    printed = parse_module(text).to_text()
    root = printed[printed.index("ROOT %r = "):].split("\n")[0]
    assert root.endswith("".join(f", {a}" for a in CASES[case][2]))
    rank = attribute_rank(parse_module(text).entry.root.opcode)
    assert all(a.split("=")[0] in rank for a in CASES[case][2])


_SHUFFLED = st.sampled_from(sorted(CASES)).flatmap(lambda c: st.tuples(st.just(c), st.permutations(CASES[c][2])))


# A bounded budget in the default run, a larger one with the slow tests.
@settings(max_examples=60, deadline=None)
@given(_SHUFFLED)
def test_shuffled_order_prints_as_xla(case_and_attributes):
    case, attributes = case_and_attributes
    _assert_prints_as_xla(_with_attributes(case, list(attributes)))


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(_SHUFFLED)
def test_shuffled_order_prints_as_xla_many(case_and_attributes):
    case, attributes = case_and_attributes
    _assert_prints_as_xla(_with_attributes(case, list(attributes)))


def _root_line(text: str) -> str:
    """The entry's root instruction (the entry is printed last)."""
    return text[text.rindex("ROOT "):].split("\n")[0]


def test_unknown_attributes_follow_the_known_ones_in_their_order():
    text = """HloModule m

ENTRY main {
  p = f32[4] parameter(0)
  ROOT n = f32[4] negate(p), zeta={1}, metadata={op_name="x"}, alpha="a", sharding={replicated}, mid=3
}
"""
    assert isinstance(parse_module(text).entry.root.attributes["zeta"], Verbatim)
    assert _root_line(parse_module(text).to_text()).endswith(
        'negate(%p), sharding={replicated}, metadata={op_name="x"}, zeta={1}, alpha="a", mid=3')


def test_attributes_of_another_opcode_are_unknown_on_this_one():
    # XLA knows `dimensions`, but not on a negate: it goes after the known ones.
    text = ('HloModule m\n\nENTRY main {\n  p = f32[4] parameter(0)\n'
            '  ROOT n = f32[4] negate(p), dimensions={0}, backend_config="b", sharding={replicated}\n}\n')
    assert _root_line(parse_module(text).to_text()).endswith(
        'negate(%p), sharding={replicated}, backend_config="b", dimensions={0}')


def test_default_values_are_still_left_out():
    text = ("HloModule m\n\nENTRY main {\n  x = f32[1,4,4,1]{3,2,1,0} parameter(0)\n"
            "  ROOT c = f32[1,4,4,1]{3,2,1,0} convolution(x, x), feature_group_count=1, "
            "dim_labels=b01f_01io->b01f, window={size=4x4 pad=0_3x0_3}, batch_group_count=1\n}\n")
    assert _root_line(parse_module(text).to_text()).endswith(
        "convolution(%x, %x), window={size=4x4 pad=0_3x0_3}, dim_labels=b01f_01io->b01f")
    _assert_prints_as_xla(text)


def test_instructions_built_by_a_pass_print_in_xlas_order():
    module = HloModule("m")
    entry = HloComputation("main")
    module.add_computation(entry, entry=True)
    p = entry.add_instruction(HloInstruction("p", "parameter", parse_shape("f32[4,8]{1,0}")))
    q = entry.add_instruction(HloInstruction("q", "parameter", parse_shape("f32[8,4]{1,0}")))
    p.parameter_number, q.parameter_number = 0, 1
    attributes = {"backend_config": '{"x":1}', "rhs_contracting_dims": (0,), "metadata": Verbatim('{op_name="d"}'),
                  "lhs_contracting_dims": (1,)}
    dot = entry.add_instruction(HloInstruction("d", "dot", parse_shape("f32[4,4]{1,0}"), [p, q], attributes))
    q.add_control_dependency_to(dot)
    entry.root = dot
    assert _root_line(module.to_text()) == (
        'ROOT %d = f32[4,4]{1,0} dot(%p, %q), lhs_contracting_dims={1}, rhs_contracting_dims={0}, '
        'control-predecessors={%q}, metadata={op_name="d"}, backend_config={"x":1}')
    _assert_prints_as_xla(module.to_text())


def test_every_opcode_ends_with_the_common_attributes():
    for opcode in OPCODES:
        order = attribute_order(opcode)
        assert order[len(order) - len(COMMON):] == COMMON
        assert len(set(order)) == len(order), opcode


def test_async_thread_comes_before_the_wrapped_ops_attributes():
    # The order XLA prints; not compared with XLA's text, whose `%add` then
    # ends with `, execution_thread="side"`, which xlapy does not read.
    text = """HloModule m

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  p = f32[4]{0} parameter(0)
  ROOT r = ((f32[4]{0}), f32[2]{0}) reduce-scatter-start(p), backend_config={"x":1}, metadata={op_name="m"}, \
to_apply=add, dimensions={0}, replica_groups={{0,1}}, channel_id=1, async_execution_thread="side"
}
"""
    assert _root_line(parse_module(text).to_text()).endswith(
        'reduce-scatter-start(%p), async_execution_thread="side", channel_id=1, replica_groups={{0,1}}, '
        'dimensions={0}, to_apply=%add, metadata={op_name="m"}, backend_config={"x":1}')


def test_async_wrapped_ops_take_the_wrapped_opcodes_attributes():
    assert own_attributes("reduce-scatter-start") == ("async_execution_thread", *own_attributes("reduce-scatter"))
    assert own_attributes("all-gather-start") == own_attributes("all-gather")
    assert own_attributes("reduce-scatter-done") == ()
    assert own_attributes("send-done") == ("channel_id", "is_host_transfer")
