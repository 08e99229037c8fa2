// RUN: xlapy sdy propagate --strategy basic --split-input-file

// A barrier stops the argument's sharding from reaching %1, but %0 is in a
// group with %4, which gets it.
// (group_crosses_a_barrier)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2, "d"=2]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {?}]>}) -> tensor<8x8xf32> {
    %0 = sdy.constant dense<0.000000e+00> : tensor<8x8xf32>
    %1 = sdy.constant dense<0.000000e+00> : tensor<8x8xf32>
    %2 = stablehlo.tanh %arg0 : tensor<8x8xf32>
    %3 = sdy.propagation_barrier %1 allowed_direction=NONE : tensor<8x8xf32>
    %4 = stablehlo.add %2, %3 : tensor<8x8xf32>
    sdy.sharding_group %0 group_id=0 : tensor<8x8xf32>
    sdy.sharding_group %4 group_id=0 : tensor<8x8xf32>
    return %4 : tensor<8x8xf32>
  }
}

// -----

// Group members across functions.
// (first_function)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2, "d"=2]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b", ?}, {?}]>}) -> tensor<8x8xf32> {
    %0 = stablehlo.tanh %arg0 : tensor<8x8xf32>
    sdy.sharding_group %0 group_id=1 : tensor<8x8xf32>
    return %0 : tensor<8x8xf32>
  }
}

// -----

// (second_function)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2, "d"=2]>
  func.func @main(%arg0: tensor<8x8xf32>) -> tensor<8x8xf32> {
    %0 = stablehlo.add %arg0, %arg0 : tensor<8x8xf32>
    sdy.sharding_group %0 group_id=1 : tensor<8x8xf32>
    return %0 : tensor<8x8xf32>
  }
}

// -----

// The zeros_like of Shardy's docs/compiler_api.md: the output and the
// constant have no data dependency on the input, but share its group.
// (zeros_like)
module {
  sdy.mesh @mesh_xy = <["x"=2, "y"=2]>
  func.func @main(%arg0: tensor<8x2xi64> {sdy.sharding = #sdy.sharding<@mesh_xy, [{"x"}, {"y"}]>}) -> tensor<8x2xi64> {
    sdy.sharding_group %arg0 group_id=0 : tensor<8x2xi64>
    %1 = stablehlo.constant dense<0> : tensor<8x2xi64>
    sdy.sharding_group %1 group_id=0 : tensor<8x2xi64>
    return %1 : tensor<8x2xi64>
  }
}

// -----

// Without the group nothing reaches the constant or the output.
// (zeros_like_without_group)
module {
  sdy.mesh @mesh_xy = <["x"=2, "y"=2]>
  func.func @main(%arg0: tensor<8x2xi64> {sdy.sharding = #sdy.sharding<@mesh_xy, [{"x"}, {"y"}]>}) -> tensor<8x2xi64> {
    %0 = stablehlo.constant dense<0> : tensor<8x2xi64>
    return %0 : tensor<8x2xi64>
  }
}

// -----

// Members of a group without a sharding take the others' as it is.
module {
  sdy.mesh @mesh_xy = <["x"=2, "y"=2]>
  func.func @main(%arg0: tensor<8x2xi64> {sdy.sharding = #sdy.sharding<@mesh_xy, [{"x"}, {"y"}]>}) -> tensor<8x2xi64> {
    sdy.sharding_group %arg0 group_id=0 : tensor<8x2xi64>
    %1 = stablehlo.constant dense<0> : tensor<8x2xi64>
    sdy.sharding_group %1 group_id=0 : tensor<8x2xi64>
    return %1 : tensor<8x2xi64>
  }
}
