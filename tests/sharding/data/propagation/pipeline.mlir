// RUN: xlapy sdy propagate --strategy pipeline --split-input-file

// Constants are split per use, so each use is sharded on its own; every
// sharding ends closed.
// (split_constants)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b"}]>}) -> (tensor<8x16xf32>, tensor<8x8xf32>) {
    %0 = stablehlo.constant dense<1.000000e+00> : tensor<8x16xf32>
    %1 = stablehlo.dot_general %0, %0, contracting_dims = [1] x [1] : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x8xf32>
    %2 = stablehlo.add %1, %arg0 : tensor<8x8xf32>
    return %0, %2 : tensor<8x16xf32>, tensor<8x8xf32>
  }
}

// -----

// The pipeline propagates by user priority.
// (user_priorities)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}p1, {"b"}p1]>},
                             %arg1: tensor<8x8xf32>, %arg2: tensor<8x8xf32>, %arg3: tensor<8x8xf32>) -> tensor<8x8xf32> {
    %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
    %1 = stablehlo.add %0, %arg2 : tensor<8x8xf32>
    %2 = stablehlo.divide %1, %arg3 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"c"}p0, {?}]>]>} : tensor<8x8xf32>
    return %2 : tensor<8x8xf32>
  }
}

// -----

// A closed constraint on a value used only by it dictates the value's
// sharding; constraints become reshards.
// (constraint_applied)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}) -> tensor<8x8xf32> {
    %0 = stablehlo.add %arg0, %arg0 : tensor<8x8xf32>
    %1 = sdy.sharding_constraint %0 <@mesh, [{}, {}]> : tensor<8x8xf32>
    return %1 : tensor<8x8xf32>
  }
}

// -----

// (constraint_becomes_reshard)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2]>
  func.func @main(%arg0: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
    %0 = sdy.sharding_constraint %arg0 <@mesh, [{"a"}, {"b"}]> : tensor<8x8xf32>
    return %arg0, %0 : tensor<8x8xf32>, tensor<8x8xf32>
  }
}

// -----

// An inline mesh becomes a module mesh.
// (inline_mesh)
module {

  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<mesh<["a"=2, "b"=2]>, [{"a"}, {"b"}]>},
                         %arg1: tensor<8x8xf32>, %arg2: tensor<8x16xf32>) -> tensor<8x16xf32> {
    %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
    %1 = stablehlo.dot_general %0, %arg2, contracting_dims = [1] x [0] : (tensor<8x8xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
    return %1 : tensor<8x16xf32>
  }
}

// -----

// A group member gets the sharding a constraint applied to another member.
// (group_member_with_constraint)
module {
  sdy.mesh @mesh = <["a"=2]>
  func.func @main(%arg0: tensor<16x16xf32>, %arg1: tensor<16x16xf32>) -> (tensor<16x16xf32>, tensor<16x16xf32>) {
    %0 = stablehlo.add %arg0, %arg0 : tensor<16x16xf32>
    %1 = sdy.sharding_constraint %0 <@mesh, [{}, {"a"}]> : tensor<16x16xf32>
    %2 = stablehlo.add %arg1, %arg1 : tensor<16x16xf32>
    sdy.sharding_group %0 group_id = 32 : tensor<16x16xf32>
    sdy.sharding_group %2 group_id = 32 : tensor<16x16xf32>
    return %1, %2 : tensor<16x16xf32>, tensor<16x16xf32>
  }
}

// -----

// A while result in a group (through its data-flow edge) with a constrained value.
// (group_on_while_result)
module {
  sdy.mesh @mesh = <["a"=2]>
  func.func @main(%arg0: tensor<16x16xf32>, %arg1: tensor<16x16xf32>) -> (tensor<16x16xf32>, tensor<16x16xf32>) {
    %0 = stablehlo.constant dense<0> : tensor<i32>
    %inc = stablehlo.constant dense<1> : tensor<i32>
    %limit = stablehlo.constant dense<32> : tensor<i32>
    %1:2 = stablehlo.while(%iterArg = %arg0, %iterArg_2 = %0) : tensor<16x16xf32>, tensor<i32>
      cond {
      %3 = stablehlo.compare LT, %iterArg_2, %limit : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %3 : tensor<i1>
    } do {
      %3 = stablehlo.add %iterArg_2, %inc : tensor<i32>
      %4 = stablehlo.add %iterArg, %iterArg : tensor<16x16xf32>
      stablehlo.return %4, %3 : tensor<16x16xf32>, tensor<i32>
    }
    sdy.sharding_group %1#0 group_id = 50 : tensor<16x16xf32>
    %2 = sdy.sharding_constraint %arg1 <@mesh, [{"a"}, {}]> : tensor<16x16xf32>
    sdy.sharding_group %2 group_id = 50 : tensor<16x16xf32>
    return %1#0, %2 : tensor<16x16xf32>, tensor<16x16xf32>
  }
}

// -----

// Case results get the common sharding of what the branches return.
// (case_results)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2]>
  func.func @main(%arg0: tensor<i32>,
      %arg1: tensor<8xi64> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}]>},
      %arg2: tensor<8xi64> {sdy.sharding = #sdy.sharding<@mesh, [{"b", ?}]>},
      %arg3: tensor<8xi64> {sdy.sharding = #sdy.sharding<@mesh, [{"a", "b", ?}]>},
      %arg4: tensor<8xi64> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}]>}) -> (tensor<8xi64>, tensor<8xi64>) {
    %0:2 = "stablehlo.case"(%arg0) ({
      stablehlo.return %arg1, %arg2 : tensor<8xi64>, tensor<8xi64>
    }, {
      stablehlo.return %arg3, %arg4 : tensor<8xi64>, tensor<8xi64>
    }) : (tensor<i32>) -> (tensor<8xi64>, tensor<8xi64>)
    return %0#0, %0#1 : tensor<8xi64>, tensor<8xi64>
  }
}

// -----

// Members of a group whose constraints disagree each get an open constraint
// (a reshard in the end) that propagation can shard alike.
// (group_members_disagree)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  func.func @main(%arg0: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
    %0 = sdy.sharding_constraint %arg0 <@mesh, [{}, {"b", ?}]> : tensor<8x8xf32>
    sdy.sharding_group %0 group_id=1183 : tensor<8x8xf32>
    %1 = sdy.sharding_constraint %arg0 <@mesh, [{"a"}, {?}]> : tensor<8x8xf32>
    sdy.sharding_group %1 group_id=1183 : tensor<8x8xf32>
    return %0, %1 : tensor<8x8xf32>, tensor<8x8xf32>
  }
}

// -----

// A chain of constraints: the first dictates the sharding of its input, and
// later uses of that input use the end of the chain instead.
// (constraint_chain)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  func.func @main(%arg0: tensor<8x8xf32>) -> tensor<8x8xf32> {
    %0 = stablehlo.add %arg0, %arg0 : tensor<8x8xf32>
    %1 = sdy.sharding_constraint %0 <@mesh, [{"a"}, {}]> : tensor<8x8xf32>
    %2 = sdy.sharding_constraint %1 <@mesh, [{"a"}, {"b"}]> : tensor<8x8xf32>
    %3 = stablehlo.multiply %0, %0 : tensor<8x8xf32>
    return %3 : tensor<8x8xf32>
  }
}

// -----

// A constraint without uses says how its input is sharded.
// (dangling_constraint)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  func.func @main(%arg0: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
    %0 = stablehlo.add %arg0, %arg0 : tensor<8x8xf32>
    %1 = sdy.sharding_constraint %0 <@mesh, [{}, {"b"}]> : tensor<8x8xf32>
    %2 = stablehlo.add %0, %0 : tensor<8x8xf32>
    return %0, %2 : tensor<8x8xf32>, tensor<8x8xf32>
  }
}

// -----

// Two constraints of one value disagree: neither dictates its sharding, each
// only says how its own uses are sharded; the value takes what both allow.
// (two_constraints_of_one_value)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  func.func @main(%arg0: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) {
    %0 = stablehlo.add %arg0, %arg0 : tensor<8x8xf32>
    %1 = sdy.sharding_constraint %0 <@mesh, [{}, {"b"}]> : tensor<8x8xf32>
    %2 = sdy.sharding_constraint %0 <@mesh, [{"a"}, {}]> : tensor<8x8xf32>
    return %0, %1, %2 : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>
  }
}

// -----

// The pipeline also removes the reshard of an unused sharding constraint.
module {
sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}, %arg1: tensor<2xui64>) -> tensor<8x8xf32> {
  %0 = stablehlo.custom_call @foo(%arg0) : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %1 = stablehlo.custom_call @bar(%arg0) {has_side_effect = true} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %2:2 = stablehlo.optimization_barrier %arg0, %arg0 : tensor<8x8xf32>, tensor<8x8xf32>
  %3 = sdy.sharding_constraint %arg0 <@mesh, [{}, {"b"}]> : tensor<8x8xf32>
  %4 = sdy.propagation_barrier %arg0 allowed_direction=BACKWARD : tensor<8x8xf32>
  %5 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"a"}, {}]>] out_shardings=[<@mesh, [{"a"}, {}]>] manual_axes={"a"} (%arg2: tensor<4x8xf32>) {
    %10 = stablehlo.abs %arg2 : tensor<4x8xf32>
    sdy.return %10 : tensor<4x8xf32>
  } : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c4 = stablehlo.constant dense<4> : tensor<i32>
  %6:2 = stablehlo.while(%iterArg = %arg0, %iterArg_0 = %c0) : tensor<8x8xf32>, tensor<i32>
    cond {
    %7 = stablehlo.compare LT, %iterArg_0, %c4 : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %7 : tensor<i1>
  } do {
    %7 = stablehlo.sine %iterArg : tensor<8x8xf32>
    stablehlo.return %7, %iterArg_0 : tensor<8x8xf32>, tensor<i32>
  }
  %8:2 = stablehlo.rng_bit_generator %arg1, algorithm = DEFAULT : (tensor<2xui64>) -> (tensor<2xui64>, tensor<8x8xui32>)
  %9 = "stablehlo.all_reduce"(%arg0) ({
    ^bb0(%a: tensor<f32>, %b: tensor<f32>):
      %s = stablehlo.add %a, %b : tensor<f32>
      stablehlo.return %s : tensor<f32>
  }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %11 = call @f(%arg0) : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %12 = stablehlo.custom_call @Sharding(%arg0) {mhlo.sharding = "{replicated}"} : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return %arg0 : tensor<8x8xf32>
}
func.func private @f(%arg0: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %0 = stablehlo.negate %arg0 : tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}
}

// -----

// Constants named as MLIR names them are numbered once they are sdy.constant
// ops; unreduced axes of arguments are kept.
sdy.mesh @mesh = <["x"=2, "y"=4]>
func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}, %arg1: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}], unreduced={"y"}>}) -> tensor<8x16xf32> {
  %cst = stablehlo.constant dense<1.0> : tensor<8x16xf32>
  %c = stablehlo.constant dense<2.0> : tensor<8x16xf32>
  %0 = stablehlo.add %arg0, %cst : tensor<8x16xf32>
  %1 = stablehlo.add %0, %c : tensor<8x16xf32>
  %2 = stablehlo.add %1, %cst : tensor<8x16xf32>
  return %2 : tensor<8x16xf32>
}
