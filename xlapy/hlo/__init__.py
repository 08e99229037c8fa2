"""HLO: the IR, its text parser and printer, and its verifier."""

from xlapy.hlo.ir import HloComputation, HloInstruction, HloModule
from xlapy.hlo.parser import parse_module
from xlapy.hlo.printer import print_module
from xlapy.hlo.verifier import verify

__all__ = ["HloComputation", "HloInstruction", "HloModule", "parse_module", "print_module", "verify"]
