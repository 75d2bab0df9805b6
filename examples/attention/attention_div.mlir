builtin.module {
  func.func @main(%q: tensor<1x2x16x8xf32> {plmr.name = "q"}, %k: tensor<1x2x16x8xf32> {plmr.name = "k"}, %v: tensor<1x2x16x8xf32> {plmr.name = "v"}, %mask: tensor<1x1x16x16xf32> {plmr.name = "mask"}) -> (tensor<1x2x16x8xf32> {plmr.name = "o"}) {
    %kt = graph.transpose %k perm = [0, 1, 3, 2] : tensor<1x2x16x8xf32> -> tensor<1x2x8x16xf32>
    %scores = graph.matmul %q, %kt : (tensor<1x2x16x8xf32>, tensor<1x2x8x16xf32>) -> tensor<1x2x16x16xf32>
    %scaled = graph.scale %scores by 3.535533966440824e-01 : tensor<1x2x16x16xf32>
    %masked = graph.add %scaled, %mask : (tensor<1x2x16x16xf32>, tensor<1x1x16x16xf32>) -> tensor<1x2x16x16xf32>
    %probs = graph.softmax %masked : tensor<1x2x16x16xf32>
    %o = graph.matmul %probs, %v : (tensor<1x2x16x16xf32>, tensor<1x2x16x8xf32>) -> tensor<1x2x16x8xf32>
    func.return %o : tensor<1x2x16x8xf32>
  }
}
