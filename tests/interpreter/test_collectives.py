"""Collectives outside a simulated group of devices: exact when the device is
alone in its group, refused (naming the op, its groups and the module's
device counts) when the result would need other devices' values."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy

_ADD = """add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
"""


def _module(header: str, root: str) -> xlapy.HloModule:
    entry = f"ENTRY e {{\n  p = f32[4] parameter(0)\n  ROOT r = {root}\n}}\n"
    return xlapy.parse_hlo(f"HloModule m{header}\n{_ADD}\n{entry}")


_X = np.array([1.5, -2.0, 3.25, 0.0], np.float32)


@pytest.mark.parametrize("header, root", [
    ("", "f32[4] all-reduce(p), replica_groups={}, to_apply=add"),
    (", replica_count=2", "f32[4] all-reduce(p), replica_groups={{0},{1}}, to_apply=add"),
    (", num_partitions=4", "f32[4] all-reduce(p), replica_groups={}, to_apply=add"),
    (", num_partitions=4", "f32[4] all-reduce(p), channel_id=1, replica_groups={{0},{1},{2},{3}}, "
                           "use_global_device_ids=true, to_apply=add"),
    (", num_partitions=2", "f32[4] all-gather(p), channel_id=1, replica_groups={{0},{1}}, dimensions={0}, "
                           "use_global_device_ids=true"),
    (", replica_count=2", "f32[4] all-to-all(p), replica_groups={{0},{1}}, dimensions={0}"),
    (", num_partitions=2", "f32[4] collective-permute(p), channel_id=1, source_target_pairs={{0,0},{1,1}}"),
])
def test_a_device_alone_in_its_group_keeps_its_value(header: str, root: str) -> None:
    np.testing.assert_array_equal(xlapy.evaluate(_module(header, root), _X), _X)


def test_collective_permute_to_no_one_gives_zeros() -> None:
    # Device 0 only sends: it receives nothing, so zeros (as XLA).
    module = _module(", num_partitions=2", "f32[4] collective-permute(p), channel_id=1, source_target_pairs={{0,1}}")
    np.testing.assert_array_equal(xlapy.evaluate(module, _X), np.zeros(4, np.float32))


@pytest.mark.parametrize("header, root, groups", [
    (", replica_count=2", "f32[4] all-reduce(p), replica_groups={{0,1}}, to_apply=add", "{{0,1}}"),
    (", replica_count=2", "f32[4] all-reduce(p), replica_groups={}, to_apply=add", "{}"),
    # A channel id without global ids: each listed replica with every partition.
    (", num_partitions=2", "f32[4] all-reduce(p), channel_id=1, replica_groups={{0}}, to_apply=add", "{{0}}"),
    (", num_partitions=4", "f32[8] all-gather(p), channel_id=1, replica_groups=[2,2]<=[4], dimensions={0}, "
                           "use_global_device_ids=true", "[2,2]<=[4]"),
    (", num_partitions=2", "f32[2] reduce-scatter(p), channel_id=1, replica_groups={{0,1}}, dimensions={0}, "
                           "use_global_device_ids=true, to_apply=add", "{{0,1}}"),
    (", num_partitions=2", "f32[4] all-to-all(p), channel_id=1, replica_groups={{0,1}}, dimensions={0}",
     "{{0,1}}"),
    (", replica_count=2", "f32[4] collective-broadcast(p), replica_groups={{1,0}}", "{{1,0}}"),
])
def test_a_collective_needing_other_devices_is_refused(header: str, root: str, groups: str) -> None:
    module = _module(header, root)
    opcode = root.split()[1].split("(")[0]
    with pytest.raises(xlapy.UnimplementedError) as error:
        xlapy.evaluate(module, _X)
    message = str(error.value)
    assert f"{opcode} r with replica_groups={groups}" in message
    assert ("replica_count=2, num_partitions=1" if "replica_count" in header else
            f"replica_count=1, num_partitions={header.split('=')[1]}") in message


def test_collective_permute_from_another_device_is_refused() -> None:
    module = _module(", num_partitions=2", "f32[4] collective-permute(p), channel_id=1, "
                                           "source_target_pairs={{0,1},{1,0}}")
    with pytest.raises(xlapy.UnimplementedError, match=r"collective-permute r .*num_partitions=2"):
        xlapy.evaluate(module, _X)


def test_groups_naming_missing_devices_are_an_error() -> None:
    module = _module("", "f32[4] all-reduce(p), replica_groups={{0,3}}, to_apply=add")
    with pytest.raises(xlapy.XlapyError, match=r"all-reduce r: replica_groups=\{\{0,3\}\} name a device outside"):
        xlapy.evaluate(module, _X)


def test_replica_and_partition_ids_of_the_single_device() -> None:
    text = """HloModule m
ENTRY e {
  r = u32[] replica-id()
  p = u32[] partition-id()
  ROOT t = (u32[], u32[]) tuple(r, p)
}
"""
    assert [int(v) for v in xlapy.evaluate(xlapy.parse_hlo(text))] == [0, 0]


@pytest.mark.parametrize("groups, message", [
    ("[3]<=[4]", "all-reduce r: replica_groups=[3]<=[4]: the iota form needs [groups,size]"),
    ("[2,2]<=[4]T(5)", "all-reduce r: replica_groups=[2,2]<=[4]T(5): T(5) is not a permutation"),
    ("[2,2]<=[8]", "all-reduce r: replica_groups=[2,2]<=[8]: 2 groups of 2 are 4 ids, but [8] holds 8"),
    ("{{0},{x}}", "all-reduce r: replica_groups={{0},{x}} is neither a list of groups"),
])
def test_malformed_groups_are_an_error(groups: str, message: str) -> None:
    module = _module(", replica_count=4", f"f32[4] all-reduce(p), replica_groups={groups}, to_apply=add")
    with pytest.raises(xlapy.XlapyError) as error:
        xlapy.evaluate(module, _X)
    assert message in str(error.value)


def test_a_huge_device_count_is_refused_without_listing_the_devices() -> None:
    module = _module(", replica_count=10000000000", "f32[4] all-reduce(p), replica_groups={}, to_apply=add")
    with pytest.raises(xlapy.UnimplementedError, match=r"all-reduce r: a group of all 10000000000 replicas "
                                                       r"\(replica_count=10000000000, num_partitions=1\) is more"):
        xlapy.evaluate(module, _X)
    module = _module(", num_partitions=10000000000", "f32[4] collective-permute(p), channel_id=1, "
                                                     "source_target_pairs={{0,0}}")
    with pytest.raises(xlapy.UnimplementedError, match="a group of all 10000000000 partitions"):
        xlapy.evaluate(module, _X)


def test_a_device_alone_in_its_group_of_a_huge_layout_keeps_its_value() -> None:
    module = _module(", replica_count=10000000000", "f32[4] all-reduce(p), replica_groups={{0}}, to_apply=add")
    np.testing.assert_array_equal(xlapy.evaluate(module, _X), _X)


@pytest.mark.parametrize("count", ["0", "1_0", "\u0662", "99999999999999999999", "-1"])
def test_device_counts_must_be_plain_positive_numbers(count: str) -> None:
    module = _module(f", replica_count={count}", "f32[4] negate(p)")
    module.attributes["replica_count"] = count  # as read, whatever the parser accepts
    with pytest.raises(xlapy.XlapyError, match=f"module m: replica_count={count} is not a device count"):
        xlapy.evaluate(module, _X)
