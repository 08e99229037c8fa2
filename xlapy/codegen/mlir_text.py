"""MLIR text in and out for the code generator: ``parse_mlir`` reads a module
written with the dialects codegen uses (builtin, func, arith, math, complex,
scf, tensor, vector, gpu, llvm, xla); ``print_mlir`` prints one, optionally
with ``#map`` aliases for the indexing maps as XLA's dumps (the examples of
XLA's docs/emitters.md) show them.

This is one of xlapy's two MLIR layers, the one of the code generator: its IR
is xDSL's (xDSL's parser, printer, verifiers and pass infrastructure), with
xlapy's own dialect classes where xDSL lacks an op or declares it narrower
than MLIR (``xlapy.codegen.dialect``, ``xlapy.codegen.mlir_dialects``), never
by modifying xDSL's. The StableHLO frontend has its own parser and printer
(``xlapy.frontends.mlir_syntax``), as xDSL cannot read or reprint JAX's
StableHLO and Shardy text; docs/mlir.md says why and which layer new code
uses."""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.dialects.complex import Complex
from xdsl.dialects.func import Func
from xdsl.dialects.scf import Scf
from xdsl.dialects.tensor import Tensor
from xdsl.dialects.vector import Vector
from xdsl.ir import Attribute, Operation
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import ParseError as XdslParseError
from xdsl.utils.exceptions import VerifyException

from xlapy.codegen.dialect import XLA, IndexingMapAttr, print_id_op
from xlapy.codegen.mlir_dialects import ARITH, GPU, LLVM, MATH, has_replaced_gpu_syntax
from xlapy.errors import ParseError, VerifyError


def make_context() -> Context:
    """A context with every dialect codegen's IR uses."""
    ctx = Context()
    for dialect in (Builtin, Func, ARITH, MATH, Complex, Scf, Tensor, Vector, GPU, LLVM, XLA):
        ctx.load_dialect(dialect)
    return ctx


def parse_mlir(text: str, verify: bool = True) -> ModuleOp:
    """The module in ``text`` (a ``builtin.module`` or top-level ops, with
    optional ``#alias = ...`` definitions), verified unless told not to."""
    _check_string_literals(text)
    try:
        module = Parser(make_context(), text).parse_module()
    except XdslParseError as error:
        raise ParseError(str(error)) from error
    except VerifyException as error:  # an attribute's verifier runs as soon as it is parsed
        raise VerifyError(str(error)) from error
    if verify:
        verify_op(module)
    return module


_ESCAPE = re.compile(r"\\.")


def _check_string_literals(text: str) -> None:
    """Rejects a string literal left open at the end of a line: xDSL's lexer
    backtracks exponentially on one instead of reporting it."""
    for number, line in enumerate(text.splitlines(), 1):
        code = _ESCAPE.sub("", line.split("//", 1)[0] if line.lstrip().startswith("//") else line)
        if code.count('"') % 2:
            raise ParseError("string literal not closed on its line (MLIR strings cannot span lines)", number)


def verify_op(op: Operation) -> None:
    """``op.verify()`` reporting a broken invariant as xlapy's ``VerifyError``."""
    try:
        op.verify()
    except VerifyException as error:
        raise VerifyError(str(error)) from error


def print_mlir(op: Operation, map_aliases: bool = False) -> str:
    """``op`` in MLIR's custom syntax. With ``map_aliases`` the indexing maps
    are defined once at the top (``#map = #xla.indexing_map<"...">``) and
    referred to as ``#map``, ``#map1``, ... in the order they first occur."""
    aliases: dict[Attribute, str] = {}
    if map_aliases:
        for nested in op.walk():
            for attr in [*nested.properties.values(), *nested.attributes.values()]:
                if isinstance(attr, IndexingMapAttr) and attr not in aliases:
                    aliases[attr] = "#map" + (str(len(aliases)) if aliases else "")
    stream = io.StringIO()
    printer = _Printer(stream=stream)
    for attr, alias in aliases.items():
        printer.print_string(f"{alias} = ")
        printer.print_attribute(attr)
        printer.print_string("\n")
    if aliases:
        printer.print_string("\n")
    printer.aliases = aliases
    printer.print_op(op)
    printer.print_string("\n")
    return stream.getvalue()


@dataclass(eq=False, repr=False)
class _Printer(Printer):
    aliases: dict[Attribute, str] = field(default_factory=dict)

    def print_attribute(self, attribute: Attribute) -> None:
        alias = self.aliases.get(attribute) if isinstance(attribute, IndexingMapAttr) else None
        if alias is not None:
            self.print_string(alias)
        else:
            super().print_attribute(attribute)

    def print_op(self, op: Operation) -> None:
        # xDSL's own id classes (built by code that does not use ours) get the short syntax too.
        if has_replaced_gpu_syntax(op) and not self.print_generic_format:
            self._print_results(op)
            self.print_string(op.name)
            print_id_op(op, self)
            return
        super().print_op(op)
