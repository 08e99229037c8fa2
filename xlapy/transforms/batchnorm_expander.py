"""Batch-norm expansion, as XLA's ``BatchNormExpander``
(``xla/service/batchnorm_expander.cc``): ``batch-norm-training``,
``batch-norm-inference`` and ``batch-norm-grad`` become broadcasts, additive
reductions over every dimension but the feature one, and elementwise ops of
the operand's type (each rounded on its own).

- training: mean = sum(x) / N, var = sum(x * x) / N - mean * mean (the
  one-pass formula, as XLA), y = (x - mean) * rsqrt(var + epsilon) * scale
  + offset; the result is the tuple (y, mean, var).
- inference: y = x * t + (offset - mean * t), t = scale * rsqrt(var + epsilon),
  computed per feature then broadcast.
- grad: grad_scale = sum(dy * (x - mean)) * rsqrt(var + epsilon),
  grad_offset = sum(dy), grad_x = scale * rsqrt(var + epsilon) / N *
  (N * dy - sum(dy) - (x - mean) * sum(dy * (x - mean)) / (var + epsilon)).

N, the number of elements per feature, is the product of
``get-dimension-size`` of every other dimension (s32), converted to the
operand's type. ``epsilon`` is an f32 attribute converted to that type. Each
expansion gets its own scalar add computation for the reductions. Every new
instruction takes the op's metadata and, when the op has a sharding, a
sharding: that of the (first) array result for instructions of the operand's
shape, otherwise the op's unique device or replicated.

XLA visits every non-fusion computation (composite ones included) and leaves
an op ordered by control dependencies as it is.
"""

from __future__ import annotations

import numpy as np

from xlapy.hlo.ir import HloComputation, HloInstruction, HloModule
from xlapy.shapes import Shape
from xlapy.transforms.call_graph import unique_computation_name
from xlapy.transforms.hlo_pass import HloPass
from xlapy.transforms.hlo_rewrites import has_control_dependencies, replace_instruction
from xlapy.transforms.op_expander_pass import with_element_type

_BATCH_NORM_OPCODES = ("batch-norm-training", "batch-norm-inference", "batch-norm-grad")


def _top_level_elements(sharding: str) -> list[str] | None:
    """The element shardings of a tuple sharding ``{{...}, {...}}`` (None when
    ``sharding`` is not a tuple sharding)."""
    text = sharding.strip()
    if not (text.startswith("{") and text.endswith("}")):
        return None
    inner = text[1:-1].strip()
    if not inner.startswith("{"):
        return None
    elements, depth, start = [], 0, 0
    for position, char in enumerate(inner):
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
        elif char == "," and depth == 0:
            elements.append(inner[start:position].strip())
            start = position + 1
    elements.append(inner[start:].strip())
    return elements


def _unique_device(sharding: str) -> int | None:
    """The device every element of ``sharding`` is assigned to, if they all
    are to one (XLA's ``HloSharding::UniqueDevice``)."""
    elements = _top_level_elements(sharding) or [sharding.strip()]
    devices = set()
    for element in elements:
        body = element.strip().removeprefix("{").removesuffix("}").split()
        if len(body) != 2 or body[0] != "maximal" or not body[1].startswith("device="):
            return None
        devices.add(body[1].removeprefix("device="))
    return int(devices.pop()) if len(devices) == 1 else None


class _Expansion:
    """Adds the instructions of one batch-norm's expansion just before it,
    each with the op's metadata; remembers them for the shardings."""

    def __init__(self, batch_norm: HloInstruction) -> None:
        assert batch_norm.parent is not None, f"{batch_norm.name} is in no computation"
        self.batch_norm = batch_norm
        self.computation: HloComputation = batch_norm.parent
        self.element_type = batch_norm.operands[0].shape.element_type
        self.added: list[HloInstruction] = []

    def _insert(self, instruction: HloInstruction, annotate: bool) -> HloInstruction:
        self.computation.add_instruction(instruction, before=self.batch_norm)
        if annotate:
            metadata = self.batch_norm.attributes.get("metadata")
            if metadata is not None:
                instruction.attributes["metadata"] = metadata
            self.added.append(instruction)
        return instruction

    def add(self, opcode: str, shape: Shape, operands: list[HloInstruction], attributes: dict | None = None,
            called: list[HloComputation] | None = None, annotate: bool = True) -> HloInstruction:
        return self._insert(HloInstruction(opcode, opcode, shape, operands, attributes, called), annotate)

    def constant(self, value: float | int, element_type: str, annotate: bool = True) -> HloInstruction:
        constant = HloInstruction("constant", "constant", Shape.array(element_type, ()))
        constant.literal = np.asarray(value, dtype=constant.shape.dtype)
        return self._insert(constant, annotate)

    def epsilon(self, annotate: bool = True) -> HloInstruction:
        # The attribute is an f32, converted to the operand's type.
        value = np.float32(float(self.batch_norm.attributes["epsilon"]))
        return self.constant(value, self.element_type, annotate)

    def broadcast(self, operand: HloInstruction, shape: Shape, dimensions: tuple[int, ...],
                  annotate: bool = True) -> HloInstruction:
        return self.add("broadcast", with_element_type(shape, operand.shape.element_type), [operand],
                        {"dimensions": dimensions}, annotate=annotate)

    def binary(self, opcode: str, shape: Shape, lhs: HloInstruction, rhs: HloInstruction) -> HloInstruction:
        return self.add(opcode, shape, [lhs, rhs])

    def rsqrt(self, operand: HloInstruction) -> HloInstruction:
        return self.add("rsqrt", operand.shape, [operand])

    def mean(self, element_count: HloInstruction, operand: HloInstruction) -> HloInstruction:
        return self.binary("divide", operand.shape, operand, self.broadcast(element_count, operand.shape, ()))

    def element_count_per_feature(self, operand: HloInstruction, feature_index: int) -> HloInstruction:
        """The product of the sizes of every dimension but the feature one, in
        the operand's type."""
        s32 = Shape.array("s32", ())
        count = self.constant(1, "s32")
        for dimension in range(operand.shape.rank):
            if dimension != feature_index:
                size = self.add("get-dimension-size", s32, [operand], {"dimensions": (dimension,)})
                count = self.binary("multiply", s32, size, count)
        return self.add("convert", Shape.array(self.element_type, ()), [count])

    def sum_over_other_dimensions(self, operand: HloInstruction, zero: HloInstruction, feature_shape: Shape,
                                  feature_index: int) -> HloInstruction:
        add_computation = self._scalar_add_computation()
        dimensions = tuple(d for d in range(operand.shape.rank) if d != feature_index)
        return self.add("reduce", feature_shape, [operand, zero],
                        {"dimensions": dimensions, "to_apply": add_computation.name}, [add_computation])

    def _scalar_add_computation(self) -> HloComputation:
        module = self.computation.module
        assert module is not None, f"{self.computation.name} is in no module"
        computation = HloComputation(unique_computation_name(module, "scalar_add_computation"))
        computation.execution_thread = self.computation.execution_thread
        module.add_computation(computation)
        # Callees come before their callers in the module.
        module.computations.remove(computation)
        module.computations.insert(module.computations.index(self.computation), computation)
        scalar = Shape.array(self.element_type, ())
        lhs = HloInstruction("scalar_lhs", "parameter", scalar)
        lhs.parameter_number = 0
        rhs = HloInstruction("scalar_rhs", "parameter", scalar)
        rhs.parameter_number = 1
        computation.add_instruction(lhs)
        computation.add_instruction(rhs)
        computation.root = computation.add_instruction(HloInstruction("add", "add", scalar, [lhs, rhs]))
        return computation

    def set_shardings(self, array_shape: Shape, array_result_sharding: str) -> None:
        """XLA's shardings of the new instructions (when the op has one)."""
        sharding = self.batch_norm.attributes.get("sharding")
        if sharding is None:
            return
        device = _unique_device(str(sharding))
        default = "{replicated}" if device is None else f"{{maximal device={device}}}"
        for instruction in self.added:
            instruction.attributes["sharding"] = (array_result_sharding if instruction.shape == array_shape
                                                  else default)


def _first_element_sharding(batch_norm: HloInstruction) -> str:
    sharding = str(batch_norm.attributes.get("sharding", ""))
    elements = _top_level_elements(sharding)
    return elements[0] if elements else sharding.strip()


class BatchNormExpander(HloPass):
    """Rewrites the batch-norm ops the options select (XLA:CPU selects all three)."""

    name = "batchnorm_expander"

    def __init__(self, rewrite_training_op: bool = True, rewrite_inference_op: bool = True,
                 rewrite_grad_op: bool = True) -> None:
        self.rewrite = {"batch-norm-training": rewrite_training_op, "batch-norm-inference": rewrite_inference_op,
                        "batch-norm-grad": rewrite_grad_op}

    def run(self, module: HloModule) -> bool:
        matching = [instruction for computation in module.computations if computation.fusion_instruction is None
                    for instruction in computation.post_order()
                    if instruction.opcode in _BATCH_NORM_OPCODES and self.rewrite[instruction.opcode]
                    and not has_control_dependencies(instruction)]
        changed = False
        for batch_norm in matching:
            expansion = _Expansion(batch_norm)
            if batch_norm.opcode == "batch-norm-training":
                expanded = _expand_training(expansion)
            elif batch_norm.opcode == "batch-norm-inference":
                expanded = _expand_inference(expansion)
            else:
                expanded = _expand_grad(expansion)
            changed |= replace_instruction(batch_norm, expanded)
        return changed


def _tuple(expansion: _Expansion, elements: list[HloInstruction]) -> HloInstruction:
    shape = Shape.make_tuple([e.shape for e in elements])
    result = expansion.add("tuple", shape, elements, annotate=False)
    sharding = expansion.batch_norm.attributes.get("sharding")
    if sharding is not None:
        result.attributes["sharding"] = sharding
    return result


def _expand_training(e: _Expansion) -> HloInstruction:
    operand, scale, offset = e.batch_norm.operands
    shape, feature_shape = operand.shape, scale.shape
    feature_index = int(e.batch_norm.attributes["feature_index"])
    dims = (feature_index,)
    zero = e.constant(0.0, e.element_type)
    epsilon = e.broadcast(e.epsilon(), shape, ())
    count = e.element_count_per_feature(operand, feature_index)
    scale_broadcast = e.broadcast(scale, shape, dims)
    offset_broadcast = e.broadcast(offset, shape, dims)
    squared = e.binary("multiply", shape, operand, operand)
    total = e.sum_over_other_dimensions(operand, zero, feature_shape, feature_index)
    squared_total = e.sum_over_other_dimensions(squared, zero, feature_shape, feature_index)
    mean = e.mean(count, total)
    mean_broadcast = e.broadcast(mean, shape, dims)
    mean_of_squares = e.mean(count, squared_total)
    square_of_mean = e.binary("multiply", feature_shape, mean, mean)
    variance = e.binary("subtract", feature_shape, mean_of_squares, square_of_mean)
    variance_broadcast = e.broadcast(variance, shape, dims)
    inverse_deviation = e.rsqrt(e.binary("add", shape, variance_broadcast, epsilon))
    centered = e.binary("subtract", shape, operand, mean_broadcast)
    normalized = e.binary("multiply", shape, centered, inverse_deviation)
    scaled = e.binary("multiply", shape, normalized, scale_broadcast)
    shifted = e.binary("add", shape, scaled, offset_broadcast)
    e.set_shardings(shape, _first_element_sharding(e.batch_norm))
    return _tuple(e, [shifted, mean, variance])


def _expand_inference(e: _Expansion) -> HloInstruction:
    operand, scale, offset, mean, variance = e.batch_norm.operands
    shape, feature_shape = operand.shape, scale.shape
    dims = (int(e.batch_norm.attributes["feature_index"]),)
    # XLA adds epsilon outside the instructions it annotates.
    epsilon = e.broadcast(e.epsilon(annotate=False), feature_shape, (), annotate=False)
    inverse_deviation = e.rsqrt(e.binary("add", feature_shape, variance, epsilon))
    true_scale = e.binary("multiply", feature_shape, scale, inverse_deviation)
    true_shift = e.binary("subtract", feature_shape, offset, e.binary("multiply", feature_shape, mean, true_scale))
    scaled = e.binary("multiply", shape, operand, e.broadcast(true_scale, shape, dims))
    shifted = e.binary("add", shape, scaled, e.broadcast(true_shift, shape, dims))
    e.set_shardings(shape, str(e.batch_norm.attributes.get("sharding", "")).strip())
    return shifted


def _expand_grad(e: _Expansion) -> HloInstruction:
    activation, scale, mean, variance, grad_output = e.batch_norm.operands
    shape, feature_shape = activation.shape, scale.shape
    feature_index = int(e.batch_norm.attributes["feature_index"])
    dims = (feature_index,)
    count = e.element_count_per_feature(activation, feature_index)
    zero = e.constant(0.0, e.element_type)
    epsilon = e.epsilon()
    epsilon_activation = e.broadcast(epsilon, shape, ())
    epsilon_feature = e.broadcast(epsilon, feature_shape, ())
    scale_broadcast = e.broadcast(scale, shape, dims)
    variance_broadcast = e.broadcast(variance, shape, dims)
    mean_broadcast = e.broadcast(mean, shape, dims)
    inverse_deviation_broadcast = e.rsqrt(e.binary("add", shape, variance_broadcast, epsilon_activation))
    inverse_deviation = e.rsqrt(e.binary("add", feature_shape, variance, epsilon_feature))
    centered = e.binary("subtract", shape, activation, mean_broadcast)
    grad_times_centered = e.binary("multiply", shape, grad_output, centered)
    sum_grad_times_centered = e.sum_over_other_dimensions(grad_times_centered, zero, feature_shape, feature_index)
    grad_offset = e.sum_over_other_dimensions(grad_output, zero, feature_shape, feature_index)
    grad_scale = e.binary("multiply", feature_shape, sum_grad_times_centered, inverse_deviation)
    sum_grad_broadcast = e.broadcast(grad_offset, shape, dims)
    sum_grad_times_centered_broadcast = e.broadcast(sum_grad_times_centered, shape, dims)
    centered_term = e.binary("multiply", shape, sum_grad_times_centered_broadcast, centered)
    centered_term = e.binary("divide", shape, centered_term,
                             e.binary("add", shape, variance_broadcast, epsilon_activation))
    factor = e.mean(count, e.binary("multiply", shape, scale_broadcast, inverse_deviation_broadcast))
    scaled_grad = e.binary("multiply", shape, grad_output, e.broadcast(count, shape, ()))
    difference = e.binary("subtract", shape, e.binary("subtract", shape, scaled_grad, sum_grad_broadcast),
                          centered_term)
    grad_activation = e.binary("multiply", shape, factor, difference)
    e.set_shardings(shape, _first_element_sharding(e.batch_norm))
    return _tuple(e, [grad_activation, grad_scale, grad_offset])

