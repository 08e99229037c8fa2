// RUN: xlapy sdy propagate --strategy basic --split-input-file

// An add and a dot: the argument's sharding reaches the other operand, the
// dot's lhs, and along the contracting dimension the dot's rhs.
// (add_then_dot)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b"}]>},
                          %arg1: tensor<8x8xf32>, %arg2: tensor<8x16xf32>) -> tensor<8x16xf32> {
    %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
    %1 = stablehlo.dot_general %0, %arg2, contracting_dims = [1] x [0] : (tensor<8x8xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
    return %1 : tensor<8x16xf32>
  }
}

// -----

// A closed dimension is not sharded further; the result's open one is.
// (closed_dimension)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>},
                              %arg1: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"b"}]>}) -> tensor<8x16xf32> {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0]
      {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}, {?}]>]>} : (tensor<8x8xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
    return %0 : tensor<8x16xf32>
  }
}

// -----

// Multi-result reduce: the operands' sharding of the kept dimension reaches both results.
// (two_result_reduce)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  func.func @main(%arg0: tensor<4x64x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}, {"b"}]>},
                               %arg1: tensor<4x64x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {}, {"b"}]>})
      -> (tensor<4x8xf32>, tensor<4x8xf32>) {
    %0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
    %1:2 = stablehlo.reduce(%arg0 init: %0), (%arg1 init: %0) across dimensions = [1] :
      (tensor<4x64x8xf32>, tensor<4x64x8xf32>, tensor<f32>, tensor<f32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
      reducer(%a: tensor<f32>, %c: tensor<f32>) (%b: tensor<f32>, %d: tensor<f32>) {
        %2 = stablehlo.add %a, %c : tensor<f32>
        %3 = stablehlo.add %b, %d : tensor<f32>
        stablehlo.return %2, %3 : tensor<f32>, tensor<f32>
      }
    return %1#0, %1#1 : tensor<4x8xf32>, tensor<4x8xf32>
  }
}

// -----

// (constraint_shards_its_input)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  func.func @main(%arg0: tensor<8x8xf32>) -> tensor<8x8xf32> {
    %0 = sdy.sharding_constraint %arg0 <@mesh, [{"a"}, {?}]> : tensor<8x8xf32>
    %1 = stablehlo.multiply %0, %0 : tensor<8x8xf32>
    return %1 : tensor<8x8xf32>
  }
}

// -----

// (open_constraint_is_sharded)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}) -> tensor<8x8xf32> {
    %0 = sdy.sharding_constraint %arg0 <@mesh, [{?}, {?}]> : tensor<8x8xf32>
    return %0 : tensor<8x8xf32>
  }
}

// -----

// A barrier that allows only backward propagation: the argument's "c" stays
// before it, the function result's "b" goes through to the argument.
// (barrier_backward)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {"c", ?}]>})
      -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", "b", ?}, {?}]>}, tensor<8x8xf32>) {
    %0 = stablehlo.add %arg0, %arg0 : tensor<8x8xf32>
    %1 = sdy.propagation_barrier %0 allowed_direction=BACKWARD : tensor<8x8xf32>
    %2 = stablehlo.add %1, %1 : tensor<8x8xf32>
    %3 = stablehlo.add %1, %1 : tensor<8x8xf32>
    return %2, %3 : tensor<8x8xf32>, tensor<8x8xf32>
  }
}

// -----

// Forward only: "c" goes through, the result's "b" does not reach the argument.
// (barrier_forward)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {"c", ?}]>})
      -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", "b", ?}, {?}]>}, tensor<8x8xf32>) {
    %0 = stablehlo.add %arg0, %arg0 : tensor<8x8xf32>
    %1 = sdy.propagation_barrier %0 allowed_direction=FORWARD : tensor<8x8xf32>
    %2 = stablehlo.add %1, %1 : tensor<8x8xf32>
    %3 = stablehlo.add %1, %1 : tensor<8x8xf32>
    return %2, %3 : tensor<8x8xf32>, tensor<8x8xf32>
  }
}

// -----

// Conflicting axes on a factor: the longest common major prefix ("b") goes
// to the first add; the second add's operands agree on nothing: no sharding.
// (conflicting_axes)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b", "a"}, {}]>},
                              %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b", "c"}, {}]>},
                              %arg2: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", "b"}, {}]>})
      -> (tensor<8x8xf32>, tensor<8x8xf32>) {
    %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
    %1 = stablehlo.add %arg0, %arg2 : tensor<8x8xf32>
    return %0, %1 : tensor<8x8xf32>, tensor<8x8xf32>
  }
}

// -----

// A replicated axis is never used to shard.
// (replicated_axis_blocks)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2, "c"=2]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", "b"}, {}]>},
                                    %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{?}, {?}], replicated={"a"}>}) -> tensor<8x8xf32> {
    %0 = stablehlo.add %arg0, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"c", ?}]>]>} : tensor<8x8xf32>
    return %0 : tensor<8x8xf32>
  }
}

// -----

// Reshapes: factors of split dimensions take sub-axes.
// (reshape_split_twice)
module {
  sdy.mesh @mesh = <["a"=4, "b"=2, "c"=2]>
  sdy.mesh @mesh16 = <["a"=16, "b"=2]>
  sdy.mesh @mesh6 = <["a"=6]>
  sdy.mesh @mesh3 = <["a"=3]>
  func.func @main(%arg0: tensor<32xf32> {sdy.sharding = #sdy.sharding<@mesh16, [{"a"}]>}) -> tensor<2x4x4xf32> {
    %0 = stablehlo.reshape %arg0 : (tensor<32xf32>) -> tensor<8x4xf32>
    %1 = stablehlo.negate %0 : tensor<8x4xf32>
    %2 = stablehlo.reshape %1 : (tensor<8x4xf32>) -> tensor<2x4x4xf32>
    return %2 : tensor<2x4x4xf32>
  }
}

// -----

// Split, then merge back: the sub-axes merge into the full axis again.
// (reshape_split_then_merge)
module {
  sdy.mesh @mesh = <["a"=4, "b"=2, "c"=2]>
  sdy.mesh @mesh16 = <["a"=16, "b"=2]>
  sdy.mesh @mesh6 = <["a"=6]>
  sdy.mesh @mesh3 = <["a"=3]>
  func.func @main(%arg0: tensor<32xf32> {sdy.sharding = #sdy.sharding<@mesh16, [{"a"}]>}) -> tensor<32xf32> {
    %0 = stablehlo.reshape %arg0 : (tensor<32xf32>) -> tensor<4x2x4xf32>
    %1 = stablehlo.reshape %0 : (tensor<4x2x4xf32>) -> tensor<4x8xf32>
    %2 = stablehlo.reshape %1 : (tensor<4x8xf32>) -> tensor<32xf32>
    return %2 : tensor<32xf32>
  }
}

// -----

// Split one dimension and merge another.
// (reshape_split_and_merge)
module {
  sdy.mesh @mesh = <["a"=4, "b"=2, "c"=2]>
  sdy.mesh @mesh16 = <["a"=16, "b"=2]>
  sdy.mesh @mesh6 = <["a"=6]>
  sdy.mesh @mesh3 = <["a"=3]>
  func.func @main(%arg0: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"c", "a"}, {"b"}]>}) -> tensor<2x16xf32> {
    %0 = stablehlo.reshape %arg0 : (tensor<8x4xf32>) -> tensor<2x16xf32>
    return %0 : tensor<2x16xf32>
  }
}

// -----

// Merging: only the part of "a" that divides the major factor goes to the merged dimension.
// (reshape_merge_takes_a_sub_axis)
module {
  sdy.mesh @mesh = <["a"=4, "b"=2, "c"=2]>
  sdy.mesh @mesh16 = <["a"=16, "b"=2]>
  sdy.mesh @mesh6 = <["a"=6]>
  sdy.mesh @mesh3 = <["a"=3]>
  func.func @main(%arg0: tensor<4x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b", "a"}, {"c"}]>}) -> tensor<16xf32> {
    %0 = stablehlo.reshape %arg0 : (tensor<4x4xf32>) -> tensor<16xf32>
    return %0 : tensor<16xf32>
  }
}

// -----

// The minor-most factor may be sharded unevenly; a non-minor-most one may not.
// (reshape_uneven_minor_factor)
module {
  sdy.mesh @mesh = <["a"=4, "b"=2, "c"=2]>
  sdy.mesh @mesh16 = <["a"=16, "b"=2]>
  sdy.mesh @mesh6 = <["a"=6]>
  sdy.mesh @mesh3 = <["a"=3]>
  func.func @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh6, [{"a"}]>},
                                         %arg1: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh3, [{"a"}]>})
      -> (tensor<2x4xf32>, tensor<2x4xf32>) {
    %0 = stablehlo.reshape %arg0 : (tensor<8xf32>) -> tensor<2x4xf32>
    %1 = stablehlo.reshape %arg1 : (tensor<8xf32>) -> tensor<2x4xf32>
    return %0, %1 : tensor<2x4xf32>, tensor<2x4xf32>
  }
}

// -----

// "a":(1)2 and "a":(3)2 of an axis of size 6 cannot both shard one tensor.
// (sub_axes_that_cannot_coexist)
module {
  sdy.mesh @mesh = <["a"=4, "b"=2, "c"=2]>
  sdy.mesh @mesh16 = <["a"=16, "b"=2]>
  sdy.mesh @mesh6 = <["a"=6]>
  sdy.mesh @mesh3 = <["a"=3]>
  func.func @main(%arg0: tensor<2x2xf32> {sdy.sharding = #sdy.sharding<@mesh6, [{"a":(1)2}, {}]>})
      -> (tensor<2x2xf32> {sdy.sharding = #sdy.sharding<@mesh6, [{}, {"a":(3)2}]>}) {
    %0 = stablehlo.sine %arg0 : tensor<2x2xf32>
    return %0 : tensor<2x2xf32>
  }
}

// -----

// Transpose, broadcast and concatenate move dimensions around (the
// concatenated dimension is sharded too).
// (transpose_broadcast_concatenate)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  func.func @main(%arg0: tensor<4x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b"}]>},
                                             %arg1: tensor<8x4xf32>, %arg2: tensor<8xf32>) -> tensor<8x12xf32> {
    %0 = stablehlo.transpose %arg0, dims = [1, 0] : (tensor<4x8xf32>) -> tensor<8x4xf32>
    %1 = stablehlo.concatenate %0, %arg1, dim = 1 : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x8xf32>
    %2 = stablehlo.broadcast_in_dim %arg2, dims = [0] : (tensor<8xf32>) -> tensor<8x4xf32>
    %3 = stablehlo.concatenate %1, %2, dim = 1 : (tensor<8x8xf32>, tensor<8x4xf32>) -> tensor<8x12xf32>
    return %3 : tensor<8x12xf32>
  }
}

// -----

// Function results and returned arguments exchange shardings both ways.
// (returned_argument)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {?}]>})
      -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{?}, {"b", ?}]>}) {
    return %arg0 : tensor<8x8xf32>
  }
}

// -----

// (result_sharding_flows_back)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  func.func @main(%arg0: tensor<8x8xf32>, %arg1: tensor<8x16xf32>)
      -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b"}]>}) {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<8x8xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
    return %0 : tensor<8x16xf32>
  }
}

// -----

// A sharding on the empty mesh takes the other mesh (its closed dimension stays closed).
// (empty_mesh_is_replaced)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  sdy.mesh @empty = <[]>
  sdy.mesh @one_device = <[], device_ids=[0]>
  sdy.mesh @mesh_copy = <["a"=2, "b"=2]>
  sdy.mesh @other = <["a"=3]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b"}]>},
                                    %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@empty, [{?}, {}]>}) -> tensor<8x8xf32> {
    %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
    return %0 : tensor<8x8xf32>
  }
}

// -----

// Different meshes (a maximal one, another one) stop propagation; an equal
// mesh of another name does not (the sharding made then names the first mesh).
// (meshes)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  sdy.mesh @empty = <[]>
  sdy.mesh @one_device = <[], device_ids=[0]>
  sdy.mesh @mesh_copy = <["a"=2, "b"=2]>
  sdy.mesh @other = <["a"=3]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b"}]>},
                    %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@one_device, []>},
                    %arg2: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@other, [{"a"}, {?}]>},
                    %arg3: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh_copy, [{?}, {"b"}]>}) -> (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) {
    %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
    %1 = stablehlo.add %arg0, %arg2 : tensor<8x8xf32>
    %2 = stablehlo.add %arg0, %arg3 : tensor<8x8xf32>
    return %0, %1, %2 : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>
  }
}

// -----

// The conflicts the aggressive strategy resolves (aggressive.mlir) stay
// unresolved in the basic one.
// (conflict_across_factors_same_size)
module {
  sdy.mesh @mesh3 = <["a"=2, "b"=2, "c"=2]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh3, [{"a"}, {?}]>},
                                               %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh3, [{?}, {"a"}]>}) -> tensor<8x8xf32> {
    %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
    return %0 : tensor<8x8xf32>
  }
}

// -----

// (real_and_fake_conflicts)
module {
  sdy.mesh @mesh3 = <["a"=2, "b"=2, "c"=2]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh3, [{"a", ?}, {?}]>},
                                     %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh3, [{"b", ?}, {"a", ?}]>}) -> tensor<8x8xf32> {
    %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
    return %0 : tensor<8x8xf32>
  }
}
