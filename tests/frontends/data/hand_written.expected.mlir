module {
  sdy.mesh @mesh_ab = <["a"=2, "b"=2]>
  func.func @add_then_dot(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh_ab, [{"a"}, {"b"}]>}, %arg1: tensor<8x8xf32>, %arg2: tensor<8x16xf32>) -> tensor<8x16xf32> {
    %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
    %1 = stablehlo.dot_general %0, %arg2, contracting_dims = [1] x [0] : (tensor<8x8xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
    return %1 : tensor<8x16xf32>
  }
}
// -----
module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  func.func @two_reductions(%arg0: tensor<4x64x8xf32>, %arg1: tensor<4x64x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %0:2 = stablehlo.reduce(%arg0 init: %cst), (%arg1 init: %cst) across dimensions = [1] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"b", ?}]>, <@mesh, [{?}, {"b", ?}]>]>} : (tensor<4x64x8xf32>, tensor<4x64x8xf32>, tensor<f32>, tensor<f32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
     reducer(%arg2: tensor<f32>, %arg4: tensor<f32>) (%arg3: tensor<f32>, %arg5: tensor<f32>)  {
      %1 = stablehlo.add %arg2, %arg4 : tensor<f32>
      %2 = stablehlo.add %arg3, %arg5 : tensor<f32>
      stablehlo.return %1, %2 : tensor<f32>, tensor<f32>
    }
    return %0#0, %0#1 : tensor<4x8xf32>, tensor<4x8xf32>
  }
}
// -----
module {
  sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2]>
  func.func @barrier(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {"c", ?}]>}) -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", "b", ?}, {?}]>}, tensor<8x8xf32>) {
    %0 = stablehlo.add %arg0, %arg0 : tensor<8x8xf32>
    %1 = sdy.propagation_barrier %0 allowed_direction=BACKWARD : tensor<8x8xf32>
    %2 = stablehlo.add %1, %1 : tensor<8x8xf32>
    %3 = stablehlo.add %1, %1 : tensor<8x8xf32>
    return %2, %3 : tensor<8x8xf32>, tensor<8x8xf32>
  }
}
// -----
module {
  sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2, "d"=2]>
  func.func @manual_two_results(%arg0: tensor<32x32xf32>, %arg1: tensor<32x32xf32>) -> (tensor<32x32xf32>, tensor<32x32xf32>) {
    %0 = stablehlo.add %arg1, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"b", "a", ?}, {?}]>]>} : tensor<32x32xf32>
    %1:2 = sdy.manual_computation(%arg0, %0) in_shardings=[<@mesh, [{?}, {?}], replicated={"b"}>, <@mesh, [{"b", ?}, {?}]>] out_shardings=[<@mesh, [{?}, {?}], replicated={"b"}>, <@mesh, [{"b", ?}, {?}]>] manual_axes={"b"} (%arg2: tensor<32x32xf32>, %arg3: tensor<16x32xf32>) {
      %2 = stablehlo.add %arg3, %arg3 : tensor<16x32xf32>
      stablehlo.custom_call @opaque_op(%arg2) {has_side_effect = true} : (tensor<32x32xf32>) -> ()
      %3 = stablehlo.custom_call @opaque_op() : () -> tensor<32x32xf32>
      sdy.return %3, %2 : tensor<32x32xf32>, tensor<16x32xf32>
    } : (tensor<32x32xf32>, tensor<32x32xf32>) -> (tensor<32x32xf32>, tensor<32x32xf32>)
    return %1#0, %1#1 : tensor<32x32xf32>, tensor<32x32xf32>
  }
}
// -----
module {
  func.func @strided_conv(%arg0: tensor<2x224x224x192xf32>, %arg1: tensor<3x3x192x64xf32>) -> tensor<2x112x112x64xf32> {
    %0 = stablehlo.convolution(%arg0, %arg1) dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f], window = {stride = [2, 2], pad = [[0, 1], [0, 1]]} {batch_group_count = 1 : i64, feature_group_count = 1 : i64, lhs_dilations = dense<1> : tensor<2xi64>, rhs_dilations = dense<1> : tensor<2xi64>} : (tensor<2x224x224x192xf32>, tensor<3x3x192x64xf32>) -> tensor<2x112x112x64xf32>
    return %0 : tensor<2x112x112x64xf32>
  }
}
// -----
module {
  func.func @custom_calls(%arg0: tensor<8x4xf32>, %arg1: tensor<16xf32>) -> (tensor<8x4xf32>, tensor<16xf32>, tensor<16xi32>) {
    %0 = stablehlo.custom_call @mhlo.erf(%arg0) {backend_config = ""} : (tensor<8x4xf32>) -> tensor<8x4xf32>
    %1:2 = stablehlo.custom_call @mhlo.topk(%arg1) {mhlo.attributes = {k = 1 : i64, largest = true}, mhlo.version = 1 : i64} : (tensor<16xf32>) -> (tensor<16xf32>, tensor<16xi32>)
    return %0, %1#0, %1#1 : tensor<8x4xf32>, tensor<16xf32>, tensor<16xi32>
  }
}
// -----
module {
  func.func @ops(%arg0: tensor<4x8xf32>, %arg1: tensor<4x8xi32>, %arg2: tensor<i32>, %arg3: tensor<2x13x1xf32>) -> tensor<4x8xf32> {
    %cst = stablehlo.constant dense<1.000000e+00> : tensor<f32>
    %0 = stablehlo.bitcast_convert %arg0 : (tensor<4x8xf32>) -> tensor<4x8xi32>
    %1 = stablehlo.bitcast_convert %arg0 : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %2 = stablehlo.broadcast_in_dim %arg3, dims = [0, 2, 3] : (tensor<2x13x1xf32>) -> tensor<2x64x13x1xf32>
    %3 = stablehlo.clamp %arg0, %arg0, %arg0 : tensor<4x8xf32>
    %4 = stablehlo.concatenate %arg0, %arg0, dim = 0 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
    %5 = stablehlo.dynamic_slice %arg0, %arg2, %arg2, sizes = [2, 2] : (tensor<4x8xf32>, tensor<i32>, tensor<i32>) -> tensor<2x2xf32>
    %6 = stablehlo.dynamic_update_slice %arg0, %5, %arg2, %arg2 : (tensor<4x8xf32>, tensor<2x2xf32>, tensor<i32>, tensor<i32>) -> tensor<4x8xf32>
    %7 = stablehlo.iota dim = 1 : tensor<4x8xi32>
    %8 = stablehlo.pad %arg0, %cst, low = [1, 1], high = [0, 0], interior = [0, 1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<5x16xf32>
    %9 = stablehlo.reshape %arg0 : (tensor<4x8xf32>) -> tensor<32xf32>
    %10 = stablehlo.reverse %arg0, dims = [1] : tensor<4x8xf32>
    %11 = stablehlo.slice %arg0 [0:4:2, 0:8] : (tensor<4x8xf32>) -> tensor<2x8xf32>
    %12 = stablehlo.transpose %arg0, dims = [1, 0] : (tensor<4x8xf32>) -> tensor<8x4xf32>
    %13 = stablehlo.compare GE, %arg1, %arg1 : (tensor<4x8xi32>, tensor<4x8xi32>) -> tensor<4x8xi1>
    %14 = stablehlo.select %13, %arg0, %arg0 : tensor<4x8xi1>, tensor<4x8xf32>
    %15 = stablehlo.dot %arg0, %12, precision = [HIGH, HIGHEST] : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
    %16 = stablehlo.get_dimension_size %arg0, dim = 1 : (tensor<4x8xf32>) -> tensor<i32>
    %17 = stablehlo.reduce_precision %arg0, format = e8m7 : tensor<4x8xf32>
    %18 = stablehlo.fft %arg0, type = RFFT, length = [8] : (tensor<4x8xf32>) -> tensor<4x5xcomplex<f32>>
    %19 = stablehlo.tuple %arg0, %arg1 : tuple<tensor<4x8xf32>, tensor<4x8xi32>>
    %20 = stablehlo.get_tuple_element %19[1] : (tuple<tensor<4x8xf32>, tensor<4x8xi32>>) -> tensor<4x8xi32>
    %21:2 = stablehlo.optimization_barrier %arg0, %arg1 : tensor<4x8xf32>, tensor<4x8xi32>
    %22 = stablehlo.partition_id : tensor<ui32>
    %23 = stablehlo.replica_id : tensor<ui32>
    %24 = stablehlo.create_token : !stablehlo.token
    %25 = stablehlo.after_all %24, %24 : !stablehlo.token
    %26 = stablehlo.convert %arg1 : (tensor<4x8xi32>) -> tensor<4x8xf32>
    %27 = stablehlo.power %arg0, %26 : tensor<4x8xf32>
    %28 = stablehlo.atan2 %arg0, %26 : tensor<4x8xf32>
    %29 = stablehlo.complex %arg0, %arg0 : tensor<4x8xcomplex<f32>>
    %30 = stablehlo.real %29 : (tensor<4x8xcomplex<f32>>) -> tensor<4x8xf32>
    %31 = stablehlo.imag %29 : (tensor<4x8xcomplex<f32>>) -> tensor<4x8xf32>
    %32 = stablehlo.abs %29 : (tensor<4x8xcomplex<f32>>) -> tensor<4x8xf32>
    %33 = stablehlo.not %13 : tensor<4x8xi1>
    %34 = stablehlo.popcnt %arg1 : tensor<4x8xi32>
    %35 = stablehlo.count_leading_zeros %arg1 : tensor<4x8xi32>
    %36 = stablehlo.shift_right_arithmetic %arg1, %arg1 : tensor<4x8xi32>
    %37 = stablehlo.round_nearest_afz %arg0 : tensor<4x8xf32>
    %38 = stablehlo.round_nearest_even %arg0 : tensor<4x8xf32>
    %39 = stablehlo.is_finite %arg0 : (tensor<4x8xf32>) -> tensor<4x8xi1>
    %40 = stablehlo.logistic %arg0 : tensor<4x8xf32>
    %41 = stablehlo.cbrt %arg0 : tensor<4x8xf32>
    %42 = stablehlo.tan %arg0 : tensor<4x8xf32>
    %43 = stablehlo.remainder %arg1, %arg1 : tensor<4x8xi32>
    %output_state, %output = stablehlo.rng_bit_generator %arg1, algorithm = DEFAULT : (tensor<4x8xi32>) -> (tensor<4x8xi32>, tensor<2x2xui32>)
    %44 = stablehlo.cholesky %15, lower = true : tensor<4x4xf32>
    %c = stablehlo.constant dense<[2, 3]> : tensor<2xi64>
    %45 = stablehlo.rng %arg2, %arg2, %c, distribution = UNIFORM : (tensor<i32>, tensor<i32>, tensor<2xi64>) -> tensor<2x3xi32>
    return %arg0 : tensor<4x8xf32>
  }
}
// -----
module {
  func.func @regions(%arg0: tensor<4x8xf32>, %arg1: tensor<4x8xi32>, %arg2: tensor<i32>, %arg3: tensor<i1>) -> tensor<4x8xf32> {
    %0:2 = "stablehlo.sort"(%arg0, %arg1) <{dimension = 1 : i64, is_stable = true}> ({
    ^bb0(%arg4: tensor<f32>, %arg5: tensor<f32>, %arg6: tensor<i32>, %arg7: tensor<i32>):
      %7 = stablehlo.compare GT, %arg4, %arg5, TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %7 : tensor<i1>
    }) : (tensor<4x8xf32>, tensor<4x8xi32>) -> (tensor<4x8xf32>, tensor<4x8xi32>)
    %1 = "stablehlo.case"(%arg2) ({
      stablehlo.return %arg0 : tensor<4x8xf32>
    }, {
      %7 = stablehlo.negate %arg0 : tensor<4x8xf32>
      stablehlo.return %7 : tensor<4x8xf32>
    }) : (tensor<i32>) -> tensor<4x8xf32>
    %2 = "stablehlo.if"(%arg3) ({
      stablehlo.return %1 : tensor<4x8xf32>
    }, {
      stablehlo.return %arg0 : tensor<4x8xf32>
    }) : (tensor<i1>) -> tensor<4x8xf32>
    %cst = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %3 = "stablehlo.reduce_window"(%arg0, %cst) <{window_dimensions = array<i64: 2, 2>}> ({
    ^bb0(%arg4: tensor<f32>, %arg5: tensor<f32>):
      %7 = stablehlo.maximum %arg4, %arg5 : tensor<f32>
      stablehlo.return %7 : tensor<f32>
    }) : (tensor<4x8xf32>, tensor<f32>) -> tensor<3x7xf32>
    %4:2 = stablehlo.while(%iterArg = %arg2, %iterArg_0 = %arg0) : tensor<i32>, tensor<4x8xf32>
    cond {
      %7 = stablehlo.compare LT, %iterArg, %iterArg : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %7 : tensor<i1>
    } do {
      %7 = stablehlo.add %iterArg_0, %iterArg_0 : tensor<4x8xf32>
      stablehlo.return %iterArg, %7 : tensor<i32>, tensor<4x8xf32>
    }
    %5 = "stablehlo.all_reduce"(%arg0) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}> ({
    ^bb0(%arg4: tensor<f32>, %arg5: tensor<f32>):
      %7 = stablehlo.add %arg4, %arg5 : tensor<f32>
      stablehlo.return %7 : tensor<f32>
    }) : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %6 = stablehlo.reduce(%arg0 init: %cst) applies stablehlo.maximum across dimensions = [0] : (tensor<4x8xf32>, tensor<f32>) -> tensor<8xf32>
    return %4#1 : tensor<4x8xf32>
  }
}
// -----
module {
  sdy.mesh @mesh = <["x"=2, "y"=4]>
  func.func @sdy_ops(%arg0: tensor<8x8xf32>) -> tensor<8x8xf32> {
    %0 = sdy.sharding_constraint %arg0 <@mesh, [{"x"}, {?}]> : tensor<8x8xf32>
    sdy.sharding_group %0 group_id=0 : tensor<8x8xf32>
    %1 = sdy.reshard %0 <@mesh, [{}, {"y"}]> : tensor<8x8xf32>
    %2 = stablehlo.add %1, %1 {sdy.sharding_rule = #sdy.op_sharding_rule<([i, j], [i, j])->([i, j]) {i=8, j=8}>} : tensor<8x8xf32>
    %3 = sdy.named_computation<"foo">(%2) in_shardings=[<@mesh, [{"x"}, {}]>] out_shardings=[<@mesh, [{"x"}, {}]>] (%arg1: tensor<8x8xf32>) {
      sdy.return %arg1 : tensor<8x8xf32>
    } : (tensor<8x8xf32>) -> tensor<8x8xf32>
    %4 = stablehlo.negate %3 {sdy.sharding = #sdy.sharding_per_value<[<mesh<["q"=2]>, [{"q"}, {}]>]>} : tensor<8x8xf32>
    return %4 : tensor<8x8xf32>
  }
}
// -----
module @jit_zeros_like attributes {mhlo.num_partitions = 4 : i32} {
  sdy.mesh @mesh_xy = <["x"=2, "y"=2]>
  func.func public @main(%arg0: tensor<8x2xi64> {sdy.sharding = #sdy.sharding<@mesh_xy, [{"x"}, {"y"}]>}) -> tensor<8x2xi64> {
    %c = stablehlo.constant dense<0> : tensor<8x2xi64>
    return %c : tensor<8x2xi64>
  }
}
// -----
module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  func.func @empty_manual_computation() {
    sdy.manual_computation() in_shardings=[] out_shardings=[] manual_axes={} () {
      sdy.return
    } : () -> ()
    return
  }
}
// -----
module {
  sdy.mesh @mesh = <["a"=4]>
  sdy.mesh @maximal = <[], device_ids=[0]>
  sdy.mesh @empty = <[]>
  func.func @shardings_everywhere(%arg0: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a":(1)2, ?}p0, {}], replicated={"a":(2)2}>}) -> (tensor<8x4xf32> {jax.result_info = "out", sdy.sharding = #sdy.sharding<@maximal, []>}) {
    %0 = stablehlo.negate %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@empty, [{?}, {?}]>]>} : tensor<8x4xf32>
    %1 = sdy.data_flow_edge %0 sharding=<@mesh, [{"a"}, {}]> : tensor<8x4xf32>
    %2 = sdy.propagation_barrier %1 allowed_direction=FORWARD : tensor<8x4xf32>
    %3 = sdy.constant {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}]>]>} dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00]> : tensor<4xf32>
    %4 = stablehlo.broadcast_in_dim %3, dims = [1] : (tensor<4xf32>) -> tensor<8x4xf32>
    %5 = stablehlo.add %2, %4 : tensor<8x4xf32>
    return %5 : tensor<8x4xf32>
  }
}
// -----
module attributes {mhlo.frontend_attributes = {xla.sdy.meshes = "{}"}, mhlo.num_partitions = 2 : i32} {
  func.func public @main(%arg0: tensor<2x3xi8> {jax.buffer_donor = true}, %arg1: tensor<ui16>) -> (tensor<2x3xi8>, tensor<ui16>) {
    %c = stablehlo.constant dense<[[-1, 127, 0], [1, 2, 3]]> : tensor<2x3xi8>
    %0 = stablehlo.xor %arg0, %c : tensor<2x3xi8>
    %c_0 = stablehlo.constant dense<65535> : tensor<ui16>
    %1 = stablehlo.and %arg1, %c_0 : tensor<ui16>
    return %0, %1 : tensor<2x3xi8>, tensor<ui16>
  }
}
// -----
module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  func.func @imported_forms(%arg0: tensor<1x8xf32> {mhlo.sharding = "{devices=[1,2]<=[2]}"}, %arg1: tensor<8xf32>) -> (tensor<8x4xf32>, tensor<3xf32>, tensor<3xi32>) {
    %0:2 = stablehlo.optimization_barrier {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"a"}]>, <@mesh, [{"b"}]>]>} %arg0, %arg1 : tensor<1x8xf32>, tensor<8xf32>
    stablehlo.optimization_barrier()
    %1 = stablehlo.broadcast_in_dim %0#0, dims = [0, 1] : (tensor<1x8xf32>) -> tensor<4x8xf32>
    %values, %indices = mhlo.topk(%0#1, k = 3) : tensor<8xf32> -> (tensor<3xf32>, tensor<3xi32>)
    %2 = stablehlo.custom_call @Sharding(%1) {backend_config = "", mhlo.sharding = "{devices=[2,1]<=[2]}"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %3 = "stablehlo.all_to_all"(%2) <{concat_dimension = 0 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, split_count = 2 : i64, split_dimension = 1 : i64}> : (tensor<4x8xf32>) -> tensor<8x4xf32>
    return %3, %values, %indices : tensor<8x4xf32>, tensor<3xf32>, tensor<3xi32>
  }
}
