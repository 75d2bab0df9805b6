// An op without its type signature.
func.func @f(%a: tensor<2xf32>) -> tensor<2xf32> {
  %r = graph.relu %a tensor<2xf32>
  func.return %r : tensor<2xf32>
}
