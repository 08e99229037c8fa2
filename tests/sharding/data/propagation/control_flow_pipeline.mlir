// RUN: xlapy sdy propagate --strategy pipeline --split-input-file

// The branches of a case and its result share a sharding.
// (case_branches)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2]>
  func.func @main(%arg0: tensor<i32>, %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}, %arg2: tensor<8x8xf32>) -> tensor<8x8xf32> {
    %0 = "stablehlo.case"(%arg0) ({
      %1 = stablehlo.abs %arg1 : tensor<8x8xf32>
      stablehlo.return %1 : tensor<8x8xf32>
    }, {
      %1 = stablehlo.negate %arg2 : tensor<8x8xf32>
      stablehlo.return %1 : tensor<8x8xf32>
    }) : (tensor<i32>) -> tensor<8x8xf32>
    return %0 : tensor<8x8xf32>
  }
}

// -----

// A while loop: the sharding of the carried value flows in and out of the body.
// (while_carried)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2]>
  func.func @main(%arg0: tensor<8x4xf32>) -> tensor<8x4xf32> {
    %c0 = stablehlo.constant dense<0> : tensor<i32>
    %c1 = stablehlo.constant dense<1> : tensor<i32>
    %c4 = stablehlo.constant dense<4> : tensor<i32>
    %0 = stablehlo.negate %arg0 : tensor<8x4xf32>
    %1:2 = stablehlo.while(%iterArg = %0, %iterArg_0 = %c0) : tensor<8x4xf32>, tensor<i32>
      cond {
      %2 = stablehlo.compare LT, %iterArg_0, %c4 : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %2 : tensor<i1>
    } do {
      %2 = stablehlo.sine %iterArg {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"b"}, {}]>]>} : tensor<8x4xf32>
      %3 = stablehlo.add %iterArg_0, %c1 : tensor<i32>
      stablehlo.return %2, %3 : tensor<8x4xf32>, tensor<i32>
    }
    %4 = stablehlo.cosine %1#0 : tensor<8x4xf32>
    return %4 : tensor<8x4xf32>
  }
}

// -----

// An optimization barrier passes shardings between its operands and results.
// (optimization_barrier)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2]>
  func.func @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}]>}, %arg1: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b"}]>}) {
    %0:2 = stablehlo.optimization_barrier %arg0, %arg1 : tensor<8xf32>, tensor<8xf32>
    return %0#0, %0#1 : tensor<8xf32>, tensor<8xf32>
  }
}

// -----

// Without explicit edges, a while loop's results, operands, body arguments and
// returned values are sharded alike (the edge's sharding ends on the loop).
// (while_loop)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  func.func @main(%arg0: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}) -> tensor<8x4xf32> {
    %c0 = stablehlo.constant dense<0> : tensor<i32>
    %c1 = stablehlo.constant dense<1> : tensor<i32>
    %c4 = stablehlo.constant dense<4> : tensor<i32>
    %0 = stablehlo.negate %arg0 : tensor<8x4xf32>
    %1:2 = stablehlo.while(%iterArg = %0, %iterArg_0 = %c0) : tensor<8x4xf32>, tensor<i32>
      cond {
      %2 = stablehlo.compare LT, %iterArg_0, %c4 : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %2 : tensor<i1>
    } do {
      %2 = stablehlo.sine %iterArg : tensor<8x4xf32>
      %3 = stablehlo.add %iterArg_0, %c1 : tensor<i32>
      stablehlo.return %2, %3 : tensor<8x4xf32>, tensor<i32>
    }
    %4 = stablehlo.cosine %1#0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"b"}]>]>} : tensor<8x4xf32>
    return %4 : tensor<8x4xf32>
  }
}

// -----

// (callee)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  func.func @main(%arg0: tensor<8xf32>) -> tensor<8xf32> {
    %0 = stablehlo.exponential %arg0 : tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}
