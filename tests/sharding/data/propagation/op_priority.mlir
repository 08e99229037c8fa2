// RUN: xlapy sdy propagate --strategy op-priority --split-input-file

// Elementwise ops go first: the result's "a" on dimension 1 reaches the dot
// before the argument's "a" on dimension 0 would.
// (elementwise_before_dot)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {?}]>}, %arg1: tensor<8x8xf32>)
      -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{?}, {"a", ?}]>}) {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    %1 = stablehlo.add %0, %0 : tensor<8x8xf32>
    %2 = stablehlo.multiply %1, %1 : tensor<8x8xf32>
    return %2 : tensor<8x8xf32>
  }
}

// -----

// A sharding constraint is elementwise too.
// (constraint_before_dot)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {?}]>}, %arg1: tensor<8x8xf32>) -> tensor<8x8xf32> {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    %1 = stablehlo.add %0, %0 : tensor<8x8xf32>
    %2 = sdy.sharding_constraint %1 <@mesh, [{?}, {"a", ?}]> : tensor<8x8xf32>
    return %2 : tensor<8x8xf32>
  }
}

// -----

// Dots still propagate in the later rounds.
// (dot_chain)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {?}]>}, %arg1: tensor<8x8xf32>)
      -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{?}, {"a", ?}]>}) {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    %1 = stablehlo.dot_general %0, %0, contracting_dims = [1] x [0] : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
    %2 = stablehlo.add %1, %1 : tensor<8x8xf32>
    return %2 : tensor<8x8xf32>
  }
}

// -----

// Pass-through factors (the dot's non-contracting dimensions) go before the
// contracting one: the result's "a" wins over the lhs taking it from the rhs.
// (pass_through_before_reduction)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  func.func @main(%arg0: tensor<32x1024xf32>,
                                           %arg1: tensor<1024x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {"b", ?}]>})
      -> (tensor<32x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {"b", ?}]>}) {
    %0 = stablehlo.dot %arg0, %arg1 : (tensor<32x1024xf32>, tensor<1024x16xf32>) -> tensor<32x16xf32>
    return %0 : tensor<32x16xf32>
  }
}

// -----

// Broadcasts propagate backward before forward.
// (broadcast_backward_first)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  func.func @main(%arg0: tensor<32xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}]>})
      -> (tensor<32x16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"a"}, {}]>}) {
    %0 = stablehlo.broadcast_in_dim %arg0, dims = [0] : (tensor<32xf32>) -> tensor<32x16xf32>
    %1 = stablehlo.broadcast_in_dim %0, dims = [0, 1] : (tensor<32x16xf32>) -> tensor<32x16x8xf32>
    return %1 : tensor<32x16x8xf32>
  }
}

// -----

// Explicit data-flow edges are pass-through: the barrier's results meet the
// returned value's sharding in the first round.
// (explicit_data_flow_edges)
module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  func.func @main(%arg0: tensor<32x96xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {?}]>}, %arg1: tensor<32x96xf32>)
      -> (tensor<32x96xf32> {sdy.sharding = #sdy.sharding<@mesh, [{?}, {"b", ?}]>}, tensor<32x96xf32>) {
    %0 = stablehlo.add %arg0, %arg0 : tensor<32x96xf32>
    %1:2 = stablehlo.optimization_barrier %0, %arg1 : tensor<32x96xf32>, tensor<32x96xf32>
    %2 = sdy.data_flow_edge %1#0 : tensor<32x96xf32>
    %3 = sdy.data_flow_edge %1#1 : tensor<32x96xf32>
    return %2, %3 : tensor<32x96xf32>, tensor<32x96xf32>
  }
}
