module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  sdy.mesh @mesh3 = <["a"=2, "b"=2, "c"=2]>
  func.func @main(%arg0: tensor<i32>, %arg1: tensor<4xi64> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}]>}, %arg2: tensor<4xi64> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}]>}) -> (tensor<4xi64> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}]>}) {
    %0 = "stablehlo.case"(%arg0) ({
      stablehlo.return %arg1 : tensor<4xi64>
    }, {
      stablehlo.return %arg2 : tensor<4xi64>
    }) : (tensor<i32>) -> tensor<4xi64>
    %1 = sdy.data_flow_edge %0 sharding=<@mesh, [{"a", ?}]> : tensor<4xi64>
    return %1 : tensor<4xi64>
  }
}

// -----

module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  sdy.mesh @mesh3 = <["a"=2, "b"=2, "c"=2]>
  func.func @main(%arg0: tensor<i32>, %arg1: tensor<8xi64> {sdy.sharding = #sdy.sharding<@mesh3, [{"a", "b"}]>}, %arg2: tensor<8xi64> {sdy.sharding = #sdy.sharding<@mesh3, [{"a", "c"}]>}) -> (tensor<8xi64> {sdy.sharding = #sdy.sharding<@mesh3, [{"a", ?}]>}) {
    %0 = "stablehlo.case"(%arg0) ({
      stablehlo.return %arg1 : tensor<8xi64>
    }, {
      stablehlo.return %arg2 : tensor<8xi64>
    }) : (tensor<i32>) -> tensor<8xi64>
    %1 = sdy.data_flow_edge %0 sharding=<@mesh3, [{"a", ?}]> : tensor<8xi64>
    return %1 : tensor<8xi64>
  }
}

// -----

module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  sdy.mesh @mesh3 = <["a"=2, "b"=2, "c"=2]>
  func.func @main(%arg0: tensor<i32>, %arg1: tensor<8x8xi64> {sdy.sharding = #sdy.sharding<@mesh3, [{"a", ?}, {"b", ?}]>}, %arg2: tensor<8x8xi64> {sdy.sharding = #sdy.sharding<@mesh3, [{"a", "b", ?}, {?}]>}) -> (tensor<8x8xi64> {sdy.sharding = #sdy.sharding<@mesh3, [{"a", ?}, {?}]>}) {
    %0 = "stablehlo.case"(%arg0) ({
      stablehlo.return %arg1 : tensor<8x8xi64>
    }, {
      stablehlo.return %arg2 : tensor<8x8xi64>
    }) : (tensor<i32>) -> tensor<8x8xi64>
    %1 = sdy.data_flow_edge %0 sharding=<@mesh3, [{"a", ?}, {?}]> : tensor<8x8xi64>
    return %1 : tensor<8x8xi64>
  }
}

// -----

module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  func.func @main(%arg0: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}) -> (tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{?}, {"b", ?}]>}) {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<1> : tensor<i32>
    %c_1 = stablehlo.constant dense<4> : tensor<i32>
    %0 = stablehlo.negate %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}, {?}]>]>} : tensor<8x4xf32>
    %1:2 = stablehlo.while(%iterArg = %0, %iterArg_2 = %c) : tensor<8x4xf32>, tensor<i32> attributes {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"b", ?}]>, <@mesh, []>]>}
    cond {
      %3 = stablehlo.compare LT, %iterArg_2, %c_1 : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %3 : tensor<i1>
    } do {
      %3 = stablehlo.sine %iterArg : tensor<8x4xf32>
      %4 = stablehlo.add %iterArg_2, %c_0 : tensor<i32>
      stablehlo.return %3, %4 : tensor<8x4xf32>, tensor<i32>
    }
    %2 = stablehlo.cosine %1#0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"b"}]>]>} : tensor<8x4xf32>
    return %2 : tensor<8x4xf32>
  }
}

// -----

module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {
    %0 = stablehlo.exponential %arg0 : tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}
