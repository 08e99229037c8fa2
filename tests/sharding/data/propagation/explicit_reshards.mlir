// RUN: xlapy sdy propagate --strategy pipeline --split-input-file

// Operands of a concatenate sharded otherwise than its result are resharded,
// before the op, to one sharding per factor: here the result's, plus the
// axes voted for the concatenated dimension, which must stay replicated and
// moves them to the other dimension.
module {
  sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}, %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b"}, {}]>}) -> (tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"b"}]>}) {
    %0 = stablehlo.concatenate %arg0, %arg1, dim = 0 : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<16x8xf32>
    return %0 : tensor<16x8xf32>
  }
}

// -----

// The result too is computed with the common sharding, and a reshard after
// the op gives its users the sharding the result had.
module {
  sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2, "d"=2]>
  func.func @main(%arg0: tensor<16x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b"}]>}) -> (tensor<16x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"d"}]>}, tensor<16x32xf32>) {
    %0 = stablehlo.negate %arg0 : tensor<16x16xf32>
    %1 = stablehlo.concatenate %0, %0, dim = 1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {"d"}]>]>} : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x32xf32>
    %2 = stablehlo.abs %1 : tensor<16x32xf32>
    return %1, %2 : tensor<16x32xf32>, tensor<16x32xf32>
  }
}

// -----

// Axes of the concatenated dimension that do not fit the other dimensions
// are dropped.
module {
  sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2, "d"=2]>
  func.func @main(%arg0: tensor<2x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"d", "c"}]>}, %arg1: tensor<2x16xf32>) -> tensor<2x32xf32> {
    %0 = stablehlo.concatenate %arg0, %arg1, dim = 1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {"b"}]>]>} : (tensor<2x16xf32>, tensor<2x16xf32>) -> tensor<2x32xf32>
    return %0 : tensor<2x32xf32>
  }
}

// -----

// Concatenating slices of one tensor only moves data between devices (a
// permutation factor). With a single operand, the operand's sharding wins and
// the result is resharded; with two, the vote takes the result's.
module {
  sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2, "d"=2]>
  func.func @main(%arg0: tensor<16x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b"}]>}) -> (tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"c"}, {"d"}]>}, tensor<16x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"c"}, {"d"}]>}) {
    %0 = stablehlo.slice %arg0 [0:16, 0:8] : (tensor<16x16xf32>) -> tensor<16x8xf32>
    %1 = stablehlo.slice %arg0 [0:16, 8:16] : (tensor<16x16xf32>) -> tensor<16x8xf32>
    %2 = stablehlo.concatenate %0, dim = 1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"c"}, {"d"}]>]>} : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %3 = stablehlo.concatenate %1, %0, dim = 1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"c"}, {"d"}]>]>} : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x16xf32>
    return %2, %3 : tensor<16x8xf32>, tensor<16x16xf32>
  }
}

// -----

// Operands sharded like the result: nothing to do.
module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}, %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}) -> tensor<8x16xf32> {
    %0 = stablehlo.concatenate %arg0, %arg1, dim = 1 : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x16xf32>
    return %0 : tensor<8x16xf32>
  }
}

// -----

// A dot whose result shards a free dimension with the contracting axes is
// computed sharded like its operand, and resharded after.
module {
  sdy.mesh @mesh = <["x"=2, "y"=2]>
  func.func @main(%arg0: tensor<4x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}, %arg1: tensor<32x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) -> tensor<4x8xf32> {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x"}]>]>} : (tensor<4x32xf32>, tensor<32x8xf32>) -> tensor<4x8xf32>
    %1 = stablehlo.negate %0 : tensor<4x8xf32>
    return %1 : tensor<4x8xf32>
  }
}

// -----

// Dots left as they are: a result larger than the operand it conflicts with,
// operands that disagree on the contracting dimension, and a result whose
// conflicting axes are not the contracting ones.
module {
  sdy.mesh @mesh = <["x"=2, "y"=2, "z"=2]>
  func.func @main(%arg0: tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}, %arg1: tensor<8x2xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>},
                  %arg2: tensor<4x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"x"}]>}, %arg3: tensor<32x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"z"}, {"y"}]>},
                  %arg4: tensor<32x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) -> (tensor<16x2xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x"}]>]>} : (tensor<16x8xf32>, tensor<8x2xf32>) -> tensor<16x2xf32>
    %1 = stablehlo.dot_general %arg2, %arg3, contracting_dims = [1] x [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"x"}]>]>} : (tensor<4x32xf32>, tensor<32x8xf32>) -> tensor<4x8xf32>
    %2 = stablehlo.dot_general %arg2, %arg4, contracting_dims = [1] x [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"z"}]>]>} : (tensor<4x32xf32>, tensor<32x8xf32>) -> tensor<4x8xf32>
    return %0, %1, %2 : tensor<16x2xf32>, tensor<4x8xf32>, tensor<4x8xf32>
  }
}

// -----

// Ops in regions get reshards too: in a while body (whose argument has the
// while's sharding) and in a manual computation (local shardings, without
// the manual axes).
module {
  sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}, %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b"}, {}]>}) -> (tensor<8x8xf32>, tensor<8x16xf32>) {
    %0 = stablehlo.constant dense<0> : tensor<i32>
    %1 = stablehlo.constant dense<4> : tensor<i32>
    %2:2 = stablehlo.while(%iterArg = %arg0, %iterArg_0 = %0) : tensor<8x8xf32>, tensor<i32>
    cond {
      %4 = stablehlo.compare LT, %iterArg_0, %1 : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %4 : tensor<i1>
    } do {
      %4 = stablehlo.concatenate %iterArg, %arg1, dim = 1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"c"}]>]>} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x16xf32>
      %5 = stablehlo.slice %4 [0:8, 0:8] : (tensor<8x16xf32>) -> tensor<8x8xf32>
      stablehlo.return %5, %iterArg_0 : tensor<8x8xf32>, tensor<i32>
    }
    %3 = sdy.manual_computation(%arg0, %arg1) in_shardings=[<@mesh, [{"a", "b"}, {}]>, <@mesh, [{"a"}, {"c"}]>] out_shardings=[<@mesh, [{"a"}, {}]>] manual_axes={"a"} (%arg2: tensor<4x8xf32>, %arg3: tensor<4x8xf32>) {
      %4 = stablehlo.concatenate %arg2, %arg3, dim = 1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x16xf32>
      sdy.return %4 : tensor<4x16xf32>
    } : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x16xf32>
    return %2#0, %3 : tensor<8x8xf32>, tensor<8x16xf32>
  }
}

// -----

// Operands on the op's mesh but with another device order are resharded
// onto the mesh most tensors use.
module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  sdy.mesh @other = <["a"=2, "b"=2], device_ids=[3, 2, 1, 0]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}, %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@other, [{"a"}, {}]>}) -> tensor<8x16xf32> {
    %0 = stablehlo.concatenate %arg0, %arg1, dim = 1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {"b"}]>]>} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x16xf32>
    return %0 : tensor<8x16xf32>
  }
}
