// RUN: xlapy sdy propagate --strategy basic --split-input-file

// Without data-flow edges, a while's region arguments share its results' shardings.
module {
sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @main(%arg0: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c1 = stablehlo.constant dense<1> : tensor<i32>
  %c4 = stablehlo.constant dense<4> : tensor<i32>
  %0 = stablehlo.negate %arg0 : tensor<8x4xf32>
  %1:2 = stablehlo.while(%iterArg = %0, %iterArg_0 = %c0) : tensor<8x4xf32>, tensor<i32> attributes {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}, {?}]>, <@mesh, []>]>}
    cond {
    %2 = stablehlo.compare LT, %iterArg_0, %c4 : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %2 : tensor<i1>
  } do {
    %2 = stablehlo.sine %iterArg : tensor<8x4xf32>
    %5 = stablehlo.cosine %2 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"b", ?}]>]>} : tensor<8x4xf32>
    %3 = stablehlo.add %iterArg_0, %c1 : tensor<i32>
    stablehlo.return %5, %3 : tensor<8x4xf32>, tensor<i32>
  }
  %4 = stablehlo.cosine %1#0 : tensor<8x4xf32>
  return %4 : tensor<8x4xf32>
}
}

// -----

// Propagation is a single sweep: the body is not revisited when the result changes.
module {
sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @main(%arg0: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c1 = stablehlo.constant dense<1> : tensor<i32>
  %c4 = stablehlo.constant dense<4> : tensor<i32>
  %1:2 = stablehlo.while(%iterArg = %arg0, %iterArg_0 = %c0) : tensor<8x4xf32>, tensor<i32>
    cond {
    %2 = stablehlo.compare LT, %iterArg_0, %c4 : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %2 : tensor<i1>
  } do {
    %2 = stablehlo.sine %iterArg : tensor<8x4xf32>
    %3 = stablehlo.add %iterArg_0, %c1 : tensor<i32>
    stablehlo.return %2, %3 : tensor<8x4xf32>, tensor<i32>
  }
  %4 = stablehlo.cosine %1#0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"b"}]>]>} : tensor<8x4xf32>
  %5 = stablehlo.cosine %4 : tensor<8x4xf32>
  return %5 : tensor<8x4xf32>
}
}

// -----

// A sharded while result reaches the body through its arguments.
module {
sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @main(%arg0: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %c0 = stablehlo.constant dense<0> : tensor<i32>
  %c1 = stablehlo.constant dense<1> : tensor<i32>
  %c4 = stablehlo.constant dense<4> : tensor<i32>
  %1:2 = stablehlo.while(%iterArg = %arg0, %iterArg_0 = %c0) : tensor<8x4xf32>, tensor<i32> attributes {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"b", ?}]>, <@mesh, []>]>}
    cond {
    %2 = stablehlo.compare LT, %iterArg_0, %c4 : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %2 : tensor<i1>
  } do {
    %2 = stablehlo.sine %iterArg : tensor<8x4xf32>
    %3 = stablehlo.add %iterArg_0, %c1 : tensor<i32>
    stablehlo.return %2, %3 : tensor<8x4xf32>, tensor<i32>
  }
  %4 = stablehlo.cosine %1#0 : tensor<8x4xf32>
  %5 = stablehlo.cosine %4 : tensor<8x4xf32>
  return %5 : tensor<8x4xf32>
}
}
