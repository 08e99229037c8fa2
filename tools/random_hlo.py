"""Random well-typed HLO programs, for testing passes against the interpreter.

``hlo_texts(...)`` is a hypothesis strategy drawing the text of a module that
verifies: elementwise ops over f32/bf16/s32/pred, constants, broadcasts,
reshapes, transposes, slices, concatenations, pads, reverses, iotas, reduces,
dots (canonical ones, general ones with several or no contracting dimensions
and batch dimensions anywhere, and ones reading transposed operands),
``power`` with constant exponents (opt-in: ``power=True``), ``logistic``,
total-order compares of floats, maxima and minima with extremes, ``and``/``or``
with constant operands, broadcast scalar constants as elementwise operands,
(nested) tuples and their elements, calls of small computations (nested,
some called twice), dead values, duplicated instructions (the same op on the
same operands), zero-sized arrays and sometimes a tuple root. Shapes are
small (at most 3 dimensions of at most ``max_dim`` elements) so that the
interpreter runs them quickly. ``hlo_modules(...)`` draws the parsed module.

``assert_pass_preserves_values(hlo_pass, module)`` runs a pass on a copy of
a module and checks that the copy still verifies and computes the same values,
bit for bit, on seeded random arguments.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import strategies as st

from tools.compare import assert_same, is_float
from xlapy.hlo import HloModule, parse_module, verify
from xlapy.hlo.fake_arguments import make_fake_arguments
from xlapy.interpreter import evaluate

FLOAT_TYPES = ("f32", "bf16")
ARRAY_TYPES = ("f32", "s32", "pred", "bf16")
_FLOAT_VALUES = ("0", "1", "-1", "0.5", "2", "-3", "1.5", "10", "-0.25", "-0")
_SPECIAL_FLOAT_VALUES = ("inf", "-inf", "nan")
_INT_VALUES = ("0", "1", "-1", "2", "3", "-4", "7")
_UNARY = {
    "float": ("abs", "negate", "exponential", "sine", "cosine", "tanh", "floor", "ceil", "sqrt", "log", "sign",
              "round-nearest-even", "copy"),
    "s32": ("abs", "negate", "not", "popcnt", "sign", "copy", "count-leading-zeros"),
    "pred": ("not", "copy"),
}
_BINARY = {
    "float": ("add", "subtract", "multiply", "divide", "maximum", "minimum", "remainder"),
    "s32": ("add", "subtract", "multiply", "maximum", "minimum", "and", "or", "xor"),
    "pred": ("and", "or", "xor"),
}
_REDUCERS = {"float": ("add", "maximum", "minimum", "multiply"), "s32": ("add", "maximum", "minimum"),
             "pred": ("and", "or")}
_DIRECTIONS = ("EQ", "NE", "LT", "LE", "GT", "GE")
_POWER_EXPONENTS = ("0", "1", "2", "3", "-1", "0.5", "-2")
# The extremes of each type, and values near them, as scalar constants for maximum/minimum.
_EXTREMES = {"f32": ("-inf", "inf", "-3.40282347e+38", "3.40282347e+38"),
             "bf16": ("-inf", "inf", "-3.38953139e+38", "3.38953139e+38"),
             "s32": ("-2147483648", "2147483647"), "pred": ("false", "true")}


@dataclass(frozen=True)
class Ty:
    """An HLO shape without layout: an array (``element_type``, ``dims``) or
    a tuple of shapes (``elements``)."""

    element_type: str = ""
    dims: tuple[int, ...] = ()
    elements: tuple[Ty, ...] | None = None

    @property
    def is_tuple(self) -> bool:
        return self.elements is not None

    @property
    def size(self) -> int:
        return math.prod(self.dims)

    def __str__(self) -> str:
        if self.elements is not None:
            return "(" + ", ".join(str(e) for e in self.elements) + ")"
        return f"{self.element_type}[{','.join(map(str, self.dims))}]"


def _family(element_type: str) -> str:
    return "float" if element_type in FLOAT_TYPES else element_type


@dataclass
class _Value:
    name: str
    ty: Ty
    # The instruction's right-hand side (after the shape), to emit a duplicate of it.
    body: str | None = None


class _Module:
    """What the computations of one module share: names, reducers, callees."""

    def __init__(self, draw: Any, *, max_dim: int, max_elements: int, zero_sized: bool, bf16: bool,
                 special_floats: bool, max_call_depth: int, power: bool = False) -> None:
        self.draw = draw
        self.max_dim, self.max_elements = max_dim, max_elements
        self.zero_sized, self.special_floats = zero_sized, special_floats
        self.element_types = ARRAY_TYPES if bf16 else tuple(t for t in ARRAY_TYPES if t != "bf16")
        self.max_call_depth = max_call_depth
        self.power = power
        self.counter = itertools.count()
        self.computations: list[str] = []
        self.reducers: dict[tuple[str, str], str] = {}
        # name, parameter shapes, result shape of each computation made for `call`.
        self.callees: list[tuple[str, tuple[Ty, ...], Ty]] = []

    # -- drawing ----------------------------------------------------------------
    def integer(self, low: int, high: int) -> int:
        return self.draw(st.integers(low, high))

    def choice(self, options: Any) -> Any:
        return self.draw(st.sampled_from(tuple(options)))

    def chance(self, percent: int) -> bool:
        return self.integer(0, 99) < percent

    def name(self, stem: str) -> str:
        return f"{stem}.{next(self.counter)}"

    def dim(self) -> int:
        return self.integer(0 if self.zero_sized and self.chance(10) else 1, self.max_dim)

    def dims(self, min_rank: int = 0) -> tuple[int, ...]:
        return tuple(self.dim() for _ in range(self.integer(min_rank, 3)))

    def array_ty(self, min_rank: int = 0) -> Ty:
        return Ty(self.choice(self.element_types), self.dims(min_rank))

    def fits(self, dims: tuple[int, ...]) -> bool:
        return len(dims) <= 3 and math.prod(dims) <= self.max_elements

    def scalar_text(self, element_type: str) -> str:
        if element_type == "pred":
            return self.choice(("true", "false"))
        if element_type == "s32":
            return self.choice(_INT_VALUES)
        values = _FLOAT_VALUES + (_SPECIAL_FLOAT_VALUES if self.special_floats else ())
        return self.choice(values)

    def literal_text(self, ty: Ty) -> str:
        if not ty.dims:
            return self.scalar_text(ty.element_type)
        inner = Ty(ty.element_type, ty.dims[1:])
        return "{" + ", ".join(self.literal_text(inner) for _ in range(ty.dims[0])) + "}"

    def reducer(self, element_type: str, opcode: str) -> str:
        key = (element_type, opcode)
        if key not in self.reducers:
            name = self.name(f"{opcode}_{element_type}")
            lhs, rhs, out = self.name("lhs"), self.name("rhs"), self.name(opcode)
            self.computations.append(
                f"{name} {{\n  {lhs} = {element_type}[] parameter(0)\n  {rhs} = {element_type}[] parameter(1)\n"
                f"  ROOT {out} = {element_type}[] {opcode}({lhs}, {rhs})\n}}\n")
            self.reducers[key] = name
        return self.reducers[key]


class _Computation:
    """One computation being drawn: its values so far and their text."""

    def __init__(self, module: _Module, parameters: tuple[Ty, ...], depth: int) -> None:
        self.m = module
        self.depth = depth
        self.lines: list[str] = []
        self.values: list[_Value] = []
        for number, ty in enumerate(parameters):
            self.add(f"parameter({number})", ty, "param", duplicable=False)

    def add(self, body: str, ty: Ty, stem: str, duplicable: bool = True) -> _Value:
        value = _Value(self.m.name(stem), ty, body if duplicable else None)
        self.lines.append(f"  {value.name} = {ty} {body}")
        self.values.append(value)
        return value

    def arrays(self, accept: Any = None) -> list[_Value]:
        return [v for v in self.values if not v.ty.is_tuple and (accept is None or accept(v.ty))]

    # -- operands ---------------------------------------------------------------
    def some_array(self, accept: Any = None) -> _Value:
        """An existing array value (``accept``-ed by its shape), or a new constant."""
        candidates = self.arrays(accept)
        if candidates and self.m.chance(85):
            return self.m.choice(candidates)
        for _ in range(10):
            ty = self.m.array_ty()
            if accept is None or accept(ty):
                return self.constant(ty)
        # Every filter used accepts a small vector.
        return self.constant(Ty("f32", (1,)))

    def operand(self, ty: Ty) -> _Value:
        """A value of shape ``ty``: an existing one, or one made for it."""
        same = [v for v in self.values if v.ty == ty]
        if same and self.m.chance(75):
            return self.m.choice(same)
        if ty.is_tuple:
            parts = [self.operand(e) for e in ty.elements]
            return self.add(f"tuple({', '.join(p.name for p in parts)})", ty, "tuple")
        way = self.m.integer(0, 2)
        if way == 1 and ty.dims:
            scalar = self.operand(Ty(ty.element_type, ()))
            return self.add(f"broadcast({scalar.name}), dimensions={{}}", ty, "broadcast")
        if way == 2:
            others = self.arrays(lambda t: t.dims == ty.dims and t.element_type != ty.element_type)
            if others:
                return self.add(f"convert({self.m.choice(others).name})", ty, "convert")
        return self.constant(ty)

    def constant(self, ty: Ty) -> _Value:
        return self.add(f"constant({self.m.literal_text(ty)})", ty, "constant")

    # -- ops --------------------------------------------------------------------
    def op_unary(self) -> bool:
        x = self.some_array()
        opcode = self.m.choice(_UNARY[_family(x.ty.element_type)])
        self.add(f"{opcode}({x.name})", x.ty, opcode)
        return True

    def op_binary(self) -> bool:
        x = self.some_array()
        y = self.operand(x.ty)
        opcode = self.m.choice(_BINARY[_family(x.ty.element_type)])
        self.add(f"{opcode}({x.name}, {y.name})", x.ty, opcode)
        return True

    def op_compare(self) -> bool:
        x = self.some_array()
        y = self.operand(x.ty)
        direction = self.m.choice(_DIRECTIONS)
        self.add(f"compare({x.name}, {y.name}), direction={direction}", Ty("pred", x.ty.dims), "compare")
        return True

    def op_total_order_compare(self) -> bool:
        x = self.some_array(lambda t: t.element_type in FLOAT_TYPES)
        if x.ty.element_type not in FLOAT_TYPES:
            return False
        y = self.operand(x.ty)
        direction = self.m.choice(_DIRECTIONS)
        self.add(f"compare({x.name}, {y.name}), direction={direction}, type=TOTALORDER", Ty("pred", x.ty.dims),
                 "compare")
        return True

    def scalar_constant_array(self, ty: Ty, value: str) -> _Value:
        """``value`` as a constant of ``ty``: a scalar, broadcast unless ``ty`` is one."""
        scalar = self.add(f"constant({value})", Ty(ty.element_type, ()), "constant")
        if not ty.dims:
            return scalar
        return self.add(f"broadcast({scalar.name}), dimensions={{}}", ty, "broadcast")

    def op_broadcast_constant_binary(self) -> bool:
        """An elementwise op with a broadcast scalar constant on either side."""
        x = self.some_array(lambda t: len(t.dims) >= 1)
        family = _family(x.ty.element_type)
        constant = self.scalar_constant_array(x.ty, self.m.scalar_text(x.ty.element_type))
        opcode = self.m.choice(_BINARY[family])
        lhs, rhs = (x, constant) if self.m.chance(50) else (constant, x)
        self.add(f"{opcode}({lhs.name}, {rhs.name})", x.ty, opcode)
        return True

    def op_max_min(self) -> bool:
        """``maximum``/``minimum`` of a value with itself, an extreme of its type or a constant."""
        x = self.some_array(lambda t: t.element_type != "pred")
        if x.ty.element_type == "pred":
            return False
        way = self.m.integer(0, 2)
        if way == 0:
            other = x
        elif way == 1:
            extremes = _EXTREMES[x.ty.element_type]
            if x.ty.element_type in FLOAT_TYPES and not self.m.special_floats:
                extremes = extremes[2:]
            other = self.scalar_constant_array(x.ty, self.m.choice(extremes))
        else:
            other = self.constant(x.ty)
        opcode = self.m.choice(("maximum", "minimum"))
        lhs, rhs = (x, other) if self.m.chance(50) else (other, x)
        self.add(f"{opcode}({lhs.name}, {rhs.name})", x.ty, opcode)
        return True

    def op_logic_with_constant(self) -> bool:
        """``and``/``or`` of a pred value with a constant (a literal or a broadcast scalar)."""
        x = self.some_array(lambda t: t.element_type == "pred")
        if x.ty.element_type != "pred":
            return False
        if x.ty.dims and self.m.chance(60):
            other = self.scalar_constant_array(x.ty, self.m.choice(("true", "false")))
        else:
            other = self.constant(x.ty)
        opcode = self.m.choice(("and", "or"))
        lhs, rhs = (x, other) if self.m.chance(50) else (other, x)
        self.add(f"{opcode}({lhs.name}, {rhs.name})", x.ty, opcode)
        return True

    def op_logistic(self) -> bool:
        x = self.some_array(lambda t: t.element_type in FLOAT_TYPES)
        if x.ty.element_type not in FLOAT_TYPES:
            return False
        self.add(f"logistic({x.name})", x.ty, "logistic")
        return True

    def op_power(self) -> bool:
        """``power`` of a float value with a constant exponent (a scalar, broadcast) or a drawn one."""
        if not self.m.power:
            return False
        x = self.some_array(lambda t: t.element_type in FLOAT_TYPES)
        if x.ty.element_type not in FLOAT_TYPES:
            return False
        if self.m.chance(75):
            exponent = self.scalar_constant_array(x.ty, self.m.choice(_POWER_EXPONENTS))
        else:
            exponent = self.operand(x.ty)
        self.add(f"power({x.name}, {exponent.name})", x.ty, "power")
        return True

    def op_select(self) -> bool:
        x = self.some_array()
        on_false = self.operand(x.ty)
        predicate = self.operand(Ty("pred", x.ty.dims)) if x.ty.dims and self.m.chance(70) \
            else self.operand(Ty("pred", ()))
        if not predicate.ty.dims and x.ty.dims:
            predicate = self.add(f"broadcast({predicate.name}), dimensions={{}}", Ty("pred", x.ty.dims), "broadcast")
        self.add(f"select({predicate.name}, {x.name}, {on_false.name})", x.ty, "select")
        return True

    def op_convert(self) -> bool:
        x = self.some_array()
        target = self.m.choice(self.m.element_types)
        self.add(f"convert({x.name})", Ty(target, x.ty.dims), "convert")
        return True

    def op_constant(self) -> bool:
        self.constant(self.m.array_ty())
        return True

    def op_broadcast(self) -> bool:
        x = self.some_array(lambda t: len(t.dims) < 3)
        rank = self.m.integer(len(x.ty.dims), 3)
        kept = sorted(self.m.draw(st.permutations(range(rank)))[:len(x.ty.dims)])
        dims = [self.m.dim() for _ in range(rank)]
        for source, target in enumerate(kept):
            dims[target] = x.ty.dims[source]
        if not self.m.fits(tuple(dims)):
            return False
        mapping = ",".join(map(str, kept))
        self.add(f"broadcast({x.name}), dimensions={{{mapping}}}", Ty(x.ty.element_type, tuple(dims)), "broadcast")
        return True

    def op_reshape(self) -> bool:
        x = self.some_array()
        sizes = range(0 if x.ty.size == 0 else 1, self.m.max_dim + 1)
        shapes = [s for rank in range(4) for s in itertools.product(sizes, repeat=rank)
                  if math.prod(s) == x.ty.size]
        shapes += [x.ty.dims, (x.ty.size,)]  # sizes with a prime factor above max_dim have few others
        self.add(f"reshape({x.name})", Ty(x.ty.element_type, self.m.choice(shapes)), "reshape")
        return True

    def op_transpose(self) -> bool:
        x = self.some_array(lambda t: len(t.dims) >= 1)
        permutation = self.m.draw(st.permutations(range(len(x.ty.dims))))
        dims = tuple(x.ty.dims[p] for p in permutation)
        self.add(f"transpose({x.name}), dimensions={{{','.join(map(str, permutation))}}}",
                 Ty(x.ty.element_type, dims), "transpose")
        return True

    def op_slice(self) -> bool:
        x = self.some_array(lambda t: len(t.dims) >= 1)
        ranges, dims = [], []
        for size in x.ty.dims:
            start = self.m.integer(0, size)
            limit = self.m.integer(start, size)
            stride = self.m.integer(1, 3)
            ranges.append(f"[{start}:{limit}:{stride}]")
            dims.append(-(-(limit - start) // stride))
        self.add(f"slice({x.name}), slice={{{', '.join(ranges)}}}", Ty(x.ty.element_type, tuple(dims)), "slice")
        return True

    def op_concatenate(self) -> bool:
        x = self.some_array(lambda t: len(t.dims) >= 1)
        axis = self.m.integer(0, len(x.ty.dims) - 1)
        parts = [x]
        for _ in range(self.m.integer(1, 2)):
            dims = list(x.ty.dims)
            dims[axis] = self.m.dim()
            parts.append(self.operand(Ty(x.ty.element_type, tuple(dims))))
        if self.m.chance(50):
            parts.reverse()
        dims = list(x.ty.dims)
        dims[axis] = sum(p.ty.dims[axis] for p in parts)
        if not self.m.fits(tuple(dims)):
            return False
        self.add(f"concatenate({', '.join(p.name for p in parts)}), dimensions={{{axis}}}",
                 Ty(x.ty.element_type, tuple(dims)), "concatenate")
        return True

    def op_pad(self) -> bool:
        x = self.some_array(lambda t: len(t.dims) >= 1)
        value = self.operand(Ty(x.ty.element_type, ()))
        config, dims = [], []
        for size in x.ty.dims:
            low, high, interior = self.m.integer(-1, 2), self.m.integer(-1, 2), self.m.integer(0, 1)
            padded = size + max(size - 1, 0) * interior
            low, high = max(low, -padded), max(high, -padded)
            while low + high + padded < 0:
                high += 1
            config.append(f"{low}_{high}_{interior}")
            dims.append(low + high + padded)
        if not self.m.fits(tuple(dims)):
            return False
        self.add(f"pad({x.name}, {value.name}), padding={'x'.join(config)}", Ty(x.ty.element_type, tuple(dims)), "pad")
        return True

    def op_reverse(self) -> bool:
        x = self.some_array(lambda t: len(t.dims) >= 1)
        axes = [d for d in range(len(x.ty.dims)) if self.m.chance(50)]
        self.add(f"reverse({x.name}), dimensions={{{','.join(map(str, axes))}}}", x.ty, "reverse")
        return True

    def op_iota(self) -> bool:
        dims = self.m.dims(min_rank=1)
        element_type = self.m.choice(("s32", "f32"))
        axis = self.m.integer(0, len(dims) - 1)
        self.add(f"iota(), iota_dimension={axis}", Ty(element_type, dims), "iota")
        return True

    def op_reduce(self) -> bool:
        x = self.some_array(lambda t: len(t.dims) >= 1)
        family = _family(x.ty.element_type)
        opcode = self.m.choice(_REDUCERS[family])
        init = self.operand(Ty(x.ty.element_type, ()))
        axes = [d for d in range(len(x.ty.dims)) if self.m.chance(50)]
        dims = tuple(s for d, s in enumerate(x.ty.dims) if d not in axes)
        reducer = self.m.reducer(x.ty.element_type, opcode)
        self.add(f"reduce({x.name}, {init.name}), dimensions={{{','.join(map(str, axes))}}}, to_apply={reducer}",
                 Ty(x.ty.element_type, dims), "reduce")
        return True

    def op_dot(self) -> bool:
        element_type = self.m.choice([t for t in self.m.element_types if t != "pred"])
        k = self.m.dim()
        batch = (self.m.dim(),) if self.m.chance(25) else ()
        lhs_free = tuple(self.m.dim() for _ in range(self.m.integer(0, 1)))
        rhs_free = tuple(self.m.dim() for _ in range(self.m.integer(0, 1)))
        lhs = self.operand(Ty(element_type, (*batch, *lhs_free, k)))
        rhs = self.operand(Ty(element_type, (*batch, k, *rhs_free)))
        attributes = f"lhs_contracting_dims={{{len(batch) + len(lhs_free)}}}, rhs_contracting_dims={{{len(batch)}}}"
        if batch:
            attributes = f"lhs_batch_dims={{0}}, rhs_batch_dims={{0}}, {attributes}"
        self.add(f"dot({lhs.name}, {rhs.name}), {attributes}", Ty(element_type, batch + lhs_free + rhs_free), "dot")
        return True

    def op_general_dot(self) -> bool:
        """A dot in any form: up to two contracting dimensions (none: an outer
        product), batch dimensions anywhere, up to two free dimensions a side,
        each operand's dimensions in a random order."""
        element_type = self.m.choice([t for t in self.m.element_types if t != "pred"])
        # Ranks of at most 3 for the operands and the result.
        batch = [self.m.dim() for _ in range(self.m.integer(0, 1))]
        contracting = [self.m.dim() for _ in range(self.m.integer(0, 2))]
        lhs_free = [self.m.dim() for _ in range(self.m.integer(0, min(2, 3 - len(batch) - len(contracting))))]
        rhs_free = [self.m.dim() for _ in range(self.m.integer(
            0, min(2, 3 - len(batch) - len(contracting), 3 - len(batch) - len(lhs_free))))]
        sizes = {"b": batch, "c": contracting}

        def layout(free: list[int]) -> tuple[list[int], list[int], list[int], list[int]] | None:
            roles = [("b", i) for i in range(len(batch))] + [("c", i) for i in range(len(contracting))] + \
                [("f", i) for i in range(len(free))]
            order = self.m.draw(st.permutations(roles))
            dims = [(free if kind == "f" else sizes[kind])[i] for kind, i in order]
            if not self.m.fits(tuple(dims)):
                return None
            return (dims, [order.index(("b", i)) for i in range(len(batch))],
                    [order.index(("c", i)) for i in range(len(contracting))],
                    [dims[p] for p, (kind, _) in enumerate(order) if kind == "f"])

        lhs_layout, rhs_layout = layout(lhs_free), layout(rhs_free)
        result = (*batch, *lhs_free, *rhs_free)
        if lhs_layout is None or rhs_layout is None or not self.m.fits(result):
            return False
        lhs_dims, lhs_batch, lhs_contracting, lhs_result = lhs_layout
        rhs_dims, rhs_batch, rhs_contracting, rhs_result = rhs_layout
        lhs = self.operand(Ty(element_type, tuple(lhs_dims)))
        rhs = self.operand(Ty(element_type, tuple(rhs_dims)))

        def numbers(dims: list[int]) -> str:
            return "{" + ",".join(map(str, dims)) + "}"

        attributes = [f"lhs_contracting_dims={numbers(lhs_contracting)}",
                      f"rhs_contracting_dims={numbers(rhs_contracting)}"]
        if batch:
            attributes = [f"lhs_batch_dims={numbers(lhs_batch)}", f"rhs_batch_dims={numbers(rhs_batch)}", *attributes]
        self.add(f"dot({lhs.name}, {rhs.name}), {', '.join(attributes)}",
                 Ty(element_type, (*batch, *lhs_result, *rhs_result)), "dot")
        return True

    def op_transposed_dot(self) -> bool:
        """A matrix (or batched matrix) dot whose operands may be transposes:
        mostly swaps of the two matrix dimensions, sometimes a transpose that
        moves the batch dimension."""
        element_type = self.m.choice([t for t in self.m.element_types if t != "pred"])
        batch = (self.m.dim(),) if self.m.chance(40) else ()
        m, k, n = self.m.dim(), self.m.dim(), self.m.dim()

        def maybe_transposed(dims: tuple[int, ...]) -> _Value:
            if not self.m.chance(70):
                return self.operand(Ty(element_type, dims))
            rank = len(dims)
            if batch and self.m.chance(25):
                permutation = tuple(self.m.draw(st.permutations(range(rank))))
            else:
                permutation = (*range(rank - 2), rank - 1, rank - 2)
            # transpose(x, permutation) has dims[i] = x.dims[permutation[i]].
            source = [0] * rank
            for i, p in enumerate(permutation):
                source[p] = dims[i]
            x = self.operand(Ty(element_type, tuple(source)))
            return self.add(f"transpose({x.name}), dimensions={{{','.join(map(str, permutation))}}}",
                            Ty(element_type, dims), "transpose")

        lhs = maybe_transposed((*batch, m, k))
        rhs = maybe_transposed((*batch, k, n))
        rank = len(batch) + 2
        attributes = f"lhs_contracting_dims={{{rank - 1}}}, rhs_contracting_dims={{{rank - 2}}}"
        if batch:
            attributes = f"lhs_batch_dims={{0}}, rhs_batch_dims={{0}}, {attributes}"
        self.add(f"dot({lhs.name}, {rhs.name}), {attributes}", Ty(element_type, (*batch, m, n)), "dot")
        return True

    def op_tuple(self) -> bool:
        parts = [self.m.choice(self.values) if self.values else self.some_array()
                 for _ in range(self.m.integer(1, 3))]
        self.add(f"tuple({', '.join(p.name for p in parts)})", Ty(elements=tuple(p.ty for p in parts)), "tuple")
        return True

    def op_get_tuple_element(self) -> bool:
        tuples = [v for v in self.values if v.ty.is_tuple and v.ty.elements]
        if not tuples:
            return False
        x = self.m.choice(tuples)
        index = self.m.integer(0, len(x.ty.elements) - 1)
        self.add(f"get-tuple-element({x.name}), index={index}", x.ty.elements[index], "get-tuple-element")
        return True

    def op_call(self) -> bool:
        if self.depth >= self.m.max_call_depth:
            return False
        if self.m.callees and self.m.chance(40):
            name, parameters, result = self.m.choice(self.m.callees)
        else:
            parameters = tuple(self.m.choice(self.values).ty if self.values and self.m.chance(80)
                               else self.m.array_ty() for _ in range(self.m.integer(0, 3)))
            name = self.m.name("callee")
            callee = _Computation(self.m, parameters, self.depth + 1)
            callee.fill(self.m.integer(1, 4))
            text, result = callee.finish(name, entry=False)
            self.m.computations.append(text)
            self.m.callees.append((name, parameters, result))
        arguments = [self.operand(ty) for ty in parameters]
        self.add(f"call({', '.join(a.name for a in arguments)}), to_apply={name}", result, "call")
        return True

    def op_duplicate(self) -> bool:
        candidates = [v for v in self.values if v.body is not None]
        if not candidates:
            return False
        x = self.m.choice(candidates)
        self.add(x.body, x.ty, x.name.rsplit(".", 1)[0])
        return True

    _OPS = ("op_unary", "op_binary", "op_binary", "op_compare", "op_select", "op_convert", "op_constant",
            "op_broadcast", "op_reshape", "op_transpose", "op_slice", "op_concatenate", "op_pad", "op_reverse",
            "op_iota", "op_reduce", "op_dot", "op_tuple", "op_get_tuple_element", "op_get_tuple_element", "op_call",
            "op_call", "op_duplicate", "op_duplicate", "op_general_dot", "op_transposed_dot", "op_total_order_compare",
            "op_broadcast_constant_binary", "op_max_min", "op_logic_with_constant", "op_logistic", "op_power")

    def fill(self, count: int) -> None:
        for _ in range(count):
            getattr(self, self.m.choice(self._OPS))()
        if not self.values:
            self.op_constant()

    def finish(self, name: str, entry: bool) -> tuple[str, Ty]:
        """The computation's text, its root chosen among its values, and the root's shape."""
        if self.m.chance(30):
            parts = [self.m.choice(self.values) for _ in range(self.m.integer(0, 3))]
            root = _Value(self.m.name("tuple"), Ty(elements=tuple(p.ty for p in parts)))
            self.lines.append(f"  ROOT {root.name} = {root.ty} tuple({', '.join(p.name for p in parts)})")
        else:
            root = self.values[-1] if self.m.chance(70) else self.m.choice(self.values)
            # One line per value, in order: the root is marked where it is defined.
            position = next(i for i, v in enumerate(self.values) if v is root)
            self.lines[position] = "  ROOT " + self.lines[position].lstrip()
        header = ("ENTRY " if entry else "") + name
        return header + " {\n" + "\n".join(self.lines) + "\n}\n", root.ty


@st.composite
def hlo_texts(draw: Any, *, max_parameters: int = 3, max_instructions: int = 12, max_dim: int = 6,
              max_elements: int = 64, zero_sized: bool = True, bf16: bool = True, special_floats: bool = False,
              max_call_depth: int = 2, power: bool = False) -> str:
    """The text of a random module that verifies. ``max_instructions`` bounds
    the ops drawn for the entry (each may add a few operands of its own);
    ``max_dim`` the drawn dimension sizes and ``max_elements`` the elements of
    a value; ``zero_sized`` allows dimensions of size 0, ``bf16`` bf16 values,
    ``special_floats`` inf and NaN constants; ``max_call_depth`` how deeply
    calls nest; ``power`` adds ``power`` ops (off by default: rewriting a
    power as products rounds differently, so value checks of such passes
    leave it out)."""
    module = _Module(draw, max_dim=max_dim, max_elements=max_elements, zero_sized=zero_sized, bf16=bf16,
                     special_floats=special_floats, max_call_depth=max_call_depth, power=power)
    parameters = tuple(module.array_ty() for _ in range(module.integer(0, max_parameters)))
    entry = _Computation(module, parameters, depth=0)
    entry.fill(module.integer(1, max_instructions))
    text, _ = entry.finish("main", entry=True)
    return "HloModule random\n\n" + "\n".join([*module.computations, text])


def hlo_modules(**options: Any) -> st.SearchStrategy[HloModule]:
    """Random modules that verify, parsed; ``options`` as for ``hlo_texts``."""
    return hlo_texts(**options).map(parse_module)


def random_arguments(module: HloModule, seed: int, special_floats: bool = False) -> list[Any]:
    """Seeded arguments for the entry's parameters: normal floats, small
    integers (``xlapy.hlo.fake_arguments``); with ``special_floats`` some
    float elements replaced by NaN, infinities and signed zeros."""
    arguments = make_fake_arguments(module, seed)
    if not special_floats:
        return arguments
    random = np.random.default_rng(seed + 1_000_003)
    specials = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0])

    def sprinkle(value: Any) -> Any:
        if isinstance(value, tuple):
            return tuple(sprinkle(v) for v in value)
        array = np.array(value)
        if is_float(array.dtype):
            mask = random.random(array.shape) < 0.25
            picks = specials[random.integers(0, len(specials), array.shape)].astype(array.dtype)
            array = np.where(mask, picks, array).astype(array.dtype)
        return array

    return [sprinkle(a) for a in arguments]


def assert_pass_preserves_values(hlo_pass: Any, module: HloModule | str, seeds: tuple[int, ...] = (0, 1), *,
                                 special_floats: bool = False) -> HloModule:
    """Run ``hlo_pass`` on a copy of ``module`` (re-parsed from its text); the
    copy must verify, keep the entry's parameter shapes and compute the same
    values as the original on seeded random arguments (floats bit for bit,
    NaN matching NaN). Returns the rewritten copy."""
    text = module if isinstance(module, str) else module.to_text()
    original = parse_module(text)
    verify(original)
    expected = {seed: evaluate(original, *random_arguments(original, seed, special_floats), verify=False)
                for seed in seeds}
    rewritten = parse_module(text)
    hlo_pass.run(rewritten)
    verify(rewritten)
    before = [str(p.shape) for p in original.entry.parameters]
    after = [str(p.shape) for p in rewritten.entry.parameters]
    assert before == after, f"{hlo_pass!r} changed the entry's parameters from {before} to {after}"
    for seed, want in expected.items():
        got = evaluate(rewritten, *random_arguments(original, seed, special_floats), verify=False)
        assert_same(got, want, context=f"after {hlo_pass!r}, seed {seed}\n{rewritten.to_text()}\nresult")
    return rewritten


# The identity of each reducer, as a reduce's initial value must be in HLO.
_REDUCER_IDENTITIES = {"add": 0, "multiply": 1, "maximum": -np.inf, "minimum": np.inf, "and": True, "or": False}


def reduce_relies_on_its_initial_value(module: HloModule) -> bool:
    """Whether a reduce of ``module`` that combines no two elements has an
    initial value other than its reducer's identity: XLA's simplifier then
    drops the initial value, as HLO allows, while the interpreter combines it.
    Random programs draw any initial value; tests of passes that simplify
    reduces leave such programs out."""
    for instr in module.instructions:
        if instr.opcode != "reduce" or instr.shape.is_tuple:
            continue
        if instr.shape.element_count != instr.operands[0].shape.element_count:
            continue
        init, root = instr.operands[1], instr.called_computations[0].root
        identity = _REDUCER_IDENTITIES.get(root.opcode)
        if init.opcode != "constant" or identity is None or not np.all(init.literal == identity):
            return True
    return False
