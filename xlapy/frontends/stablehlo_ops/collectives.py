"""Collectives, written in MLIR's generic form: all_reduce, all_gather,
reduce_scatter, all_to_all, collective_permute, collective_broadcast."""

from __future__ import annotations

from xlapy.frontends.mlir_syntax import DenseElementsAttr, DialectAttr
from xlapy.frontends.stablehlo_ops.common import bool_value, int_value, struct_int
from xlapy.frontends.stablehlo_ops.drafts import OpDraft
from xlapy.frontends.stablehlo_ops.registry import OpSpec, register
from xlapy.hlo.attributes import Verbatim


def _groups(d: OpDraft) -> dict:
    hlo: dict = {}
    channel = d.attributes.get("channel_handle")
    if isinstance(channel, DialectAttr) and struct_int(channel, "handle") > 0:
        hlo["channel_id"] = struct_int(channel, "handle")
    groups = d.attributes.get("replica_groups")
    if isinstance(groups, DenseElementsAttr):
        rows = groups.array.reshape(groups.array.shape[0] if groups.array.ndim else 1, -1) \
            if groups.array.size else groups.array.reshape(0, 0)
        hlo["replica_groups"] = Verbatim("{" + ",".join("{" + ",".join(str(int(v)) for v in row) + "}"
                                                        for row in rows) + "}")
    return hlo


def _global_ids(d: OpDraft, hlo: dict) -> dict:
    if bool_value(d.attributes.get("use_global_device_ids")):
        hlo["use_global_device_ids"] = True
    return hlo


def _all_reduce(d: OpDraft) -> dict:
    return {**_global_ids(d, _groups(d)), "to_apply": d.regions[0].name}


def _all_gather(d: OpDraft) -> dict:
    hlo = _groups(d)
    hlo["dimensions"] = (int_value(d.attributes.get("all_gather_dim")),)
    return _global_ids(d, hlo)


def _reduce_scatter(d: OpDraft) -> dict:
    hlo = _global_ids(d, _groups(d))
    hlo["dimensions"] = (int_value(d.attributes.get("scatter_dimension")),)
    hlo["to_apply"] = d.regions[0].name
    return hlo


def _split_concat(d: OpDraft) -> tuple[int, int, int]:
    missing = [name for name in _SPLIT_CONCAT if name not in d.attributes]
    if missing:
        raise ValueError(f"all_to_all needs {', '.join(missing)}")
    split, concat, count = (int_value(d.attributes[name]) for name in _SPLIT_CONCAT)
    return split, concat, count


def _is_hlo_all_to_all(d: OpDraft) -> bool:
    """Whether the op is XLA's HLO all-to-all (``dimensions={d}``): one
    operand, split and concatenated along one dimension, in as many blocks
    as its replica groups (listed) have devices."""
    try:
        split, concat, count = _split_concat(d)
    except ValueError:
        return False  # the attributes say what is missing
    groups = d.attributes.get("replica_groups")
    rows = groups.array.shape if isinstance(groups, DenseElementsAttr) else ()
    return len(d.operands) == 1 and split == concat and len(rows) == 2 and rows[0] > 0 and rows[1] == count


def _all_to_all_opcode(d: OpDraft) -> str:
    # StableHLO's all_to_all may concatenate along another dimension than it
    # splits, exchange several operands, or leave the group size to the device count.
    return "all-to-all" if _is_hlo_all_to_all(d) else "stablehlo.all_to_all"


def _all_to_all(d: OpDraft) -> dict:
    hlo = _groups(d)
    split, concat, count = _split_concat(d)
    if _is_hlo_all_to_all(d):
        hlo["dimensions"] = (split,)
    else:
        hlo.update(split_dimension=split, concat_dimension=concat, split_count=count)
    return hlo


_SPLIT_CONCAT = ("split_dimension", "concat_dimension", "split_count")


def _collective_permute(d: OpDraft) -> dict:
    hlo: dict = {}
    channel = d.attributes.get("channel_handle")
    if isinstance(channel, DialectAttr) and struct_int(channel, "handle") > 0:
        hlo["channel_id"] = struct_int(channel, "handle")
    pairs = d.attributes.get("source_target_pairs")
    if isinstance(pairs, DenseElementsAttr):
        hlo["source_target_pairs"] = tuple(tuple(int(v) for v in row) for row in pairs.array.reshape(-1, 2))
    return hlo


_GROUPS = ("channel_handle", "replica_groups")
register(OpSpec("stablehlo.all_reduce", "all-reduce", hlo=_all_reduce,
                properties=(*_GROUPS, "use_global_device_ids")))
register(OpSpec("stablehlo.all_gather", "all-gather", hlo=_all_gather,
                properties=("all_gather_dim", *_GROUPS, "use_global_device_ids")))
register(OpSpec("stablehlo.reduce_scatter", "reduce-scatter", hlo=_reduce_scatter,
                properties=(*_GROUPS, "scatter_dimension", "use_global_device_ids")))
register(OpSpec("stablehlo.all_to_all", _all_to_all_opcode, hlo=_all_to_all,
                properties=(*_GROUPS, "concat_dimension", "split_count", "split_dimension")))
register(OpSpec("stablehlo.collective_permute", "collective-permute", hlo=_collective_permute,
                properties=("channel_handle", "source_target_pairs")))
register(OpSpec("stablehlo.collective_broadcast", "collective-broadcast", hlo=_groups, properties=_GROUPS))
