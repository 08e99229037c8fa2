"""IndexingMap: an affine map from the indices of one tensor to the indices of
another, with the bounds of its variables and constraints on its domain
(XLA's docs/indexing.md), printed and parsed in XLA's syntax."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from xdsl.ir.affine import AffineConstantExpr, AffineDimExpr, AffineExpr, AffineMap, AffineSymExpr

from xlapy.indexing import affine
from xlapy.indexing.affine import MOD, binary_rhs_constant
from xlapy.indexing.interval import Interval
from xlapy.indexing.simplifier import ExprSimplifier, RangeEvaluator, narrow_constraint_once
from xlapy.syntax import Cursor


@dataclass(frozen=True)
class Variable:
    """A dimension, range or runtime variable: inclusive bounds and an
    optional name (``th_x``, ``vector_index``) used when printing."""

    bounds: Interval
    name: str = ""

    @staticmethod
    def of_size(size: int, name: str = "") -> Variable:
        return Variable(Interval(0, size - 1), name)


def _variables(items: Iterable[Variable | Interval | tuple[int, int]]) -> tuple[Variable, ...]:
    result = []
    for item in items:
        if isinstance(item, Variable):
            result.append(item)
        elif isinstance(item, Interval):
            result.append(Variable(item))
        else:
            result.append(Variable(Interval(*item)))
    return tuple(result)


class IndexingMap:
    """``f(d, s, rt)``: dimension variables ``d``, range variables ``s`` and
    runtime variables ``rt`` (the affine map's symbols are the range
    variables followed by the runtime variables), each with inclusive
    bounds, and constraints ``expr in [lower, upper]``.

    Maps are values: operations return new maps. Two maps are equal when
    their expressions, bounds and constraints are; names do not count."""

    __slots__ = ("_hash", "_known_empty", "affine_map", "constraints", "dim_vars", "range_vars", "rt_vars")

    def __init__(
        self,
        affine_map: AffineMap | None,
        dim_vars: Iterable[Variable | Interval | tuple[int, int]],
        range_vars: Iterable[Variable | Interval | tuple[int, int]] = (),
        rt_vars: Iterable[Variable | Interval | tuple[int, int]] = (),
        constraints: Mapping[AffineExpr, Interval] | Iterable[tuple[AffineExpr, Interval]] = (),
        *,
        known_empty: bool = False,
    ):
        self.affine_map = affine_map
        self.dim_vars = _variables(dim_vars)
        self.range_vars = _variables(range_vars)
        self.rt_vars = _variables(rt_vars)
        self.constraints: dict[AffineExpr, Interval] = {}
        self._known_empty = known_empty
        self._hash: int | None = None
        if affine_map is not None and not known_empty:
            if affine_map.num_dims != len(self.dim_vars):
                raise ValueError(f"{affine_map.num_dims} dimensions in the map, {len(self.dim_vars)} bounds")
            if affine_map.num_symbols != len(self.range_vars) + len(self.rt_vars):
                raise ValueError(
                    f"{affine_map.num_symbols} symbols in the map, "
                    f"{len(self.range_vars)} range and {len(self.rt_vars)} runtime variables"
                )
            if any(v.bounds.is_empty() for v in itertools.chain(self.dim_vars, self.range_vars, self.rt_vars)):
                self._known_empty = True
            items = constraints.items() if isinstance(constraints, Mapping) else constraints
            for expr, bounds in items:
                self._add_constraint(expr, bounds)
        if self._known_empty:
            self.constraints = {}

    # --- construction ---

    @staticmethod
    def from_exprs(
        results: Sequence[AffineExpr],
        dim_vars: Iterable[Variable | Interval | tuple[int, int]],
        range_vars: Iterable[Variable | Interval | tuple[int, int]] = (),
        rt_vars: Iterable[Variable | Interval | tuple[int, int]] = (),
        constraints: Mapping[AffineExpr, Interval] | Iterable[tuple[AffineExpr, Interval]] = (),
    ) -> IndexingMap:
        dim_vars, range_vars, rt_vars = _variables(dim_vars), _variables(range_vars), _variables(rt_vars)
        affine_map = AffineMap(len(dim_vars), len(range_vars) + len(rt_vars), tuple(results))
        return IndexingMap(affine_map, dim_vars, range_vars, rt_vars, constraints)

    @staticmethod
    def from_tensor_sizes(
        results: Sequence[AffineExpr], dim_sizes: Sequence[int], symbol_sizes: Sequence[int] = ()
    ) -> IndexingMap:
        """Dimension ``i`` in ``[0, dim_sizes[i] - 1]``, range variable ``j`` in
        ``[0, symbol_sizes[j] - 1]``."""
        return IndexingMap.from_exprs(
            results, [Variable.of_size(n) for n in dim_sizes], [Variable.of_size(n) for n in symbol_sizes]
        )

    @staticmethod
    def identity(dim_sizes: Sequence[int]) -> IndexingMap:
        return IndexingMap.from_tensor_sizes([affine.dim(i) for i in range(len(dim_sizes))], dim_sizes)

    @staticmethod
    def undefined() -> IndexingMap:
        """The map of an access XLA cannot describe (an unsupported op)."""
        return IndexingMap(None, ())

    @staticmethod
    def known_empty(num_dims: int = 0, num_symbols: int = 0) -> IndexingMap:
        nothing = Variable(Interval(0, -1))
        return IndexingMap(
            AffineMap(num_dims, num_symbols, ()), [nothing] * num_dims, [nothing] * num_symbols, known_empty=True
        )

    def _add_constraint(self, expr: AffineExpr, bounds: Interval) -> None:
        """Adds ``expr in bounds``; a constraint on one variable narrows its
        bounds instead, as XLA's ``AddConstraint`` does."""
        if isinstance(expr, AffineDimExpr):
            var = self.dim_vars[expr.position]
            narrowed = var.bounds.intersect(bounds)
            self.dim_vars = (
                *self.dim_vars[: expr.position],
                Variable(narrowed, var.name),
                *self.dim_vars[expr.position + 1 :],
            )
            self._known_empty |= narrowed.is_empty()
            return
        if isinstance(expr, AffineSymExpr):
            position = expr.position
            in_range = position < len(self.range_vars)
            group = self.range_vars if in_range else self.rt_vars
            index = position if in_range else position - len(self.range_vars)
            var = group[index]
            narrowed = var.bounds.intersect(bounds)
            group = (*group[:index], Variable(narrowed, var.name), *group[index + 1 :])
            if in_range:
                self.range_vars = group
            else:
                self.rt_vars = group
            self._known_empty |= narrowed.is_empty()
            return
        if isinstance(expr, AffineConstantExpr):
            self._known_empty |= not bounds.contains(expr.value)
            return
        existing = self.constraints.get(expr)
        narrowed = bounds if existing is None else existing.intersect(bounds)
        self.constraints[expr] = narrowed
        self._known_empty |= narrowed.is_empty()

    def with_constraints(self, constraints: Iterable[tuple[AffineExpr, Interval]]) -> IndexingMap:
        """This map with more constraints."""
        return IndexingMap(
            self.affine_map,
            self.dim_vars,
            self.range_vars,
            self.rt_vars,
            [*self.constraints.items(), *constraints],
            known_empty=self._known_empty,
        )

    # --- accessors ---

    @property
    def results(self) -> tuple[AffineExpr, ...]:
        return self.affine_map.results

    @property
    def num_dims(self) -> int:
        return len(self.dim_vars)

    @property
    def num_symbols(self) -> int:
        return len(self.range_vars) + len(self.rt_vars)

    @property
    def symbol_vars(self) -> tuple[Variable, ...]:
        return self.range_vars + self.rt_vars

    def is_undefined(self) -> bool:
        return self.affine_map is None

    def is_known_empty(self) -> bool:
        return self._known_empty

    def dim_names(self) -> list[str]:
        return [v.name or f"d{i}" for i, v in enumerate(self.dim_vars)]

    def range_names(self) -> list[str]:
        return [v.name or f"s{i}" for i, v in enumerate(self.range_vars)]

    def rt_names(self) -> list[str]:
        return [v.name or f"rt{i}" for i, v in enumerate(self.rt_vars)]

    # --- values ---

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, IndexingMap):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(self._key())
        return self._hash

    def _key(self) -> tuple:
        if self.affine_map is None:
            return ("undefined",)
        if self._known_empty:
            return ("empty",)
        return (
            self.affine_map.results,
            tuple(v.bounds for v in self.dim_vars),
            tuple(v.bounds for v in self.range_vars),
            tuple(v.bounds for v in self.rt_vars),
            frozenset(self.constraints.items()),
        )

    def __repr__(self) -> str:
        return f"IndexingMap({self.to_string(multiline=False)!r})"

    def __str__(self) -> str:
        return self.to_string()

    def to_string(self, multiline: bool = True, spell_out_empty: bool = False) -> str:
        """The map in XLA's syntax; ``multiline`` puts ``domain:`` and each
        bound on its own line, as XLA's docs/indexing.md prints them. A known
        empty map prints as XLA prints it, ``KNOWN EMPTY``, unless
        ``spell_out_empty``: then its variables and results are printed with the
        constraint ``0 in [1, 0]``, so that the text parses back to a map of the
        same arity (which ``KNOWN EMPTY`` does not say)."""
        if self.affine_map is None:
            return "UNDEFINED"
        if self._known_empty and not spell_out_empty:
            return "KNOWN EMPTY"
        dims, ranges, rts = self.dim_names(), self.range_names(), self.rt_names()
        symbols = ranges + rts
        text = f"({', '.join(dims)})"
        if ranges:
            text += f"[{', '.join(ranges)}]"
        if rts:
            text += f"{{{', '.join(rts)}}}"
        text += f" -> ({', '.join(affine.print_expr(e, dims, symbols) for e in self.results)})"
        if not (dims or symbols or self._known_empty):
            return text
        lines = [f"{name} in {var.bounds}" for name, var in zip(dims + symbols, self.dim_vars + self.symbol_vars)]
        lines += sorted(f"{affine.print_expr(e, dims, symbols)} in {b}" for e, b in self.constraints.items())
        if self._known_empty:
            lines.append("0 in [1, 0]")
        if multiline:
            return f"{text},\ndomain:\n" + ",\n".join(lines)
        return f"{text}, domain: " + ", ".join(lines)

    # --- evaluation ---

    def evaluate(self, dims: Sequence[int], symbols: Sequence[int] = ()) -> tuple[int, ...]:
        """The indices the map gives for one point (bounds are not checked)."""
        self._check_arity(dims, symbols)
        return tuple(affine.evaluate(e, dims, symbols) for e in self.results)

    def contains(self, dims: Sequence[int], symbols: Sequence[int] = ()) -> bool:
        """Whether the point is in the domain: every bound and constraint holds."""
        self._check_arity(dims, symbols)
        if self._known_empty:
            return False
        if not all(v.bounds.contains(x) for v, x in zip(self.dim_vars, dims)):
            return False
        if not all(v.bounds.contains(x) for v, x in zip(self.symbol_vars, symbols)):
            return False
        return all(b.contains(affine.evaluate(e, dims, symbols)) for e, b in self.constraints.items())

    def _check_arity(self, dims: Sequence[int], symbols: Sequence[int]) -> None:
        if self.affine_map is None:
            raise ValueError("an undefined indexing map has no values")
        if len(dims) != self.num_dims or len(symbols) != self.num_symbols:
            raise ValueError(
                f"the map takes {self.num_dims} dimensions and {self.num_symbols} symbols, "
                f"got {len(dims)} and {len(symbols)}"
            )

    def domain(self) -> Iterator[tuple[tuple[int, ...], tuple[int, ...]]]:
        """Every ``(dims, symbols)`` point of the domain (enumerates the box)."""
        if self._known_empty or self.affine_map is None:
            return
        boxes = [range(v.bounds.lower, v.bounds.upper + 1) for v in self.dim_vars + self.symbol_vars]
        for point in itertools.product(*boxes):
            dims, symbols = point[: self.num_dims], point[self.num_dims :]
            if all(b.contains(affine.evaluate(e, dims, symbols)) for e, b in self.constraints.items()):
                yield dims, symbols

    def box_arrays(self, max_points: int = 1 << 26) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """Every point of the variables' bounds (constraints ignored) as flat
        numpy arrays, one per dimension and per symbol."""
        if self.affine_map is None:
            raise ValueError("an undefined indexing map has no domain")
        variables = self.dim_vars + self.symbol_vars
        count = 1
        for v in variables:
            count *= v.bounds.size()
        if count > max_points:
            raise ValueError(f"the domain has {count} points, more than {max_points} to enumerate")
        axes = [np.arange(v.bounds.lower, v.bounds.upper + 1, dtype=np.int64) for v in variables]
        grids = [g.ravel() for g in np.meshgrid(*axes, indexing="ij")] if axes else []
        return grids[: self.num_dims], grids[self.num_dims :]

    def contains_arrays(self, dims: Sequence[np.ndarray], symbols: Sequence[np.ndarray]) -> np.ndarray:
        """``contains`` at many points at once: a boolean array."""
        keep = np.full(len([*dims, *symbols][0]), not self._known_empty)
        for var, values in zip(self.dim_vars + self.symbol_vars, [*dims, *symbols]):
            keep &= (values >= var.bounds.lower) & (values <= var.bounds.upper)
        for expr, bounds in self.constraints.items():
            value = affine.evaluate(expr, dims, symbols)
            keep &= (value >= bounds.lower) & (value <= bounds.upper)
        return keep

    def domain_arrays(self, max_points: int = 1 << 26) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """The domain as flat numpy arrays, one per dimension and per symbol
        (every point of the box that meets the constraints)."""
        dims, symbols = self.box_arrays(max_points)
        if self._known_empty or (self.constraints and (dims or symbols)):
            keep = self.contains_arrays(dims, symbols)
            dims, symbols = [g[keep] for g in dims], [g[keep] for g in symbols]
        return dims, symbols

    def point_count(self, dims: Sequence[np.ndarray], symbols: Sequence[np.ndarray]) -> int:
        """The number of points in arrays from ``domain_arrays`` (a map without
        variables has one point unless it is known empty)."""
        variables = [*dims, *symbols]
        return len(variables[0]) if variables else int(not self._known_empty)

    def evaluate_arrays(self, dims: Sequence[np.ndarray], symbols: Sequence[np.ndarray]) -> list[np.ndarray]:
        """The results at many points at once (numpy arrays of equal length)."""
        length = len(dims[0]) if dims else len(symbols[0]) if symbols else 1
        return [affine.evaluate(e, dims, symbols) + np.zeros(length, np.int64) for e in self.results]

    def touched_elements(self) -> set[tuple[int, ...]]:
        """The exact set of indices the map produces over its domain."""
        dims, symbols = self.domain_arrays()
        if not self.point_count(dims, symbols):
            return set()
        if not (dims or symbols):
            return {self.evaluate((), ())}
        return set(zip(*(r.tolist() for r in self.evaluate_arrays(dims, symbols)))) if self.results else {()}

    def touched_ranges(self) -> list[Interval]:
        """For each result, an interval holding every index it takes over the
        domain (exact for sums of variables; an enclosure in general)."""
        ranges = RangeEvaluator(self, use_constraints=True)
        return [ranges.range(e) for e in self.results]

    # --- transformations ---

    def compose(self, producer: IndexingMap) -> IndexingMap:
        """``producer ∘ self``: this map (consumer indices → the indices of an
        operand) followed by ``producer`` (that operand's indices → its own
        operands'). The result takes this map's dimensions; its range
        variables are the producer's then this map's, and likewise its runtime
        variables. The producer's domain becomes constraints on this map's
        results."""
        if self.affine_map is None or producer.affine_map is None:
            return IndexingMap.undefined()
        # A known-empty map has no results (XLA's ``GetKnownEmpty``): composing with it gives an empty map.
        if self._known_empty or producer._known_empty:
            return IndexingMap.known_empty(self.num_dims)
        if len(self.results) != producer.num_dims:
            raise ValueError(f"cannot compose: {len(self.results)} results into {producer.num_dims} dimensions")
        p_ranges, c_ranges = len(producer.range_vars), len(self.range_vars)
        p_rts = len(producer.rt_vars)
        # New symbol positions: [producer ranges | consumer ranges | producer rts | consumer rts].
        consumer_symbols = [affine.sym(p_ranges + i) for i in range(c_ranges)]
        consumer_symbols += [affine.sym(p_ranges + c_ranges + p_rts + i) for i in range(len(self.rt_vars))]
        producer_symbols = [affine.sym(i) for i in range(p_ranges)]
        producer_symbols += [affine.sym(p_ranges + c_ranges + i) for i in range(p_rts)]
        dims = [affine.dim(i) for i in range(self.num_dims)]
        consumer_results = [affine.replace(e, dims, consumer_symbols) for e in self.results]
        results = tuple(affine.replace(e, consumer_results, producer_symbols) for e in producer.results)
        constraints = [(affine.replace(e, dims, consumer_symbols), b) for e, b in self.constraints.items()]
        constraints += [
            (affine.replace(e, consumer_results, producer_symbols), b) for e, b in producer.constraints.items()
        ]
        constraints += [(e, v.bounds) for e, v in zip(consumer_results, producer.dim_vars)]
        return IndexingMap.from_exprs(
            results,
            self.dim_vars,
            producer.range_vars + self.range_vars,
            producer.rt_vars + self.rt_vars,
            constraints,
        )

    def remove_unused_symbols(self) -> IndexingMap:
        """Drops range and runtime variables the results do not use, with the
        constraints that mention only such variables. A variable in a
        constraint with a used variable stays: it still limits the domain."""
        if self.affine_map is None or self._known_empty:
            return self
        used: set[int] = set()
        for e in self.results:
            used |= _symbols_of(e)
        # A constraint that involves a dimension or a used symbol keeps all its symbols.
        mentions = [(_dims_of(e), _symbols_of(e)) for e in self.constraints]
        changed = True
        while changed:
            changed = False
            for dims_in, symbols_in in mentions:
                if (dims_in or symbols_in & used) and not symbols_in <= used:
                    used |= symbols_in
                    changed = True
        if len(used) == self.num_symbols:
            return self
        keep = [i for i in range(self.num_symbols) if i in used]
        renumber = {old: new for new, old in enumerate(keep)}
        new_symbols = [affine.sym(renumber[i]) if i in renumber else affine.const(0) for i in range(self.num_symbols)]
        dims = [affine.dim(i) for i in range(self.num_dims)]
        results = [affine.replace(e, dims, new_symbols) for e in self.results]
        constraints = [
            (affine.replace(e, dims, new_symbols), b) for e, b in self.constraints.items() if _symbols_of(e) <= used
        ]
        n_range = len(self.range_vars)
        return IndexingMap.from_exprs(
            results,
            self.dim_vars,
            [v for i, v in enumerate(self.range_vars) if i in used],
            [v for i, v in enumerate(self.rt_vars) if n_range + i in used],
            constraints,
        )

    def rename(
        self,
        dim_names: Sequence[str] | None = None,
        range_names: Sequence[str] | None = None,
        rt_names: Sequence[str] | None = None,
    ) -> IndexingMap:
        """The same map with its variables printed under other names."""

        def named(variables: tuple[Variable, ...], names: Sequence[str] | None) -> tuple[Variable, ...]:
            if names is None:
                return variables
            if len(names) != len(variables):
                raise ValueError(f"{len(names)} names for {len(variables)} variables")
            return tuple(Variable(v.bounds, n) for v, n in zip(variables, names))

        renamed = IndexingMap.__new__(IndexingMap)
        renamed.affine_map = self.affine_map
        renamed.dim_vars = named(self.dim_vars, dim_names)
        renamed.range_vars = named(self.range_vars, range_names)
        renamed.rt_vars = named(self.rt_vars, rt_names)
        renamed.constraints = dict(self.constraints)
        renamed._known_empty = self._known_empty
        renamed._hash = None
        return renamed

    def reads_its_own_indices(self) -> bool:
        """Whether the results are exactly ``d0, d1, ...`` over all the
        dimensions: the access of an elementwise op (bounds aside)."""
        results = self.results if self.affine_map is not None else ()
        return len(results) == self.num_dims and all(
            isinstance(r, AffineDimExpr) and r.position == i for i, r in enumerate(results))

    def sort_summands(self) -> IndexingMap:
        """The same map with sums in today's XLA print order (see ``affine.sort_summands``)."""
        if self.affine_map is None or self.is_known_empty():
            return self
        results = [affine.sort_summands(r) for r in self.results]
        constraints = [(affine.sort_summands(e), b) for e, b in self.constraints.items()]
        return IndexingMap.from_exprs(results, self.dim_vars, self.range_vars, self.rt_vars, constraints)

    def simplify(self) -> IndexingMap:
        """The map with its expressions and constraints rewritten using the
        ranges of their variables (XLA's docs/indexing.md)."""
        return _simplify_map(self)

    # --- text ---

    @staticmethod
    def parse(text: str) -> IndexingMap:
        """Reads a map in XLA's syntax (any whitespace)."""
        return _parse(Cursor(text))


def _symbols_of(expr: AffineExpr) -> set[int]:
    dims: set[int] = set()
    symbols: set[int] = set()
    affine.uses(expr, dims, symbols)
    return symbols


def _dims_of(expr: AffineExpr) -> set[int]:
    dims: set[int] = set()
    affine.uses(expr, dims, set())
    return dims


def _parse(cursor: Cursor) -> IndexingMap:
    if cursor.eat("UNDEFINED"):
        _expect_end(cursor)
        return IndexingMap.undefined()
    if cursor.eat("KNOWN"):
        cursor.expect("EMPTY", "after 'KNOWN'")
        _expect_end(cursor)
        return IndexingMap.known_empty()
    dims = _names(cursor, "(", ")", "dimension variables")
    ranges = _names(cursor, "[", "]", "range variables") if cursor.peek("[") else []
    rts = _names(cursor, "{", "}", "runtime variables") if cursor.peek("{") else []
    all_names = dims + ranges + rts
    seen: set[str] = set()
    for name in all_names:
        if name in seen:
            raise cursor.error(f"variable '{name}' is declared twice")
        seen.add(name)
    names: dict[str, AffineExpr] = {n: affine.dim(i) for i, n in enumerate(dims)}
    names.update({n: affine.sym(i) for i, n in enumerate(ranges + rts)})
    parser = affine.ExprParser(cursor, names)
    cursor.expect("->", "after the variables of an indexing map")
    results = cursor.delimited("(", ")", parser.parse, "the results of an indexing map")
    bounds: dict[str, Interval] = {}
    constraints: list[tuple[AffineExpr, Interval]] = []
    if all_names or cursor.peek(","):
        cursor.expect(",", "before 'domain:'")
        cursor.expect("domain", "after the results")
        cursor.expect(":", "after 'domain'")
        more = True
        for name in all_names:
            cursor.skip_space()
            at = cursor.pos
            if cursor.ident() != name:
                raise cursor.error(f"expected the bounds of '{name}', got {cursor.found()}", at)
            cursor.pos += len(name)
            cursor.expect("in", f"after '{name}'")
            bounds[name] = _interval(cursor)
            more = cursor.eat(",")
            if not more:
                break
        # After a comma come constraints, then perhaps XLA's older is_simplified flag.
        while more and not cursor.peek("is_simplified"):
            expr = parser.parse()
            cursor.expect("in", "after a constraint expression")
            constraints.append((expr, _interval(cursor)))
            more = cursor.eat(",")
        missing = [n for n in all_names if n not in bounds]
        if missing:
            raise cursor.error(f"expected ',' and the bounds of '{missing[0]}', got {cursor.found()}")
        if cursor.eat("is_simplified"):
            cursor.expect(":", "after 'is_simplified'")
            if not (cursor.eat("true") or cursor.eat("false")):
                raise cursor.error(f"expected true or false, got {cursor.found()}")
    _expect_end(cursor)
    return IndexingMap.from_exprs(
        results,
        [Variable(bounds[n], _custom_name(n, "d", i)) for i, n in enumerate(dims)],
        [Variable(bounds[n], _custom_name(n, "s", i)) for i, n in enumerate(ranges)],
        [Variable(bounds[n], _custom_name(n, "rt", i)) for i, n in enumerate(rts)],
        constraints,
    )


def _custom_name(name: str, prefix: str, index: int) -> str:
    """The name to keep: none when it is the default one."""
    return "" if name == f"{prefix}{index}" else name


def _names(cursor: Cursor, open_: str, close: str, what: str) -> list[str]:
    def read() -> str:
        name = cursor.ident()
        if name is None:
            raise cursor.error(f"expected a variable name in {what}, got {cursor.found()}")
        cursor.pos += len(name)
        return name

    return cursor.delimited(open_, close, read, what)


def _interval(cursor: Cursor) -> Interval:
    cursor.expect("[", "to start an interval")
    lower = cursor.int("the lower bound")
    cursor.expect(",", "in an interval")
    upper = cursor.int("the upper bound")
    cursor.expect("]", "to end an interval")
    return Interval(lower, upper)


def _expect_end(cursor: Cursor) -> None:
    if not cursor.at_end():
        raise cursor.error(f"unexpected {cursor.found()} after the indexing map")


# --- simplification (XLA's docs/indexing.md) ---


def _simplify_map(indexing_map: IndexingMap) -> IndexingMap:
    """Simplifies constraints (tightening variable bounds, dropping the ones
    that always hold, detecting unsatisfiable ones) and then the results,
    until nothing changes."""
    if indexing_map.is_undefined() or indexing_map.is_known_empty():
        return indexing_map
    current = indexing_map
    for _ in range(16):
        simplified = _simplify_once(current)
        if simplified.is_known_empty() or simplified == current:
            return simplified
        current = simplified
    return current


def _simplify_once(indexing_map: IndexingMap) -> IndexingMap:
    # Constraints are simplified without using themselves as facts.
    constraint_simplifier = ExprSimplifier(RangeEvaluator(indexing_map, use_constraints=False))
    constraints: list[tuple[AffineExpr, Interval]] = []
    for expr, bounds in indexing_map.constraints.items():
        expr = constraint_simplifier.simplify(expr)
        while True:
            narrowed = narrow_constraint_once(constraint_simplifier, expr, bounds)
            if narrowed is None:
                break
            expr, bounds = narrowed
        expr_range = constraint_simplifier.ranges.range(expr)
        if bounds.contains(expr_range):
            continue  # always holds
        if expr_range.intersect(bounds).is_empty():
            return IndexingMap.known_empty(indexing_map.num_dims, indexing_map.num_symbols)
        constraints.append((expr, bounds))
    narrowed_map = IndexingMap(
        indexing_map.affine_map,
        indexing_map.dim_vars,
        indexing_map.range_vars,
        indexing_map.rt_vars,
        _merge_mod_constraints(indexing_map, constraints),
    )
    if narrowed_map.is_known_empty():
        return narrowed_map
    result_simplifier = ExprSimplifier(RangeEvaluator(narrowed_map, use_constraints=True))
    results = tuple(result_simplifier.simplify(e) for e in narrowed_map.results)
    return IndexingMap.from_exprs(
        results, narrowed_map.dim_vars, narrowed_map.range_vars, narrowed_map.rt_vars, narrowed_map.constraints
    )


def _merge_mod_constraints(
    indexing_map: IndexingMap, constraints: list[tuple[AffineExpr, Interval]]
) -> list[tuple[AffineExpr, Interval]]:
    """``x mod a in [r, r]`` and ``x mod b in [r, r]`` become ``x mod lcm(a, b)
    in [r, r]``; on a variable, such a constraint also moves its bounds to
    the first and last values that meet it."""
    merged: dict[tuple[AffineExpr, int], int] = {}
    others = []
    for expr, bounds in constraints:
        modulus = binary_rhs_constant(expr, MOD)
        if modulus is not None and modulus > 0 and bounds.is_point() and 0 <= bounds.lower < modulus:
            key = (expr.lhs, bounds.lower)
            merged[key] = math.lcm(merged.get(key, 1), modulus)
        else:
            others.append((expr, bounds))
    result = []
    ranges = RangeEvaluator(indexing_map)
    for (x, residue), modulus in merged.items():
        result.append((affine.mod(x, modulus), Interval(residue, residue)))
        if isinstance(x, (AffineDimExpr, AffineSymExpr)):
            current = ranges.range(x)
            lower = current.lower + (residue - current.lower) % modulus
            upper = current.upper - (current.upper - residue) % modulus
            result.append((x, Interval(lower, upper)))
    return result + others
