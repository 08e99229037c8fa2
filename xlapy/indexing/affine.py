"""Affine expressions as MLIR builds them, on xDSL's expression nodes.

The nodes are xDSL's (``AffineDimExpr``, ``AffineSymExpr``,
``AffineConstantExpr``, ``AffineBinaryOpExpr``). The builders here apply the
folds MLIR's ``getAffineBinaryOpExpr`` applies at construction (constants to
the right, ``(x + 2) + 3`` to ``x + 5``, ``(x * 128) floordiv 64`` to
``x * 2``, ...) and nothing more, so that an expression built here has the
shape XLA's would and prints the same. xDSL's own operators distribute
products over sums, which MLIR does not; they are not used.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Sequence

from xdsl.ir.affine import (
    AffineBinaryOpExpr,
    AffineBinaryOpKind,
    AffineConstantExpr,
    AffineDimExpr,
    AffineExpr,
    AffineSymExpr,
)

from xlapy.syntax import IDENT, MAX_NESTING, Cursor

ADD = AffineBinaryOpKind.Add
MUL = AffineBinaryOpKind.Mul
MOD = AffineBinaryOpKind.Mod
FLOORDIV = AffineBinaryOpKind.FloorDiv
CEILDIV = AffineBinaryOpKind.CeilDiv


_CONSTANTS: dict[int, AffineConstantExpr] = {}
_DIMS: dict[int, AffineDimExpr] = {}
_SYMS: dict[int, AffineSymExpr] = {}


def const(value: int) -> AffineConstantExpr:
    node = _CONSTANTS.get(value)
    if node is None:
        node = _CONSTANTS[value] = AffineConstantExpr(value)
    return node


def dim(position: int) -> AffineDimExpr:
    node = _DIMS.get(position)
    if node is None:
        node = _DIMS[position] = AffineDimExpr(position)
    return node


def sym(position: int) -> AffineSymExpr:
    node = _SYMS.get(position)
    if node is None:
        node = _SYMS[position] = AffineSymExpr(position)
    return node


def _expr(value: AffineExpr | int) -> AffineExpr:
    return const(value) if isinstance(value, int) else value


def constant_value(expr: AffineExpr) -> int | None:
    return expr.value if isinstance(expr, AffineConstantExpr) else None


def binary_rhs_constant(expr: AffineExpr, kind: AffineBinaryOpKind) -> int | None:
    """``c`` when ``expr`` is ``x <kind> c`` for a constant ``c``."""
    if isinstance(expr, AffineBinaryOpExpr) and expr.kind is kind and isinstance(expr.rhs, AffineConstantExpr):
        return expr.rhs.value
    return None


def is_symbolic_or_constant(expr: AffineExpr) -> bool:
    """True when no dimension occurs in ``expr``."""
    if isinstance(expr, AffineDimExpr):
        return False
    if isinstance(expr, AffineBinaryOpExpr):
        return is_symbolic_or_constant(expr.lhs) and is_symbolic_or_constant(expr.rhs)
    return True


def largest_known_divisor(expr: AffineExpr) -> int:
    """The largest integer known to divide every value of ``expr`` (MLIR's rule)."""
    if isinstance(expr, AffineConstantExpr):
        return abs(expr.value)
    if isinstance(expr, AffineBinaryOpExpr):
        if expr.kind is MUL:
            return largest_known_divisor(expr.lhs) * largest_known_divisor(expr.rhs)
        if expr.kind in (ADD, MOD):
            return math.gcd(largest_known_divisor(expr.lhs), largest_known_divisor(expr.rhs))
        divisor = constant_value(expr.rhs)
        if divisor:
            lhs_divisor = largest_known_divisor(expr.lhs)
            if lhs_divisor % divisor == 0:
                return abs(lhs_divisor // divisor)
        return 1
    return 1


def add(lhs: AffineExpr | int, rhs: AffineExpr | int) -> AffineExpr:
    lhs, rhs = _expr(lhs), _expr(rhs)
    lhs_const, rhs_const = constant_value(lhs), constant_value(rhs)
    if lhs_const is not None and rhs_const is not None:
        return const(lhs_const + rhs_const)
    # Only the right-hand side is constant; dimension-free terms go right.
    if lhs_const is not None or (is_symbolic_or_constant(lhs) and not is_symbolic_or_constant(rhs)):
        return add(rhs, lhs)
    if rhs_const == 0:
        return lhs
    lhs_bin = lhs if isinstance(lhs, AffineBinaryOpExpr) else None
    if lhs_bin is not None and lhs_bin.kind is ADD and rhs_const is not None:
        lhs_rhs_const = constant_value(lhs_bin.rhs)
        if lhs_rhs_const is not None:
            return add(lhs_bin.lhs, lhs_rhs_const + rhs_const)
    # c1 * x + c2 * x -> (c1 + c2) * x
    first, first_factor = _split_factor(lhs)
    second, second_factor = _split_factor(rhs)
    if first == second:
        return mul(first, first_factor + second_factor)
    # (x + 2) + y -> (x + y) + 2
    if lhs_bin is not None and lhs_bin.kind is ADD:
        lhs_rhs_const = constant_value(lhs_bin.rhs)
        if lhs_rhs_const is not None:
            return add(add(lhs_bin.lhs, rhs), lhs_rhs_const)
    # x + (x floordiv c) * -c -> x mod c
    factor = binary_rhs_constant(rhs, MUL)
    if factor is not None:
        quotient = rhs.lhs
        divisor = binary_rhs_constant(quotient, FLOORDIV)
        if divisor is not None and divisor > 0 and factor == -divisor and quotient.lhs == lhs:
            return mod(lhs, divisor)
    return AffineBinaryOpExpr(ADD, lhs, rhs)


_KIND_ORDER = {ADD: 0, MUL: 1, MOD: 2, FLOORDIV: 3, CEILDIV: 4}


def _order_key(expr: AffineExpr) -> tuple:
    """MLIR's order of expression kinds (Add < Mul < Mod < FloorDiv < CeilDiv <
    Constant < DimId < SymbolId), then the operands' keys."""
    if isinstance(expr, AffineBinaryOpExpr):
        return (_KIND_ORDER[expr.kind], _order_key(expr.lhs), _order_key(expr.rhs))
    if isinstance(expr, AffineConstantExpr):
        return (5, expr.value)
    if isinstance(expr, AffineDimExpr):
        return (6, expr.position)
    return (7, expr.position)


def sort_summands(expr: AffineExpr) -> AffineExpr:
    """``expr`` with the terms of every sum in today's XLA order: sorted by
    kind and operands (products before variables), the constant last. The
    value is unchanged; only the printed order differs from the builders'."""
    if not isinstance(expr, AffineBinaryOpExpr):
        return expr
    if expr.kind is not ADD:
        return AffineBinaryOpExpr(expr.kind, sort_summands(expr.lhs), sort_summands(expr.rhs))
    terms: list[AffineExpr] = []
    pending = [expr]
    while pending:
        item = pending.pop()
        if isinstance(item, AffineBinaryOpExpr) and item.kind is ADD:
            pending.extend((item.rhs, item.lhs))
        else:
            terms.append(sort_summands(item))
    constants = [t for t in terms if isinstance(t, AffineConstantExpr)]
    ordered = sorted((t for t in terms if not isinstance(t, AffineConstantExpr)), key=_order_key) + constants
    result = ordered[0]
    for term in ordered[1:]:
        result = AffineBinaryOpExpr(ADD, result, term)
    return result


def _split_factor(expr: AffineExpr) -> tuple[AffineExpr, int]:
    factor = binary_rhs_constant(expr, MUL)
    return (expr.lhs, factor) if factor is not None else (expr, 1)


def mul(lhs: AffineExpr | int, rhs: AffineExpr | int) -> AffineExpr:
    lhs, rhs = _expr(lhs), _expr(rhs)
    lhs_const, rhs_const = constant_value(lhs), constant_value(rhs)
    if lhs_const is not None and rhs_const is not None:
        return const(lhs_const * rhs_const)
    if lhs_const is not None:
        return mul(rhs, lhs)
    if rhs_const is None:
        raise ValueError(f"not affine: {print_expr(lhs)} * {print_expr(rhs)} (one factor must be a constant)")
    if rhs_const == 1:
        return lhs
    if rhs_const == 0:
        return rhs
    factor = binary_rhs_constant(lhs, MUL)
    if factor is not None:
        return mul(lhs.lhs, factor * rhs_const)
    return AffineBinaryOpExpr(MUL, lhs, rhs)


def neg(expr: AffineExpr | int) -> AffineExpr:
    return mul(expr, -1)


def sub(lhs: AffineExpr | int, rhs: AffineExpr | int) -> AffineExpr:
    return add(lhs, neg(rhs))


def _divisor(rhs: AffineExpr | int, what: str) -> int:
    value = constant_value(_expr(rhs))
    if value is None:
        raise ValueError(f"not affine: {what} by a non-constant {print_expr(_expr(rhs))}")
    return value


def floordiv(lhs: AffineExpr | int, rhs: AffineExpr | int) -> AffineExpr:
    lhs = _expr(lhs)
    divisor = _divisor(rhs, "floordiv")
    if divisor < 1:
        return AffineBinaryOpExpr(FLOORDIV, lhs, const(divisor))
    lhs_const = constant_value(lhs)
    if lhs_const is not None:
        return const(lhs_const // divisor)
    if divisor == 1:
        return lhs
    factor = binary_rhs_constant(lhs, MUL)
    if factor is not None and factor % divisor == 0:
        return mul(lhs.lhs, factor // divisor)
    if (
        isinstance(lhs, AffineBinaryOpExpr)
        and lhs.kind is ADD
        and (largest_known_divisor(lhs.lhs) % divisor == 0 or largest_known_divisor(lhs.rhs) % divisor == 0)
    ):
        return add(floordiv(lhs.lhs, divisor), floordiv(lhs.rhs, divisor))
    return AffineBinaryOpExpr(FLOORDIV, lhs, const(divisor))


def ceildiv(lhs: AffineExpr | int, rhs: AffineExpr | int) -> AffineExpr:
    lhs = _expr(lhs)
    divisor = _divisor(rhs, "ceildiv")
    if divisor < 1:
        return AffineBinaryOpExpr(CEILDIV, lhs, const(divisor))
    lhs_const = constant_value(lhs)
    if lhs_const is not None:
        return const(-(-lhs_const // divisor))
    if divisor == 1:
        return lhs
    factor = binary_rhs_constant(lhs, MUL)
    if factor is not None and factor % divisor == 0:
        return mul(lhs.lhs, factor // divisor)
    return AffineBinaryOpExpr(CEILDIV, lhs, const(divisor))


def mod(lhs: AffineExpr | int, rhs: AffineExpr | int) -> AffineExpr:
    lhs = _expr(lhs)
    modulus = _divisor(rhs, "mod")
    if modulus < 1:
        return AffineBinaryOpExpr(MOD, lhs, const(modulus))
    lhs_const = constant_value(lhs)
    if lhs_const is not None:
        return const(lhs_const % modulus)
    if largest_known_divisor(lhs) % modulus == 0:
        return const(0)
    if isinstance(lhs, AffineBinaryOpExpr):
        if lhs.kind is ADD:
            if largest_known_divisor(lhs.lhs) % modulus == 0:
                return mod(lhs.rhs, modulus)
            if largest_known_divisor(lhs.rhs) % modulus == 0:
                return mod(lhs.lhs, modulus)
        inner = binary_rhs_constant(lhs, MOD)
        if inner is not None and inner >= 1 and inner % modulus == 0:
            return mod(lhs.lhs, modulus)
    return AffineBinaryOpExpr(MOD, lhs, const(modulus))


BUILDERS: dict[AffineBinaryOpKind, Callable[[AffineExpr, AffineExpr], AffineExpr]] = {
    ADD: add,
    MUL: mul,
    MOD: mod,
    FLOORDIV: floordiv,
    CEILDIV: ceildiv,
}


def replace(expr: AffineExpr, dims: Sequence[AffineExpr], symbols: Sequence[AffineExpr]) -> AffineExpr:
    """``expr`` with dimension ``i`` replaced by ``dims[i]`` and symbol ``j`` by
    ``symbols[j]``, rebuilt with the folding builders."""
    if isinstance(expr, AffineDimExpr):
        return dims[expr.position]
    if isinstance(expr, AffineSymExpr):
        return symbols[expr.position]
    if isinstance(expr, AffineBinaryOpExpr):
        return BUILDERS[expr.kind](replace(expr.lhs, dims, symbols), replace(expr.rhs, dims, symbols))
    return expr


def evaluate(expr: AffineExpr, dims: Sequence[int], symbols: Sequence[int]) -> int:
    if isinstance(expr, AffineConstantExpr):
        return expr.value
    if isinstance(expr, AffineDimExpr):
        return dims[expr.position]
    if isinstance(expr, AffineSymExpr):
        return symbols[expr.position]
    lhs = evaluate(expr.lhs, dims, symbols)
    rhs = evaluate(expr.rhs, dims, symbols)
    kind = expr.kind
    if kind is ADD:
        return lhs + rhs
    if kind is MUL:
        return lhs * rhs
    if kind is FLOORDIV:
        return lhs // rhs
    if kind is MOD:
        return lhs % rhs
    return -(-lhs // rhs)


def uses(expr: AffineExpr, dims: set[int], symbols: set[int]) -> None:
    """Adds the positions of the dimensions and symbols of ``expr`` to the sets."""
    if isinstance(expr, AffineDimExpr):
        dims.add(expr.position)
    elif isinstance(expr, AffineSymExpr):
        symbols.add(expr.position)
    elif isinstance(expr, AffineBinaryOpExpr):
        uses(expr.lhs, dims, symbols)
        uses(expr.rhs, dims, symbols)


# --- printing (MLIR's affine-expression printer, with variable names) ---

_SPELLING = {ADD: " + ", MUL: " * ", FLOORDIV: " floordiv ", CEILDIV: " ceildiv ", MOD: " mod "}


def print_expr(expr: AffineExpr, dim_names: Sequence[str] = (), symbol_names: Sequence[str] = ()) -> str:
    parts: list[str] = []
    _print(expr, dim_names, symbol_names, False, parts)
    return "".join(parts)


def _print(expr: AffineExpr, dims: Sequence[str], symbols: Sequence[str], parens: bool, out: list[str]) -> None:
    if isinstance(expr, AffineDimExpr):
        position = expr.position
        out.append(dims[position] if position < len(dims) and dims[position] else f"d{position}")
        return
    if isinstance(expr, AffineSymExpr):
        position = expr.position
        out.append(symbols[position] if position < len(symbols) and symbols[position] else f"s{position}")
        return
    if isinstance(expr, AffineConstantExpr):
        out.append(str(expr.value))
        return
    lhs, rhs, kind = expr.lhs, expr.rhs, expr.kind
    if parens:
        out.append("(")
    if kind is not ADD:
        if kind is MUL and constant_value(rhs) == -1:
            out.append("-")
            _print(lhs, dims, symbols, True, out)
        else:
            _print(lhs, dims, symbols, True, out)
            out.append(_SPELLING[kind])
            _print(rhs, dims, symbols, True, out)
    else:
        factor = binary_rhs_constant(rhs, MUL)
        rhs_const = constant_value(rhs)
        if factor is not None and factor < 0:
            _print(lhs, dims, symbols, False, out)
            out.append(" - ")
            if factor == -1:
                inner = rhs.lhs
                _print(inner, dims, symbols, isinstance(inner, AffineBinaryOpExpr) and inner.kind is ADD, out)
            else:
                _print(rhs.lhs, dims, symbols, True, out)
                out.append(f" * {-factor}")
        elif rhs_const is not None and rhs_const < 0:
            _print(lhs, dims, symbols, False, out)
            out.append(f" - {-rhs_const}")
        else:
            _print(lhs, dims, symbols, False, out)
            out.append(" + ")
            _print(rhs, dims, symbols, False, out)
    if parens:
        out.append(")")


# --- parsing (MLIR's affine-expression grammar) ---

_TOKEN = re.compile(r"\s*(?:(?P<int>[0-9]+)|(?P<word>[A-Za-z_][A-Za-z0-9_]*)|(?P<punct>[-+*()]))")
# As MLIR, a constant may be 2**63 (the magnitude of INT64_MIN, which prints as `- 9223372036854775808`).
_MAX_CONSTANT = 2**63
_HIGH_PRECEDENCE = {"*": MUL, "floordiv": FLOORDIV, "floorDiv": FLOORDIV, "ceildiv": CEILDIV, "mod": MOD}


class ExprParser:
    """Reads one affine expression at a cursor; ``names`` maps a variable name
    to its expression (a dimension or a symbol)."""

    def __init__(self, cursor: Cursor, names: dict[str, AffineExpr]):
        self.cursor = cursor
        self.names = names
        self._depths: dict[AffineExpr, int] = {}

    def _depth(self, expr: AffineExpr, at: int) -> int:
        """How deep ``expr`` nests (memoised: the builders reuse the sub-expressions
        read); a constant folded past 64 bits is an error, as it would not read back."""
        if isinstance(expr, AffineConstantExpr):
            if not -_MAX_CONSTANT <= expr.value <= _MAX_CONSTANT:
                raise self.cursor.error(f"the constant {expr.value} of this expression does not fit in 64 bits", at)
            return 0
        if not isinstance(expr, AffineBinaryOpExpr):
            return 0
        depth = self._depths.get(expr)
        if depth is None:
            depth = self._depths[expr] = 1 + max(self._depth(expr.lhs, at), self._depth(expr.rhs, at))
        return depth

    def _peek(self) -> tuple[str, str] | None:
        match = _TOKEN.match(self.cursor.text, self.cursor.pos)
        if not match:
            return None
        kind = match.lastgroup
        return kind, match.group(kind)

    def _take(self) -> tuple[str, str]:
        match = _TOKEN.match(self.cursor.text, self.cursor.pos)
        self.cursor.pos = match.end()
        return match.lastgroup, match.group(match.lastgroup)

    def _build(self, builder: Callable[[AffineExpr, AffineExpr], AffineExpr], lhs, rhs, at: int) -> AffineExpr:
        try:
            expr = builder(lhs, rhs)
        except ValueError as error:
            raise self.cursor.error(str(error), at) from None
        # Deeper expressions would exhaust the stack of the recursive printer and simplifier.
        if self._depth(expr, at) > MAX_NESTING:
            raise self.cursor.error(f"affine expression nested more than {MAX_NESTING} levels deep", at)
        return expr

    def _skip_space_from(self, pos: int) -> int:
        text = self.cursor.text
        while pos < len(text) and text[pos].isspace():
            pos += 1
        return pos

    def parse(self) -> AffineExpr:
        """``term (('+' | '-') term)*``"""
        expr = self._term()
        while True:
            token = self._peek()
            if token not in (("punct", "+"), ("punct", "-")):
                return expr
            self._take()
            at = self.cursor.pos
            rhs = self._term()
            expr = self._build(add if token[1] == "+" else sub, expr, rhs, at)

    def _term(self) -> AffineExpr:
        """``operand (('*' | 'floordiv' | 'ceildiv' | 'mod') operand)*``"""
        expr = self._operand()
        while True:
            token = self._peek()
            if token is None or token[1] not in _HIGH_PRECEDENCE or token[0] == "int":
                return expr
            self.cursor.skip_space()
            at = self.cursor.pos
            self._take()
            rhs_at = self.cursor.pos
            rhs = self._operand()
            kind = _HIGH_PRECEDENCE[token[1]]
            divisor = constant_value(rhs)
            if kind is not MUL and divisor is not None and divisor < 1:
                # MLIR's affine grammar: the right operand of mod, floordiv and ceildiv is positive.
                raise self.cursor.error(f"the right operand of '{token[1]}' must be a positive constant, "
                                        f"got {divisor}", self._skip_space_from(rhs_at))
            expr = self._build(BUILDERS[kind], expr, rhs, at)

    def _operand(self) -> AffineExpr:
        self.cursor.skip_space()
        at = self.cursor.pos
        token = self._peek()
        if token is None:
            raise self.cursor.error(f"expected an affine expression, got {self.cursor.found()}")
        kind, text = token
        if kind == "int":
            self._take()
            value = const(self.cursor.checked_int(text, at, 0, _MAX_CONSTANT))
            # ``16d0`` (the notation of XLA's simplifier examples) is ``16 * d0``.
            word = IDENT.match(self.cursor.text, self.cursor.pos)
            if word and word.group() in self.names:
                return mul(self._operand(), value)
            return value
        if kind == "word":
            if text in self.names:
                self._take()
                return self.names[text]
            raise self.cursor.error(f"unknown variable '{text}' in affine expression", at)
        if text == "(":
            with self.cursor.nested("parentheses"):
                self._take()
                expr = self.parse()
                self.cursor.skip_space()
                if not self.cursor.eat(")"):
                    raise self.cursor.error(f"expected ')' in affine expression, got {self.cursor.found()}")
            return expr
        if text == "-":
            with self.cursor.nested("negations"):
                self._take()
                return neg(self._operand())
        raise self.cursor.error(f"expected an affine expression, got {self.cursor.found()}", at)


def parse_expr(text: str, dim_names: Sequence[str] = (), symbol_names: Sequence[str] = ()) -> AffineExpr:
    """Parses one affine expression over the named dimensions and symbols
    (default names ``d0, d1, ...`` and ``s0, s1, ...``)."""
    names: dict[str, AffineExpr] = {name: dim(i) for i, name in enumerate(dim_names)}
    names.update({name: sym(i) for i, name in enumerate(symbol_names)})
    cursor = Cursor(text)
    expr = ExprParser(cursor, names).parse()
    if not cursor.at_end():
        raise cursor.error(f"unexpected {cursor.found()} after affine expression")
    return expr
