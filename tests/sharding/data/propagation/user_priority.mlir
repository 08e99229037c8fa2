// RUN: xlapy sdy propagate --strategy user-priority --split-input-file

// Without priorities this is op-priority propagation.
// (no_priorities)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b"}]>},
                           %arg1: tensor<8x8xf32>, %arg2: tensor<8x8xf32>) -> tensor<8x8xf32> {
    %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
    %1 = stablehlo.divide %0, %arg2 : tensor<8x8xf32>
    return %1 : tensor<8x8xf32>
  }
}

// -----

// p0 goes first: the divide's "c" spreads before the argument's p1 axes come
// back; then "b" (no conflict) spreads but "a" conflicts with "c".
// (p0_before_p1)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}p1, {"b"}p1]>},
                          %arg1: tensor<8x8xf32>, %arg2: tensor<8x8xf32>, %arg3: tensor<8x8xf32>) -> tensor<8x8xf32> {
    %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
    %1 = stablehlo.add %0, %arg2 : tensor<8x8xf32>
    %2 = stablehlo.divide %1, %arg3 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"c"}p0, {?}]>]>} : tensor<8x8xf32>
    return %2 : tensor<8x8xf32>
  }
}

// -----

// A hidden priority keeps its axes replicated meanwhile: "b" cannot be taken
// by anything else before its turn.
// (lower_priority_axes_stay_reserved)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}p1, {"b"}p1]>},
                                               %arg1: tensor<8x8xf32>, %arg2: tensor<8x8xf32>, %arg3: tensor<8x8xf32>) -> tensor<8x8xf32> {
    %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
    %1 = stablehlo.add %0, %arg2 : tensor<8x8xf32>
    %2 = stablehlo.divide %1, %arg3 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"c"}p0, {?}], replicated={"b"}>]>} : tensor<8x8xf32>
    return %2 : tensor<8x8xf32>
  }
}

// -----

// Priorities need not be consecutive (p4 after p1).
// (skipped_priorities)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b"}p4]>},
                                %arg1: tensor<8x8xf32>, %arg2: tensor<8x8xf32>) -> tensor<8x8xf32> {
    %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
    %1 = stablehlo.divide %0, %arg2 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"c", ?}p1]>]>} : tensor<8x8xf32>
    return %1 : tensor<8x8xf32>
  }
}

// -----

// A dimension of a lower priority is sharded further by a higher one:
// "b" (p1) gets "a" after it from the p0 sharding.
// (lower_priority_dimension_sharded_further)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b", ?}p1, {}]>},
                                                      %arg1: tensor<8x8xf32>, %arg2: tensor<8x8xf32>, %arg3: tensor<8x8xf32>)
      -> (tensor<8x8xf32>, tensor<8x8xf32>) {
    %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
    %1 = stablehlo.add %arg0, %arg2 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"b", "a", ?}p0, {}]>]>} : tensor<8x8xf32>
    %2 = stablehlo.divide %0, %arg3 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"c", ?}p0, {}]>]>} : tensor<8x8xf32>
    return %1, %2 : tensor<8x8xf32>, tensor<8x8xf32>
  }
}

// -----

// Batch parallelism (p0) before sharding a weight (p1).
// (batch_then_weights)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}p0, {?}]>},
                                %arg1: tensor<8x8xf32>, %arg2: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{?}, {"a"}p1]>}) -> tensor<8x16xf32> {
    %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
    %1 = stablehlo.dot_general %0, %arg2, contracting_dims = [1] x [0] : (tensor<8x8xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
    return %1 : tensor<8x16xf32>
  }
}
