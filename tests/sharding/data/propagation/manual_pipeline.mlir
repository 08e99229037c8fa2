// RUN: xlapy sdy propagate --strategy pipeline --split-input-file

// A body argument returned as is: the in and out shardings meet.
// (returned_body_argument)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2, "d"=2]>
  func.func @main(%arg0: tensor<32x32xf32>) -> tensor<32x32xf32> {
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"a", ?}, {"c", ?}]>] out_shardings=[<@mesh, [{"a", "b", ?}, {"d", ?}]>] manual_axes={} (%arg1: tensor<32x32xf32>) {
      sdy.return %arg1 : tensor<32x32xf32>
    } : (tensor<32x32xf32>) -> tensor<32x32xf32>
    return %0 : tensor<32x32xf32>
  }
}

// -----

// Nested manual computations, each with its own manual axis: the free axis
// "c" goes all the way in, the manual axes stay at their levels.
// (nested)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2]>
  func.func @main(%arg0: tensor<16x16xf32>) -> tensor<16x16xf32> {
    %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"a", ?}, {?}]>] out_shardings=[<@mesh, [{"a", ?}, {?}]>] manual_axes={"a"} (%arg1: tensor<8x16xf32>) {
      %1 = sdy.manual_computation(%arg1) in_shardings=[<@mesh, [{?}, {"b", ?}]>] out_shardings=[<@mesh, [{?}, {"b", ?}]>] manual_axes={"b"} (%arg2: tensor<8x8xf32>) {
        %2 = stablehlo.multiply %arg2, %arg2 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"c", ?}, {?}]>]>} : tensor<8x8xf32>
        sdy.return %2 : tensor<8x8xf32>
      } : (tensor<8x16xf32>) -> tensor<8x16xf32>
      sdy.return %1 : tensor<8x16xf32>
    } : (tensor<16x16xf32>) -> tensor<16x16xf32>
    return %0 : tensor<16x16xf32>
  }
}
