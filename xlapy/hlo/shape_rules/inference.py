"""Shape inference for HLO: one rule per opcode that computes the shape an
instruction must have from its operands' shapes, its attributes and the
computations it calls, and rejects inconsistent operands with a
``VerifyError`` naming the rule broken (the checks of XLA's
``ShapeInference`` and ``HloVerifier``).

Rules compute element type and dimensions (and which dimensions are
dynamic); layouts are ignored. Where the result depends on something the
instruction does not carry — the new dimensions of a broadcast, the shape of
a parameter, constant or custom call, the replica-group size of a collective
— the rule takes that part from the declared shape and checks the rest.

The rules are registered by family in the modules of this package; this
module imports them all."""

from __future__ import annotations

from xlapy.errors import UnimplementedError, VerifyError, XlapyError
from xlapy.hlo.ir import HloInstruction
from xlapy.hlo.opcodes import OPCODES
from xlapy.hlo.shape_rules import (  # noqa: F401 - importing a family registers its rules
    asynchronous,
    collectives,
    control_flow,
    custom_call,
    data_movement,
    elementwise,
    gather_scatter,
    linalg,
    random,
    reductions,
    sdy,
    sorting,
    stablehlo,
)
from xlapy.hlo.shape_rules.registry import SHAPE_RULES
from xlapy.shapes import Shape


def has_shape_rule(opcode: str) -> bool:
    """Whether ``infer_shape`` knows ``opcode``."""
    return opcode in SHAPE_RULES


def opcodes_without_rules() -> list[str]:
    """The opcodes of ``OPCODES`` whose declared shape the verifier accepts unchecked."""
    return sorted(name for name in OPCODES if name not in SHAPE_RULES)


def infer_shape(instr: HloInstruction) -> Shape:
    """The shape ``instr`` must have (without layout). Raises ``VerifyError``
    naming the instruction and the rule broken when its operands, attributes
    or called computations are inconsistent, and ``UnimplementedError`` for
    an opcode without a rule."""
    rule = SHAPE_RULES.get(instr.opcode)
    if rule is None:
        raise UnimplementedError(f"instruction {instr.name}: no shape rule for opcode {instr.opcode}")
    try:
        return rule(instr)
    except VerifyError as e:
        raise VerifyError(f"instruction {instr.name}: {e}") from None
    except XlapyError as e:  # e.g. an impossible shape built from bad attributes
        raise VerifyError(f"instruction {instr.name}: {e}") from None
    except (TypeError, ValueError, KeyError, IndexError, AttributeError) as e:
        # An attribute of the wrong kind that a rule reads without a check of
        # its own (an IR built or edited by hand): still a verification error.
        raise VerifyError(f"instruction {instr.name}: malformed {instr.opcode}: {type(e).__name__}: {e}") from None


# Last, once every family has registered its rules.
asynchronous.register_async_wrappings()
