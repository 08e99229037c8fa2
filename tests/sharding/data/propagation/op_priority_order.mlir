// RUN: xlapy sdy propagate --strategy op-priority --split-input-file

// Pass-through ops whose operands have other uses wait for the second round.
module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  func.func @main(%arg0: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
    %0 = stablehlo.cosine %arg0 : tensor<8x8xf32>
    %1 = stablehlo.abs %arg0 : tensor<8x8xf32>
    %2 = stablehlo.negate %1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {}]>]>} : tensor<8x8xf32>
    %3 = stablehlo.sine %0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"b"}, {}]>]>} : tensor<8x8xf32>
    return %2, %3 : tensor<8x8xf32>, tensor<8x8xf32>
  }
}

// -----

// Program order decides between two ops in the same round.
module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  func.func @main(%arg0: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>) {
    %0 = stablehlo.abs %arg0 : tensor<8x8xf32>
    %1 = stablehlo.cosine %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"b"}, {}]>]>} : tensor<8x8xf32>
    %2 = stablehlo.negate %0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {}]>]>} : tensor<8x8xf32>
    return %1, %2 : tensor<8x8xf32>, tensor<8x8xf32>
  }
}

// -----

// A concatenate passes its non-concatenated dimensions only in the third round.
module {
  sdy.mesh @mesh = <["a"=2, "b"=2, "c"=4, "d"=2]>
  func.func @main(%arg0: tensor<8x8xf32>) -> (tensor<16x8xf32>, tensor<8x8xf32>) {
    %1 = stablehlo.concatenate %arg0, %arg0, dim = 0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {"b"}]>]>} : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<16x8xf32>
    %2 = stablehlo.cosine %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"c"}, {"d"}]>]>} : tensor<8x8xf32>
    return %1, %2 : tensor<16x8xf32>, tensor<8x8xf32>
  }
}

// -----

// An op on a value used twice propagates after ops on single-use values.
module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  func.func @main(%arg0: tensor<8x8xf32>, %arg1: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) {
    %1 = stablehlo.cosine %arg0 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a"}, {}]>]>} : tensor<8x8xf32>
    %0 = stablehlo.abs %arg0 : tensor<8x8xf32>
    %2 = stablehlo.negate %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"b"}, {}]>]>} : tensor<8x8xf32>
    return %1, %0, %2 : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>
  }
}

// -----

// Forward propagation from a value with several uses waits too.
module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {}]>}, %arg1: tensor<8x8xf32>) -> (tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) {
    %r = stablehlo.abs %arg0 : tensor<8x8xf32>
    %u1 = stablehlo.negate %r : tensor<8x8xf32>
    %u2 = stablehlo.cosine %r : tensor<8x8xf32>
    %v = stablehlo.exponential %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"b"}, {}]>]>} : tensor<8x8xf32>
    return %u1, %u2, %v : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>
  }
}

// -----

// Function results are pushed to the returned values before each round.
module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  func.func @main(%arg0: tensor<8x8xf32>) -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {?}]>}, tensor<8x8xf32>) {
    %0 = stablehlo.abs %arg0 : tensor<8x8xf32>
    %1 = stablehlo.cosine %arg0 : tensor<8x8xf32>
    %2 = stablehlo.sine %1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"b", ?}, {?}]>]>} : tensor<8x8xf32>
    return %0, %2 : tensor<8x8xf32>, tensor<8x8xf32>
  }
}

// -----

// Conflicting shardings reaching an argument through two paths.
module {
  sdy.mesh @mesh = <["a"=2, "b"=2, "c"=4, "d"=2]>
  func.func @main(%arg0: tensor<8x8xf32>) -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"c"}, {"a", "d", ?}]>}, tensor<8x8xf32>) {
    %v2 = stablehlo.cosine %arg0 : tensor<8x8xf32>
    %v4 = stablehlo.abs %arg0 : tensor<8x8xf32>
    %v6 = stablehlo.sine %v2 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"c", ?}, {"d"}]>]>} : tensor<8x8xf32>
    return %v4, %v6 : tensor<8x8xf32>, tensor<8x8xf32>
  }
}
