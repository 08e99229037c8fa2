"""The order in which XLA prints an instruction's attributes.

XLA prints an instruction's attributes in a fixed order whatever order the
text it parsed had: first the ones of the opcode (its instruction class's own
fields, then the computations it calls), then the ones every instruction may
have. ``attribute_order(opcode)`` is that order; ``attribute_rank(opcode)``
maps each name to its position.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache

# Printed after the opcode's own attributes, for every opcode.
COMMON: tuple[str, ...] = ("sharding", "frontend_attributes", "control-predecessors", "statistics",
                           "result_accuracy", "origin", "metadata", "backend_config")

# Shared by an instruction class and its subclasses, or by look-alike classes.
_COLLECTIVE = "channel_id replica_groups constrain_layout"
_WINDOWED = "window dim_labels feature_group_count batch_group_count"
_DOT = "lhs_batch_dims lhs_contracting_dims rhs_batch_dims rhs_contracting_dims"

# Opcodes (space-separated) -> their own attributes in XLA's order. Opcodes
# of one instruction class share a list. A custom-call's `to_apply` is one of
# its called computations; the names XLA's parser takes but never prints
# (all-reduce's `mode`) are left out.
_OWN: dict[str, str] = {
    "broadcast transpose reverse concatenate get-dimension-size set-dimension-size": "dimensions",
    "reduce map": "dimensions to_apply",
    "sort": "dimensions is_stable to_apply",
    "reduce-window": "window to_apply",
    "select-and-scatter": "window select scatter",
    "while": "condition body",
    "conditional": "true_computation false_computation branch_computations",
    "call": "to_apply is_composite",
    "fusion": "kind output_to_operand_aliasing calls",
    "async-start": "async_execution_thread calls",
    "all-reduce all-reduce-start": f"{_COLLECTIVE} use_global_device_ids to_apply",
    "all-gather all-gather-start": f"{_COLLECTIVE} dimensions use_global_device_ids",
    "reduce-scatter": f"{_COLLECTIVE} use_global_device_ids dimensions to_apply",
    "all-to-all ragged-all-to-all": f"{_COLLECTIVE} dimensions",
    "collective-broadcast": _COLLECTIVE,
    "collective-permute collective-permute-start": "channel_id source_target_pairs slice_sizes",
    "send send-done recv recv-done": "channel_id is_host_transfer",
    "dot": f"{_DOT} operand_precision algorithm",
    "ragged-dot": f"{_DOT} lhs_ragged_dims rhs_group_dims operand_precision",
    "convolution": f"{_WINDOWED} convolution_kind operand_precision sparsity_config",
    "custom-call": f"{_WINDOWED} operand_precision padding_type custom_call_target operand_layout_constraints "
                   "custom_call_has_side_effect literal output_to_operand_aliasing schedule api_version "
                   "called_computations to_apply",
    "gather": "offset_dims collapsed_slice_dims start_index_map operand_batching_dims start_indices_batching_dims "
              "index_vector_dim slice_sizes indices_are_sorted",
    "scatter": "update_window_dims inserted_window_dims scatter_dims_to_operand_dims input_batching_dims "
               "scatter_indices_batching_dims index_vector_dim indices_are_sorted unique_indices to_apply",
    "compare": "direction type",
    "fft": "fft_type fft_length",
    "batch-norm-training batch-norm-inference batch-norm-grad": "epsilon feature_index",
    # The options proto's fields, in field-number order.
    "triangular-solve": "left_side lower unit_diagonal transpose_a",
    "cholesky": "lower",
    "topk": "k largest",
    "copy-start": "cross_program_prefetch_index",
    "reduce-precision": "exponent_bits mantissa_bits",
    "rng": "distribution",
    "rng-bit-generator": "algorithm",
    "rng-get-and-update-state": "delta",
    "iota": "iota_dimension",
    "slice": "slice",
    "pad": "padding",
    "dynamic-slice": "dynamic_slice_sizes",
    "get-tuple-element": "index",
    "reshape": "inferred_dimension",
    "domain": "domain",
    "infeed": "infeed_config",
    "outfeed": "outfeed_shape outfeed_config",
    "parameter": "parameter_replication",
}

OWN_ATTRIBUTES: dict[str, tuple[str, ...]] = {
    opcode: tuple(names.split()) for opcodes, names in _OWN.items() for opcode in opcodes.split()
}


def own_attributes(opcode: str) -> tuple[str, ...]:
    """The attributes of ``opcode`` itself, in the order XLA prints them."""
    own = OWN_ATTRIBUTES.get(opcode)
    if own is not None:
        return own
    # `X-start` with no opcode of its own wraps an X in an async computation:
    # XLA prints the async thread, then X's attributes. Its `-update` and
    # `-done` have none of their own.
    if opcode.endswith("-start"):
        return ("async_execution_thread", *OWN_ATTRIBUTES.get(opcode.removesuffix("-start"), ()))
    return ()


def attribute_order(opcode: str) -> tuple[str, ...]:
    """Every attribute XLA may print on an ``opcode`` instruction, in its order."""
    return own_attributes(opcode) + COMMON


@cache
def attribute_rank(opcode: str) -> Mapping[str, int]:
    """Attribute name -> its position in ``attribute_order(opcode)``."""
    return {name: i for i, name in enumerate(attribute_order(opcode))}
