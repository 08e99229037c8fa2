module @jit_matmul {
  sdy.mesh @mesh = <["data"=2, "model"=4]>
  func.func public @main(%x: tensor<16x32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"data"}, {}]>},
                         %w: tensor<32x64xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"model"}]>},
                         %b: tensor<64xf32>) -> tensor<16x64xf32> {
    %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<16x32xf32>, tensor<32x64xf32>) -> tensor<16x64xf32>
    %1 = stablehlo.broadcast_in_dim %b, dims = [1] : (tensor<64xf32>) -> tensor<16x64xf32>
    %2 = stablehlo.add %0, %1 : tensor<16x64xf32>
    %3 = stablehlo.tanh %2 : tensor<16x64xf32>
    return %3 : tensor<16x64xf32>
  }
}
