// RUN: xlapy sdy propagate --strategy aggressive --split-input-file

// Without conflicts the aggressive strategy gives what the basic one gives.
// (no_conflict)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  sdy.mesh @mesh3 = <["a"=2, "b"=2, "c"=2]>
  sdy.mesh @mesh4 = <["a"=2, "b"=2, "c"=2, "d"=2]>
  sdy.mesh @mesh_a4 = <["a"=4]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b"}]>},
                         %arg1: tensor<8x8xf32>, %arg2: tensor<8x16xf32>) -> tensor<8x16xf32> {
    %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
    %1 = stablehlo.dot_general %0, %arg2, contracting_dims = [1] x [0] : (tensor<8x8xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
    return %1 : tensor<8x16xf32>
  }
}

// -----

// "a" is wanted by both non-contracting dimensions of the lhs; the result
// already uses it, so it only goes to the rhs (a fake conflict).
// (two_non_contracting_dims)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  sdy.mesh @mesh3 = <["a"=2, "b"=2, "c"=2]>
  sdy.mesh @mesh4 = <["a"=2, "b"=2, "c"=2, "d"=2]>
  sdy.mesh @mesh_a4 = <["a"=4]>
  func.func @main(%arg0: tensor<256x512xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {?}]>},
                                      %arg1: tensor<128x512xf32>)
      -> (tensor<256x128xf32> {sdy.sharding = #sdy.sharding<@mesh, [{?}, {"a", ?}]>}) {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [1] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"a", ?}]>]>} :
      (tensor<256x512xf32>, tensor<128x512xf32>) -> tensor<256x128xf32>
    return %0 : tensor<256x128xf32>
  }
}

// -----

// The axes used by the contracting dimension in one operand are free in the result.
// (contracting_and_non_contracting_dims)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  sdy.mesh @mesh3 = <["a"=2, "b"=2, "c"=2]>
  sdy.mesh @mesh4 = <["a"=2, "b"=2, "c"=2, "d"=2]>
  sdy.mesh @mesh_a4 = <["a"=4]>
  func.func @main(%arg0: tensor<256x512xf32> {sdy.sharding = #sdy.sharding<@mesh3, [{"a"}, {"b", "c"}]>},
                                                  %arg1: tensor<128x512xf32> {sdy.sharding = #sdy.sharding<@mesh3, [{"c", "b"}, {"a"}]>}) -> tensor<256x128xf32> {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [1] : (tensor<256x512xf32>, tensor<128x512xf32>) -> tensor<256x128xf32>
    return %0 : tensor<256x128xf32>
  }
}

// -----

// Different axes on the same factor: a real conflict, nothing propagates.
// (conflict_within_a_factor)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  sdy.mesh @mesh3 = <["a"=2, "b"=2, "c"=2]>
  sdy.mesh @mesh4 = <["a"=2, "b"=2, "c"=2, "d"=2]>
  sdy.mesh @mesh_a4 = <["a"=4]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh3, [{"a", ?}, {}]>},
                                      %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh3, [{"b", ?}, {}]>}) -> tensor<8x8xf32> {
    %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
    return %0 : tensor<8x8xf32>
  }
}

// -----

// "a" conflicts with "b" on dimension 0, but dimension 1 can take it.
// (real_and_fake_conflicts)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  sdy.mesh @mesh3 = <["a"=2, "b"=2, "c"=2]>
  sdy.mesh @mesh4 = <["a"=2, "b"=2, "c"=2, "d"=2]>
  sdy.mesh @mesh_a4 = <["a"=4]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh3, [{"a", ?}, {?}]>},
                                     %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh3, [{"b", ?}, {"a", ?}]>}) -> tensor<8x8xf32> {
    %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
    return %0 : tensor<8x8xf32>
  }
}

// -----

// Same-size sources want "a" on different dimensions: the lower factor wins.
// (conflict_across_factors_same_size)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  sdy.mesh @mesh3 = <["a"=2, "b"=2, "c"=2]>
  sdy.mesh @mesh4 = <["a"=2, "b"=2, "c"=2, "d"=2]>
  sdy.mesh @mesh_a4 = <["a"=4]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh3, [{"a"}, {?}]>},
                                               %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh3, [{?}, {"a"}]>}) -> tensor<8x8xf32> {
    %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
    return %0 : tensor<8x8xf32>
  }
}

// -----

// The larger source wins.
// (conflict_across_factors_different_sizes)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  sdy.mesh @mesh3 = <["a"=2, "b"=2, "c"=2]>
  sdy.mesh @mesh4 = <["a"=2, "b"=2, "c"=2, "d"=2]>
  sdy.mesh @mesh_a4 = <["a"=4]>
  func.func @main(%arg0: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh3, [{"a", "b"}, {?}]>},
                                                     %arg1: tensor<4x16xf32> {sdy.sharding = #sdy.sharding<@mesh3, [{?}, {"a", "c"}]>}) -> tensor<8x16xf32> {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
    return %0 : tensor<8x16xf32>
  }
}

// -----

// (several_conflicts_across_factors)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  sdy.mesh @mesh3 = <["a"=2, "b"=2, "c"=2]>
  sdy.mesh @mesh4 = <["a"=2, "b"=2, "c"=2, "d"=2]>
  sdy.mesh @mesh_a4 = <["a"=4]>
  func.func @main(%arg0: tensor<2x8x4xf32> {sdy.sharding = #sdy.sharding<@mesh4, [{?}, {"a", "b"}, {?}]>},
                                              %arg1: tensor<2x4x16xf32> {sdy.sharding = #sdy.sharding<@mesh4, [{?}, {"d", "c"}, {"b", "a"}]>}) -> tensor<2x8x16xf32> {
    %0 = stablehlo.dot_general %arg0, %arg1, batching_dims = [0] x [0], contracting_dims = [2] x [1]
      {sdy.sharding = #sdy.sharding_per_value<[<@mesh4, [{"d"}, {?}, {?}]>]>} : (tensor<2x8x4xf32>, tensor<2x4x16xf32>) -> tensor<2x8x16xf32>
    return %0 : tensor<2x8x16xf32>
  }
}

// -----

// Elementwise ops do not shard an operand further than their result can be.
// (no_sideways_past_a_closed_result)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  sdy.mesh @mesh3 = <["a"=2, "b"=2, "c"=2]>
  sdy.mesh @mesh4 = <["a"=2, "b"=2, "c"=2, "d"=2]>
  sdy.mesh @mesh_a4 = <["a"=4]>
  func.func @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}]>},
                                              %arg1: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{?}]>}) -> tensor<8xf32> {
    %0 = stablehlo.add %arg0, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}]>]>} : tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}

// -----

// (sideways_up_to_the_result)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  sdy.mesh @mesh3 = <["a"=2, "b"=2, "c"=2]>
  sdy.mesh @mesh4 = <["a"=2, "b"=2, "c"=2, "d"=2]>
  sdy.mesh @mesh_a4 = <["a"=4]>
  func.func @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh_a4, [{"a"}]>},
                                       %arg1: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh_a4, [{?}]>}) -> tensor<8xf32> {
    %0 = stablehlo.add %arg0, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh_a4, [{"a":(1)2}]>]>} : tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}
