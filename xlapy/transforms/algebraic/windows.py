"""Rules for ``reduce-window``, as XLA's ``HandleReduceWindow``:

- a reduce-window of no elements (or making none) is its initial value
  broadcast; one of a scalar is the scalar;
- a window of one element (no stride, dilation nor reversal), reduced by
  ``add``, ``maximum`` or ``minimum``, combines each element with the
  initial value: an elementwise op, padded with the initial value where the
  window's padding was;
- a window spanning whole dimensions, or one element of the others (no
  stride, dilation nor padding), is a ``reduce`` of those dimensions,
  reshaped to the result.

As for ``reduce``, the initial value is taken to be an identity of the
reduction where XLA drops it. The elementwise op keeps the reducer's operand
order (initial value, element). XLA's rewrites of cumulative sums of
broadcast constants into products and its folding of pads into the window
are not made (the first rounds differently).
"""

from __future__ import annotations

from xlapy.hlo.attributes import PaddingDimension, WindowDimension
from xlapy.hlo.ir import HloInstruction
from xlapy.transforms.algebraic import building
from xlapy.transforms.algebraic.registry import Simplifier, rule

_ELEMENTWISE_REDUCERS = ("add", "maximum", "minimum")


def _window(reduce_window: HloInstruction) -> tuple[WindowDimension, ...]:
    window = tuple(reduce_window.attr("window", ()) or ())
    return window or (WindowDimension(),) * reduce_window.operands[0].shape.rank


def reducer_operand_order(computation) -> str | None:
    """For a reducer ``op(p0, p1)`` of two parameters: "init-first" when the
    root reads parameter 0 first, "element-first" when parameter 1; None for
    any other reducer."""
    root = computation.root
    params = computation.parameters
    if len(params) != 2 or len(root.operands) != 2:
        return None
    if root.operands[0] is params[0] and root.operands[1] is params[1]:
        return "init-first"
    if root.operands[0] is params[1] and root.operands[1] is params[0]:
        return "element-first"
    return None


@rule("reduce-window")
def _reduce_window(reduce_window: HloInstruction, s: Simplifier) -> bool:
    count = len(reduce_window.operands) // 2
    inputs, inits = reduce_window.operands[:count], reduce_window.operands[count:]
    multi_output = reduce_window.shape.is_tuple
    outputs = list(reduce_window.shape.tuple_shapes) if multi_output else [reduce_window.shape]
    if inputs[0].shape.element_count == 0 or outputs[0].element_count == 0:
        parts = [building.broadcast(s, init, shape, (), reduce_window) for init, shape in zip(inits, outputs)]
        return _replace_with_parts(reduce_window, s, parts)
    function = reduce_window.called_computations[0]
    if inputs[0].shape.rank == 0 and (not multi_output or function.root.opcode == "tuple"):
        return _replace_with_parts(reduce_window, s, list(inputs))
    if multi_output:
        return False
    operand, init = inputs[0], inits[0]
    window = _window(reduce_window)
    if all(d.size == 1 and d.stride == 1 and d.window_dilation == 1 and d.base_dilation == 1
           and not d.window_reversal and d.padding_low >= 0 and d.padding_high >= 0 for d in window):
        order = reducer_operand_order(function)
        if function.root.opcode in _ELEMENTWISE_REDUCERS and order is not None:
            return _elementwise(reduce_window, s, operand, init, window, function.root.opcode, order)
    # Whole dimensions (or single elements) reduced, without stride, dilation nor padding: a reduce.
    if any(d.stride != 1 or d.window_dilation != 1 or d.base_dilation != 1 or d.padding_low or d.padding_high
           for d in window):
        return False
    dims = []
    for d, window_dim in enumerate(window):
        if window_dim.size == 1:
            continue
        if reduce_window.shape.dimensions[d] != 1:
            return False
        dims.append(d)
    if not dims:
        return False
    kept = [size for d, size in enumerate(reduce_window.shape.dimensions) if d not in dims]
    reduce = s.computation.add_instruction(HloInstruction(
        "reduce", "reduce", building.array_shape(reduce_window.shape, reduce_window.shape.element_type, kept),
        [operand, init], {"dimensions": tuple(dims), "to_apply": function.name}, [function]), before=reduce_window)
    return s.replace_with_new(reduce_window, "reshape", reduce_window.shape, [reduce])


def _elementwise(reduce_window: HloInstruction, s: Simplifier, operand: HloInstruction, init: HloInstruction,
                 window: tuple[WindowDimension, ...], opcode: str, order: str) -> bool:
    """Each output element is the reducer applied to the initial value and
    one element; padding holds the initial value."""
    broadcast_init = building.broadcast(s, init, operand.shape, (), reduce_window)
    operands = [broadcast_init, operand] if order == "init-first" else [operand, broadcast_init]
    combined = s.add(opcode, operand.shape, operands, before=reduce_window)
    if any(d.padding_low > 0 or d.padding_high > 0 for d in window):
        padding = tuple(PaddingDimension(d.padding_low, d.padding_high, 0) for d in window)
        combined = s.add("pad", reduce_window.shape, [combined, init], {"padding": padding}, before=reduce_window)
    return s.replace(reduce_window, combined)


def _replace_with_parts(instr: HloInstruction, s: Simplifier, parts: list[HloInstruction]) -> bool:
    if instr.shape.is_tuple:
        return s.replace_with_new(instr, "tuple", instr.shape, parts)
    return s.replace(instr, parts[0])
