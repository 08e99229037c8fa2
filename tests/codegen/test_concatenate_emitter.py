"""The concatenate emitter's work split, by evaluating the maps of its loops: every output element is written once,
by the loop of the operand it comes from, with no bounds check (every point of every loop's domain is in the
output); vectors are runs of consecutive elements, and the blocks, their rounds (``chunk``) and their threads take
each operand's vectors in the output's order. The values themselves are compared with the interpreter in
``test_hero_folders.py`` (``data/concatenate``) and ``test_loop_speedups.py``."""

from __future__ import annotations

import itertools

import pytest

import xlapy
from tests.codegen.emitter_cases import WIDE_HOST
from tools.loop_fusion_corpus import single_fusion
from xlapy.codegen.dialect import LoopOp
from xlapy.codegen.emitters.concatenate import concatenate_hero, emit_concatenate_fusion
from xlapy.codegen.launch import Device, LaunchDimensions
from xlapy.hlo.ir import HloInstruction
from xlapy.indexing import IndexingMap
from xlapy.shapes import Shape

DEVICES = {"cpu": WIDE_HOST, "gpu": Device.gpu()}


def _fusion(shapes: list[str], result: str, dimension: int) -> HloInstruction:
    operands = ", ".join(f"p{i}" for i in range(len(shapes)))
    text = single_fusion([f"f32{s}" for s in shapes],
                         [f"ROOT c = f32{result} concatenate({operands}), dimensions={{{dimension}}}"],
                         f"f32{result}")
    return xlapy.parse_hlo(text).entry.root


CASES = {
    "minor": (["[64,256]", "[64,128]", "[64,64]"], "[64,448]", 1),
    "narrow_rows": (["[512,4]", "[512,12]"], "[512,16]", 1),
    "odd_rows": (["[64,3]", "[64,5]", "[64,1]"], "[64,9]", 1),
    "major": (["[40,16]", "[24,16]"], "[64,16]", 0),
    "middle": (["[2,64,32]", "[2,32,32]"], "[2,96,32]", 1),
    "column_major": (["[32,16]{0,1}", "[32,48]{0,1}"], "[32,64]{0,1}", 1),
}


def _physical_offset(shape: Shape, index: tuple[int, ...]) -> int:
    offset, stride = 0, 1
    for d in shape.layout_or_default.minor_to_major:
        offset += index[d] * stride
        stride *= shape.dimensions[d]
    return offset


def _loops(fusion: HloInstruction, device: Device) -> tuple[list[IndexingMap], LaunchDimensions]:
    module, launch = emit_concatenate_fusion(fusion, device)
    main = next(op for op in module.ops if op.sym_name.data == "main")
    return [op.indexing_map_attr.indexing_map for op in main.walk() if isinstance(op, LoopOp)], launch


def _writes(indexing_map: IndexingMap, launch: LaunchDimensions, shape: Shape) -> dict[tuple[int, ...], list[int]]:
    """The physical output offsets a loop writes, by ``(block, thread, chunk)``, lanes in order."""
    chunks, lanes = (range(v.bounds.lower, v.bounds.upper + 1) for v in indexing_map.range_vars)
    writes = {}
    for bl, th, chunk in itertools.product(range(launch.blocks), range(launch.threads_per_block), chunks):
        offsets = []
        for lane in lanes:
            assert indexing_map.contains([th, bl], [chunk, lane])
            offsets.append(_physical_offset(shape, tuple(indexing_map.evaluate([th, bl], [chunk, lane]))))
        writes[(bl, th, chunk)] = offsets
    return writes


def _operand_ranges(fusion: HloInstruction) -> list[range]:
    hero = concatenate_hero(fusion)
    dimension, offset, ranges = hero.attr("dimensions")[0], 0, []
    for operand in hero.operands:
        ranges.append(range(offset, offset + operand.shape.dimensions[dimension]))
        offset += operand.shape.dimensions[dimension]
    return ranges


@pytest.mark.parametrize("device", sorted(DEVICES))
@pytest.mark.parametrize("name", sorted(CASES))
def test_every_element_is_written_once_by_its_operand_loop(name: str, device: str) -> None:
    shapes, result, dimension = CASES[name]
    fusion = _fusion(shapes, result, dimension)
    shape = fusion.shape
    loops, launch = _loops(fusion, DEVICES[device])
    assert len(loops) == len(shapes)
    position = {_physical_offset(shape, i): i for i in itertools.product(*(range(d) for d in shape.dimensions))}
    written = []
    for indexing_map, along in zip(loops, _operand_ranges(fusion)):
        offsets = [o for vector in _writes(indexing_map, launch, shape).values() for o in vector]
        assert all(position[o][dimension] in along for o in offsets)
        written += offsets
    assert sorted(written) == sorted(position)


@pytest.mark.parametrize("device", sorted(DEVICES))
@pytest.mark.parametrize("name", ["minor", "narrow_rows", "middle"])
def test_vectors_are_contiguous_and_threads_write_consecutive_ones(name: str, device: str) -> None:
    """A vector's lanes are consecutive output elements, and ordering a loop's vectors by block, then round
    (``chunk``), then thread orders them as in the output: consecutive threads write consecutive vectors."""
    shapes, result, dimension = CASES[name]
    fusion = _fusion(shapes, result, dimension)
    loops, launch = _loops(fusion, DEVICES[device])
    for indexing_map in loops:
        writes = _writes(indexing_map, launch, fusion.shape)
        for offsets in writes.values():
            assert offsets == list(range(offsets[0], offsets[0] + len(offsets)))
        chunks = indexing_map.range_vars[0].bounds.upper + 1
        ordered = [writes[(bl, th, chunk)][0] for bl, chunk, th in
                   itertools.product(range(launch.blocks), range(chunks), range(launch.threads_per_block))]
        assert ordered == sorted(ordered)
