module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  func.func @main(%arg0: tensor<8x4xf32>) -> (tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {"b", ?}]>}) {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<1> : tensor<i32>
    %c_1 = stablehlo.constant dense<4> : tensor<i32>
    %0 = stablehlo.negate %arg0 : tensor<8x4xf32>
    %1:2 = stablehlo.while(%iterArg = %0, %iterArg_2 = %c) : tensor<8x4xf32>, tensor<i32> attributes {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}, {"b", ?}]>, <@mesh, []>]>}
    cond {
      %3 = stablehlo.compare LT, %iterArg_2, %c_1 : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %3 : tensor<i1>
    } do {
      %3 = stablehlo.sine %iterArg {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}, {"b", ?}]>]>} : tensor<8x4xf32>
      %4 = stablehlo.cosine %3 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}, {"b", ?}]>]>} : tensor<8x4xf32>
      %5 = stablehlo.add %iterArg_2, %c_0 : tensor<i32>
      stablehlo.return %4, %5 : tensor<8x4xf32>, tensor<i32>
    }
    %2 = stablehlo.cosine %1#0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}, {"b", ?}]>]>} : tensor<8x4xf32>
    return %2 : tensor<8x4xf32>
  }
}

// -----

module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  func.func @main(%arg0: tensor<8x4xf32>) -> (tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{?}, {"b", ?}]>}) {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<1> : tensor<i32>
    %c_1 = stablehlo.constant dense<4> : tensor<i32>
    %0:2 = stablehlo.while(%iterArg = %arg0, %iterArg_2 = %c) : tensor<8x4xf32>, tensor<i32> attributes {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"b", ?}]>, <@mesh, []>]>}
    cond {
      %3 = stablehlo.compare LT, %iterArg_2, %c_1 : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %3 : tensor<i1>
    } do {
      %3 = stablehlo.sine %iterArg : tensor<8x4xf32>
      %4 = stablehlo.add %iterArg_2, %c_0 : tensor<i32>
      stablehlo.return %3, %4 : tensor<8x4xf32>, tensor<i32>
    }
    %1 = stablehlo.cosine %0#0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"b"}]>]>} : tensor<8x4xf32>
    %2 = stablehlo.cosine %1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"b", ?}]>]>} : tensor<8x4xf32>
    return %2 : tensor<8x4xf32>
  }
}

// -----

module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  func.func @main(%arg0: tensor<8x4xf32>) -> (tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{?}, {"b", ?}]>}) {
    %c = stablehlo.constant dense<0> : tensor<i32>
    %c_0 = stablehlo.constant dense<1> : tensor<i32>
    %c_1 = stablehlo.constant dense<4> : tensor<i32>
    %0:2 = stablehlo.while(%iterArg = %arg0, %iterArg_2 = %c) : tensor<8x4xf32>, tensor<i32> attributes {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"b", ?}]>, <@mesh, []>]>}
    cond {
      %3 = stablehlo.compare LT, %iterArg_2, %c_1 : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %3 : tensor<i1>
    } do {
      %3 = stablehlo.sine %iterArg {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"b", ?}]>]>} : tensor<8x4xf32>
      %4 = stablehlo.add %iterArg_2, %c_0 : tensor<i32>
      stablehlo.return %3, %4 : tensor<8x4xf32>, tensor<i32>
    }
    %1 = stablehlo.cosine %0#0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"b", ?}]>]>} : tensor<8x4xf32>
    %2 = stablehlo.cosine %1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"b", ?}]>]>} : tensor<8x4xf32>
    return %2 : tensor<8x4xf32>
  }
}
