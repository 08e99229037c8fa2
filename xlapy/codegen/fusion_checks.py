"""What must hold of a fusion before native code is generated for it, whether
or not its module went through the verifier.

The loop emitter derives every index it reads or writes from the shapes of the
fused instructions and of the fusion's outputs; the kernel's buffers are sized
from the same shapes. ``check_fusion`` makes sure these agree (each fused
instruction has the shape its operands and attributes give it, the fused
parameters are the fusion's operands, the outputs are the fused roots), so that
no index can leave its buffer. It is linear in the size of the fused
computation.

``unsupported_fused_ops`` lists what the code generator cannot emit, so that a
caller can name every obstacle at once before compiling anything. A scatter is
emitted only as the root of a fusion (by the scatter emitter), its combiner and
the fused instructions computing its operands by their elemental rules.
"""

from __future__ import annotations

from xlapy.codegen.elemental_rules import COMPLEX_ELEMENTAL, ELEMENTAL, rule_of
from xlapy.errors import UnimplementedError, VerifyError, XlapyError
from xlapy.hlo.ir import HloComputation, HloInstruction
from xlapy.hlo.shape_rules.helpers import same_shape, show
from xlapy.hlo.shape_rules.inference import infer_shape
from xlapy.shapes import Shape, physical_byte_size

# Fused opcodes that have no elemental rule of their own: the emitter handles them directly (get-tuple-element
# picks an element of a variadic reduce's value).
_STRUCTURAL = frozenset({"parameter", "tuple", "get-tuple-element"})


def _error(fusion: HloInstruction, message: str) -> VerifyError:
    return VerifyError(f"fusion {fusion.name}: {message}")


def fusion_outputs(fusion: HloInstruction) -> list[Shape]:
    """The array shapes a fusion writes, in order."""
    return list(fusion.shape.tuple_shapes) if fusion.shape.is_tuple else [fusion.shape]


def _fused_computation(fusion: HloInstruction) -> HloComputation:
    if len(fusion.called_computations) != 1:
        raise _error(fusion, f"calls {len(fusion.called_computations)} computations, a fusion calls one")
    computation = fusion.called_computations[0]
    if computation.root is None:
        raise _error(fusion, f"the fused computation {computation.name} has no ROOT")
    return computation


def check_fusion(fusion: HloInstruction) -> None:
    """Raises ``VerifyError`` unless ``fusion`` is consistent enough for the
    code generator to stay inside its buffers (see the module's docstring)."""
    computation = _fused_computation(fusion)
    members = {id(i) for i in computation.instructions}
    if id(computation.root) not in members:
        raise _error(fusion, f"the ROOT {computation.root.name} is not in {computation.name}")
    for instr in computation.instructions:
        for operand in instr.operands:
            if id(operand) not in members:
                raise _error(fusion, f"{instr.name} uses {operand.name}, which is not in {computation.name}")
    computation.post_order()  # raises VerifyError on a cycle
    _check_parameters(fusion, computation)
    for instr in computation.instructions:
        if instr.opcode == "parameter":
            continue
        if instr.opcode == "tuple" and instr is not computation.root:
            raise _error(fusion, f"tuple {instr.name} is not the fused root")
        try:
            expected = infer_shape(instr)
        except XlapyError as error:
            raise _error(fusion, str(error)) from None
        except (ArithmeticError, IndexError, KeyError, TypeError, ValueError) as error:
            # A malformed instruction the shape rules did not anticipate: still not one to compile.
            raise _error(fusion, f"instruction {instr.name} is malformed ({type(error).__name__}: {error})") from None
        if not same_shape(expected, instr.shape):
            raise _error(fusion, f"{instr.name} is declared {show(instr.shape)}, its {instr.opcode} gives "
                                 f"{show(expected)}")
    _check_outputs(fusion, computation)


def _check_parameters(fusion: HloInstruction, computation: HloComputation) -> None:
    params = [i for i in computation.instructions if i.opcode == "parameter"]
    numbers = sorted(p.parameter_number for p in params)
    if numbers != list(range(len(fusion.operands))):
        raise _error(fusion, f"has {len(fusion.operands)} operands, but its fused parameters are numbered "
                             f"{numbers}")
    for param in params:
        operand = fusion.operands[param.parameter_number]
        if param.shape.is_tuple or not same_shape(param.shape, operand.shape):
            raise _error(fusion, f"fused parameter {param.name} is {show(param.shape)}, but operand "
                                 f"{param.parameter_number} ({operand.name}) is {show(operand.shape)}")
        if _byte_size(fusion, param.shape) != _byte_size(fusion, operand.shape):
            raise _error(fusion, f"fused parameter {param.name} and operand {operand.name} lay out "
                                 f"{show(param.shape)} in buffers of different sizes")


def _check_outputs(fusion: HloInstruction, computation: HloComputation) -> None:
    root = computation.root
    # A root tuple's operands, or the elements of a tuple-shaped root (a variadic reduce).
    if root.opcode == "tuple":
        values = [(r.shape, r.name) for r in root.operands]
    elif root.shape.is_tuple:
        values = [(s, root.name) for s in root.shape.tuple_shapes]
    else:
        values = [(root.shape, root.name)]
    outputs = fusion_outputs(fusion)
    if fusion.shape.is_tuple != root.shape.is_tuple or len(outputs) != len(values):
        raise _error(fusion, f"returns {show(fusion.shape)}, but its fused root {root.name} is {show(root.shape)}")
    for index, (output, (shape, name)) in enumerate(zip(outputs, values)):
        if output.is_tuple or shape.is_tuple:
            continue  # nested tuples are refused as unsupported (see ``unsupported_fused_ops``)
        if not same_shape(output, shape):
            raise _error(fusion, f"output {index} is {show(output)}, but the fused computation computes "
                                 f"{show(shape)} ({name})")
    for output in outputs:
        if not output.is_tuple:
            _byte_size(fusion, output)


def check_output_dimensions(fusion: HloInstruction) -> None:
    """Raises ``VerifyError`` unless every array output of ``fusion`` has the first one's dimensions: what an
    emitter needs that walks the indices of the first output and writes every output at them."""
    outputs = [output for output in fusion_outputs(fusion) if not output.is_tuple]
    for output in outputs[1:]:
        if output.dimensions != outputs[0].dimensions:
            raise _error(fusion, f"outputs {show(outputs[0])} and {show(output)} have different dimensions")


def _byte_size(fusion: HloInstruction, shape: Shape) -> int:
    try:
        return physical_byte_size(shape)
    except XlapyError as error:
        raise _error(fusion, f"{show(shape)}: {error}") from None


def unsupported_fused_ops(fusion: HloInstruction) -> list[str]:
    """What stops the loop emitter from compiling ``fusion``, each as ``"opcode (name)"`` with the reason
    when it is not the opcode itself (empty when nothing is known to stop it)."""
    kind = fusion.attr("kind")
    if kind not in ("kLoop", None):
        return [f"fusion ({fusion.name}) of kind {kind}"]
    try:
        computation = _fused_computation(fusion)
    except VerifyError:
        return []  # reported by ``check_fusion``
    found = []
    if any(s.is_tuple for s in fusion_outputs(fusion)):
        found.append(f"fusion ({fusion.name}) returning a nested tuple")
    _unsupported_in(computation, fusion, found, set())
    return found


def _unsupported_in(computation: HloComputation, fusion: HloInstruction, found: list[str], seen: set[int]) -> None:
    """Adds to ``found`` the ops of ``computation`` and of the computations its instructions apply to scalars
    (reducers) that have no elemental rule."""
    seen.add(id(computation))
    fused = computation is fusion.called_computations[0]
    where = f"fusion {fusion.name}" if fused else f"{computation.name} in fusion {fusion.name}"
    for instr in computation.instructions:
        if instr.opcode in _STRUCTURAL:
            continue
        if fused and instr.opcode == "scatter" and instr is computation.root:
            for called in instr.called_computations:  # the combiner, applied to scalars
                if id(called) not in seen:
                    _unsupported_in(called, fusion, found, seen)
            continue
        if instr.opcode not in ELEMENTAL and instr.opcode not in COMPLEX_ELEMENTAL:
            found.append(f"{instr.opcode} ({instr.name}) in {where}")
            continue
        try:
            rule_of(instr)
        except UnimplementedError:
            types = sorted({s.element_type for s in _array_shapes(instr)})
            found.append(f"{instr.opcode} ({instr.name}) on {'/'.join(types)} in {where}")
        for called in instr.called_computations:
            if id(called) not in seen:
                _unsupported_in(called, fusion, found, seen)


def _array_shapes(instr: HloInstruction) -> list[Shape]:
    shapes = [o.shape for o in instr.operands] + [instr.shape]
    return [t for s in shapes for t in (s.tuple_shapes if s.is_tuple else (s,))]
