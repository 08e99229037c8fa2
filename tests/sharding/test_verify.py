"""Validity checks: Shardy's verifier rules for meshes and tensor shardings (messages of its
mesh_verification / tensor_sharding_verification / manual_computation_verification tests) and
the manual computation invariants of Shardy's compiler API (docs/compiler_api.md)."""

from types import SimpleNamespace

import pytest

from xlapy.errors import VerifyError
from xlapy.frontends.stablehlo import parse_module
from xlapy.frontends.stablehlo_ops.records import OpRecord
from xlapy.hlo import HloComputation, HloInstruction, HloModule
from xlapy.shapes import Shape
from xlapy.sharding.axis_ref import AxisRef
from xlapy.sharding.mesh import Mesh
from xlapy.sharding.tensor_sharding import TensorSharding
from xlapy.sharding.verify import (
    describe,
    verify_manual_computation,
    verify_mesh,
    verify_module,
    verify_tensor_sharding,
    verify_value_sharding,
)


def sh(text: str) -> TensorSharding:
    return TensorSharding.parse(text)


def f32(*dims: int) -> Shape:
    return Shape.array("f32", dims)


# -- meshes --------------------------------------------------------------------------

@pytest.mark.parametrize(("mesh", "message"), [
    ('<["a"=2, "b"=0]>', "axis size must be at least 1, got: 0"),
    ('<["a"=2, "b"=2, "a"=4]>', 'duplicate axis name: "a"'),
    ("<[], device_ids=[-1]>", "device id must be non-negative, got: -1"),
    ("<[], device_ids=[1, 0]>", "axes is empty and device_ids has more than one element"),
    ('<["a"=2, "b"=2], device_ids=[0, 2, 1, 3, 4, 5]>',
     "total product of axis sizes must match total number of device ids, got: 4 != 6"),
    ('<["a"=2], device_ids=[0]>', "total product of axis sizes must match total number of device ids, got: 2 != 1"),
    ('<["a"=2], device_ids=[1, 1]>', "sorted device ids must be iota(product(axes)), got: 1, 1"),
    ('<["a"=2], device_ids=[2, 1]>', "sorted device ids must be iota(product(axes)), got: 1, 2"),
])
def test_invalid_meshes(mesh, message):
    with pytest.raises(VerifyError) as info:
        verify_mesh(Mesh.parse(mesh), "sdy.mesh @mesh")
    assert str(info.value) == f"sdy.mesh @mesh: {message}"


@pytest.mark.parametrize("mesh", ["<[]>", "<[], device_ids=[0]>", "<[], device_ids=[5]>", '<["a"=1]>',
                                  '<["a"=2, "b"=3], device_ids=[0, 2, 4, 1, 3, 5]>'])
def test_valid_meshes(mesh):
    verify_mesh(Mesh.parse(mesh))


def test_explicit_identity_order_is_rejected_when_built_directly():
    mesh = Mesh.of(("a", 2))
    object.__setattr__(mesh, "device_ids", (0, 1))  # the parser would have dropped it
    with pytest.raises(VerifyError, match="no need to specify them for simplicity"):
        verify_mesh(mesh)


# -- tensor shardings ---------------------------------------------------------------------

MESHES = {
    "mesh": Mesh.parse('<["a"=2, "b"=2]>'),
    "cab": Mesh.parse('<["c"=2, "a"=2, "b"=2]>'),
    "a8": Mesh.parse('<["a"=8, "b"=4]>'),
    "maximal_mesh": Mesh.parse("<[], device_ids=[0]>"),
    "empty": Mesh.parse("<[]>"),
}


@pytest.mark.parametrize(("sharding", "dims", "message"), [
    ('<@mesh, [{}]>', None, "non-shaped tensors can only have a sharding with rank 0 and no replicated or unreduced"),
    ('<@mesh, [], replicated={"a"}>', None, "non-shaped tensors can only have a sharding with rank 0"),
    ('<@mesh, [], unreduced={"a"}>', None, "non-shaped tensors can only have a sharding with rank 0"),
    ('<@mesh, [{}, {"b"}], replicated={"a"}>', (8,), "sharding doesn't match tensor rank: 2 != 1"),
    ('<@mesh, [{}]>', (-1, -1), "sharding doesn't match tensor rank: 1 != 2"),
    ('<@mesh, [{}p1, {}]>', (8, 8), "dim 0 is empty and closed but has a priority"),
    ('<@a8, [{"a"}, {}p3]>', (8, 8), "dim 1 is empty and closed but has a priority"),
    ('<@other_mesh, [{}, {"a"}]>', (8, 8), "unknown mesh: @other_mesh"),
    ('<@mesh, [{}, {"c"}]>', (8, 8), 'unknown axis name: "c"'),
    ('<mesh<["a"=2, "b"=2]>, [{}, {"c"}]>', (8, 8), 'unknown axis name: "c"'),
    ('<@mesh, [{}, {}], replicated={"c"}>', (8, 8), 'unknown axis name: "c"'),
    ('<@mesh, [{}, {}], unreduced={"c"}>', (8, 8), 'unknown axis name: "c"'),
    ('<@mesh, [{}, {"c":(2)2}], replicated={"a"}>', (8, 8), 'unknown axis name: "c"'),
    ('<@mesh, [{}, {"a"}], replicated={"a"}>', (8, 8), 'duplicate axis ref: "a"'),
    ('<@mesh, [{}, {"a"}], unreduced={"a"}>', (8, 8), 'duplicate axis ref: "a"'),
    ('<@mesh, [{}, {}], replicated={"a"}, unreduced={"a"}>', (8, 8), 'duplicate axis ref: "a"'),
    ('<@mesh, [{}, {}], replicated={"a", "a"}>', (8, 8), 'duplicate axis ref: "a"'),
    ('<@mesh, [{}, {}], unreduced={"a", "a"}>', (8, 8), 'duplicate axis ref: "a"'),
    ('<@mesh, [{}, {"a", "a"}]>', (8, 8), 'duplicate axis ref: "a"'),
    ('<@mesh, [{"a"}, {"a"}]>', (8, 8), 'duplicate axis ref: "a"'),
    ('<@cab, [{}, {}], replicated={"a", "b", "c"}>', (8, 8), "replicated axes are not ordered w.r.t. mesh"),
    ('<@cab, [{}, {}], unreduced={"a", "b", "c"}>', (8, 8), "unreduced axes are not ordered w.r.t. mesh"),
    ('<@a8, [{}, {"a":(2)2}], replicated={"a":(2)2}>', (8, 8), 'duplicate axis ref: "a":(2)2'),
    ('<@a8, [{}, {"a"}], replicated={"a":(2)2}>', (8, 8), 'both sub-axis and full-axis are used for axis name: "a"'),
    ('<@a8, [{}, {"a"}], unreduced={"a":(2)2}>', (8, 8), 'both sub-axis and full-axis are used for axis name: "a"'),
    ('<@a8, [{}, {}], replicated={"a":(4)2, "a":(1)2, "b"}>', (8, 8), "replicated axes are not ordered w.r.t. mesh"),
    ('<@a8, [{}, {}], unreduced={"a":(4)2, "a":(1)2, "b"}>', (8, 8), "unreduced axes are not ordered w.r.t. mesh"),
    ('<@a8, [{}, {"a":(2)2, "a":(4)2}]>', (8, 8), 'two consecutive sub-axes can be merged: "a":(2)2, "a":(4)2'),
    ('<@a8, [{}, {}], replicated={"a":(2)2, "a":(4)2}>', (8, 8),
     'two consecutive sub-axes can be merged: "a":(2)2, "a":(4)2'),
    ('<@a8, [{}, {"a":(-1)2}]>', (8, 8), 'sub-axis pre-size must be at least 1: "a":(-1)2'),
    ('<@a8, [{}, {"a":(2)1}]>', (8, 8), 'sub-axis sizes must be greater than 1: "a":(2)1'),
    ('<@a8, [{}, {"a":(3)2}]>', (6, 6),
     'sub-axis next pre-size 6 doesn\'t divide the size of the full axis 8: "a":(3)2'),
    ('<@a8, [{}, {"a":(2)3}]>', (6, 6),
     'sub-axis next pre-size 6 doesn\'t divide the size of the full axis 8: "a":(2)3'),
    ('<@a8, [{}, {"a":(4)4}]>', (8, 8),
     'sub-axis next pre-size 16 doesn\'t divide the size of the full axis 8: "a":(4)4'),
    ('<@a8, [{}, {"a":(1)8}]>', (8, 8), 'sub-axis size is equal to the full axis size: "a":(1)8'),
    ('<@a8, [{"a":(2)4}, {"b":(2)2}], replicated={"a":(1)4}>', (8, 8), 'overlapping sub-axes: "a":(1)4, "a":(2)4'),
    ('<@a8, [{"a":(2)4}, {"b":(2)2}], replicated={"a":(1)4}>', (-1, -1), 'overlapping sub-axes: "a":(1)4, "a":(2)4'),
    ('<@maximal_mesh, [{}, {}]>', (8, 8), "a maximal sharding can only have a sharding with rank 0 and no replicated"),
    ('<@maximal_mesh, [], replicated={"a"}>', (8, 8), "a maximal sharding can only have a sharding with rank 0"),
    ('<@maximal_mesh, [], unreduced={"a"}>', (8, 8), "a maximal sharding can only have a sharding with rank 0"),
    ('<@empty, [{"a"}]>', (8,), 'unknown axis name: "a"'),
])
def test_invalid_shardings(sharding, dims, message):
    with pytest.raises(VerifyError) as info:
        verify_tensor_sharding(sh(sharding), dims, MESHES, "stablehlo.add %0 result")
    text = str(info.value)
    assert text.startswith("stablehlo.add %0 result: ")
    assert message in text
    assert text.endswith(f" in sharding {sh(sharding).body()}")


@pytest.mark.parametrize(("sharding", "dims"), [
    ('<@mesh, [{"a", ?}, {?}]>', (8, 8)),
    ('<@mesh, [{"a"}, {}], replicated={"b"}>', (8, 8)),
    ('<@mesh, [], replicated={"b"}>', ()),
    ('<@a8, [{"a":(1)2, "b", "a":(2)2}, {}]>', (8, 8)),      # a full axis between two sub-axes
    ('<@a8, [{"a":(2)2, "a":(1)2}, {}]>', (8, 8)),           # consecutive sub-axes in reverse
    ('<@a8, [{"a":(4)2}, {"b"}], replicated={"a":(1)2}>', (8, 8)),
    ('<@a8, [{"a"}p0, {"b"}p7]>', (8, 8)),
    ('<@a8, [{?}p1, {}]>', (8, 8)),                          # an open empty dimension may have a priority
    ('<@a8, [{"a"}, {"b"}]>', (3, 5)),                       # not divisible: Shardy pads
    ('<@maximal_mesh, []>', (8, 8)),
    ('<@mesh, []>', None),
    ('<@empty, [{}, {?}]>', (8, 8)),
    ('<@cab, [{}, {}], replicated={"c", "a", "b"}>', (8, 8)),
])
def test_valid_shardings(sharding, dims):
    verify_tensor_sharding(sh(sharding), dims, MESHES, "here")


def test_negative_priority():
    sharding = sh('<@mesh, [{"a"}p1, {}]>')
    sharding = sharding.replace_dim_sharding(0, sharding.dim_shardings[0].__class__((AxisRef("a"),), True, -1))
    with pytest.raises(VerifyError, match="dim 0 has a negative priority"):
        verify_tensor_sharding(sharding, (8, 8), MESHES, "here")


def test_divisibility_only_when_asked():
    sharding = sh('<@a8, [{"a"}, {"b"}]>')
    verify_tensor_sharding(sharding, (12, 8), MESHES, "here")
    with pytest.raises(VerifyError, match="dim 0 with size 12 is not divisible by its sharded size 8"):
        verify_tensor_sharding(sharding, (12, 8), MESHES, "here", check_divisibility=True)
    verify_tensor_sharding(sharding, (-1, 8), MESHES, "here", check_divisibility=True)


def test_axis_bound_by_enclosing_manual_computation():
    with pytest.raises(VerifyError, match=r'operates on axis "a" which is already bound by a parent '
                                          r'sdy\.manual_computation op'):
        verify_tensor_sharding(sh('<@mesh, [{"a"}, {}]>'), (8, 32), MESHES, "here", bound_manual_axes=["a"])
    verify_tensor_sharding(sh('<@mesh, [{"b"}, {}]>'), (8, 32), MESHES, "here", bound_manual_axes=["a"])


def test_value_shapes():
    verify_value_sharding(sh('<@mesh, [{"a"}]>'), Shape.make_tuple([f32(8)]), MESHES, "here")
    with pytest.raises(VerifyError, match="ops can only have a sharding for a tuple of size 1"):
        verify_value_sharding(sh('<@mesh, [{"a"}]>'), Shape.make_tuple([f32(8), f32(8)]), MESHES, "here")
    with pytest.raises(VerifyError, match="non-shaped tensors can only have a sharding with rank 0"):
        verify_value_sharding(sh('<@mesh, [{}]>'), Shape.token(), MESHES, "here")
    verify_value_sharding(sh('<@mesh, []>'), Shape.token(), MESHES, "here")


# -- manual computations ---------------------------------------------------------------------

def build_manual_computation(operand_shapes, in_shardings, out_shardings, manual_axes, param_shapes,
                             returned_shapes, result_shapes=None):
    """``sdy.manual_computation`` in a function ``main``; returns (module, instruction)."""
    module = HloModule("m")
    result_shapes = list(operand_shapes if result_shapes is None else result_shapes)
    body = HloComputation("body")
    params = []
    for index, shape in enumerate(param_shapes):
        param = body.add_instruction(HloInstruction(f"arg{index}", "parameter", shape))
        param.parameter_number = index
        params.append(param)
    returned = [body.add_instruction(HloInstruction(f"v{index}", "constant", shape))
                for index, shape in enumerate(returned_shapes)]
    if len(returned) == 1:
        body.root = returned[0]
    else:
        body.root = body.add_instruction(HloInstruction("ret", "tuple", Shape.make_tuple([r.shape for r in returned]),
                                                        returned))
        body.root.encodes_mlir_structure = True

    main = HloComputation("main")
    operands = []
    for index, shape in enumerate(operand_shapes):
        param = main.add_instruction(HloInstruction(f"p{index}", "parameter", shape))
        param.parameter_number = index
        operands.append(param)
    shape = result_shapes[0] if len(result_shapes) == 1 else Shape.make_tuple(result_shapes)
    mc = main.add_instruction(HloInstruction(
        "mc", "sdy.manual_computation", shape, operands,
        {"in_shardings": tuple(sh(s) for s in in_shardings), "manual_axes": tuple(manual_axes)}, [body]))
    if len(result_shapes) == 1:
        mc.sdy_sharding = sh(out_shardings[0]) if out_shardings else None
        main.root = mc
    else:
        gtes = []
        for index, result_shape in enumerate(result_shapes):
            gte = main.add_instruction(HloInstruction(f"gte{index}", "get-tuple-element", result_shape, [mc],
                                                      {"index": index}))
            gte.encodes_mlir_structure = True
            gte.sdy_sharding = sh(out_shardings[index]) if index < len(out_shardings) else None
            gtes.append(gte)
        main.root = main.add_instruction(HloInstruction("ret", "tuple", shape, gtes))
        main.root.encodes_mlir_structure = True
    module.add_computation(body)
    module.add_computation(main, entry=True)
    module.meshes = {"mesh_name": Mesh.parse('<["data"=2, "model"=2]>'), "other": Mesh.parse('<["data"=2]>')}
    return module, mc


def check(module, mc, message=None):
    # The strict checks (invariant 2 in its strict form): a superset of the default ones.
    if message is None:
        verify_manual_computation(mc, module.meshes, implicit_manual_replication=False)
        verify_module(module, implicit_manual_replication=False)
        return
    with pytest.raises(VerifyError) as info:
        verify_manual_computation(mc, module.meshes, implicit_manual_replication=False)
    assert message in str(info.value), str(info.value)
    with pytest.raises(VerifyError) as info:
        verify_module(module, implicit_manual_replication=False)
    assert str(info.value).startswith("func @main sdy.manual_computation mc")
    assert message in str(info.value)


def test_spec_example_a80_is_valid():
    # Body type tensor<8x32xf32>: dimension 0 divided by the manual axis "data".
    check(*build_manual_computation(
        [f32(16, 32)], ['<@mesh_name, [{"data"}, {"model", ?}]>'], ['<@mesh_name, [{"data"}, {?}]>'], ["data"],
        [f32(8, 32)], [f32(8, 32)]))


def test_spec_example_a81_free_axis_major_to_manual_axis():
    module, mc = build_manual_computation(
        [f32(16, 32)], ['<@mesh_name, [{"model", "data"}, {}]>'], ['<@mesh_name, [{"data"}, {?}]>'], ["data"],
        [f32(8, 32)], [f32(8, 32)])
    check(module, mc, 'invariant 3: free axis "model" must be minor to manual axis "data" in dimension 0 of '
                      'in_shardings[0] <@mesh_name, [{"model", "data"}, {}]>')
    module, mc = build_manual_computation(
        [f32(16, 32)], ['<@mesh_name, [{"data", "model"}, {}]>'], ['<@mesh_name, [{"data"}, {?}]>'], ["data"],
        [f32(8, 32)], [f32(8, 32)])
    check(module, mc)


def test_invariant_3_on_results_and_later_dimensions():
    # Shardy's free_axes_before_manual_dim_sharding case.
    module, mc = build_manual_computation(
        [f32(16, 32)], ['<@mesh_name, [{}, {"data"}]>'],
        ['<@mesh_name, [{}, {"model", "data"}]>'], ["data"], [f32(16, 16)], [f32(16, 16)], [f32(16, 32)])
    check(module, mc, 'invariant 3: free axis "model" must be minor to manual axis "data" in dimension 1 of '
                      'out_shardings[0] <@mesh_name, [{}, {"model", "data"}]>')


def test_invariant_1_same_mesh():
    module, mc = build_manual_computation(
        [f32(16, 32)], ['<@mesh_name, [{"data"}, {}]>'], ['<@other, [{"data"}, {}]>'], ["data"],
        [f32(8, 32)], [f32(8, 32)])
    check(module, mc, "invariant 1: all in and out shardings must be bound to the same mesh or an empty mesh, got "
                      '<@mesh_name, [{"data"}, {}]> and <@other, [{"data"}, {}]>')


def test_invariant_1_unknown_and_unsorted_manual_axes():
    module, mc = build_manual_computation(
        [f32(16, 32)], ['<@mesh_name, [{"data"}, {}]>'], ['<@mesh_name, [{"data"}, {}]>'], ["data", "b"],
        [f32(8, 32)], [f32(8, 32)])
    check(module, mc, 'invariant 1: unknown manual axis: "b"')
    module, mc = build_manual_computation(
        [f32(16, 32)], ['<@mesh_name, [{"data"}, {"model"}]>'], ['<@mesh_name, [{"data"}, {"model"}]>'],
        ["model", "data"], [f32(8, 16)], [f32(8, 16)])
    check(module, mc, 'invariant 1: manual_axes {"model", "data"} must be sorted w.r.t. the mesh '
                      '<["data"=2, "model"=2]>')


def test_invariant_2_manual_axis_used_explicitly():
    module, mc = build_manual_computation(
        [f32(16, 32)], ['<@mesh_name, [{"data"}, {}]>'], ['<@mesh_name, [{}, {?}]>'], ["data"],
        [f32(8, 32)], [f32(16, 32)])
    check(module, mc, 'invariant 2: manual axis "data" must shard a dimension or be replicated in '
                      'out_shardings[0] <@mesh_name, [{}, {?}]>')
    # Explicitly replicated is enough.
    module, mc = build_manual_computation(
        [f32(16, 32)], ['<@mesh_name, [{"data"}, {}]>'], ['<@mesh_name, [{}, {?}], replicated={"data"}>'], ["data"],
        [f32(8, 32)], [f32(16, 32)])
    check(module, mc)


def test_invariant_2_relaxed_by_implicit_manual_replication():
    # JAX's shard_map leaves replicated manual axes out; Shardy reads them as replicated.
    module, mc = build_manual_computation(
        [f32(16, 32)], ['<@mesh_name, [{"data"}, {}]>'], ['<@mesh_name, [{}, {?}]>'], ["data"],
        [f32(8, 32)], [f32(16, 32)])
    verify_manual_computation(mc, module.meshes, implicit_manual_replication=True)
    verify_module(module, implicit_manual_replication=True)
    # Relaxed is the default, as JAX's shard_map output needs.
    verify_manual_computation(mc, module.meshes)
    verify_module(module)
    # The other invariants still hold.
    module, mc = build_manual_computation(
        [f32(16, 32)], ['<@mesh_name, [{"model", "data"}, {}]>'], ['<@mesh_name, [{}, {?}]>'], ["data"],
        [f32(8, 32)], [f32(16, 32)])
    with pytest.raises(VerifyError, match='invariant 3: free axis "model" must be minor to manual axis "data"'):
        verify_module(module, implicit_manual_replication=True)
    module, mc = build_manual_computation(
        [f32(16, 32)], ['<@mesh_name, [{}, {}]>'], ['<@mesh_name, [{}, {?}]>'], ["data"],
        [f32(8, 32)], [f32(16, 32)])
    with pytest.raises(VerifyError, match=r"invariant 4: body parameter 0 has shape f32\[8,32\] but the global "
                                          r"shape f32\[16,32\] with in_shardings\[0\] <@mesh_name, \[\{\}, \{\}\]> "
                                          r"has local shape f32\[16,32\]"):
        verify_module(module, implicit_manual_replication=True)


def test_invariant_2_no_sub_axes_of_manual_axes():
    module, mc = build_manual_computation(
        [f32(16, 32)], ['<mesh<["a"=4]>, [{"a":(1)2}, {}]>'], ['<mesh<["a"=4]>, [{"a":(1)2}, {}]>'], ["a"],
        [f32(8, 32)], [f32(8, 32)])
    check(module, mc, 'invariant 2: in_shardings[0] <mesh<["a"=4]>, [{"a":(1)2}, {}]> cannot use a manual axis '
                      'as a sub/split axis: "a":(1)2')


def test_invariant_4_local_types():
    # Shardy's man_comp_operand_shape_mismatch_sharded case.
    module, mc = build_manual_computation(
        [f32(16, 32)], ['<@mesh_name, [{"data"}, {}]>'], ['<@mesh_name, [{}, {}], replicated={"data"}>'], ["data"],
        [f32(16, 32)], [f32(16, 32)])
    check(module, mc, "invariant 4: body parameter 0 has shape f32[16,32] but the global shape f32[16,32] with "
                      'in_shardings[0] <@mesh_name, [{"data"}, {}]> has local shape f32[8,32]')
    # Shardy's man_comp_result_shape_mismatch_sharded case.
    module, mc = build_manual_computation(
        [f32(16, 32)], ['<@mesh_name, [{}, {}], replicated={"data"}>'], ['<@mesh_name, [{"data"}, {}]>'], ["data"],
        [f32(16, 32)], [f32(16, 32)])
    check(module, mc, "invariant 4: body returned value 0 has shape f32[16,32] but the global shape f32[16,32] "
                      'with out_shardings[0] <@mesh_name, [{"data"}, {}]> has local shape f32[8,32]')
    # Free axes do not change the local type; several manual axes in one dimension multiply.
    module, mc = build_manual_computation(
        [f32(16, 32)], ['<@mesh_name, [{"data", "model"}, {}]>'], ['<@mesh_name, [{"model", "data"}, {}]>'],
        ["data", "model"], [f32(4, 32)], [f32(4, 32)])
    check(module, mc)


def test_invariant_4_divisibility_and_counts():
    module, mc = build_manual_computation(
        [f32(6)], ['<mesh<["a"=4]>, [{"a"}]>'], ['<mesh<["a"=4]>, [{"a"}]>'], ["a"], [f32(1)], [f32(1)])
    check(module, mc, "invariant 4: in_shardings[0]: dimension size 6 is not divisible by the manual axes size 4")
    module, mc = build_manual_computation(
        [f32(16, 32)], ['<@mesh_name, [{}, {}]>'], ['<@mesh_name, [{}, {}]>'], [],
        [f32(16, 32), f32(16, 32)], [f32(16, 32)])
    check(module, mc, "invariant 4: number of op operands and body parameters must match: 1 op operands and 2 body "
                      "parameters")
    module, mc = build_manual_computation(
        [f32(16, 32)], ['<@mesh_name, [{}, {}]>'], ['<@mesh_name, [{}, {}]>'], [],
        [f32(16, 32)], [f32(16, 32), f32(16, 32)])
    check(module, mc, "invariant 4: number of op results and body returned values must match: 1 op results and 2 "
                      "body returned values")


def test_sharding_counts_and_validity():
    module, mc = build_manual_computation(
        [f32(16, 32)], ['<@mesh_name, [{}, {}]>', '<@mesh_name, [{}, {}]>'], ['<@mesh_name, [{}, {}]>'], [],
        [f32(16, 32)], [f32(16, 32)])
    check(module, mc, "operand shardings don't match number of values: 2 shardings vs 1 values")
    module, mc = build_manual_computation(
        [f32(16, 32)], ['<@mesh_name, [{}, {}, {}]>'], ['<@mesh_name, [{}, {}]>'], [],
        [f32(16, 32)], [f32(16, 32)])
    check(module, mc, "in_shardings[0]: sharding doesn't match tensor rank: 3 != 2")
    module, mc = build_manual_computation(
        [f32(16, 32)], ['<@meshA, [{?}, {?}]>'], ['<@meshA, [{?}, {?}]>'], [], [f32(16, 32)], [f32(16, 32)])
    check(module, mc, "in_shardings[0]: unknown mesh: @meshA")


def test_several_results():
    module, mc = build_manual_computation(
        [f32(16, 32)], ['<@mesh_name, [{"data"}, {}]>'],
        ['<@mesh_name, [{"data"}, {}]>', '<@mesh_name, [{}, {}], replicated={"data"}>'], ["data"],
        [f32(8, 32)], [f32(8, 32), f32(16, 32)], [f32(16, 32), f32(16, 32)])
    check(module, mc)
    module, mc = build_manual_computation(
        [f32(16, 32)], ['<@mesh_name, [{"data"}, {}]>'], ['<@mesh_name, [{"data"}, {}]>'], ["data"],
        [f32(8, 32)], [f32(8, 32), f32(16, 32)], [f32(16, 32), f32(16, 32)])
    check(module, mc, "result 1 has no out sharding")


def test_no_in_out_shardings():
    module, mc = build_manual_computation([], [], [], ["data"], [], [], [])
    check(module, mc)  # an empty body may still name manual axes
    body = mc.called_computations[0]
    body.add_instruction(HloInstruction("side_effect", "custom-call", Shape.make_tuple([])), before=body.root)
    check(module, mc, "cannot have manual_axes when there are no in/out shardings and the body is not empty")
    mc.attributes["manual_axes"] = ()
    check(module, mc)


def nest(module, outer, inner_manual_axes, inner_in, inner_out, inner_param):
    """Put a manual computation on the outer body's parameter 0 inside the outer body."""
    body = outer.called_computations[0]
    inner_body = HloComputation("inner_body")
    param = inner_body.add_instruction(HloInstruction("iarg0", "parameter", inner_param))
    param.parameter_number = 0
    inner_body.root = inner_body.add_instruction(HloInstruction("iv", "constant", inner_param))
    outer_param = body.parameters[0]
    inner = body.add_instruction(HloInstruction(
        "inner", "sdy.manual_computation", outer_param.shape, [outer_param],
        {"in_shardings": (sh(inner_in),), "manual_axes": tuple(inner_manual_axes)}, [inner_body]))
    inner.sdy_sharding = sh(inner_out)
    module.add_computation(inner_body)
    return inner


def test_nested_manual_computations_use_disjoint_axes():
    module, outer = build_manual_computation(
        [f32(16, 32)], ['<@mesh_name, [{"data"}, {}]>'], ['<@mesh_name, [{"data"}, {}]>'], ["data"],
        [f32(8, 32)], [f32(8, 32)])
    nest(module, outer, ["model"], '<@mesh_name, [{"model"}, {}]>', '<@mesh_name, [{"model"}, {}]>', f32(4, 32))
    verify_module(module)

    module, outer = build_manual_computation(
        [f32(16, 32)], ['<@mesh_name, [{"data"}, {}]>'], ['<@mesh_name, [{"data"}, {}]>'], ["data"],
        [f32(8, 32)], [f32(8, 32)])
    nest(module, outer, ["data"], '<@mesh_name, [{}, {}]>', '<@mesh_name, [{}, {}]>', f32(8, 32))
    with pytest.raises(VerifyError) as info:
        verify_module(module)
    assert str(info.value) == ('func @main sdy.manual_computation inner: operates on axis "data" which is already '
                               'bound by a parent sdy.manual_computation op (nested manual computations must use '
                               'disjoint manual axes)')


def test_sharding_inside_body_may_not_use_manual_axes():
    # Shardy's sharding_bound_manual_computation case.
    module, mc = build_manual_computation(
        [f32(16, 32)], ['<@mesh_name, [{"data", ?}, {?}]>'], ['<@mesh_name, [{"data", ?}, {?}]>'], ["data"],
        [f32(8, 32)], [f32(8, 32)])
    mc.called_computations[0].root.sdy_sharding = sh('<@mesh_name, [{"data"}, {}]>')
    with pytest.raises(VerifyError) as info:
        verify_module(module)
    assert str(info.value) == ('func @main constant v0 result: operates on axis "data" which is already bound by a '
                               'parent sdy.manual_computation op in sharding <@mesh_name, [{"data"}, {}]>')
    mc.called_computations[0].root.sdy_sharding = sh('<@mesh_name, [{"model"}, {}]>')
    verify_module(module)


# -- whole modules ------------------------------------------------------------------------

def simple_module():
    """func @main(%arg0, %arg1) { %0 = add; %1:2 = opt-barrier; return %1#0, %1#1 } with a while region."""
    module = HloModule("m")
    module.meshes = {"mesh": Mesh.parse('<["a"=2, "b"=2]>')}
    main = HloComputation("main")
    args = []
    for index in range(2):
        arg = main.add_instruction(HloInstruction(f"arg{index}", "parameter", f32(8, 8)))
        arg.parameter_number = index
        args.append(arg)
    add = main.add_instruction(HloInstruction("add", "add", f32(8, 8), args))
    add.mlir = OpRecord("stablehlo.add", [("0", 1)])
    barrier = main.add_instruction(HloInstruction("barrier", "opt-barrier", Shape.make_tuple([f32(8, 8)] * 2),
                                                  [add, args[1]]))
    barrier.mlir = OpRecord("stablehlo.optimization_barrier", [("1", 1)])
    gtes = []
    for index in range(2):
        gte = main.add_instruction(HloInstruction(f"gte{index}", "get-tuple-element", f32(8, 8), [barrier],
                                                  {"index": index}))
        gte.encodes_mlir_structure = True
        gtes.append(gte)
    main.root = main.add_instruction(HloInstruction("ret", "tuple", barrier.shape, gtes))
    main.root.encodes_mlir_structure = True
    region = HloComputation("region")
    region_arg = region.add_instruction(HloInstruction("r0", "parameter", f32(8, 8)))
    region_arg.parameter_number = 0
    constraint = region.add_instruction(HloInstruction("c", "sdy.sharding_constraint", f32(8, 8), [region_arg]))
    region.root = constraint
    loop = main.add_instruction(HloInstruction("loop", "while", f32(8, 8), [add], {}, [region, region]))
    loop.mlir = OpRecord("stablehlo.while", [("2", 1)])
    module.add_computation(region)
    module.add_computation(main, entry=True)
    return module, SimpleNamespace(args=args, add=add, gtes=gtes, constraint=constraint, main=main)


def test_valid_module():
    module, v = simple_module()
    v.args[0].sdy_sharding = sh('<@mesh, [{"a"}, {}]>')
    v.add.sdy_sharding = sh('<@mesh, [{"a", ?}, {?}]>')
    v.gtes[0].sdy_sharding = sh('<@mesh, [{"a"}, {}]>')
    v.gtes[1].sdy_sharding = sh('<@mesh, [{}, {"b"}]>')
    v.constraint.sdy_sharding = sh('<@mesh, [{}, {"b"}]>')
    v.main.result_shardings = [sh('<@mesh, [{"a"}, {}]>'), None]
    verify_module(module)


@pytest.mark.parametrize(("target", "sharding", "message"), [
    ("arg", '<@mesh, [{}, {"c"}]>', 'func @main arg 0: unknown axis name: "c" in sharding <@mesh, [{}, {"c"}]>'),
    ("result", '<@mesh, [{"c"}, {}]>', 'func @main result 1: unknown axis name: "c" in sharding <@mesh, [{"c"}, {}]>'),
    ("add", '<@mesh, [{}]>', "func @main stablehlo.add %0 result: sharding doesn't match tensor rank: 1 != 2 in "
                             "sharding <@mesh, [{}]>"),
    ("gte", '<@mesh, [{"c"}, {}]>', 'func @main stablehlo.optimization_barrier %1 result 1: unknown axis name: "c" '
                                    'in sharding <@mesh, [{"c"}, {}]>'),
    ("constraint", '<@other_mesh, [{}, {}]>', "func @main sdy.sharding_constraint c result: unknown mesh: "
                                              "@other_mesh in sharding <@other_mesh, [{}, {}]>"),
])
def test_module_errors_name_the_value(target, sharding, message):
    module, v = simple_module()
    if target == "arg":
        v.args[0].sdy_sharding = sh(sharding)
    elif target == "result":
        v.main.result_shardings = [None, sh(sharding)]
    elif target == "add":
        v.add.sdy_sharding = sh(sharding)
    elif target == "gte":
        v.gtes[1].sdy_sharding = sh(sharding)
    else:
        v.constraint.sdy_sharding = sh(sharding)
    with pytest.raises(VerifyError) as info:
        verify_module(module)
    assert str(info.value) == message


def test_module_checks_meshes_and_result_mesh_agreement():
    module, v = simple_module()
    module.meshes["bad"] = Mesh.parse('<["x"=0]>')
    with pytest.raises(VerifyError, match=r"^sdy.mesh @bad: axis size must be at least 1, got: 0$"):
        verify_module(module)
    module, v = simple_module()
    module.meshes["mesh2"] = Mesh.parse('<["b"=2]>')
    v.gtes[0].sdy_sharding = sh('<@mesh, [{"a"}, {}]>')
    v.gtes[1].sdy_sharding = sh('<@mesh2, [{"b"}, {}]>')
    with pytest.raises(VerifyError, match="result shardings can only be bound to the same mesh or an empty mesh"):
        verify_module(module)
    v.gtes[1].sdy_sharding = sh('<mesh<[]>, [{}, {}]>')
    verify_module(module)


def test_describe():
    instr = HloInstruction("add.1", "add", f32(2))
    assert describe(instr) == "add add.1"
    module = parse_module("""
      func.func @main(%a: tensor<2xf32>) -> tensor<2xf32> {
        %sum = stablehlo.add %a, %a : tensor<2xf32>
        %1:2 = stablehlo.optimization_barrier %sum, %a : tensor<2xf32>, tensor<2xf32>
        return %1#0 : tensor<2xf32>
      }""")
    ops = [i for i in module.entry.instructions if i.opcode not in ("parameter", "get-tuple-element")]
    assert [describe(i) for i in ops] == ["stablehlo.add %sum", "stablehlo.optimization_barrier %1"]


def test_the_interpreter_loads_sharding_types_but_not_propagation_or_frontends():
    import subprocess
    import sys

    code = ("import sys, xlapy, xlapy.hlo.shape_rules.registry as s; "
            "print(sorted(m for m in sys.modules if m.startswith(('xlapy.sharding.propagat', 'xlapy.sharding.rules', "
            "'xlapy.frontends')))); print(sorted(s.OP_CHECKS))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    # The manual computation's check is registered with the HLO verifier all the same.
    assert out.stdout.split("\n")[:2] == ["[]", "['sdy.manual_computation']"]


def test_exported_names_are_their_modules_functions_and_no_submodule_shadows_them():
    import importlib.util

    import xlapy.sharding
    import xlapy.sharding.propagation.strategies
    import xlapy.sharding.sharding_rule
    from xlapy.sharding import STRATEGIES, op_sharding_rule, propagate
    from xlapy.sharding.propagation.strategies import STRATEGIES as strategies
    from xlapy.sharding.propagation.strategies import propagate as propagate_function
    from xlapy.sharding.rules import op_sharding_rule as rule_function

    assert propagate is propagate_function and op_sharding_rule is rule_function and STRATEGIES is strategies
    assert xlapy.sharding.propagate is propagate_function
    # An exported name that were also a submodule would be replaced by it once the submodule is imported.
    assert not [n for n in xlapy.sharding.__all__ if importlib.util.find_spec(f"xlapy.sharding.{n}") is not None]
    assert set(xlapy.sharding.__all__) <= set(dir(xlapy.sharding))
