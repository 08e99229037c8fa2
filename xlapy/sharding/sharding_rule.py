"""Shardy's op sharding rule, ``#sdy.op_sharding_rule<...>``: how the
dimensions of an op's operands and results decompose into *factors*, so that
a sharding of one tensor can be projected onto the others.

    #sdy.op_sharding_rule<([i, k], [k, j])->([i, j]) {i=8, j=16, k=32} reduction={k}>

Each operand and result maps each of its dimensions to a list of factor
indices (several for a dimension that is a product of factors, e.g. ``[ij]``
after a reshape; none for a scalar, ``[]``). Factors are spelled ``i`` ..
``z`` and then ``z_1``, ``z_2``, ... Some factors are special: a reduction
factor is absent from the results (a dot's contracting dimension), a
need-replication factor cannot stay sharded (a sort dimension), a
permutation factor needs data to move between devices (a sliced or padded
dimension), and propagation never goes along a blocked factor.

``OpShardingRuleBuilder`` builds rules the way Shardy's registry does: add
factors one at a time; any dimension left without a factor gets a factor of
size 1 of its own when the rule is built."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum

from xlapy.errors import VerifyError
from xlapy.syntax import Cursor

DimMapping = tuple[int, ...]
TensorMapping = tuple[DimMapping, ...]

# `i` .. `z` name factors 0..17; later factors are `z_1`, `z_2`, ...
_LETTERS = "ijklmnopqrstuvwxyz"
_LAST_LETTER_INDEX = len(_LETTERS) - 1
_INT64_MAX = 2**63 - 1
# An MLIR bare identifier: what the attribute parser reads as one keyword.
_KEYWORD = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*")
_SIZE = re.compile(r"-?\d+")
_PREFIX = "#sdy.op_sharding_rule"


class FactorType(Enum):
    """What keeping a factor sharded costs (a factor is in at most one of the
    three special sets; every other factor passes through)."""

    PASS_THROUGH = "pass_through"
    REDUCTION = "reduction"
    NEED_REPLICATION = "need_replication"
    PERMUTATION = "permutation"


def factor_symbol(index: int) -> str:
    """The name Shardy prints for factor ``index``: ``i``..``z``, then ``z_1``, ``z_2``, ..."""
    if index <= _LAST_LETTER_INDEX:
        return _LETTERS[index]
    return f"z_{index - _LAST_LETTER_INDEX}"


def _symbols(factors: Sequence[int]) -> str:
    return ", ".join(factor_symbol(f) for f in factors)


def _tensor_text(mapping: TensorMapping) -> str:
    return "[" + ", ".join("".join(factor_symbol(f) for f in dim) for dim in mapping) + "]"


@dataclass(frozen=True)
class OpShardingRule:
    factor_sizes: tuple[int, ...]
    # Per operand (in operand order), per dimension: the factor indices, major to minor.
    operand_mappings: tuple[TensorMapping, ...]
    # Per result (in result order), as for operands.
    result_mappings: tuple[TensorMapping, ...]
    reduction_factors: tuple[int, ...] = ()
    need_replication_factors: tuple[int, ...] = ()
    permutation_factors: tuple[int, ...] = ()
    blocked_propagation_factors: tuple[int, ...] = ()
    # A rule the user wrote on a custom call: kept as is by every pass.
    is_custom: bool = False

    def __post_init__(self) -> None:
        # Accept any nested sequences, store tuples: rules are hashable values.
        def tensors(mappings) -> tuple[TensorMapping, ...]:
            return tuple(tuple(tuple(int(f) for f in dim) for dim in tensor) for tensor in mappings)

        set_ = object.__setattr__
        set_(self, "factor_sizes", tuple(int(s) for s in self.factor_sizes))
        set_(self, "operand_mappings", tensors(self.operand_mappings))
        set_(self, "result_mappings", tensors(self.result_mappings))
        for name in ("reduction_factors", "need_replication_factors", "permutation_factors",
                     "blocked_propagation_factors"):
            set_(self, name, tuple(int(f) for f in getattr(self, name)))
        set_(self, "is_custom", bool(self.is_custom))

    def __hash__(self) -> int:
        # Rules key the caches of propagation, one lookup per op visited:
        # hash the nested tuples once (ints only, so the same in every process).
        cached = self.__dict__.get("_hash")
        if cached is None:
            cached = hash((self.factor_sizes, self.operand_mappings, self.result_mappings, self.reduction_factors,
                           self.need_replication_factors, self.permutation_factors,
                           self.blocked_propagation_factors, self.is_custom))
            object.__setattr__(self, "_hash", cached)
        return cached

    # -- views -----------------------------------------------------------------
    @property
    def num_factors(self) -> int:
        return len(self.factor_sizes)

    @property
    def num_operands(self) -> int:
        return len(self.operand_mappings)

    @property
    def num_results(self) -> int:
        return len(self.result_mappings)

    @property
    def tensor_mappings(self) -> tuple[TensorMapping, ...]:
        """Operands then results: the tensor indices propagation uses."""
        return self.operand_mappings + self.result_mappings

    def factor_type(self, factor: int) -> FactorType:
        if factor in self.reduction_factors:
            return FactorType.REDUCTION
        if factor in self.need_replication_factors:
            return FactorType.NEED_REPLICATION
        if factor in self.permutation_factors:
            return FactorType.PERMUTATION
        return FactorType.PASS_THROUGH

    def is_pass_through_factor(self, factor: int) -> bool:
        return self.factor_type(factor) is FactorType.PASS_THROUGH

    def is_reduction_factor(self, factor: int) -> bool:
        return factor in self.reduction_factors

    def is_need_replication_factor(self, factor: int) -> bool:
        return factor in self.need_replication_factors

    def is_permutation_factor(self, factor: int) -> bool:
        return factor in self.permutation_factors

    def is_blocked_propagation_factor(self, factor: int) -> bool:
        return factor in self.blocked_propagation_factors

    def non_scalar_tensor_indices(self) -> list[int]:
        return [i for i, mapping in enumerate(self.tensor_mappings) if mapping]

    def is_factor_in_all_non_scalar_tensors(self, factor: int) -> bool:
        return all(any(factor in dim for dim in mapping) for mapping in self.tensor_mappings if mapping)

    def is_batching_factor(self, factor: int) -> bool:
        """A pass-through factor of every non-scalar tensor (e.g. any factor of a pointwise op)."""
        return self.is_pass_through_factor(factor) and self.is_factor_in_all_non_scalar_tensors(factor)

    def batching_factors(self) -> list[int]:
        return [f for f in range(self.num_factors) if self.is_batching_factor(f)]

    def tensor_sizes(self) -> list[int]:
        """Per tensor (operands then results), the product of its factor sizes."""
        sizes = []
        for mapping in self.tensor_mappings:
            size = 1
            for dim in mapping:
                for factor in dim:
                    size *= self.factor_sizes[factor]
            sizes.append(size)
        return sizes

    def has_dimensions_with_multiple_factors(self) -> bool:
        return any(len(dim) > 1 for mapping in self.tensor_mappings for dim in mapping)

    # -- text --------------------------------------------------------------------
    def body(self) -> str:
        """The rule without the ``#sdy.op_sharding_rule`` prefix: ``<(...)->(...) ...>``."""
        text = "<(" + ", ".join(map(_tensor_text, self.operand_mappings)) + ")->("
        text += ", ".join(map(_tensor_text, self.result_mappings)) + ")"
        if self.factor_sizes:
            text += " {" + ", ".join(f"{factor_symbol(i)}={s}" for i, s in enumerate(self.factor_sizes)) + "}"
        for keyword, factors in self._special_sets():
            if factors:
                text += f" {keyword}={{{_symbols(factors)}}}"
        if self.is_custom:
            text += ", custom"
        return text + ">"

    def __str__(self) -> str:
        return _PREFIX + self.body()

    def _special_sets(self) -> tuple[tuple[str, tuple[int, ...]], ...]:
        return (("reduction", self.reduction_factors), ("need_replication", self.need_replication_factors),
                ("permutation", self.permutation_factors),
                ("blocked_propagation", self.blocked_propagation_factors))

    @staticmethod
    def parse(text: str, source: str | None = None) -> OpShardingRule:
        """The rule ``text`` spells (all of it), e.g. ``#sdy.op_sharding_rule<([i])->([i]) {i=4}>``."""
        cursor = Cursor(text, source=source)
        rule = parse_op_sharding_rule(cursor)
        if not cursor.at_end():
            raise cursor.error(f"unexpected {cursor.found()} after the sharding rule")
        return rule

    # -- verification ------------------------------------------------------------
    def verify(self, operand_dims: Sequence[Sequence[int]], result_dims: Sequence[Sequence[int]],
               where: str = "op", is_custom_call: bool = True) -> None:
        """Check the rule against the op it is on (the dimension sizes of its
        operands and results), as Shardy's verifier does; ``VerifyError``
        naming ``where`` otherwise."""
        def fail(message: str) -> None:
            raise VerifyError(f"{where}: {message}")

        if self.is_custom and not is_custom_call:
            fail("can only define custom sharding rules on custom-call")
        seen: set[int] = set()
        for kind, mappings, dims in (("operand", self.operand_mappings, operand_dims),
                                     ("result", self.result_mappings, result_dims)):
            self._verify_mappings(kind, mappings, dims, seen, fail)
        unused = next((f for f in range(self.num_factors) if f not in seen), None)
        if unused is not None:
            fail(f"has factor {factor_symbol(unused)}={self.factor_sizes[unused]} that isn't used in operand and "
                 "result mappings")
        for _, factors in self._special_sets():
            if list(factors) != sorted(factors):
                fail("indices of special factors must be sorted")
            if len(set(factors)) != len(factors):
                fail("indices of special factors must be unique")
            for factor in factors:
                if not 0 <= factor < self.num_factors:
                    fail(f"index must be less than {self.num_factors}, got: {factor}")
        special = self.reduction_factors + self.need_replication_factors + self.permutation_factors
        if len(set(special)) != len(special):
            fail("a factor can only be in one of the reduction, need replication, or permutation factor sets")
        in_results = {f for mapping in self.result_mappings for dim in mapping for f in dim}
        if any(f in in_results for f in self.reduction_factors):
            fail("reduction factor cannot be in result mappings")

    def _verify_mappings(self, kind: str, mappings: tuple[TensorMapping, ...], dims: Sequence[Sequence[int]],
                         seen: set[int], fail: Callable[[str], None]) -> None:
        if len(mappings) != len(dims):
            fail(f"number of {kind}s and mappings must match: {len(dims)} != {len(mappings)}")
        if not mappings:
            fail(f"number of {kind}s mappings cannot be 0. Op sharding rules can only be defined on operations "
                 "with at least one operand and result.")
        for index, (mapping, shape) in enumerate(zip(mappings, dims)):
            name = kind if len(mappings) == 1 else f"{kind} {index}"
            if len(mapping) != len(shape):
                fail(f"{name} - mapping rank must match: {len(mapping)} != {len(shape)}")
            in_tensor: set[int] = set()
            for dim in mapping:
                if not dim:
                    fail(f"{name} - dim mapping must have at least one factor")
                for factor in dim:
                    if not 0 <= factor < self.num_factors:
                        fail(f"{name} - expecting factor indices to be within 0<=...<num_factors; received: "
                             f"{factor}, num_factors: {self.num_factors}")
                    if factor in in_tensor:
                        fail(f"{name} - cannot reuse factors for the same tensor value")
                    if self.factor_sizes[factor] == 1 and len(dim) > 1:
                        fail(f"{name} - dim mapping can't have a factor of size 1 if there are multiple factors")
                    in_tensor.add(factor)
            seen |= in_tensor


# -- parsing -------------------------------------------------------------------------

def parse_op_sharding_rule(cursor: Cursor) -> OpShardingRule:
    """Read ``#sdy.op_sharding_rule<...>`` (or just ``<...>``) at the cursor."""
    if not cursor.eat(_PREFIX) and not cursor.peek("<"):
        raise cursor.error(f"expected '{_PREFIX}<', got {cursor.found()}")
    cursor.expect("<", "to start the sharding rule")
    operands = _tensor_mappings(cursor, "operand")
    cursor.expect("->", "between the operand and result mappings")
    results = _tensor_mappings(cursor, "result")
    sizes = _factor_sizes(cursor)
    special: dict[str, tuple[int, ...]] = {}
    # Each special set is optional, but they come in this order.
    for keyword in ("reduction", "need_replication", "permutation", "blocked_propagation"):
        if cursor.ident() == keyword:
            cursor.pos += len(keyword)
            cursor.expect("=", f"after '{keyword}'")
            special[keyword] = tuple(cursor.delimited("{", "}", lambda: _single_symbol(cursor),
                                                      f"the {keyword} factors"))
    is_custom = False
    if cursor.eat(","):
        if cursor.ident() != "custom":
            raise cursor.error(f"expected 'custom', got {cursor.found()}")
        cursor.pos += len("custom")
        is_custom = True
    if not cursor.eat(">"):
        raise cursor.error(f"expected '>' to end the sharding rule, got {cursor.found()}")
    return OpShardingRule(sizes, operands, results, special.get("reduction", ()),
                          special.get("need_replication", ()), special.get("permutation", ()),
                          special.get("blocked_propagation", ()), is_custom)


def _tensor_mappings(cursor: Cursor, kind: str) -> tuple[TensorMapping, ...]:
    # `([i, j], [])`: one or more tensor mappings.
    cursor.expect("(", f"to start the {kind} mappings")
    mappings = [_tensor_mapping(cursor, kind)]
    while cursor.eat(","):
        mappings.append(_tensor_mapping(cursor, kind))
    cursor.expect(")", f"to end the {kind} mappings")
    return tuple(mappings)


def _tensor_mapping(cursor: Cursor, kind: str) -> TensorMapping:
    # `[ij, k]`; as in MLIR, a dimension with no symbols (`[i, ]`) maps to no
    # factor, which the verifier rejects.
    cursor.expect("[", f"to start an {kind} mapping")
    dims: list[DimMapping] = []
    if cursor.eat("]"):
        return ()
    while True:
        dims.append(_dim_mapping(cursor))
        if cursor.eat("]"):
            return tuple(dims)
        if not cursor.eat(","):
            raise cursor.error(f"expected ',' or ']' in an {kind} mapping, got {cursor.found()}")


def _dim_mapping(cursor: Cursor) -> DimMapping:
    cursor.skip_space()
    match = _KEYWORD.match(cursor.text, cursor.pos)
    if not match:
        return ()
    factors = []
    pos = match.start()
    while pos < match.end():
        index, pos = _symbol_at(cursor, pos, match.end())
        factors.append(index)
    cursor.pos = match.end()
    return tuple(factors)


def _symbol_at(cursor: Cursor, pos: int, end: int) -> tuple[int, int]:
    """The factor index of the symbol at ``pos`` (inside a word ending at
    ``end``) and the position after it: ``k`` -> 2, ``z_3`` -> 20."""
    text = cursor.text
    if text.startswith("z_", pos):
        digits_end = pos + 2
        while digits_end < end and text[digits_end].isdigit():
            digits_end += 1
        digits = text[pos + 2:digits_end]
        if not digits:
            raise cursor.error(f"expecting integer after 'z_'. Received: '{text[pos:end]}'", pos)
        if digits[0] == "0":
            raise cursor.error(f"expecting positive integer without leading zeros. Received: '{digits}'", pos + 2)
        if int(digits) > _INT64_MAX:
            raise cursor.error(f"expecting symbol index <=2^63-1. Received: '{digits}'", pos + 2)
        return int(digits) + _LAST_LETTER_INDEX, digits_end
    if text[pos] not in _LETTERS:
        raise cursor.error(f"expecting symbol from 'i' to 'z'. Received: '{text[pos]}'", pos)
    return _LETTERS.index(text[pos]), pos + 1


def _single_symbol(cursor: Cursor) -> int:
    word = cursor.match(_KEYWORD, "a factor symbol")
    index, pos = _symbol_at(cursor, word.start(), word.end())
    if pos != word.end():
        raise cursor.error(f"expecting single factor symbol: {cursor.text[pos:word.end()]}", pos)
    return index


def _factor_sizes(cursor: Cursor) -> tuple[int, ...]:
    # `{i=8, j=16}`: optional; factors in index order, each exactly once.
    if not cursor.peek("{"):
        return ()

    def size_entry() -> int:
        cursor.skip_space()
        start = cursor.pos
        index = _single_symbol(cursor)
        expected = len(sizes)
        if index != expected:
            raise cursor.error("expecting factor indices to be ordered like an iota ([0,1,2,...], e.g. {i=#, j=#, "
                               f"...}}). Expecting factor index symbol '{factor_symbol(expected)}', received: "
                               f"'{factor_symbol(index)}'", start)
        cursor.expect("=", f"after factor '{factor_symbol(index)}'")
        cursor.skip_space()
        size_pos = cursor.pos
        size = int(cursor.match(_SIZE, "a factor size").group())
        if abs(size) > _INT64_MAX:
            raise cursor.error(f"factor size {size} does not fit in 64 bits", size_pos)
        sizes.append(size)
        return size

    sizes: list[int] = []
    cursor.delimited("{", "}", size_entry, "the factor sizes")
    return tuple(sizes)


# -- building ------------------------------------------------------------------------

NULL_DIM = -1  # "this tensor has no dimension for the factor"


class OpShardingRuleBuilder:
    """Builds a rule factor by factor, for an op whose operands and results
    have the given ranks."""

    def __init__(self, operand_ranks: Sequence[int], result_ranks: Sequence[int]):
        # Per tensor, per dimension: the factors added so far, major to minor.
        self._operands: list[list[list[int]]] = [[[] for _ in range(r)] for r in operand_ranks]
        self._results: list[list[list[int]]] = [[[] for _ in range(r)] for r in result_ranks]
        self._sizes: list[int] = []
        self._special: dict[FactorType, list[int]] = {}
        self._blocked: list[int] = []

    def _new_factor(self, size: int, factor_type: FactorType, blocked: bool) -> int:
        index = len(self._sizes)
        self._sizes.append(size)
        if factor_type is not FactorType.PASS_THROUGH:
            self._special.setdefault(factor_type, []).append(index)
        if blocked:
            self._blocked.append(index)
        return index

    def add_factor(self, operand_dims: Sequence[int], result_dims: Sequence[int], size: int,
                   factor_type: FactorType = FactorType.PASS_THROUGH, blocked: bool = False) -> OpShardingRuleBuilder:
        """A new factor, mapped to dimension ``operand_dims[k]`` of operand k
        and ``result_dims[k]`` of result k (``NULL_DIM``: not in that tensor).
        The lists may be shorter than the operands/results: the rest get none."""
        index = self._new_factor(size, factor_type, blocked)
        for tensors, dims in ((self._operands, operand_dims), (self._results, result_dims)):
            for tensor, dim in zip(tensors, dims):
                if dim != NULL_DIM:
                    tensor[dim].append(index)
        return self

    def add_pointwise_factor(self, dim: int, size: int, factor_type: FactorType = FactorType.PASS_THROUGH,
                             blocked: bool = False) -> OpShardingRuleBuilder:
        """A new factor on dimension ``dim`` of every operand and result that
        has one (scalars have none)."""
        index = self._new_factor(size, factor_type, blocked)
        for tensor in self._operands + self._results:
            if dim < len(tensor):
                tensor[dim].append(index)
        return self

    def add_pointwise(self, shape: Sequence[int],
                      factor_type: Callable[[int], FactorType] = lambda dim: FactorType.PASS_THROUGH,
                      blocked: bool = False) -> OpShardingRuleBuilder:
        for dim, size in enumerate(shape):
            self.add_pointwise_factor(dim, size, factor_type(dim), blocked)
        return self

    def add_pointwise_if(self, shape: Sequence[int], keep: Callable[[int], bool],
                         factor_type: Callable[[int], FactorType] = lambda dim: FactorType.PASS_THROUGH
                         ) -> OpShardingRuleBuilder:
        for dim, size in enumerate(shape):
            if keep(dim):
                self.add_pointwise_factor(dim, size, factor_type(dim))
        return self

    def add_pointwise_with_diff_type_for_mismatch(self, in_shape: Sequence[int], out_shape: Sequence[int],
                                                  mismatch_type: FactorType = FactorType.NEED_REPLICATION,
                                                  mismatch_blocked: bool = False) -> OpShardingRuleBuilder:
        """A pointwise factor per dimension, of ``in_shape``'s size; where the
        sizes differ the factor has ``mismatch_type`` (and is blocked if asked)."""
        for dim, (in_size, out_size) in enumerate(zip(in_shape, out_shape)):
            same = in_size == out_size
            self.add_pointwise_factor(dim, in_size, FactorType.PASS_THROUGH if same else mismatch_type,
                                      not same and mismatch_blocked)
        return self

    def build(self) -> OpShardingRule:
        """The rule. A dimension of several factors keeps only those larger
        than 1 (a factor of size 1 left in no dimension is dropped, and the
        others renumbered); every dimension without a factor gets a new factor
        of size 1."""
        tensors = [[self._without_size_one(dim) for dim in tensor] for tensor in self._operands + self._results]
        used = sorted({f for tensor in tensors for dim in tensor for f in dim})
        renumbered = {old: new for new, old in enumerate(used)}
        sizes = [self._sizes[f] for f in used]

        def factors(old: Sequence[int]) -> tuple[int, ...]:
            return tuple(renumbered[f] for f in old if f in renumbered)

        frozen = []
        for tensor in tensors:
            dims = []
            for dim in tensor:
                if dim:
                    dims.append(factors(dim))
                else:
                    dims.append((len(sizes),))
                    sizes.append(1)
            frozen.append(tuple(dims))
        operands, results = tuple(frozen[:len(self._operands)]), tuple(frozen[len(self._operands):])
        return OpShardingRule(tuple(sizes), operands, results, factors(self._special.get(FactorType.REDUCTION, ())),
                              factors(self._special.get(FactorType.NEED_REPLICATION, ())),
                              factors(self._special.get(FactorType.PERMUTATION, ())), factors(self._blocked))

    def _without_size_one(self, dim: list[int]) -> list[int]:
        if len(dim) < 2:
            return dim
        larger = [f for f in dim if self._sizes[f] != 1]
        return larger or dim[:1]


def pointwise_rule(operand_ranks: Sequence[int], result_shapes: Sequence[Sequence[int]]) -> OpShardingRule:
    """The rule of a pointwise op: factor d is dimension d of every operand and
    result (sized as the first result)."""
    builder = OpShardingRuleBuilder(operand_ranks, [len(s) for s in result_shapes])
    for dim, size in enumerate(result_shapes[0] if result_shapes else ()):
        builder.add_pointwise_factor(dim, size)
    return builder.build()


__all__ = ["NULL_DIM", "FactorType", "OpShardingRule", "OpShardingRuleBuilder", "factor_symbol",
           "parse_op_sharding_rule", "pointwise_rule"]
