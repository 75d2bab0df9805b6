// A LLaMA-style decoder block at toy size, written by hand in the `graph` dialect:
// token embedding (gather), RMSNorm, Q/K/V projections, causal attention with two heads,
// output projection, residual, RMSNorm, SwiGLU feed-forward, residual.
// seq = 8, dim = 16, heads = 2 (head dim 8), ffn = 32, vocab = 64.
func.func @main(%ids: tensor<8xi64> {plmr.name = "token_ids"},
                %embed: tensor<64x16xf32> {plmr.name = "embedding"},
                %wq: tensor<16x16xf32>, %wk: tensor<16x16xf32>, %wv: tensor<16x16xf32>,
                %wo: tensor<16x16xf32>, %w_gate: tensor<16x32xf32>, %w_up: tensor<16x32xf32>,
                %w_down: tensor<32x16xf32>, %g1: tensor<16xf32>, %g2: tensor<16xf32>)
    -> (tensor<8x16xf32> {plmr.name = "hidden"}) {
  %x = graph.gather %embed, %ids : (tensor<64x16xf32>, tensor<8xi64>) -> tensor<8x16xf32>
  %h = graph.rmsnorm %x, %g1 epsilon = 1.0e-06 : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %q = graph.matmul %h, %wq : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %k = graph.matmul %h, %wk : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %v = graph.matmul %h, %wv : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %q2 = graph.reshape %q : tensor<8x16xf32> -> tensor<8x2x8xf32>
  %k2 = graph.reshape %k : tensor<8x16xf32> -> tensor<8x2x8xf32>
  %v2 = graph.reshape %v : tensor<8x16xf32> -> tensor<8x2x8xf32>
  %qh = graph.transpose %q2 perm = [1, 0, 2] : tensor<8x2x8xf32> -> tensor<2x8x8xf32>
  %kh = graph.transpose %k2 perm = [1, 0, 2] : tensor<8x2x8xf32> -> tensor<2x8x8xf32>
  %vh = graph.transpose %v2 perm = [1, 0, 2] : tensor<8x2x8xf32> -> tensor<2x8x8xf32>
  %s = graph.matmul %qh, %kh transpose_b : (tensor<2x8x8xf32>, tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %ss = graph.scale %s by 0.35355339059327373 : tensor<2x8x8xf32>
  %mask = graph.constant dense<[[0.0, -1.0e9, -1.0e9, -1.0e9, -1.0e9, -1.0e9, -1.0e9, -1.0e9],
                                [0.0, 0.0, -1.0e9, -1.0e9, -1.0e9, -1.0e9, -1.0e9, -1.0e9],
                                [0.0, 0.0, 0.0, -1.0e9, -1.0e9, -1.0e9, -1.0e9, -1.0e9],
                                [0.0, 0.0, 0.0, 0.0, -1.0e9, -1.0e9, -1.0e9, -1.0e9],
                                [0.0, 0.0, 0.0, 0.0, 0.0, -1.0e9, -1.0e9, -1.0e9],
                                [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0e9, -1.0e9],
                                [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0e9],
                                [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]]> : tensor<8x8xf32>
  %sm = graph.add %ss, %mask : (tensor<2x8x8xf32>, tensor<8x8xf32>) -> tensor<2x8x8xf32>
  %p = graph.softmax %sm : tensor<2x8x8xf32>
  %o = graph.matmul %p, %vh : (tensor<2x8x8xf32>, tensor<2x8x8xf32>) -> tensor<2x8x8xf32>
  %ot = graph.transpose %o perm = [1, 0, 2] : tensor<2x8x8xf32> -> tensor<8x2x8xf32>
  %oc = graph.reshape %ot : tensor<8x2x8xf32> -> tensor<8x16xf32>
  %attn = graph.matmul %oc, %wo : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %r1 = graph.add %x, %attn : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  %h2 = graph.rmsnorm %r1, %g2 epsilon = 1.0e-06 : (tensor<8x16xf32>, tensor<16xf32>) -> tensor<8x16xf32>
  %gate = graph.matmul %h2, %w_gate : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %up = graph.matmul %h2, %w_up : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %act = graph.silu %gate : tensor<8x32xf32>
  %gu = graph.mul %act, %up : (tensor<8x32xf32>, tensor<8x32xf32>) -> tensor<8x32xf32>
  %down = graph.matmul %gu, %w_down : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %out = graph.add %r1, %down : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  func.return %out : tensor<8x16xf32>
}
