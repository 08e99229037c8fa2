"""Shape rules of random number generation: rng, rng-bit-generator and the
generator's state."""

from __future__ import annotations

from xlapy.hlo.ir import HloInstruction
from xlapy.hlo.shape_rules.helpers import (
    FLOAT,
    array_operand,
    array_shape,
    declared_array,
    declared_tuple,
    fail,
    operand_count,
    require_kind,
    scalar_operand,
    show,
    tuple_shape,
    word_attr,
)
from xlapy.hlo.shape_rules.registry import shape_rule
from xlapy.shapes import Shape


def rng_parameter_type(instr: HloInstruction) -> str:
    """The element type of an rng's two scalar parameters, after checking them and its distribution."""
    a, b = scalar_operand(instr, 0, "the first parameter"), scalar_operand(instr, 1, "the second parameter")
    if a.element_type != b.element_type:
        fail(f"parameters of {instr.opcode} must have one element type, got {show(a)} and {show(b)}")
    distribution = word_attr(instr, "distribution")
    if distribution not in ("rng_uniform", "rng_normal"):
        fail(f"{instr.opcode} distribution must be rng_uniform or rng_normal, got {distribution}")
    if distribution == "rng_normal":
        require_kind(instr, a, FLOAT, "parameters for rng_normal")
    return a.element_type


@shape_rule("rng")
def _rng(instr: HloInstruction) -> Shape:
    # The result's dimensions come from the declared shape (StableHLO's rng takes them as an operand).
    operand_count(instr, 2)
    declared = declared_array(instr)
    return array_shape(rng_parameter_type(instr), declared.dimensions, declared.dynamic_dimensions)


@shape_rule("rng-get-and-update-state")
def _rng_state(instr: HloInstruction) -> Shape:
    # The state of XLA's random number generator: two u64 words.
    operand_count(instr, 0)
    return array_shape("u64", [2])


# The state sizes each algorithm takes (StableHLO's rng_bit_generator); the
# default algorithm's state is the implementation's (any integral array).
_RNG_STATE_SIZES: dict[str, tuple[int, ...]] = {"rng_default": (), "rng_philox": (2, 3), "rng_three_fry": (2,)}


@shape_rule("rng-bit-generator")
def _rng_bit_generator(instr: HloInstruction) -> Shape:
    # rng-bit-generator(state) -> (new state, random bits of the declared shape).
    operand_count(instr, 1)
    state = array_operand(instr, 0, "the state")
    algorithm = word_attr(instr, "algorithm", "rng_default")
    sizes = _RNG_STATE_SIZES.get(algorithm)
    if sizes is None:
        fail(f"rng-bit-generator algorithm must be one of {', '.join(sorted(_RNG_STATE_SIZES))}, got {algorithm}")
    if sizes and (state.element_type != "u64" or state.rank != 1 or state.dimensions[0] not in sizes):
        fail(f"the state of rng-bit-generator with {algorithm} must be "
              f"{' or '.join(f'u64[{n}]' for n in sizes)}, got {show(state)}")
    if not state.type.is_integral:
        fail(f"the state of rng-bit-generator must be integral, got {show(state)}")
    declared = declared_tuple(instr, 2)
    bits = declared.tuple_shapes[1]
    if not bits.is_array or not bits.type.is_integral:
        fail(f"rng-bit-generator produces integral bits, but the instruction declares {show(declared)}")
    return tuple_shape([state, bits])
