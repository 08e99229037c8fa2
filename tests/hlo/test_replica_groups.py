"""replica_groups of collectives (xlapy.hlo.replica_groups): the listed and
iota forms against numpy's layout of the ids, and clean errors for anything else."""

from __future__ import annotations

import numpy as np
import pytest

import xlapy
from xlapy.hlo.replica_groups import MAX_DEVICES, parse_replica_groups


@pytest.mark.parametrize("text, dims, permutation, shape", [
    ("[2,2]<=[4]", (4,), None, (2, 2)),
    ("[1,8]<=[8]", (8,), None, (1, 8)),
    ("[2,2]<=[2,2]T(1,0)", (2, 2), (1, 0), (2, 2)),
    ("[4,3]<=[2,3,2]T(2,0,1)", (2, 3, 2), (2, 0, 1), (4, 3)),
    ("[ 3 , 2 ] <= [ 3 , 2 ] T( 1 , 0 )", (3, 2), (1, 0), (3, 2)),
])
def test_iota_groups_are_the_transposed_ids(text: str, dims: tuple, permutation: tuple | None,
                                            shape: tuple) -> None:
    ids = np.arange(int(np.prod(dims))).reshape(dims)
    if permutation is not None:
        ids = ids.transpose(permutation)
    groups = parse_replica_groups(text)
    assert groups.groups() == ids.reshape(shape).tolist()
    assert groups.group_size == shape[1]


@pytest.mark.parametrize("value, groups, size", [
    ("{{0,1},{2,3}}", [[0, 1], [2, 3]], 2),
    ("{ {3, 0}, {1, 2} }", [[3, 0], [1, 2]], 2),
    ("{}", [], None),
    (None, [], None),
    ("{{0},{1,2}}", [[0], [1, 2]], None),
    ([[1, 0], [3, 2]], [[1, 0], [3, 2]], 2),
    ((np.int64(0), np.int64(1)), None, None),
])
def test_listed_groups(value, groups, size) -> None:
    if groups is None:  # not a list of groups
        with pytest.raises(xlapy.XlapyError, match="replica_groups"):
            parse_replica_groups(value)
        return
    parsed = parse_replica_groups(value)
    assert parsed.groups() == groups
    assert parsed.group_size == size


@pytest.mark.parametrize("text, message", [
    ("[3]<=[4]", "replica_groups=[3]<=[4]: the iota form needs [groups,size]"),
    ("[2,2,1]<=[4]", "the iota form needs [groups,size]"),
    ("[2,3]<=[4]", "replica_groups=[2,3]<=[4]: 2 groups of 3 are 6 ids, but [4] holds 4"),
    ("[2,2]<=[4]T(5)", "replica_groups=[2,2]<=[4]T(5): T(5) is not a permutation of the 1 dimensions of [4]"),
    ("[2,2]<=[2,2]T(0,0)", "T(0,0) is not a permutation"),
    ("[2,2]<=[2,2]T(0)", "T(0) is not a permutation"),
    ("[0,4]<=[0]", "at least one group of one id"),
    ("[1,100000]<=[100000]", f"names 100000 devices, more than the {MAX_DEVICES} supported"),
    ("{{0,1}", "is neither a list of groups"),
    ("{{0,-1}}", "is neither a list of groups"),
    ("{{\u0661}}", "is neither a list of groups"),  # an Arabic-Indic digit one
    ("{{1_0}}", "is neither a list of groups"),
    ("{{" + "9" * 30 + "}}", "is neither a list of groups"),
    ("[2,2]<=[4]T", "is neither a list of groups"),
])
def test_malformed_groups_are_an_error(text: str, message: str) -> None:
    with pytest.raises(xlapy.XlapyError) as error:
        parse_replica_groups(text).groups()
    assert message in str(error.value)


_ALL_GATHER = """HloModule m
ENTRY e {
  p = f32[2] parameter(0)
  ROOT g = f32[GATHERED] all-gather(p), replica_groups=GROUPS, dimensions={0}
}
"""


@pytest.mark.parametrize("groups, gathered", [
    ("[2,3]<=[6]", 6),
    ("[3,2]<=[2,3]T(1,0)", 4),
    ("{{0,1,2,3}}", 8),
])
def test_the_verifier_takes_the_group_size_from_either_form(groups: str, gathered: int) -> None:
    xlapy.verify(xlapy.parse_hlo(_ALL_GATHER.replace("GROUPS", groups).replace("GATHERED", str(gathered))))
    with pytest.raises(xlapy.VerifyError, match=f"all-gather produces f32\\[{gathered}\\]"):
        xlapy.verify(xlapy.parse_hlo(_ALL_GATHER.replace("GROUPS", groups).replace("GATHERED", "3")))


@pytest.mark.parametrize("groups, message", [
    ("[2,2]<=[4]T(5)", "instruction g: all-gather: replica_groups=[2,2]<=[4]T(5): T(5) is not a permutation"),
    ("[3]<=[4]", "instruction g: all-gather: replica_groups=[3]<=[4]: the iota form needs [groups,size]"),
    ("{{0,1},{2}}", "replica_groups {{0,1},{2}} of all-gather have different sizes"),
])
def test_the_verifier_refuses_malformed_groups(groups: str, message: str) -> None:
    module = xlapy.parse_hlo(_ALL_GATHER.replace("GROUPS", groups).replace("GATHERED", "4"))
    with pytest.raises(xlapy.VerifyError) as error:
        xlapy.verify(module)
    assert message in str(error.value)
