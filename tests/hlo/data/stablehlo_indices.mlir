module @indices {
  func.func public @main(%arg0: tensor<8xf32>, %arg1: tensor<i32>, %arg2: tensor<1x1xi32>, %arg3: tensor<i32>, %arg4: tensor<i1>) -> (tensor<8xf32>, tensor<2x3xf32>, tensor<5xf32>, tensor<8xf32>) {
    %0 = "stablehlo.case"(%arg1) ({
      stablehlo.return %arg0 : tensor<8xf32>
    }, {
      %5 = stablehlo.negate %arg0 : tensor<8xf32>
      stablehlo.return %5 : tensor<8xf32>
    }, {
      %5 = stablehlo.abs %arg0 : tensor<8xf32>
      stablehlo.return %5 : tensor<8xf32>
    }) : (tensor<i32>) -> tensor<8xf32>
    %1 = stablehlo.broadcast_in_dim %arg2, dims = [0, 1] : (tensor<1x1xi32>) -> tensor<2x1xi32>
    %2 = "stablehlo.gather"(%arg0, %1) <{dimension_numbers = #stablehlo.gather<offset_dims = [1], collapsed_slice_dims = [], start_index_map = [0], index_vector_dim = 1>, slice_sizes = array<i64: 3>}> : (tensor<8xf32>, tensor<2x1xi32>) -> tensor<2x3xf32>
    %3:2 = stablehlo.optimization_barrier %arg0, %arg3 : tensor<8xf32>, tensor<i32>
    %4 = stablehlo.dynamic_slice %3#0, %3#1, sizes = [5] : (tensor<8xf32>, tensor<i32>) -> tensor<5xf32>
    %6 = "stablehlo.if"(%arg4) ({
      stablehlo.return %arg0 : tensor<8xf32>
    }, {
      %7 = stablehlo.negate %arg0 : tensor<8xf32>
      stablehlo.return %7 : tensor<8xf32>
    }) : (tensor<i1>) -> tensor<8xf32>
    return %0, %2, %4, %6 : tensor<8xf32>, tensor<2x3xf32>, tensor<5xf32>, tensor<8xf32>
  }
}
