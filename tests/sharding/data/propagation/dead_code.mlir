// RUN: xlapy sdy propagate --strategy basic --split-input-file

// Unused ops without side effects go away while propagating.
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

// Dead ops are removed before propagating through them; nothing is folded.
module {
sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}) -> tensor<8x8xf32> {
  %0 = stablehlo.negate %arg0 : tensor<8x8xf32>
  %1 = stablehlo.constant dense<1.0> : tensor<8x8xf32>
  %2 = stablehlo.add %0, %1 : tensor<8x8xf32>
  %3 = stablehlo.constant dense<1.0> : tensor<8x8xf32>
  %4 = stablehlo.add %2, %3 : tensor<8x8xf32>
  %5 = stablehlo.constant dense<2.0> : tensor<8x8xf32>
  %6 = stablehlo.add %5, %3 : tensor<8x8xf32>
  %7 = stablehlo.multiply %4, %6 : tensor<8x8xf32>
  %8 = stablehlo.transpose %7, dims = [0, 1] : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %9 = stablehlo.reshape %8 : (tensor<8x8xf32>) -> tensor<8x8xf32>
  %10 = stablehlo.abs %9 : tensor<8x8xf32>
  %11 = stablehlo.cosine %10 : tensor<8x8xf32>
  return %10 : tensor<8x8xf32>
}
}
