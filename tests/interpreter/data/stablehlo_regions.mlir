module @regions {
  func.func public @main(%arg0: tensor<4xf32>, %arg1: tensor<i32>) -> (tensor<4xf32>, tensor<i32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>) {
    %cst = stablehlo.constant dense<3.000000e+00> : tensor<4xf32>
    %0 = stablehlo.multiply %arg0, %cst : tensor<4xf32>
    %1:2 = stablehlo.while(%iterArg = %arg0, %iterArg_0 = %arg1) : tensor<4xf32>, tensor<i32>
    cond {
      %c = stablehlo.constant dense<5> : tensor<i32>
      %4 = stablehlo.compare LT, %iterArg_0, %c, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %4 : tensor<i1>
    } do {
      %c = stablehlo.constant dense<1> : tensor<i32>
      %4 = stablehlo.add %iterArg_0, %c : tensor<i32>
      %c_1 = stablehlo.constant dense<2> : tensor<i32>
      %5 = stablehlo.remainder %iterArg_0, %c_1 : tensor<i32>
      %c_2 = stablehlo.constant dense<0> : tensor<i32>
      %6 = stablehlo.compare EQ, %5, %c_2, SIGNED : (tensor<i32>, tensor<i32>) -> tensor<i1>
      %7 = "stablehlo.if"(%6) ({
        %8 = stablehlo.add %iterArg, %0 : tensor<4xf32>
        stablehlo.return %8 : tensor<4xf32>
      }, {
        stablehlo.return %0 : tensor<4xf32>
      }) : (tensor<i1>) -> tensor<4xf32>
      stablehlo.return %7, %4 : tensor<4xf32>, tensor<i32>
    }
    %2 = stablehlo.while(%iterArg = %arg0) : tensor<4xf32>
    cond {
      %cst_0 = stablehlo.constant dense<0xFF800000> : tensor<f32>
      %4 = stablehlo.reduce(%iterArg init: %cst_0) applies stablehlo.maximum across dimensions = [0] : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
      %cst_1 = stablehlo.constant dense<1.000000e+02> : tensor<f32>
      %5 = stablehlo.compare LT, %4, %cst_1, FLOAT : (tensor<f32>, tensor<f32>) -> tensor<i1>
      stablehlo.return %5 : tensor<i1>
    } do {
      %4 = stablehlo.add %iterArg, %0 : tensor<4xf32>
      stablehlo.return %4 : tensor<4xf32>
    }
    %3:2 = "stablehlo.case"(%arg1) ({
      %cst_0 = stablehlo.constant dense<1.000000e+00> : tensor<f32>
      stablehlo.return %0, %cst_0 : tensor<4xf32>, tensor<f32>
    }, {
      %4 = stablehlo.negate %2 : tensor<4xf32>
      %cst_0 = stablehlo.constant dense<2.000000e+00> : tensor<f32>
      stablehlo.return %4, %cst_0 : tensor<4xf32>, tensor<f32>
    }, {
      %4 = stablehlo.sine %1#0 : tensor<4xf32>
      %cst_0 = stablehlo.constant dense<0.000000e+00> : tensor<f32>
      %5 = stablehlo.reduce(%4 init: %cst_0) applies stablehlo.add across dimensions = [0] : (tensor<4xf32>, tensor<f32>) -> tensor<f32>
      stablehlo.return %4, %5 : tensor<4xf32>, tensor<f32>
    }) : (tensor<i32>) -> (tensor<4xf32>, tensor<f32>)
    return %1#0, %1#1, %2, %3#0, %3#1 : tensor<4xf32>, tensor<i32>, tensor<4xf32>, tensor<4xf32>, tensor<f32>
  }
}
