// Plain scaled-dot-product attention: the program Neptune-style fusion turns into
// FlashAttention. q: [seq, d], k and v: [kv_len, d].
func.func @main(%q: tensor<16x32xf32> {plmr.name = "q"}, %k: tensor<64x32xf32> {plmr.name = "k"},
                %v: tensor<64x32xf32> {plmr.name = "v"}) -> (tensor<16x32xf32> {plmr.name = "o"}) {
  %s = graph.matmul %q, %k transpose_b : (tensor<16x32xf32>, tensor<64x32xf32>) -> tensor<16x64xf32>
  %ss = graph.scale %s by 0.17677669529663687 : tensor<16x64xf32>
  %p = graph.softmax %ss axis = 1 : tensor<16x64xf32>
  %o = graph.matmul %p, %v : (tensor<16x64xf32>, tensor<64x32xf32>) -> tensor<16x32xf32>
  func.return %o : tensor<16x32xf32>
}
