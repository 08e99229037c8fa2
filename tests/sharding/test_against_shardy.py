"""xlapy against real Shardy: every program of the reference catalogue
(``shardy_reference.py``) is compiled by JAX/XLA, whose Shardy pipeline dumps
the module before and after propagation. xlapy reads the "before" module and
must reproduce, text for text,

* the sharding rule Shardy printed on each op (``sdy.sharding_rule``), and
* after Shardy's pipeline, the sharding of every function argument and result
  and of every op result, as Shardy printed them in the "after" module, with
  the same ops (constraints turned into reshards, sharding groups removed).
  XLA dumps that module before the pipeline's last step (explicit reshards),
  so xlapy's pipeline stops there too (``run_pipeline(module,
  explicit_reshards=False)``);
* after the whole pipeline, the same of XLA's next dump (after the explicit
  reshards: ``sdy.reshard`` ops around differently sharded concatenates).

The facts are read from both printed modules by the same small reader
(``expected.py``), which does not use xlapy's frontend. Needs jax; a failure
to compile the catalogue is an error of every test here, and only
``XLAPY_NO_JAX=1`` skips them (``shardy_oracle.py``)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.sharding.expected import Values, op_rules, value_shardings
from tests.sharding.shardy_oracle import require_shardy
from tests.sharding.shardy_reference import PROGRAMS, reference_corpus
from xlapy.frontends.stablehlo import parse_module, print_module
from xlapy.hlo import HloComputation, HloInstruction, HloModule
from xlapy.hlo.mlir_structure import encodes_mlir_structure
from xlapy.sharding.propagation.pipeline import run_pipeline
from xlapy.sharding.rules import op_sharding_rule

require_shardy()

_MISSING = "<no such value>"


@pytest.fixture(scope="session")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, str, str]]:
    return reference_corpus(tmp_path_factory.mktemp("shardy_reference"))


def _program(corpus: dict[str, tuple[str, str, str]], name: str) -> tuple[str, str]:
    """The module before and after Shardy's propagation."""
    assert name in corpus, f"no dump for {name}: {sorted(corpus)}"
    return corpus[name][:2]


# -- the reader on a fixed text ---------------------------------------------------

_SAMPLE = """module @m {
  sdy.mesh @mesh = <["x"=2, "y"=4]>
  func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, %arg1: tensor<i32>) \
-> (tensor<16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"y":(1)2}]>}, tensor<8x16xf32>) {
    %0 = sdy.constant dense<0> : tensor<i32>
    %1:2 = stablehlo.while(%iterArg = %0, %iterArg_0 = %arg0) : tensor<i32>, tensor<8x16xf32> attributes \
{sdy.sharding = #sdy.sharding_per_value<[<@mesh, []>, <@mesh, [{"x", ?}, {}]>]>}
    cond {
      %3 = stablehlo.compare LT, %iterArg, %0 {sdy.sharding_rule = #sdy.op_sharding_rule<([], [])->([])>} \
: (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %3 : tensor<i1>
    } do {
      %3 = sdy.reshard %iterArg_0 <@mesh, [{"x"}, {}], replicated={"y"}> : tensor<8x16xf32>
      stablehlo.return %iterArg, %3 : tensor<i32>, tensor<8x16xf32>
    }
    %2 = "stablehlo.reduce_window"(%1#1, %0) <{window_dimensions = array<i64: 1, 16>}> ({
    ^bb0(%arg2: tensor<f32>, %arg3: tensor<f32>):
      %4 = stablehlo.add %arg2, %arg3 : tensor<f32>
      stablehlo.return %4 : tensor<f32>
    }) {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"y"}]>]>, sdy.sharding_rule = \
#sdy.op_sharding_rule<([i, j], [])->([i]) {i=8, j=16} reduction={j}, custom>} : (tensor<8x16xf32>, tensor<f32>) \
-> tensor<16xf32>
    return %2, %1#1 : tensor<16xf32>, tensor<8x16xf32>
  }
}
"""


def _by_label(text: str) -> dict[str, list[str | None]]:
    values = value_shardings(text)
    return {values.labels[key]: shardings for key, shardings in values.shardings.items()}


def test_reader_values() -> None:
    assert _by_label(_SAMPLE) == {
        "@main arg 0": ['<@mesh, [{"x"}, {}]>'],
        "@main arg 1": [None],
        "@main result 0": ['<@mesh, [{"y":(1)2}]>'],
        "@main result 1": [None],
        "@main %0 (sdy.constant)": [None],
        "@main %1#0 (stablehlo.while)": ["<@mesh, []>"],
        "@main %1#1 (stablehlo.while)": ['<@mesh, [{"x", ?}, {}]>'],
        "@main %1/r0 %3 (stablehlo.compare)": [None],
        "@main %1/r1 %3 (sdy.reshard)": ['<@mesh, [{"x"}, {}], replicated={"y"}>'],
        "@main %2 (stablehlo.reduce_window)": ['<@mesh, [{"y"}]>'],
        "@main %2/r0 %4 (stablehlo.add)": [None],
    }


def test_reader_rules() -> None:
    assert [(op.label, op.op_name, op.rule) for op in op_rules(_SAMPLE)] == [
        ("@main %0", "sdy.constant", None),
        ("@main %1", "stablehlo.while", None),
        ("@main %1/r0 %3", "stablehlo.compare", "#sdy.op_sharding_rule<([], [])->([])>"),
        ("@main %1/r1 %3", "sdy.reshard", None),
        ("@main %2", "stablehlo.reduce_window",
         "#sdy.op_sharding_rule<([i, j], [])->([i]) {i=8, j=16} reduction={j}, custom>"),
        ("@main %2/r0 %4", "stablehlo.add", None),
    ]


def test_reader_keys_ignore_names_and_shardings() -> None:
    """Renumbered SSA names, no shardings and a constraint instead of a reshard:
    the same values, so the same keys."""
    renamed = (_SAMPLE.replace("%3", "%13").replace("%2", "%12").replace("%iterArg", "%it")
               .replace("%arg2", "%arg5").replace("sdy.reshard", "sdy.sharding_constraint")
               .replace('"x", ?}, {}]>]>', '"x"}, {?}]>]>'))
    stripped = (_SAMPLE.replace(' {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}', "")
                .replace(' attributes {sdy.sharding = #sdy.sharding_per_value<[<@mesh, []>, <@mesh, [{"x", ?}, {}]>]>}',
                         "")
                .replace(' {sdy.sharding_rule = #sdy.op_sharding_rule<([], [])->([])>}', "")
                .replace('{sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"y"}]>]>, sdy.sharding_rule = '
                         '#sdy.op_sharding_rule<([i, j], [])->([i]) {i=8, j=16} reduction={j}, custom>} ', ""))
    assert "sharding_per_value" not in stripped and "sharding_rule" not in stripped
    keys = sorted(value_shardings(_SAMPLE).shardings)
    assert sorted(value_shardings(renamed).shardings) == keys
    assert [op.key for op in op_rules(stripped)] == [op.key for op in op_rules(_SAMPLE)]
    assert len(set(keys)) == 11


def test_reader_manual_computation() -> None:
    text = """func.func @f(%arg0: tensor<8x16xf32>) -> tensor<8x16xf32> {
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}, {"y", ?}]>] out_shardings=[<@mesh, \
[{"x"}, {}]>] manual_axes={"x"} (%arg1: tensor<4x16xf32>) {
      %1 = stablehlo.sine %arg1 : tensor<4x16xf32>
      sdy.return %1 : tensor<4x16xf32>
    } : (tensor<8x16xf32>) -> tensor<8x16xf32>
    return %0 : tensor<8x16xf32>
  }"""
    assert _by_label(text) == {
        "@f arg 0": [None],
        "@f result 0": [None],
        "@f %0 (sdy.manual_computation)": ['<@mesh, [{"x"}, {}]>'],
        "@f %0 in_shardings[0]": ['<@mesh, [{"x"}, {"y", ?}]>'],
        "@f %0/r0 %1 (stablehlo.sine)": [None],
    }


# -- the corpus ---------------------------------------------------------------------

def test_corpus_has_every_program(corpus: dict[str, tuple[str, str, str]]) -> None:
    assert sorted(corpus) == sorted(PROGRAMS)


def _keyed_instructions(module: HloModule) -> dict[str, HloInstruction]:
    """'@func PATH%name' -> the instruction of that op, over every function and
    the regions of their ops (keys as ``expected.py`` makes them)."""
    keyed: dict[str, HloInstruction] = {}

    def walk(computation: HloComputation, prefix: str) -> Iterator[tuple[str, HloInstruction]]:
        for instr in computation.instructions:
            results = getattr(instr.mlir, "results", None)
            if instr.opcode == "parameter" or encodes_mlir_structure(instr) or not results:
                continue
            anchor = "%" + results[0][0]  # the frontend's record: [("0", 2)] for `%0:2 = `
            yield prefix + anchor, instr
            if instr.opcode != "call":  # a call's computation is a function, not a region
                for number, region in enumerate(instr.called_computations):
                    yield from walk(region, f"{prefix}{anchor}/r{number} ")

    for function in module.mlir.functions:
        for key, instr in walk(function, ""):
            keyed[f"@{function.mlir.name} {key}"] = instr
    return keyed


@pytest.mark.parametrize("name", PROGRAMS)
def test_rules_match_shardy(corpus: dict[str, tuple[str, str, str]], name: str) -> None:
    """Every op Shardy kept (same kind before and after) has xlapy's rule, or
    no rule where Shardy printed none."""
    before, after = _program(corpus, name)
    shardy: dict[str, tuple[str, str | None]] = {}
    for op in op_rules(after):
        shardy.setdefault(op.key, (op.op_name, op.rule))
    instructions = _keyed_instructions(parse_module(before))
    mismatches = []
    for op in op_rules(before):
        op_name, expected = shardy.get(op.key, (None, None))
        if op_name != op.op_name:
            continue  # converted by Shardy's pipeline (a constraint became a reshard): another op's rule
        instr = instructions.get(op.label)
        if instr is None:
            mismatches.append(f"{op.label} ({op_name}): not found in xlapy's module")
            continue
        rule = op_sharding_rule(instr)
        actual = None if rule is None else str(rule)
        if actual != expected:
            mismatches.append(f"{op.label} ({op_name}):\n    expected {expected}\n    actual   {actual}")
    assert not mismatches, f"{name}: {len(mismatches)} rule(s) differ\n" + "\n".join(mismatches)


def _same(want: list | None, got: list | None) -> bool:
    """Ops that compute the same thing share a key: compared in order when both
    sides have as many of them, else as sets (Shardy merges identical constant
    expressions, and so may xlapy)."""
    if want is None or got is None:
        return want is got
    return want == got if len(want) == len(got) else set(want) == set(got)


def _differences(expected: Values, actual: Values) -> list[str]:
    """Values whose sharding or defining op differ, and ops without results
    (sharding groups, which Shardy's pipeline removes) that differ."""
    differences = []
    for key in list(expected.shardings) + [k for k in actual.shardings if k not in expected.shardings]:
        for what, want, got in (("", expected.shardings.get(key), actual.shardings.get(key)),
                                (" op", expected.kinds.get(key), actual.kinds.get(key))):
            if not _same(want, got):
                label = expected.labels.get(key) or actual.labels[key]
                shown = [_MISSING if found is None else " | ".join(map(str, found)) for found in (want, got)]
                differences.append(f"{label}{what}:\n    expected {shown[0]}\n    actual   {shown[1]}")
                break
    if expected.effects != actual.effects:
        differences.append(f"ops without results:\n    expected {expected.effects}\n    actual   {actual.effects}")
    return differences


def test_differences_name_each_difference() -> None:
    """A changed sharding, a constraint left unconverted and a sharding group
    left in place are each reported, under Shardy's names."""
    changed = (_SAMPLE.replace('<@mesh, [{"y"}]>]>', '<@mesh, [{}]>]>')
               .replace("sdy.reshard", "sdy.sharding_constraint")
               .replace("    return %2, %1#1", "    sdy.sharding_group %2 group_id=0 : tensor<16xf32>\n"
                                                "    return %2, %1#1"))
    assert _differences(value_shardings(_SAMPLE), value_shardings(changed)) == [
        "@main %1/r1 %3 (sdy.reshard) op:\n    expected sdy.reshard\n    actual   sdy.sharding_constraint",
        '@main %2 (stablehlo.reduce_window):\n    expected <@mesh, [{"y"}]>\n    actual   <@mesh, [{}]>',
        "ops without results:\n    expected []\n    actual   ['sdy.sharding_group']",
    ]
    assert _differences(value_shardings(_SAMPLE), value_shardings(_SAMPLE)) == []


@pytest.mark.parametrize("name", PROGRAMS)
def test_propagation_matches_shardy(corpus: dict[str, tuple[str, str, str]], name: str) -> None:
    """After propagation, every value carries exactly the sharding Shardy gave it."""
    before, after = _program(corpus, name)
    module = parse_module(before)
    run_pipeline(module, explicit_reshards=False)
    printed = print_module(module)
    mismatches = _differences(value_shardings(after), value_shardings(printed))
    assert not mismatches, f"{name}: {len(mismatches)} value(s) differ\n" + "\n".join(mismatches)


@pytest.mark.parametrize("name", PROGRAMS)
def test_explicit_reshards_match_shardy(corpus: dict[str, tuple[str, str, str]], name: str) -> None:
    """After the whole pipeline (explicit reshards included), the ops and their
    shardings are those of XLA's dump after Shardy's explicit reshards."""
    before, _ = _program(corpus, name)
    reshards = corpus[name][2]
    module = parse_module(before)
    run_pipeline(module)
    mismatches = _differences(value_shardings(reshards), value_shardings(print_module(module)))
    assert not mismatches, f"{name}: {len(mismatches)} value(s) differ\n" + "\n".join(mismatches)


def test_corpus_is_read_completely(corpus: dict[str, tuple[str, str, str]]) -> None:
    """Nothing is compared vacuously: the reader sees every op line of Shardy's
    output, and every op there is one of the program handed to Shardy."""
    for name in PROGRAMS:
        before, after = _program(corpus, name)
        defining = sum(1 for line in after.splitlines() if line.strip().startswith("%") and " = " in line)
        ops = op_rules(after)
        assert len(ops) == defining, name
        before_keys = {op.key for op in op_rules(before)}
        assert [op.label for op in ops if op.key not in before_keys] == [], name


def test_some_programs_get_explicit_reshards(corpus: dict[str, tuple[str, str, str]]) -> None:
    """The explicit-reshard comparison is not vacuous: XLA's dump adds reshards to some programs."""
    resharded = sorted(name for name, (_, after, reshards) in corpus.items()
                       if reshards.count("sdy.reshard") > after.count("sdy.reshard"))
    assert resharded == ["concatenate_other_dim", "concatenate_three_shardings"]
