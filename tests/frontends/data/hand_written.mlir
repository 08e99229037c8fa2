// Hand-written StableHLO/Shardy inputs in spellings MLIR's printer does not
// produce (line breaks inside ops, missing spaces, generic forms of ops that
// have a pretty form, properties given as attributes...). Each chunk must come
// out of parse + print exactly as MLIR prints it.
sdy.mesh @mesh_ab = <["a"=2, "b"=2]>
func.func @add_then_dot(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh_ab, [{"a"}, {"b"}]>},
                  %arg1: tensor<8x8xf32>, %arg2: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
  %1 = stablehlo.dot_general %0, %arg2, contracting_dims = [1] x [0] :
    (tensor<8x8xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  return %1 : tensor<8x16xf32>
}
// -----
sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @two_reductions(%arg0: tensor<4x64x8xf32>, %arg1: tensor<4x64x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
  %1:2 = stablehlo.reduce(%arg0 init: %0), (%arg1 init: %0) across dimensions = [1]
    {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"b", ?}]>, <@mesh, [{?}, {"b", ?}]>]>} :
    (tensor<4x64x8xf32>, tensor<4x64x8xf32>, tensor<f32>, tensor<f32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
    reducer(%arg2: tensor<f32>, %arg4: tensor<f32>) (%arg3: tensor<f32>, %arg5: tensor<f32>)  {
      %2 = stablehlo.add %arg2, %arg4 : tensor<f32>
      %3 = stablehlo.add %arg3, %arg5 : tensor<f32>
      stablehlo.return %2, %3 : tensor<f32>, tensor<f32>
    }
  return %1#0, %1#1 : tensor<4x8xf32>, tensor<4x8xf32>
}
// -----
sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2]>
func.func @barrier(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {"c", ?}]>}) -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a","b",?}, {?}]>}, tensor<8x8xf32>) {
  %0 = stablehlo.add %arg0, %arg0 : tensor<8x8xf32>
  %1 = sdy.propagation_barrier %0 allowed_direction=BACKWARD : tensor<8x8xf32>
  %2 = stablehlo.add %1, %1 : tensor<8x8xf32>
  %3 = stablehlo.add %1, %1 : tensor<8x8xf32>
  func.return %2, %3: tensor<8x8xf32>, tensor<8x8xf32>
}
// -----
sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2, "d"=2]>
func.func @manual_two_results(%arg0: tensor<32x32xf32>, %arg1: tensor<32x32xf32>) -> (tensor<32x32xf32>, tensor<32x32xf32>) {
  %0 = stablehlo.add %arg1, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"b", "a", ?}, {?}]>]>} : tensor<32x32xf32>
  %1:2 = sdy.manual_computation(%arg0, %0) in_shardings=[<@mesh, [{?}, {?}], replicated={"b"}>, <@mesh, [{"b", ?}, {?}]>] out_shardings=[<@mesh, [{?}, {?}], replicated={"b"}>, <@mesh, [{"b", ?}, {?}]>] manual_axes={"b"} (%arg2: tensor<32x32xf32>, %arg3: tensor<16x32xf32>) {
    %2 = stablehlo.add %arg3, %arg3 : tensor<16x32xf32>
    stablehlo.custom_call @opaque_op(%arg2) {has_side_effect = true} : (tensor<32x32xf32>) -> ()
    %3 = stablehlo.custom_call @opaque_op() : () -> tensor<32x32xf32>
    sdy.return %3, %2 : tensor<32x32xf32>, tensor<16x32xf32>
  } : (tensor<32x32xf32>, tensor<32x32xf32>) -> (tensor<32x32xf32>, tensor<32x32xf32>)
  func.return %1#0, %1#1: tensor<32x32xf32>, tensor<32x32xf32>
}
// -----
func.func @strided_conv(%arg0 : tensor<2x224x224x192xf32>, %arg1 : tensor<3x3x192x64xf32>) -> tensor<2x112x112x64xf32> {
  %0 = stablehlo.convolution(%arg0, %arg1)
    dim_numbers = [b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f],
    window = {stride = [2, 2], pad = [[0, 1], [0, 1]]} {
      batch_group_count = 1 : i64,
      feature_group_count = 1 : i64,
      lhs_dilations = dense<1> : tensor<2xi64>,
      rhs_dilations = dense<1> : tensor<2xi64>
    } : (tensor<2x224x224x192xf32>, tensor<3x3x192x64xf32>) -> tensor<2x112x112x64xf32>
  return %0 : tensor<2x112x112x64xf32>
}
// -----
func.func @custom_calls(%arg0: tensor<8x4xf32>, %arg1: tensor<16xf32>) -> (tensor<8x4xf32>, tensor<16xf32>, tensor<16xi32>) {
  %0 = stablehlo.custom_call @mhlo.erf (%arg0) {backend_config = ""} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %1:2 = stablehlo.custom_call @mhlo.topk(%arg1) {
    mhlo.attributes = {
        k = 1 : i64,
        largest = true},
    mhlo.version = 1 : i64}
    : (tensor<16xf32>) -> (tensor<16xf32>, tensor<16xi32>)
  return %0, %1#0, %1#1 : tensor<8x4xf32>, tensor<16xf32>, tensor<16xi32>
}
// -----
func.func @ops(%arg0: tensor<4x8xf32>, %arg1: tensor<4x8xi32>, %arg2: tensor<i32>, %arg3: tensor<2x13x1xf32>) -> tensor<4x8xf32> {
  %18 = stablehlo.constant dense<1.0> : tensor<f32>
  %0 = stablehlo.bitcast_convert %arg0 : (tensor<4x8xf32>) -> tensor<4x8xi32>
  %1 = stablehlo.bitcast_convert %arg0 : (tensor<4x8xf32>) ->tensor<4x8xf32>
  %2 = stablehlo.broadcast_in_dim %arg3, dims = [0, 2, 3] : (tensor<2x13x1xf32>) -> tensor<2x64x13x1xf32>
  %4 = stablehlo.clamp %arg0, %arg0, %arg0 : tensor<4x8xf32>
  %5 = stablehlo.concatenate %arg0, %arg0, dim = 0 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  %6 = stablehlo.dynamic_slice %arg0, %arg2, %arg2, sizes = [2, 2] : (tensor<4x8xf32>, tensor<i32>, tensor<i32>) -> tensor<2x2xf32>
  %7 = stablehlo.dynamic_update_slice %arg0, %6, %arg2, %arg2 : (tensor<4x8xf32>, tensor<2x2xf32>, tensor<i32>, tensor<i32>) -> tensor<4x8xf32>
  %8 = stablehlo.iota dim = 1 : tensor<4x8xi32>
  %9 = stablehlo.pad %arg0, %18, low = [1, 1], high = [0, 0], interior = [0, 1] : (tensor<4x8xf32>, tensor<f32>) -> tensor<5x16xf32>
  %10 = stablehlo.reshape %arg0 : (tensor<4x8xf32>) -> tensor<32xf32>
  %11 = stablehlo.reverse %arg0, dims = [1] : tensor<4x8xf32>
  %12 = stablehlo.slice %arg0 [0:4:2, 0:8] : (tensor<4x8xf32>) -> tensor<2x8xf32>
  %13 = stablehlo.transpose %arg0, dims = [1, 0] : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %14 = stablehlo.compare GE, %arg1, %arg1 : (tensor<4x8xi32>, tensor<4x8xi32>) -> tensor<4x8xi1>
  %15 = stablehlo.select %14, %arg0, %arg0 : tensor<4x8xi1>, tensor<4x8xf32>
  %16 = stablehlo.dot %arg0, %13, precision = [HIGH, HIGHEST] : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  %17 = stablehlo.get_dimension_size %arg0, dim = 1 : (tensor<4x8xf32>) -> tensor<i32>
  %r18 = stablehlo.reduce_precision %arg0, format = e8m7 : tensor<4x8xf32>
  %19 = stablehlo.fft %arg0, type = RFFT, length = [8] : (tensor<4x8xf32>) -> tensor<4x5xcomplex<f32>>
  %20 = stablehlo.tuple %arg0, %arg1 : tuple<tensor<4x8xf32>, tensor<4x8xi32>>
  %21 = stablehlo.get_tuple_element %20[1] : (tuple<tensor<4x8xf32>, tensor<4x8xi32>>) -> tensor<4x8xi32>
  %22:2 = stablehlo.optimization_barrier %arg0, %arg1 : tensor<4x8xf32>, tensor<4x8xi32>
  %23 = stablehlo.partition_id : tensor<ui32>
  %24 = stablehlo.replica_id : tensor<ui32>
  %25 = stablehlo.create_token : !stablehlo.token
  %26 = stablehlo.after_all %25, %25 : !stablehlo.token
  %27 = stablehlo.convert %arg1 : (tensor<4x8xi32>) -> tensor<4x8xf32>
  %28 = stablehlo.power %arg0, %27 : tensor<4x8xf32>
  %29 = stablehlo.atan2 %arg0, %27 : tensor<4x8xf32>
  %30 = stablehlo.complex %arg0, %arg0 : tensor<4x8xcomplex<f32>>
  %31 = stablehlo.real %30 : (tensor<4x8xcomplex<f32>>) -> tensor<4x8xf32>
  %32 = stablehlo.imag %30 : (tensor<4x8xcomplex<f32>>) -> tensor<4x8xf32>
  %33 = stablehlo.abs %30 : (tensor<4x8xcomplex<f32>>) -> tensor<4x8xf32>
  %34 = stablehlo.not %14 : tensor<4x8xi1>
  %35 = stablehlo.popcnt %arg1 : tensor<4x8xi32>
  %36 = stablehlo.count_leading_zeros %arg1 : tensor<4x8xi32>
  %37 = stablehlo.shift_right_arithmetic %arg1, %arg1 : tensor<4x8xi32>
  %38 = stablehlo.round_nearest_afz %arg0 : tensor<4x8xf32>
  %39 = stablehlo.round_nearest_even %arg0 : tensor<4x8xf32>
  %40 = stablehlo.is_finite %arg0 : (tensor<4x8xf32>) -> tensor<4x8xi1>
  %41 = stablehlo.logistic %arg0 : tensor<4x8xf32>
  %42 = stablehlo.cbrt %arg0 : tensor<4x8xf32>
  %43 = stablehlo.tan %arg0 : tensor<4x8xf32>
  %44 = stablehlo.remainder %arg1, %arg1 : tensor<4x8xi32>
  %45:2 = stablehlo.rng_bit_generator %arg1, algorithm = DEFAULT : (tensor<4x8xi32>) -> (tensor<4x8xi32>, tensor<2x2xui32>)
  %3 = stablehlo.cholesky %16, lower = true : (tensor<4x4xf32>) -> tensor<4x4xf32>
  %sh = stablehlo.constant dense<[2, 3]> : tensor<2xi64>
  %46 = stablehlo.rng %arg2, %arg2, %sh, distribution = UNIFORM : (tensor<i32>, tensor<i32>, tensor<2xi64>) -> tensor<2x3xi32>
  return %arg0 : tensor<4x8xf32>
}
// -----
func.func @regions(%arg0: tensor<4x8xf32>, %arg1: tensor<4x8xi32>, %arg2: tensor<i32>, %arg3: tensor<i1>) -> tensor<4x8xf32> {
  %0:2 = "stablehlo.sort"(%arg0, %arg1) ({
  ^bb0(%a: tensor<f32>, %b: tensor<f32>, %c: tensor<i32>, %d: tensor<i32>):
    %p = stablehlo.compare GT, %a, %b, TOTALORDER : (tensor<f32>, tensor<f32>) -> tensor<i1>
    stablehlo.return %p : tensor<i1>
  }) {dimension = 1 : i64, is_stable = true} : (tensor<4x8xf32>, tensor<4x8xi32>) -> (tensor<4x8xf32>, tensor<4x8xi32>)
  %1 = "stablehlo.case"(%arg2) ({
    stablehlo.return %arg0 : tensor<4x8xf32>
  }, {
    %n = stablehlo.negate %arg0 : tensor<4x8xf32>
    stablehlo.return %n : tensor<4x8xf32>
  }) : (tensor<i32>) -> tensor<4x8xf32>
  %2 = "stablehlo.if"(%arg3) ({
    stablehlo.return %1 : tensor<4x8xf32>
  }, {
    stablehlo.return %arg0 : tensor<4x8xf32>
  }) : (tensor<i1>) -> tensor<4x8xf32>
  %z = stablehlo.constant dense<0.0> : tensor<f32>
  %3 = "stablehlo.reduce_window"(%arg0, %z) ({
  ^bb0(%x: tensor<f32>, %y: tensor<f32>):
    %m = stablehlo.maximum %x, %y : tensor<f32>
    stablehlo.return %m : tensor<f32>
  }) {window_dimensions = array<i64: 2, 2>} : (tensor<4x8xf32>, tensor<f32>) -> tensor<3x7xf32>
  %4:2 = stablehlo.while(%i = %arg2, %v = %arg0) : tensor<i32>, tensor<4x8xf32>
    cond {
      %c = stablehlo.compare LT, %i, %i : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %c : tensor<i1>
    } do {
      %w = stablehlo.add %v, %v : tensor<4x8xf32>
      stablehlo.return %i, %w : tensor<i32>, tensor<4x8xf32>
    }
  %5 = "stablehlo.all_reduce"(%arg0) ({
  ^bb0(%x: tensor<f32>, %y: tensor<f32>):
    %s = stablehlo.add %x, %y : tensor<f32>
    stablehlo.return %s : tensor<f32>
  }) {replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  %6 = stablehlo.reduce(%arg0 init: %z) applies stablehlo.maximum across dimensions = [0] : (tensor<4x8xf32>, tensor<f32>) -> tensor<8xf32>
  return %4#1 : tensor<4x8xf32>
}
// -----
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
// -----
module @"jit_zeros_like" attributes {mhlo.num_partitions = 4 : i32} {
  sdy.mesh @mesh_xy = <["x"=2, "y"=2]>
  func.func public @main(%arg0: tensor<8x2xi64> {sdy.sharding = #sdy.sharding<@mesh_xy, [{"x"},{"y"}]>}) -> (tensor<8x2xi64>) {
    %1 = stablehlo.constant dense<0> : tensor<8x2xi64>
    return %1 : tensor<8x2xi64>
  }
}
// -----
sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @empty_manual_computation() {
  sdy.manual_computation() in_shardings=[] out_shardings=[] manual_axes={} () {
    sdy.return
  } : () -> ()
  func.return
}
// -----
sdy.mesh @mesh = <["a"=4]>
sdy.mesh @maximal = <[], device_ids=[0]>
sdy.mesh @empty = <[]>
func.func @shardings_everywhere(%arg0: tensor<8x4xf32> {sdy.sharding=#sdy.sharding<@mesh, [{"a":(1)2, ?}p0, {}], replicated={"a":(2)2}>}) -> (tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@maximal, []>, jax.result_info = "out"}) {
  %0 = "stablehlo.negate"(%arg0) {sdy.sharding = #sdy.sharding_per_value<[<@empty, [{?}, {?}]>]>} : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %1 = sdy.data_flow_edge %0 sharding=<@mesh, [{"a"}, {}]> : tensor<8x4xf32>
  %2 = sdy.propagation_barrier %1 allowed_direction=FORWARD : tensor<8x4xf32>
  %3 = sdy.constant {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}]>]>} dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %4 = stablehlo.broadcast_in_dim %3, dims = [1] : (tensor<4xf32>) -> tensor<8x4xf32>
  %5 = stablehlo.add %2, %4 : tensor<8x4xf32>
  return %5 : tensor<8x4xf32>
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
// Forms Shardy and XLA print: a barrier's attributes before its operands, mhlo.topk,
// custom_call @Sharding and all_to_all; a broadcast_in_dim stretching a size-1 dimension.
sdy.mesh @mesh = <["a"=2, "b"=2]>
func.func @imported_forms(%arg0: tensor<1x8xf32> {mhlo.sharding = "{devices=[1,2]<=[2]}"}, %arg1: tensor<8xf32>)
    -> (tensor<8x4xf32>, tensor<3xf32>, tensor<3xi32>) {
  %0:2 = stablehlo.optimization_barrier {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"a"}]>, <@mesh, [{"b"}]>]>}
    %arg0, %arg1 : tensor<1x8xf32>, tensor<8xf32>
  "stablehlo.optimization_barrier"() : () -> ()
  %1 = stablehlo.broadcast_in_dim %0#0, dims = [0, 1] : (tensor<1x8xf32>) -> tensor<4x8xf32>
  %2:2 = mhlo.topk(%0#1, k = 3, largest = true) : tensor<8xf32> -> (tensor<3xf32>, tensor<3xi32>)
  %3 = stablehlo.custom_call @Sharding(%1) {backend_config = "", mhlo.sharding = "{devices=[2,1]<=[2]}"} :
    (tensor<4x8xf32>) -> tensor<4x8xf32>
  %4 = "stablehlo.all_to_all"(%3) {concat_dimension = 0 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>,
    split_count = 2 : i64, split_dimension = 1 : i64} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  return %4, %2#0, %2#1 : tensor<8x4xf32>, tensor<3xf32>, tensor<3xi32>
}
