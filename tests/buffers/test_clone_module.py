"""``clone_module``: a deep copy that compiling may edit freely."""

from pathlib import Path

import numpy as np
import pytest

from tests.corpus_cases import verifying_corpus
from xlapy.frontends import stablehlo
from xlapy.hlo import parse_module
from xlapy.transforms.call_graph import clone_module

CORPUS = verifying_corpus()
MLIR_DATA = Path(__file__).resolve().parent.parent / "frontends" / "data"


def _objects(module) -> set[int]:
    return ({id(c) for c in module.computations} | {id(i) for i in module.instructions}
            | {id(i.attributes) for i in module.instructions})


@pytest.mark.parametrize("path,text", CORPUS, ids=[p for p, _ in CORPUS])
def test_clone_prints_identically_and_shares_nothing(path: str, text: str) -> None:
    module = parse_module(text)
    clone = clone_module(module)
    assert clone.to_text() == module.to_text()
    assert not _objects(clone) & _objects(module)
    for computation in clone.computations:
        for instr in computation.instructions:
            assert instr.parent is computation
            assert all(c.module is clone for c in instr.called_computations)
            assert all(o.parent is not None and o.parent.module is clone for o in instr.operands)


@pytest.mark.parametrize("name", ["hand_written.mlir", "jax_shard_map.mlir", "multi_result_ops.mlir"])
def test_clone_of_stablehlo_prints_identically(name: str) -> None:
    text = (MLIR_DATA / name).read_text()
    chunks = stablehlo.split_input_file(text)
    for chunk, line in chunks:
        module = stablehlo.parse_module(chunk, first_line=line)
        clone = clone_module(module)
        assert stablehlo.print_module(clone) == stablehlo.print_module(module)


def test_mutating_the_clone_leaves_the_original() -> None:
    text = """HloModule m, entry_computation_layout={(f32[2]{0})->f32[2]{0}}

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  p = f32[2]{0} parameter(0)
  c = f32[2]{0} constant({1, 2})
  s = f32[2]{0} add(p, c)
  z = f32[] constant(0)
  r = f32[] reduce(s, z), dimensions={0}, to_apply=add
  ROOT b = f32[2]{0} broadcast(r), dimensions={}
}
"""
    module = parse_module(text)
    before = module.to_text()
    clone = clone_module(module)
    entry = clone.entry
    constant = next(i for i in entry.instructions if i.name == "c")
    if isinstance(constant.literal, np.ndarray):
        constant.literal[0] = 7
    constant.attributes["marker"] = "x"
    reduce = next(i for i in entry.instructions if i.opcode == "reduce")
    reduce.attributes["dimensions"] = ()
    reduce.called_computations[0].root.opcode = "multiply"
    clone.attributes["entry_computation_layout"] = "{()->()}"
    entry.root.replace_all_uses_with(reduce)
    entry.remove_instruction(next(i for i in entry.instructions if i.opcode == "broadcast"))
    assert module.to_text() == before
    assert clone.to_text() != before
