"""The pass interface and pipeline: order, disabling, fixed points, dumps and
verification after each pass."""

from __future__ import annotations

import pytest

from xlapy.errors import VerifyError
from xlapy.hlo import parse_module
from xlapy.hlo.ir import HloModule
from xlapy.shapes import parse_shape
from xlapy.transforms.hlo_pass import HloPass, HloPassFix, HloPassPipeline

TEXT = """HloModule m

ENTRY main {
  p = f32[4] parameter(0)
  a = f32[4] negate(p)
  ROOT b = f32[4] negate(a)
}
"""


class RenameRoot(HloPass):
    """Renames the entry root once, recording the order passes ran in."""

    name = "rename-root"

    def __init__(self, new_name: str, log: list[str]) -> None:
        self.new_name, self.log = new_name, log

    def run(self, module: HloModule) -> bool:
        self.log.append(self.new_name)
        root = module.entry.root
        if root.name == self.new_name:
            return False
        root.name = self.new_name
        return True


class BreakShapes(HloPass):
    name = "break-shapes"

    def run(self, module: HloModule) -> bool:
        module.entry.root.shape = parse_shape("s32[7]")
        return True


class CountDown(HloPass):
    name = "count-down"

    def __init__(self, steps: int) -> None:
        self.steps = steps

    def run(self, module: HloModule) -> bool:
        if self.steps == 0:
            return False
        self.steps -= 1
        return True


def test_passes_run_in_order_and_disabled_ones_are_skipped():
    log: list[str] = []
    pipeline = HloPassPipeline("p", [RenameRoot("x", log), CountDown(1), RenameRoot("y", log)],
                               disabled=["count-down"])
    module = parse_module(TEXT)
    assert pipeline.run(module)
    assert log == ["x", "y"] and module.entry.root.name == "y"


def test_a_pipeline_that_changes_nothing_says_so():
    module = parse_module(TEXT)
    assert not HloPassPipeline("p", [RenameRoot("b", [])]).run(module)


def test_fix_point_runs_until_nothing_changes():
    counter = CountDown(3)
    assert HloPassFix(counter).run(parse_module(TEXT))
    assert counter.steps == 0
    assert not HloPassFix(counter).run(parse_module(TEXT))


def test_dumps_are_numbered_and_named_after_the_pass(tmp_path):
    pipeline = HloPassPipeline("opt", [RenameRoot("b", []), RenameRoot("c", [])], dump_to=tmp_path)
    pipeline.run(parse_module(TEXT))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["0000.opt.before.hlo", "0001.opt.after_rename-root.hlo"]
    assert "ROOT %c = f32[4]{0} negate(%a)" in (tmp_path / "0001.opt.after_rename-root.hlo").read_text()
    assert parse_module((tmp_path / "0001.opt.after_rename-root.hlo").read_text()).entry.root.name == "c"


def test_verification_after_each_pass_names_the_pass():
    with pytest.raises(VerifyError, match="after HLO pass break-shapes"):
        HloPassPipeline("p", [BreakShapes()], verify_each=True).run(parse_module(TEXT))
