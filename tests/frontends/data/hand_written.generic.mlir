// The chunks of hand_written.mlir in MLIR's generic op form (as mlir-opt --mlir-print-op-generic
// writes them): they read back to the same module and print in the pretty form.
"builtin.module"() ({
  "sdy.mesh"() <{mesh = #sdy.mesh<["a"=2, "b"=2]>, sym_name = "mesh_ab"}> : () -> ()
  "func.func"() <{arg_attrs = [{sdy.sharding = #sdy.sharding<@mesh_ab, [{"a"}, {"b"}]>}, {}, {}], function_type = (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>, sym_name = "add_then_dot"}> ({
  ^bb0(%arg0: tensor<8x8xf32>, %arg1: tensor<8x8xf32>, %arg2: tensor<8x16xf32>):
    %0 = "stablehlo.add"(%arg0, %arg1) : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    %1 = "stablehlo.dot_general"(%0, %arg2) <{dot_dimension_numbers = #stablehlo.dot<lhs_contracting_dimensions = [1], rhs_contracting_dimensions = [0]>}> : (tensor<8x8xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
    "func.return"(%1) : (tensor<8x16xf32>) -> ()
  }) : () -> ()
}) : () -> ()

// -----
"builtin.module"() ({
  "sdy.mesh"() <{mesh = #sdy.mesh<["a"=2, "b"=2]>, sym_name = "mesh"}> : () -> ()
  "func.func"() <{function_type = (tensor<4x64x8xf32>, tensor<4x64x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>), sym_name = "two_reductions"}> ({
  ^bb0(%arg0: tensor<4x64x8xf32>, %arg1: tensor<4x64x8xf32>):
    %0 = "stablehlo.constant"() <{value = dense<0.000000e+00> : tensor<f32>}> : () -> tensor<f32>
    %1:2 = "stablehlo.reduce"(%arg0, %arg1, %0, %0) <{dimensions = array<i64: 1>}> ({
    ^bb0(%arg2: tensor<f32>, %arg3: tensor<f32>, %arg4: tensor<f32>, %arg5: tensor<f32>):
      %2 = "stablehlo.add"(%arg2, %arg4) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      %3 = "stablehlo.add"(%arg3, %arg5) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%2, %3) : (tensor<f32>, tensor<f32>) -> ()
    }) {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"b", ?}]>, <@mesh, [{?}, {"b", ?}]>]>} : (tensor<4x64x8xf32>, tensor<4x64x8xf32>, tensor<f32>, tensor<f32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
    "func.return"(%1#0, %1#1) : (tensor<4x8xf32>, tensor<4x8xf32>) -> ()
  }) : () -> ()
}) : () -> ()

// -----
"builtin.module"() ({
  "sdy.mesh"() <{mesh = #sdy.mesh<["a"=2, "b"=2, "c"=2]>, sym_name = "mesh"}> : () -> ()
  "func.func"() <{arg_attrs = [{sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {"c", ?}]>}], function_type = (tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>), res_attrs = [{sdy.sharding = #sdy.sharding<@mesh, [{"a", "b", ?}, {?}]>}, {}], sym_name = "barrier"}> ({
  ^bb0(%arg0: tensor<8x8xf32>):
    %0 = "stablehlo.add"(%arg0, %arg0) : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    %1 = "sdy.propagation_barrier"(%0) <{allowed_direction = 2 : i32}> : (tensor<8x8xf32>) -> tensor<8x8xf32>
    %2 = "stablehlo.add"(%1, %1) : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    %3 = "stablehlo.add"(%1, %1) : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    "func.return"(%2, %3) : (tensor<8x8xf32>, tensor<8x8xf32>) -> ()
  }) : () -> ()
}) : () -> ()

// -----
"builtin.module"() ({
  "sdy.mesh"() <{mesh = #sdy.mesh<["a"=2, "b"=2, "c"=2, "d"=2]>, sym_name = "mesh"}> : () -> ()
  "func.func"() <{function_type = (tensor<32x32xf32>, tensor<32x32xf32>) -> (tensor<32x32xf32>, tensor<32x32xf32>), sym_name = "manual_two_results"}> ({
  ^bb0(%arg0: tensor<32x32xf32>, %arg1: tensor<32x32xf32>):
    %0 = "stablehlo.add"(%arg1, %arg1) {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"b", "a", ?}, {?}]>]>} : (tensor<32x32xf32>, tensor<32x32xf32>) -> tensor<32x32xf32>
    %1:2 = "sdy.manual_computation"(%arg0, %0) <{in_shardings = #sdy.sharding_per_value<[<@mesh, [{?}, {?}], replicated={"b"}>, <@mesh, [{"b", ?}, {?}]>]>, manual_axes = #sdy<manual_axes{"b"}>, out_shardings = #sdy.sharding_per_value<[<@mesh, [{?}, {?}], replicated={"b"}>, <@mesh, [{"b", ?}, {?}]>]>}> ({
    ^bb0(%arg2: tensor<32x32xf32>, %arg3: tensor<16x32xf32>):
      %2 = "stablehlo.add"(%arg3, %arg3) : (tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
      "stablehlo.custom_call"(%arg2) <{call_target_name = "opaque_op", has_side_effect = true}> : (tensor<32x32xf32>) -> ()
      %3 = "stablehlo.custom_call"() <{call_target_name = "opaque_op"}> : () -> tensor<32x32xf32>
      "sdy.return"(%3, %2) : (tensor<32x32xf32>, tensor<16x32xf32>) -> ()
    }) : (tensor<32x32xf32>, tensor<32x32xf32>) -> (tensor<32x32xf32>, tensor<32x32xf32>)
    "func.return"(%1#0, %1#1) : (tensor<32x32xf32>, tensor<32x32xf32>) -> ()
  }) : () -> ()
}) : () -> ()

// -----
"builtin.module"() ({
  "func.func"() <{function_type = (tensor<2x224x224x192xf32>, tensor<3x3x192x64xf32>) -> tensor<2x112x112x64xf32>, sym_name = "strided_conv"}> ({
  ^bb0(%arg0: tensor<2x224x224x192xf32>, %arg1: tensor<3x3x192x64xf32>):
    %0 = "stablehlo.convolution"(%arg0, %arg1) <{batch_group_count = 1 : i64, dimension_numbers = #stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]>, feature_group_count = 1 : i64, padding = dense<[[0, 1], [0, 1]]> : tensor<2x2xi64>, window_strides = array<i64: 2, 2>}> {lhs_dilations = dense<1> : tensor<2xi64>, rhs_dilations = dense<1> : tensor<2xi64>} : (tensor<2x224x224x192xf32>, tensor<3x3x192x64xf32>) -> tensor<2x112x112x64xf32>
    "func.return"(%0) : (tensor<2x112x112x64xf32>) -> ()
  }) : () -> ()
}) : () -> ()

// -----
"builtin.module"() ({
  "func.func"() <{function_type = (tensor<8x4xf32>, tensor<16xf32>) -> (tensor<8x4xf32>, tensor<16xf32>, tensor<16xi32>), sym_name = "custom_calls"}> ({
  ^bb0(%arg0: tensor<8x4xf32>, %arg1: tensor<16xf32>):
    %0 = "stablehlo.custom_call"(%arg0) <{backend_config = "", call_target_name = "mhlo.erf"}> : (tensor<8x4xf32>) -> tensor<8x4xf32>
    %1:2 = "stablehlo.custom_call"(%arg1) <{call_target_name = "mhlo.topk"}> {mhlo.attributes = {k = 1 : i64, largest = true}, mhlo.version = 1 : i64} : (tensor<16xf32>) -> (tensor<16xf32>, tensor<16xi32>)
    "func.return"(%0, %1#0, %1#1) : (tensor<8x4xf32>, tensor<16xf32>, tensor<16xi32>) -> ()
  }) : () -> ()
}) : () -> ()

// -----
"builtin.module"() ({
  "func.func"() <{function_type = (tensor<4x8xf32>, tensor<4x8xi32>, tensor<i32>, tensor<2x13x1xf32>) -> tensor<4x8xf32>, sym_name = "ops"}> ({
  ^bb0(%arg0: tensor<4x8xf32>, %arg1: tensor<4x8xi32>, %arg2: tensor<i32>, %arg3: tensor<2x13x1xf32>):
    %0 = "stablehlo.constant"() <{value = dense<1.000000e+00> : tensor<f32>}> : () -> tensor<f32>
    %1 = "stablehlo.bitcast_convert"(%arg0) : (tensor<4x8xf32>) -> tensor<4x8xi32>
    %2 = "stablehlo.bitcast_convert"(%arg0) : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %3 = "stablehlo.broadcast_in_dim"(%arg3) <{broadcast_dimensions = array<i64: 0, 2, 3>}> : (tensor<2x13x1xf32>) -> tensor<2x64x13x1xf32>
    %4 = "stablehlo.clamp"(%arg0, %arg0, %arg0) : (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %5 = "stablehlo.concatenate"(%arg0, %arg0) <{dimension = 0 : i64}> : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
    %6 = "stablehlo.dynamic_slice"(%arg0, %arg2, %arg2) <{slice_sizes = array<i64: 2, 2>}> : (tensor<4x8xf32>, tensor<i32>, tensor<i32>) -> tensor<2x2xf32>
    %7 = "stablehlo.dynamic_update_slice"(%arg0, %6, %arg2, %arg2) : (tensor<4x8xf32>, tensor<2x2xf32>, tensor<i32>, tensor<i32>) -> tensor<4x8xf32>
    %8 = "stablehlo.iota"() <{iota_dimension = 1 : i64}> : () -> tensor<4x8xi32>
    %9 = "stablehlo.pad"(%arg0, %0) <{edge_padding_high = array<i64: 0, 0>, edge_padding_low = array<i64: 1, 1>, interior_padding = array<i64: 0, 1>}> : (tensor<4x8xf32>, tensor<f32>) -> tensor<5x16xf32>
    %10 = "stablehlo.reshape"(%arg0) : (tensor<4x8xf32>) -> tensor<32xf32>
    %11 = "stablehlo.reverse"(%arg0) <{dimensions = array<i64: 1>}> : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %12 = "stablehlo.slice"(%arg0) <{limit_indices = array<i64: 4, 8>, start_indices = array<i64: 0, 0>, strides = array<i64: 2, 1>}> : (tensor<4x8xf32>) -> tensor<2x8xf32>
    %13 = "stablehlo.transpose"(%arg0) <{permutation = array<i64: 1, 0>}> : (tensor<4x8xf32>) -> tensor<8x4xf32>
    %14 = "stablehlo.compare"(%arg1, %arg1) <{comparison_direction = #stablehlo<comparison_direction GE>}> : (tensor<4x8xi32>, tensor<4x8xi32>) -> tensor<4x8xi1>
    %15 = "stablehlo.select"(%14, %arg0, %arg0) : (tensor<4x8xi1>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %16 = "stablehlo.dot"(%arg0, %13) <{precision_config = [#stablehlo<precision HIGH>, #stablehlo<precision HIGHEST>]}> : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
    %17 = "stablehlo.get_dimension_size"(%arg0) <{dimension = 1 : i64}> : (tensor<4x8xf32>) -> tensor<i32>
    %18 = "stablehlo.reduce_precision"(%arg0) <{exponent_bits = 8 : i32, mantissa_bits = 7 : i32}> : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %19 = "stablehlo.fft"(%arg0) <{fft_length = array<i64: 8>, fft_type = #stablehlo<fft_type RFFT>}> : (tensor<4x8xf32>) -> tensor<4x5xcomplex<f32>>
    %20 = "stablehlo.tuple"(%arg0, %arg1) : (tensor<4x8xf32>, tensor<4x8xi32>) -> tuple<tensor<4x8xf32>, tensor<4x8xi32>>
    %21 = "stablehlo.get_tuple_element"(%20) <{index = 1 : i32}> : (tuple<tensor<4x8xf32>, tensor<4x8xi32>>) -> tensor<4x8xi32>
    %22:2 = "stablehlo.optimization_barrier"(%arg0, %arg1) : (tensor<4x8xf32>, tensor<4x8xi32>) -> (tensor<4x8xf32>, tensor<4x8xi32>)
    %23 = "stablehlo.partition_id"() : () -> tensor<ui32>
    %24 = "stablehlo.replica_id"() : () -> tensor<ui32>
    %25 = "stablehlo.create_token"() : () -> !stablehlo.token
    %26 = "stablehlo.after_all"(%25, %25) : (!stablehlo.token, !stablehlo.token) -> !stablehlo.token
    %27 = "stablehlo.convert"(%arg1) : (tensor<4x8xi32>) -> tensor<4x8xf32>
    %28 = "stablehlo.power"(%arg0, %27) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %29 = "stablehlo.atan2"(%arg0, %27) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
    %30 = "stablehlo.complex"(%arg0, %arg0) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xcomplex<f32>>
    %31 = "stablehlo.real"(%30) : (tensor<4x8xcomplex<f32>>) -> tensor<4x8xf32>
    %32 = "stablehlo.imag"(%30) : (tensor<4x8xcomplex<f32>>) -> tensor<4x8xf32>
    %33 = "stablehlo.abs"(%30) : (tensor<4x8xcomplex<f32>>) -> tensor<4x8xf32>
    %34 = "stablehlo.not"(%14) : (tensor<4x8xi1>) -> tensor<4x8xi1>
    %35 = "stablehlo.popcnt"(%arg1) : (tensor<4x8xi32>) -> tensor<4x8xi32>
    %36 = "stablehlo.count_leading_zeros"(%arg1) : (tensor<4x8xi32>) -> tensor<4x8xi32>
    %37 = "stablehlo.shift_right_arithmetic"(%arg1, %arg1) : (tensor<4x8xi32>, tensor<4x8xi32>) -> tensor<4x8xi32>
    %38 = "stablehlo.round_nearest_afz"(%arg0) : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %39 = "stablehlo.round_nearest_even"(%arg0) : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %40 = "stablehlo.is_finite"(%arg0) : (tensor<4x8xf32>) -> tensor<4x8xi1>
    %41 = "stablehlo.logistic"(%arg0) : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %42 = "stablehlo.cbrt"(%arg0) : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %43 = "stablehlo.tan"(%arg0) : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %44 = "stablehlo.remainder"(%arg1, %arg1) : (tensor<4x8xi32>, tensor<4x8xi32>) -> tensor<4x8xi32>
    %45:2 = "stablehlo.rng_bit_generator"(%arg1) <{rng_algorithm = #stablehlo<rng_algorithm DEFAULT>}> : (tensor<4x8xi32>) -> (tensor<4x8xi32>, tensor<2x2xui32>)
    %46 = "stablehlo.cholesky"(%16) <{lower = true}> : (tensor<4x4xf32>) -> tensor<4x4xf32>
    %47 = "stablehlo.constant"() <{value = dense<[2, 3]> : tensor<2xi64>}> : () -> tensor<2xi64>
    %48 = "stablehlo.rng"(%arg2, %arg2, %47) <{rng_distribution = #stablehlo<rng_distribution UNIFORM>}> : (tensor<i32>, tensor<i32>, tensor<2xi64>) -> tensor<2x3xi32>
    "func.return"(%arg0) : (tensor<4x8xf32>) -> ()
  }) : () -> ()
}) : () -> ()

// -----
"builtin.module"() ({
  "func.func"() <{function_type = (tensor<4x8xf32>, tensor<4x8xi32>, tensor<i32>, tensor<i1>) -> tensor<4x8xf32>, sym_name = "regions"}> ({
  ^bb0(%arg0: tensor<4x8xf32>, %arg1: tensor<4x8xi32>, %arg2: tensor<i32>, %arg3: tensor<i1>):
    %0:2 = "stablehlo.sort"(%arg0, %arg1) <{dimension = 1 : i64, is_stable = true}> ({
    ^bb0(%arg14: tensor<f32>, %arg15: tensor<f32>, %arg16: tensor<i32>, %arg17: tensor<i32>):
      %14 = "stablehlo.compare"(%arg14, %arg15) <{compare_type = #stablehlo<comparison_type TOTALORDER>, comparison_direction = #stablehlo<comparison_direction GT>}> : (tensor<f32>, tensor<f32>) -> tensor<i1>
      "stablehlo.return"(%14) : (tensor<i1>) -> ()
    }) : (tensor<4x8xf32>, tensor<4x8xi32>) -> (tensor<4x8xf32>, tensor<4x8xi32>)
    %1 = "stablehlo.case"(%arg2) ({
      "stablehlo.return"(%arg0) : (tensor<4x8xf32>) -> ()
    }, {
      %13 = "stablehlo.negate"(%arg0) : (tensor<4x8xf32>) -> tensor<4x8xf32>
      "stablehlo.return"(%13) : (tensor<4x8xf32>) -> ()
    }) : (tensor<i32>) -> tensor<4x8xf32>
    %2 = "stablehlo.if"(%arg3) ({
      "stablehlo.return"(%1) : (tensor<4x8xf32>) -> ()
    }, {
      "stablehlo.return"(%arg0) : (tensor<4x8xf32>) -> ()
    }) : (tensor<i1>) -> tensor<4x8xf32>
    %3 = "stablehlo.constant"() <{value = dense<0.000000e+00> : tensor<f32>}> : () -> tensor<f32>
    %4 = "stablehlo.reduce_window"(%arg0, %3) <{window_dimensions = array<i64: 2, 2>}> ({
    ^bb0(%arg12: tensor<f32>, %arg13: tensor<f32>):
      %12 = "stablehlo.maximum"(%arg12, %arg13) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%12) : (tensor<f32>) -> ()
    }) : (tensor<4x8xf32>, tensor<f32>) -> tensor<3x7xf32>
    %5:2 = "stablehlo.while"(%arg2, %arg0) ({
    ^bb0(%arg10: tensor<i32>, %arg11: tensor<4x8xf32>):
      %11 = "stablehlo.compare"(%arg10, %arg10) <{comparison_direction = #stablehlo<comparison_direction LT>}> : (tensor<i32>, tensor<i32>) -> tensor<i1>
      "stablehlo.return"(%11) : (tensor<i1>) -> ()
    }, {
    ^bb0(%arg8: tensor<i32>, %arg9: tensor<4x8xf32>):
      %10 = "stablehlo.add"(%arg9, %arg9) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
      "stablehlo.return"(%arg8, %10) : (tensor<i32>, tensor<4x8xf32>) -> ()
    }) : (tensor<i32>, tensor<4x8xf32>) -> (tensor<i32>, tensor<4x8xf32>)
    %6 = "stablehlo.all_reduce"(%arg0) <{channel_handle = #stablehlo.channel_handle<handle = 1, type = 1>, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>}> ({
    ^bb0(%arg6: tensor<f32>, %arg7: tensor<f32>):
      %9 = "stablehlo.add"(%arg6, %arg7) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%9) : (tensor<f32>) -> ()
    }) : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %7 = "stablehlo.reduce"(%arg0, %3) <{dimensions = array<i64: 0>}> ({
    ^bb0(%arg4: tensor<f32>, %arg5: tensor<f32>):
      %8 = "stablehlo.maximum"(%arg4, %arg5) : (tensor<f32>, tensor<f32>) -> tensor<f32>
      "stablehlo.return"(%8) : (tensor<f32>) -> ()
    }) : (tensor<4x8xf32>, tensor<f32>) -> tensor<8xf32>
    "func.return"(%5#1) : (tensor<4x8xf32>) -> ()
  }) : () -> ()
}) : () -> ()

// -----
"builtin.module"() ({
  "sdy.mesh"() <{mesh = #sdy.mesh<["x"=2, "y"=4]>, sym_name = "mesh"}> : () -> ()
  "func.func"() <{function_type = (tensor<8x8xf32>) -> tensor<8x8xf32>, sym_name = "sdy_ops"}> ({
  ^bb0(%arg0: tensor<8x8xf32>):
    %0 = "sdy.sharding_constraint"(%arg0) <{sharding = #sdy.sharding<@mesh, [{"x"}, {?}]>}> : (tensor<8x8xf32>) -> tensor<8x8xf32>
    "sdy.sharding_group"(%0) <{group_id = 0 : i64}> : (tensor<8x8xf32>) -> ()
    %1 = "sdy.reshard"(%0) <{sharding = #sdy.sharding<@mesh, [{}, {"y"}]>}> : (tensor<8x8xf32>) -> tensor<8x8xf32>
    %2 = "stablehlo.add"(%1, %1) {sdy.sharding_rule = #sdy.op_sharding_rule<([i, j], [i, j])->([i, j]) {i=8, j=8}>} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    %3 = "sdy.named_computation"(%2) <{in_shardings = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>, name = "foo", out_shardings = #sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>]>}> ({
    ^bb0(%arg1: tensor<8x8xf32>):
      "sdy.return"(%arg1) : (tensor<8x8xf32>) -> ()
    }) : (tensor<8x8xf32>) -> tensor<8x8xf32>
    %4 = "stablehlo.negate"(%3) {sdy.sharding = #sdy.sharding_per_value<[<mesh<["q"=2]>, [{"q"}, {}]>]>} : (tensor<8x8xf32>) -> tensor<8x8xf32>
    "func.return"(%4) : (tensor<8x8xf32>) -> ()
  }) : () -> ()
}) : () -> ()

// -----
"builtin.module"() <{sym_name = "jit_zeros_like"}> ({
  "sdy.mesh"() <{mesh = #sdy.mesh<["x"=2, "y"=2]>, sym_name = "mesh_xy"}> : () -> ()
  "func.func"() <{arg_attrs = [{sdy.sharding = #sdy.sharding<@mesh_xy, [{"x"}, {"y"}]>}], function_type = (tensor<8x2xi64>) -> tensor<8x2xi64>, sym_name = "main", sym_visibility = "public"}> ({
  ^bb0(%arg0: tensor<8x2xi64>):
    %0 = "stablehlo.constant"() <{value = dense<0> : tensor<8x2xi64>}> : () -> tensor<8x2xi64>
    "func.return"(%0) : (tensor<8x2xi64>) -> ()
  }) : () -> ()
}) {mhlo.num_partitions = 4 : i32} : () -> ()

// -----
"builtin.module"() ({
  "sdy.mesh"() <{mesh = #sdy.mesh<["a"=2, "b"=2]>, sym_name = "mesh"}> : () -> ()
  "func.func"() <{function_type = () -> (), sym_name = "empty_manual_computation"}> ({
    "sdy.manual_computation"() <{in_shardings = #sdy.sharding_per_value<[]>, manual_axes = #sdy<manual_axes{}>, out_shardings = #sdy.sharding_per_value<[]>}> ({
      "sdy.return"() : () -> ()
    }) : () -> ()
    "func.return"() : () -> ()
  }) : () -> ()
}) : () -> ()

// -----
"builtin.module"() ({
  "sdy.mesh"() <{mesh = #sdy.mesh<["a"=4]>, sym_name = "mesh"}> : () -> ()
  "sdy.mesh"() <{mesh = #sdy.mesh<[], device_ids=[0]>, sym_name = "maximal"}> : () -> ()
  "sdy.mesh"() <{mesh = #sdy.mesh<[]>, sym_name = "empty"}> : () -> ()
  "func.func"() <{arg_attrs = [{sdy.sharding = #sdy.sharding<@mesh, [{"a":(1)2, ?}p0, {}], replicated={"a":(2)2}>}], function_type = (tensor<8x4xf32>) -> tensor<8x4xf32>, res_attrs = [{jax.result_info = "out", sdy.sharding = #sdy.sharding<@maximal, []>}], sym_name = "shardings_everywhere"}> ({
  ^bb0(%arg0: tensor<8x4xf32>):
    %0 = "stablehlo.negate"(%arg0) {sdy.sharding = #sdy.sharding_per_value<[<@empty, [{?}, {?}]>]>} : (tensor<8x4xf32>) -> tensor<8x4xf32>
    %1 = "sdy.data_flow_edge"(%0) <{sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}> : (tensor<8x4xf32>) -> tensor<8x4xf32>
    %2 = "sdy.propagation_barrier"(%1) <{allowed_direction = 1 : i32}> : (tensor<8x4xf32>) -> tensor<8x4xf32>
    %3 = "sdy.constant"() <{value = dense<[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00]> : tensor<4xf32>}> {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}]>]>} : () -> tensor<4xf32>
    %4 = "stablehlo.broadcast_in_dim"(%3) <{broadcast_dimensions = array<i64: 1>}> : (tensor<4xf32>) -> tensor<8x4xf32>
    %5 = "stablehlo.add"(%2, %4) : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
    "func.return"(%5) : (tensor<8x4xf32>) -> ()
  }) : () -> ()
}) : () -> ()

// -----
"builtin.module"() ({
  "func.func"() <{arg_attrs = [{jax.buffer_donor = true}, {}], function_type = (tensor<2x3xi8>, tensor<ui16>) -> (tensor<2x3xi8>, tensor<ui16>), sym_name = "main", sym_visibility = "public"}> ({
  ^bb0(%arg0: tensor<2x3xi8>, %arg1: tensor<ui16>):
    %0 = "stablehlo.constant"() <{value = dense<[[-1, 127, 0], [1, 2, 3]]> : tensor<2x3xi8>}> : () -> tensor<2x3xi8>
    %1 = "stablehlo.xor"(%arg0, %0) : (tensor<2x3xi8>, tensor<2x3xi8>) -> tensor<2x3xi8>
    %2 = "stablehlo.constant"() <{value = dense<65535> : tensor<ui16>}> : () -> tensor<ui16>
    %3 = "stablehlo.and"(%arg1, %2) : (tensor<ui16>, tensor<ui16>) -> tensor<ui16>
    "func.return"(%1, %3) : (tensor<2x3xi8>, tensor<ui16>) -> ()
  }) : () -> ()
}) {mhlo.frontend_attributes = {xla.sdy.meshes = "{}"}, mhlo.num_partitions = 2 : i32} : () -> ()

// -----
"builtin.module"() ({
  "sdy.mesh"() <{mesh = #sdy.mesh<["a"=2, "b"=2]>, sym_name = "mesh"}> : () -> ()
  "func.func"() <{arg_attrs = [{mhlo.sharding = "{devices=[1,2]<=[2]}"}, {}], function_type = (tensor<1x8xf32>, tensor<8xf32>) -> (tensor<8x4xf32>, tensor<3xf32>, tensor<3xi32>), sym_name = "imported_forms"}> ({
  ^bb0(%arg0: tensor<1x8xf32>, %arg1: tensor<8xf32>):
    %0:2 = "stablehlo.optimization_barrier"(%arg0, %arg1) {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {"a"}]>, <@mesh, [{"b"}]>]>} : (tensor<1x8xf32>, tensor<8xf32>) -> (tensor<1x8xf32>, tensor<8xf32>)
    "stablehlo.optimization_barrier"() : () -> ()
    %1 = "stablehlo.broadcast_in_dim"(%0#0) <{broadcast_dimensions = array<i64: 0, 1>}> : (tensor<1x8xf32>) -> tensor<4x8xf32>
    %2:2 = "mhlo.topk"(%0#1) <{k = 3 : i64, largest = true}> : (tensor<8xf32>) -> (tensor<3xf32>, tensor<3xi32>)
    %3 = "stablehlo.custom_call"(%1) <{backend_config = "", call_target_name = "Sharding"}> {mhlo.sharding = "{devices=[2,1]<=[2]}"} : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %4 = "stablehlo.all_to_all"(%3) <{concat_dimension = 0 : i64, replica_groups = dense<[[0, 1]]> : tensor<1x2xi64>, split_count = 2 : i64, split_dimension = 1 : i64}> : (tensor<4x8xf32>) -> tensor<8x4xf32>
    "func.return"(%4, %2#0, %2#1) : (tensor<8x4xf32>, tensor<3xf32>, tensor<3xi32>) -> ()
  }) : () -> ()
}) : () -> ()
