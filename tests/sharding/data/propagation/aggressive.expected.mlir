module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  sdy.mesh @mesh3 = <["a"=2, "b"=2, "c"=2]>
  sdy.mesh @mesh4 = <["a"=2, "b"=2, "c"=2, "d"=2]>
  sdy.mesh @mesh_a4 = <["a"=4]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}, {"b"}]>}, %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {"b", ?}]>}, %arg2: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"b", ?}, {?}]>}) -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {?}]>}) {
    %0 = stablehlo.add %arg0, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}, {"b", ?}]>]>} : tensor<8x8xf32>
    %1 = stablehlo.dot_general %0, %arg2, contracting_dims = [1] x [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{"a", ?}, {?}]>]>} : (tensor<8x8xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
    return %1 : tensor<8x16xf32>
  }
}

// -----

module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  sdy.mesh @mesh3 = <["a"=2, "b"=2, "c"=2]>
  sdy.mesh @mesh4 = <["a"=2, "b"=2, "c"=2, "d"=2]>
  sdy.mesh @mesh_a4 = <["a"=4]>
  func.func @main(%arg0: tensor<256x512xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {?}]>}, %arg1: tensor<128x512xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a", ?}, {?}]>}) -> (tensor<256x128xf32> {sdy.sharding = #sdy.sharding<@mesh, [{?}, {"a", ?}]>}) {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [1] {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{?}, {"a", ?}]>]>} : (tensor<256x512xf32>, tensor<128x512xf32>) -> tensor<256x128xf32>
    return %0 : tensor<256x128xf32>
  }
}

// -----

module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  sdy.mesh @mesh3 = <["a"=2, "b"=2, "c"=2]>
  sdy.mesh @mesh4 = <["a"=2, "b"=2, "c"=2, "d"=2]>
  sdy.mesh @mesh_a4 = <["a"=4]>
  func.func @main(%arg0: tensor<256x512xf32> {sdy.sharding = #sdy.sharding<@mesh3, [{"a"}, {"b", "c"}]>}, %arg1: tensor<128x512xf32> {sdy.sharding = #sdy.sharding<@mesh3, [{"c", "b"}, {"a"}]>}) -> (tensor<256x128xf32> {sdy.sharding = #sdy.sharding<@mesh3, [{"a", ?}, {"c", "b", ?}]>}) {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [1] {sdy.sharding = #sdy.sharding_per_value<[<@mesh3, [{"a", ?}, {"c", "b", ?}]>]>} : (tensor<256x512xf32>, tensor<128x512xf32>) -> tensor<256x128xf32>
    return %0 : tensor<256x128xf32>
  }
}

// -----

module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  sdy.mesh @mesh3 = <["a"=2, "b"=2, "c"=2]>
  sdy.mesh @mesh4 = <["a"=2, "b"=2, "c"=2, "d"=2]>
  sdy.mesh @mesh_a4 = <["a"=4]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh3, [{"a", ?}, {}]>}, %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh3, [{"b", ?}, {}]>}) -> tensor<8x8xf32> {
    %0 = stablehlo.add %arg0, %arg1 : tensor<8x8xf32>
    return %0 : tensor<8x8xf32>
  }
}

// -----

module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  sdy.mesh @mesh3 = <["a"=2, "b"=2, "c"=2]>
  sdy.mesh @mesh4 = <["a"=2, "b"=2, "c"=2, "d"=2]>
  sdy.mesh @mesh_a4 = <["a"=4]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh3, [{"a", ?}, {?}]>}, %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh3, [{"b", ?}, {"a", ?}]>}) -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh3, [{?}, {"a", ?}]>}) {
    %0 = stablehlo.add %arg0, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh3, [{?}, {"a", ?}]>]>} : tensor<8x8xf32>
    return %0 : tensor<8x8xf32>
  }
}

// -----

module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  sdy.mesh @mesh3 = <["a"=2, "b"=2, "c"=2]>
  sdy.mesh @mesh4 = <["a"=2, "b"=2, "c"=2, "d"=2]>
  sdy.mesh @mesh_a4 = <["a"=4]>
  func.func @main(%arg0: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh3, [{"a"}, {?}]>}, %arg1: tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh3, [{?}, {"a"}]>}) -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh3, [{"a", ?}, {?}]>}) {
    %0 = stablehlo.add %arg0, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh3, [{"a", ?}, {?}]>]>} : tensor<8x8xf32>
    return %0 : tensor<8x8xf32>
  }
}

// -----

module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  sdy.mesh @mesh3 = <["a"=2, "b"=2, "c"=2]>
  sdy.mesh @mesh4 = <["a"=2, "b"=2, "c"=2, "d"=2]>
  sdy.mesh @mesh_a4 = <["a"=4]>
  func.func @main(%arg0: tensor<8x4xf32> {sdy.sharding = #sdy.sharding<@mesh3, [{"a", "b"}, {?}]>}, %arg1: tensor<4x16xf32> {sdy.sharding = #sdy.sharding<@mesh3, [{?}, {"a", "c"}]>}) -> (tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh3, [{?}, {"a", "c", ?}]>}) {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0] {sdy.sharding = #sdy.sharding_per_value<[<@mesh3, [{?}, {"a", "c", ?}]>]>} : (tensor<8x4xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
    return %0 : tensor<8x16xf32>
  }
}

// -----

module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  sdy.mesh @mesh3 = <["a"=2, "b"=2, "c"=2]>
  sdy.mesh @mesh4 = <["a"=2, "b"=2, "c"=2, "d"=2]>
  sdy.mesh @mesh_a4 = <["a"=4]>
  func.func @main(%arg0: tensor<2x8x4xf32> {sdy.sharding = #sdy.sharding<@mesh4, [{"d", ?}, {"a", "b"}, {?}]>}, %arg1: tensor<2x4x16xf32> {sdy.sharding = #sdy.sharding<@mesh4, [{?}, {"d", "c"}, {"b", "a"}]>}) -> (tensor<2x8x16xf32> {sdy.sharding = #sdy.sharding<@mesh4, [{"d", ?}, {?}, {"b", "a", ?}]>}) {
    %0 = stablehlo.dot_general %arg0, %arg1, batching_dims = [0] x [0], contracting_dims = [2] x [1] {sdy.sharding = #sdy.sharding_per_value<[<@mesh4, [{"d"}, {?}, {"b", "a", ?}]>]>} : (tensor<2x8x4xf32>, tensor<2x4x16xf32>) -> tensor<2x8x16xf32>
    return %0 : tensor<2x8x16xf32>
  }
}

// -----

module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  sdy.mesh @mesh3 = <["a"=2, "b"=2, "c"=2]>
  sdy.mesh @mesh4 = <["a"=2, "b"=2, "c"=2, "d"=2]>
  sdy.mesh @mesh_a4 = <["a"=4]>
  func.func @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"a"}]>}, %arg1: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{?}]>}) -> tensor<8xf32> {
    %0 = stablehlo.add %arg0, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh, [{}]>]>} : tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}

// -----

module {
  sdy.mesh @mesh = <["a"=2, "b"=2]>
  sdy.mesh @mesh3 = <["a"=2, "b"=2, "c"=2]>
  sdy.mesh @mesh4 = <["a"=2, "b"=2, "c"=2, "d"=2]>
  sdy.mesh @mesh_a4 = <["a"=4]>
  func.func @main(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh_a4, [{"a"}]>}, %arg1: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh_a4, [{"a":(1)2, ?}]>}) -> (tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh_a4, [{"a":(1)2, ?}]>}) {
    %0 = stablehlo.add %arg0, %arg1 {sdy.sharding = #sdy.sharding_per_value<[<@mesh_a4, [{"a":(1)2}]>]>} : tensor<8xf32>
    return %0 : tensor<8xf32>
  }
}
