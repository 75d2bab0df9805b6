func.func @softmax(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %s = graph.softmax %x axis = -1 : tensor<8x16xf32>
  func.return %s : tensor<8x16xf32>
}
