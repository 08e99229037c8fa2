module @structure {
  sdy.mesh @mesh = <["x"=2]>
  func.func private @pair(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
    %0 = stablehlo.add %arg0, %arg1 : tensor<4xf32>
    return %0, %arg0 : tensor<4xf32>, tensor<4xf32>
  }
  func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
    %0:2 = call @pair(%arg0, %arg1) : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
    %1:2 = stablehlo.optimization_barrier %0#0, %0#1 : tensor<4xf32>, tensor<4xf32>
    %2:2 = sdy.named_computation<"twice">(%1#0, %1#1) (%arg2: tensor<4xf32>, %arg3: tensor<4xf32>) {
      %4 = stablehlo.multiply %arg2, %arg3 : tensor<4xf32>
      sdy.return %4, %arg2 : tensor<4xf32>, tensor<4xf32>
    } : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
    %3:2 = sdy.manual_computation(%2#0, %2#1) in_shardings=[<@mesh, [{"x"}]>, <@mesh, [{"x"}]>] out_shardings=[<@mesh, [{"x"}]>, <@mesh, [{"x"}]>] manual_axes={"x"} (%arg2: tensor<2xf32>, %arg3: tensor<2xf32>) {
      %4 = stablehlo.subtract %arg2, %arg3 : tensor<2xf32>
      %5 = stablehlo.negate %arg3 : tensor<2xf32>
      sdy.return %4, %5 : tensor<2xf32>, tensor<2xf32>
    } : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
    return %3#0, %3#1, %2#0, %0#1 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
  }
}
