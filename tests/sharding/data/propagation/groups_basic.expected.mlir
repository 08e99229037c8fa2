module {
  sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2, "d"=2]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {?}]>}) -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {?}]>}) {
    %0 = sdy.constant {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}, {?}]>]>} dense<0.000000e+00> : tensor<8x8xf32>
    %1 = sdy.constant dense<0.000000e+00> : tensor<8x8xf32>
    %2 = stablehlo.tanh %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}, {?}]>]>} : tensor<8x8xf32>
    %3 = sdy.propagation_barrier %1 allowed_direction=NONE {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}, {?}]>]>} : tensor<8x8xf32>
    %4 = stablehlo.add %2, %3 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}, {?}]>]>} : tensor<8x8xf32>
    sdy.sharding_group %0 group_id=0 : tensor<8x8xf32>
    sdy.sharding_group %4 group_id=0 : tensor<8x8xf32>
    return %4 : tensor<8x8xf32>
  }
}

// -----

module {
  sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2, "d"=2]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b", ?}, {?}]>}) -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b", ?}, {?}]>}) {
    %0 = stablehlo.tanh %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"b", ?}, {?}]>]>} : tensor<8x8xf32>
    sdy.sharding_group %0 group_id=1 : tensor<8x8xf32>
    return %0 : tensor<8x8xf32>
  }
}

// -----

module {
  sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2, "d"=2]>
  func.func @main(%arg0: tensor<8x8xf32>) -> tensor<8x8xf32> {
    %0 = stablehlo.add %arg0, %arg0 : tensor<8x8xf32>
    sdy.sharding_group %0 group_id=1 : tensor<8x8xf32>
    return %0 : tensor<8x8xf32>
  }
}

// -----

module {
  sdy.mesh @mesh_xy = <["x"=2, "y"=2]>
  func.func @main(%arg0: tensor<8x2xi64> {sdy.sharding = #sdy.sharding<@mesh_xy, [{"x"}, {"y"}]>}) -> (tensor<8x2xi64> {sdy.sharding = #sdy.sharding<@mesh_xy, [{"x", ?}, {"y", ?}]>}) {
    sdy.sharding_group %arg0 group_id=0 : tensor<8x2xi64>
    %c = stablehlo.constant {sdy.sharding = #sdy.sharding_per_value<[<@mesh_xy, [{"x"}, {"y"}]>]>} dense<0> : tensor<8x2xi64>
    sdy.sharding_group %c group_id=0 : tensor<8x2xi64>
    return %c : tensor<8x2xi64>
  }
}

// -----

module {
  sdy.mesh @mesh_xy = <["x"=2, "y"=2]>
  func.func @main(%arg0: tensor<8x2xi64> {sdy.sharding = #sdy.sharding<@mesh_xy, [{"x"}, {"y"}]>}) -> tensor<8x2xi64> {
    %c = stablehlo.constant dense<0> : tensor<8x2xi64>
    return %c : tensor<8x2xi64>
  }
}

// -----

module {
  sdy.mesh @mesh_xy = <["x"=2, "y"=2]>
  func.func @main(%arg0: tensor<8x2xi64> {sdy.sharding = #sdy.sharding<@mesh_xy, [{"x"}, {"y"}]>}) -> (tensor<8x2xi64> {sdy.sharding = #sdy.sharding<@mesh_xy, [{"x", ?}, {"y", ?}]>}) {
    sdy.sharding_group %arg0 group_id=0 : tensor<8x2xi64>
    %c = stablehlo.constant {sdy.sharding = #sdy.sharding_per_value<[<@mesh_xy, [{"x"}, {"y"}]>]>} dense<0> : tensor<8x2xi64>
    sdy.sharding_group %c group_id=0 : tensor<8x2xi64>
    return %c : tensor<8x2xi64>
  }
}
