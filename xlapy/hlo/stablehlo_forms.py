"""StableHLO's forms of ops that HLO has too, with semantics of their own.

The StableHLO frontend maps each StableHLO op to the HLO instruction XLA has
for it. Where the StableHLO op means something HLO's opcode does not, the
instruction keeps the op's MLIR name as its opcode, so that an HLO opcode
means the same wherever an instruction came from:

- ``stablehlo.while``: one operand per loop value (HLO's ``while`` takes one,
  usually a tuple); its condition and body take one parameter per value and
  are its computations in that order;
- ``stablehlo.case`` (``s32[]`` index) and ``stablehlo.if`` (``pred[]``): the
  branch index is the only operand; the branches take no parameters and use
  the enclosing computations' values directly (HLO's ``conditional`` passes
  each branch an operand of its own);
- ``stablehlo.optimization_barrier``: any number of operands, one result each
  (HLO's ``opt-barrier`` passes one value through);
- ``stablehlo.broadcast_in_dim``: may stretch an operand dimension of size 1
  (HLO's ``broadcast`` may not); a broadcast that does not is HLO's ``broadcast``;
- ``stablehlo.all_to_all``: may concatenate along another dimension than it
  splits (``split_dimension``, ``concat_dimension``, ``split_count``), exchange
  several operands, or leave the group size to the number of devices; one
  that does none of this is HLO's ``all-to-all`` (``dimensions={d}``);
- ``stablehlo.convert`` from complex to real numbers keeps the real part (HLO's
  ``convert`` refuses); every other convert is HLO's ``convert``;
- ``stablehlo.rng``: takes the result's dimensions as a third operand.

Their rules live with HLO's, one per opcode, in each registry's family
file: shape inference (``xlapy.hlo.shape_rules.stablehlo``), the interpreter
(``xlapy.interpreter``: control_flow, data_movement, collectives,
elementwise, random), sharding rules (``xlapy.sharding.rules``) and
propagation's data-flow edges (``xlapy.sharding.propagation.graph``).
Indexing has no rules for them: as for any opcode without one, every operand
gets an undefined map (as XLA's indexing analysis gives an op it does not
know). Code generation has none either and refuses them, as it refuses any
opcode it cannot emit.
"""

from __future__ import annotations

from xlapy.hlo.opcodes import OpSpec

STABLEHLO_OPCODES: dict[str, OpSpec] = {
    "stablehlo.while": OpSpec("stablehlo.while"),
    "stablehlo.case": OpSpec("stablehlo.case", arity=1),
    "stablehlo.if": OpSpec("stablehlo.if", arity=1),
    "stablehlo.optimization_barrier": OpSpec("stablehlo.optimization_barrier"),
    "stablehlo.broadcast_in_dim": OpSpec("stablehlo.broadcast_in_dim", arity=1),
    "stablehlo.all_to_all": OpSpec("stablehlo.all_to_all"),
    "stablehlo.convert": OpSpec("stablehlo.convert", arity=1),
    "stablehlo.rng": OpSpec("stablehlo.rng", arity=3),
}

# The ops whose regions may use values of the computations they run inside
# (MLIR's implicit capture); every other computation sees only its parameters.
CAPTURING_OPCODES = frozenset({"stablehlo.while", "stablehlo.case", "stablehlo.if"})

