module {
  sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}, %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b"}, {}]>}) -> (tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"b"}]>}) {
    %0 = sdy.reshard %arg0 <@mesh, [{}, {"b", "a"}]> : tensor<8x8xf32>
    %1 = sdy.reshard %arg1 <@mesh, [{}, {"b", "a"}]> : tensor<8x8xf32>
    %2 = stablehlo.concatenate %0, %1, dim = 0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"b", "a"}]>]>} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<16x8xf32>
    %3 = sdy.reshard %2 <@mesh, [{}, {"b"}]> : tensor<16x8xf32>
    return %3 : tensor<16x8xf32>
  }
}

// -----

module {
  sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2, "d"=2]>
  func.func @main(%arg0: tensor<16x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b"}]>}) -> (tensor<16x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"d"}]>}, tensor<16x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"d"}]>}) {
    %0 = stablehlo.negate %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {"b"}]>]>} : tensor<16x16xf32>
    %1 = sdy.reshard %0 <@mesh, [{"a", "d"}, {}]> : tensor<16x16xf32>
    %2 = sdy.reshard %0 <@mesh, [{"a", "d"}, {}]> : tensor<16x16xf32>
    %3 = stablehlo.concatenate %1, %2, dim = 1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", "d"}, {}]>]>} : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x32xf32>
    %4 = sdy.reshard %3 <@mesh, [{"a"}, {"d"}]> : tensor<16x32xf32>
    %5 = stablehlo.abs %4 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {"d"}]>]>} : tensor<16x32xf32>
    return %4, %5 : tensor<16x32xf32>, tensor<16x32xf32>
  }
}

// -----

module {
  sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2, "d"=2]>
  func.func @main(%arg0: tensor<2x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"d", "c"}]>}, %arg1: tensor<2x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}) -> (tensor<2x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b"}]>}) {
    %0 = sdy.reshard %arg0 <@mesh, [{"a"}, {}]> : tensor<2x16xf32>
    %1 = stablehlo.concatenate %0, %arg1, dim = 1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {}]>]>} : (tensor<2x16xf32>, tensor<2x16xf32>) -> tensor<2x32xf32>
    %2 = sdy.reshard %1 <@mesh, [{"a"}, {"b"}]> : tensor<2x32xf32>
    return %2 : tensor<2x32xf32>
  }
}

// -----

module {
  sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2, "d"=2]>
  func.func @main(%arg0: tensor<16x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b"}]>}) -> (tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"c"}, {"d"}]>}, tensor<16x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"c"}, {"d"}]>}) {
    %0 = stablehlo.slice %arg0 [0:16, 0:8] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {"b"}]>]>} : (tensor<16x16xf32>) -> tensor<16x8xf32>
    %1 = stablehlo.slice %arg0 [0:16, 8:16] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {"b"}]>]>} : (tensor<16x16xf32>) -> tensor<16x8xf32>
    %2 = stablehlo.concatenate %0, dim = 1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {"b"}]>]>} : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %3 = sdy.reshard %2 <@mesh, [{"c"}, {"d"}]> : tensor<16x8xf32>
    %4 = sdy.reshard %1 <@mesh, [{"c"}, {"d"}]> : tensor<16x8xf32>
    %5 = sdy.reshard %0 <@mesh, [{"c"}, {"d"}]> : tensor<16x8xf32>
    %6 = stablehlo.concatenate %4, %5, dim = 1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"c"}, {"d"}]>]>} : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x16xf32>
    return %3, %6 : tensor<16x8xf32>, tensor<16x16xf32>
  }
}

// -----

module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}, %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}) -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}) {
    %0 = stablehlo.concatenate %arg0, %arg1, dim = 1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {}]>]>} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x16xf32>
    return %0 : tensor<8x16xf32>
  }
}

// -----

module {
  sdy.mesh @mesh = <["x"=2, "y"=2]>
  func.func @main(%arg0: tensor<4x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}, %arg1: tensor<32x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) -> (tensor<4x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}) {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"y"}]>]>} : (tensor<4x32xf32>, tensor<32x8xf32>) -> tensor<4x8xf32>
    %1 = sdy.reshard %0 <@mesh, [{}, {"x"}]> : tensor<4x8xf32>
    %2 = stablehlo.negate %1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x"}]>]>} : tensor<4x8xf32>
    return %2 : tensor<4x8xf32>
  }
}

// -----

module {
  sdy.mesh @mesh = <["x"=2, "y"=2, "z"=2]>
  func.func @main(%arg0: tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}, %arg1: tensor<8x2xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}, %arg2: tensor<4x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}, %arg3: tensor<32x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"z"}, {"y"}]>}, %arg4: tensor<32x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) -> (tensor<16x2xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}, tensor<4x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}, tensor<4x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"z"}]>}) {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x"}]>]>} : (tensor<16x8xf32>, tensor<8x2xf32>) -> tensor<16x2xf32>
    %1 = stablehlo.dot_general %arg2, %arg3, contracting_dims = [1] x [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x"}]>]>} : (tensor<4x32xf32>, tensor<32x8xf32>) -> tensor<4x8xf32>
    %2 = stablehlo.dot_general %arg2, %arg4, contracting_dims = [1] x [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"z"}]>]>} : (tensor<4x32xf32>, tensor<32x8xf32>) -> tensor<4x8xf32>
    return %0, %1, %2 : tensor<16x2xf32>, tensor<4x8xf32>, tensor<4x8xf32>
  }
}

// -----

module {
  sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}, %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b"}, {}]>}) -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"c"}]>}, tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}) {
    %0 = sdy.constant dense<0> : tensor<i32>
    %1 = sdy.constant dense<4> : tensor<i32>
    %2:2 = stablehlo.while(%iterArg = %arg0, %iterArg_0 = %0) : tensor<8x8xf32>, tensor<i32> attributes {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {"c"}]>, <@mesh, []>]>}
    cond {
      %4 = stablehlo.compare LT, %iterArg_0, %1 : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %4 : tensor<i1>
    } do {
      %4 = sdy.reshard %iterArg <@mesh, [{"b", "c"}, {}]> : tensor<8x8xf32>
      %5 = sdy.reshard %arg1 <@mesh, [{"b", "c"}, {}]> : tensor<8x8xf32>
      %6 = stablehlo.concatenate %4, %5, dim = 1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"b", "c"}, {}]>]>} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x16xf32>
      %7 = sdy.reshard %6 <@mesh, [{}, {"c"}]> : tensor<8x16xf32>
      %8 = stablehlo.slice %7 [0:8, 0:8] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {"c"}]>]>} : (tensor<8x16xf32>) -> tensor<8x8xf32>
      stablehlo.return %8, %iterArg_0 : tensor<8x8xf32>, tensor<i32>
    }
    %3 = sdy.manual_computation(%arg0, %arg1) in_shardings=[<@mesh, [{"a", "b"}, {}]>, <@mesh, [{"a"}, {"c"}]>] out_shardings=[<@mesh, [{"a"}, {}]>] manual_axes={"a"} (%arg2: tensor<4x8xf32>, %arg3: tensor<4x8xf32>) {
      %4 = sdy.reshard %arg2 <@mesh, [{"b", "c"}, {}]> : tensor<4x8xf32>
      %5 = sdy.reshard %arg3 <@mesh, [{"b", "c"}, {}]> : tensor<4x8xf32>
      %6 = stablehlo.concatenate %4, %5, dim = 1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"b", "c"}, {}]>]>} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x16xf32>
      %7 = sdy.reshard %6 <@mesh, [{"b"}, {"c"}]> : tensor<4x16xf32>
      sdy.return %7 : tensor<4x16xf32>
    } : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x16xf32>
    return %2#0, %3 : tensor<8x8xf32>, tensor<8x16xf32>
  }
}

// -----

module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  sdy.mesh @other = <["a"=2, "b"=2], device_ids=[3, 2, 1, 0]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}, %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@other, [{"a"}, {}]>}) -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b"}]>}) {
    %0 = sdy.reshard %arg0 <@mesh, [{"a", "b"}, {}]> : tensor<8x8xf32>
    %1 = sdy.reshard %arg1 <@mesh, [{"a", "b"}, {}]> : tensor<8x8xf32>
    %2 = stablehlo.concatenate %0, %1, dim = 1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", "b"}, {}]>]>} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x16xf32>
    %3 = sdy.reshard %2 <@mesh, [{"a"}, {"b"}]> : tensor<8x16xf32>
    return %3 : tensor<8x16xf32>
  }
}
