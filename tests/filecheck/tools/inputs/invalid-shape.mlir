func.func @f(%a: tensor<2x3xf32>, %b: tensor<4x3xf32>) -> tensor<4x3xf32> {
  %r = "graph.add"(%a, %b) : (tensor<2x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  func.return %r : tensor<4x3xf32>
}
