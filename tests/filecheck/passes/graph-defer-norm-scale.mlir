// RUN: plmr-opt %s -p 'graph-defer-norm-scale{max-rows=8}' --split-input-file | filecheck %s
// RUN: plmr-opt %s -p graph-defer-norm-scale --split-input-file | filecheck %s --check-prefix=ONE

// By default (max-rows = 1) only the one-row norm (decode) moves its scale; the others
// keep their norm.
// ONE-LABEL: func.func @decode_qkv
// ONE:         graph.reciprocal
// ONE:         %qkv_scaled = graph.mul
// ONE-LABEL: func.func @ffn
// ONE-NEXT:    %f = graph.rmsnorm %h, %g
// ONE-LABEL: func.func @two_matmuls
// ONE-NEXT:    %n = graph.rmsnorm %x, %g
// ONE-NOT:     graph.reciprocal
// ONE-LABEL: func.func @other_user

// Decode's QKV projection: the norm reshaped to [1, 1, n, dim] and a batched GEMV over
// [kv heads, heads per group, dim, hd]. The matmul reads `x · g`; its output is scaled by
// the inverse RMS of each row (reshaped to the matmul's left operand, the last dim 1).
// CHECK-LABEL: func.func @decode_qkv
// CHECK-NEXT:    %n_xg = graph.mul %x, %g : (tensor<1x64xf32>, tensor<64xf32>) -> tensor<1x64xf32>
// CHECK-NEXT:    %[[SQ:.*]] = graph.mul %x, %x : (tensor<1x64xf32>, tensor<1x64xf32>) -> tensor<1x64xf32>
// CHECK-NEXT:    %n_ms = graph.reduce mean %[[SQ]] axes = [1] keepdims : tensor<1x64xf32> -> tensor<1x1xf32>
// CHECK-NEXT:    %[[EPS:.*]] = graph.constant dense<1.000000e-05> : tensor<f32>
// CHECK-NEXT:    %[[V:.*]] = graph.add %n_ms, %[[EPS]] : (tensor<1x1xf32>, tensor<f32>) -> tensor<1x1xf32>
// CHECK-NEXT:    %[[RMS:.*]] = graph.sqrt %[[V]] : tensor<1x1xf32>
// CHECK-NEXT:    %n_rstd = graph.reciprocal %[[RMS]] : tensor<1x1xf32>
// CHECK-NEXT:    %[[A:.*]] = graph.reshape %n_xg : tensor<1x64xf32> -> tensor<1x1x1x64xf32>
// CHECK-NEXT:    %qkv = graph.matmul %[[A]], %w : (tensor<1x1x1x64xf32>, tensor<2x3x64x16xf32>) -> tensor<2x3x1x16xf32>
// CHECK-NEXT:    %[[R:.*]] = graph.reshape %n_rstd : tensor<1x1xf32> -> tensor<1x1x1x1xf32>
// CHECK-NEXT:    %qkv_scaled = graph.mul %qkv, %[[R]] : (tensor<2x3x1x16xf32>, tensor<1x1x1x1xf32>) -> tensor<2x3x1x16xf32>
// CHECK-NEXT:    %y = graph.mul %qkv_scaled, %c : (tensor<2x3x1x16xf32>, tensor<1x16xf32>) -> tensor<2x3x1x16xf32>
// CHECK-NEXT:    func.return %y : tensor<2x3x1x16xf32>
// CHECK-NOT:     graph.rmsnorm
func.func @decode_qkv(%x: tensor<1x64xf32>, %g: tensor<64xf32>, %w: tensor<2x3x64x16xf32>, %c: tensor<1x16xf32>) -> tensor<2x3x1x16xf32> {
  %n = graph.rmsnorm %x, %g epsilon = 1.000000e-05 : (tensor<1x64xf32>, tensor<64xf32>) -> tensor<1x64xf32>
  %r = graph.reshape %n : tensor<1x64xf32> -> tensor<1x1x1x64xf32>
  %qkv = graph.matmul %r, %w : (tensor<1x1x1x64xf32>, tensor<2x3x64x16xf32>) -> tensor<2x3x1x16xf32>
  %y = graph.mul %qkv, %c : (tensor<2x3x1x16xf32>, tensor<1x16xf32>) -> tensor<2x3x1x16xf32>
  func.return %y : tensor<2x3x1x16xf32>
}

// -----

// The FFN's up and gate projections: three rows, the norm reshaped to [1, n, dim]
// against [2, dim, ffn]; the inverse RMS of each row broadcasts over both projections.
// CHECK-LABEL: func.func @ffn
// CHECK:         %f_rstd = graph.reciprocal %{{.*}} : tensor<3x1xf32>
// CHECK-NEXT:    %[[A:.*]] = graph.reshape %f_xg : tensor<3x64xf32> -> tensor<1x3x64xf32>
// CHECK-NEXT:    %both = graph.matmul %[[A]], %w13 : (tensor<1x3x64xf32>, tensor<2x64x32xf32>) -> tensor<2x3x32xf32>
// CHECK-NEXT:    %[[R:.*]] = graph.reshape %f_rstd : tensor<3x1xf32> -> tensor<1x3x1xf32>
// CHECK-NEXT:    %both_scaled = graph.mul %both, %[[R]] : (tensor<2x3x32xf32>, tensor<1x3x1xf32>) -> tensor<2x3x32xf32>
// CHECK-NEXT:    %up = graph.slice %both_scaled
func.func @ffn(%h: tensor<3x64xf32>, %g: tensor<64xf32>, %w13: tensor<2x64x32xf32>) -> tensor<1x3x32xf32> {
  %f = graph.rmsnorm %h, %g epsilon = 1.000000e-05 : (tensor<3x64xf32>, tensor<64xf32>) -> tensor<3x64xf32>
  %r = graph.reshape %f : tensor<3x64xf32> -> tensor<1x3x64xf32>
  %both = graph.matmul %r, %w13 : (tensor<1x3x64xf32>, tensor<2x64x32xf32>) -> tensor<2x3x32xf32>
  %up = graph.slice %both starts = [0, 0, 0] ends = [1, 3, 32] steps = [1, 1, 1] : tensor<2x3x32xf32> -> tensor<1x3x32xf32>
  %gate = graph.slice %both starts = [1, 0, 0] ends = [2, 3, 32] steps = [1, 1, 1] : tensor<2x3x32xf32> -> tensor<1x3x32xf32>
  %s = graph.silu %up : tensor<1x3x32xf32>
  %y = graph.mul %s, %gate : (tensor<1x3x32xf32>, tensor<1x3x32xf32>) -> tensor<1x3x32xf32>
  func.return %y : tensor<1x3x32xf32>
}

// -----

// Two matmuls of the same norm (`transpose_b` kept) read the one `x · g` and the one
// inverse RMS. A matmul whose result is only returned (the logits: no consumer to fold
// the multiply into) keeps reading the norm.
// CHECK-LABEL: func.func @two_matmuls
// CHECK-NEXT:    %n = graph.rmsnorm %x, %g
// CHECK-NEXT:    %n_xg = graph.mul %x, %g
// CHECK-COUNT-1: graph.reciprocal
// CHECK:         %a = graph.matmul %n_xg, %wa transpose_b : (tensor<2x64xf32>, tensor<100x64xf32>) -> tensor<2x100xf32>
// CHECK-NEXT:    %a_scaled = graph.mul %a, %n_rstd : (tensor<2x100xf32>, tensor<2x1xf32>) -> tensor<2x100xf32>
// CHECK-NEXT:    %b = graph.matmul %n_xg, %wb : (tensor<2x64xf32>, tensor<64x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT:    %b_scaled = graph.mul %b, %n_rstd : (tensor<2x8xf32>, tensor<2x1xf32>) -> tensor<2x8xf32>
// CHECK-NEXT:    %logits = graph.matmul %n, %head : (tensor<2x64xf32>, tensor<64x10xf32>) -> tensor<2x10xf32>
// CHECK-NEXT:    %ra = graph.relu %a_scaled
// CHECK-NEXT:    %rb = graph.relu %b_scaled
func.func @two_matmuls(%x: tensor<2x64xf32>, %g: tensor<64xf32>, %wa: tensor<100x64xf32>, %wb: tensor<64x8xf32>, %head: tensor<64x10xf32>) -> (tensor<2x100xf32>, tensor<2x8xf32>, tensor<2x10xf32>) {
  %n = graph.rmsnorm %x, %g epsilon = 1.000000e-06 : (tensor<2x64xf32>, tensor<64xf32>) -> tensor<2x64xf32>
  %a = graph.matmul %n, %wa transpose_b : (tensor<2x64xf32>, tensor<100x64xf32>) -> tensor<2x100xf32>
  %b = graph.matmul %n, %wb : (tensor<2x64xf32>, tensor<64x8xf32>) -> tensor<2x8xf32>
  %logits = graph.matmul %n, %head : (tensor<2x64xf32>, tensor<64x10xf32>) -> tensor<2x10xf32>
  %ra = graph.relu %a : tensor<2x100xf32>
  %rb = graph.relu %b : tensor<2x8xf32>
  func.return %ra, %rb, %logits : tensor<2x100xf32>, tensor<2x8xf32>, tensor<2x10xf32>
}

// -----

// A norm with a user other than a matmul keeps it (the matmul is still rewritten).
// CHECK-LABEL: func.func @other_user
// CHECK:         %n = graph.rmsnorm %x, %g
// CHECK:         %y = graph.matmul %n_xg, %w
// CHECK:         %y_scaled = graph.mul %y, %n_rstd
// CHECK:         %z = graph.add %n, %x
// CHECK-NEXT:    %t = graph.tanh %y_scaled
// CHECK-NEXT:    func.return %t, %z
func.func @other_user(%x: tensor<2x64xf32>, %g: tensor<64xf32>, %w: tensor<64x8xf32>) -> (tensor<2x8xf32>, tensor<2x64xf32>) {
  %n = graph.rmsnorm %x, %g epsilon = 1.000000e-05 : (tensor<2x64xf32>, tensor<64xf32>) -> tensor<2x64xf32>
  %y = graph.matmul %n, %w : (tensor<2x64xf32>, tensor<64x8xf32>) -> tensor<2x8xf32>
  %z = graph.add %n, %x : (tensor<2x64xf32>, tensor<2x64xf32>) -> tensor<2x64xf32>
  %t = graph.tanh %y : tensor<2x8xf32>
  func.return %t, %z : tensor<2x8xf32>, tensor<2x64xf32>
}

// -----

// The matmul does not contract the normalised dimension: `transpose_a` contracts the
// rows, a reshape regroups the normalised elements across rows, the norm is the right
// operand. All stay.
// CHECK-LABEL: func.func @not_contracted
// CHECK-NEXT:    %n = graph.rmsnorm %x, %g
// CHECK-NEXT:    %a = graph.matmul %n, %w transpose_a
// CHECK-NEXT:    %r = graph.reshape %n : tensor<4x16xf32> -> tensor<8x8xf32>
// CHECK-NEXT:    %b = graph.matmul %r, %v
// CHECK-NEXT:    %c = graph.matmul %u, %n
// CHECK-NEXT:    %ra = graph.relu %a
// CHECK-NEXT:    %rb = graph.relu %b
// CHECK-NEXT:    %rc = graph.relu %c
// CHECK-NEXT:    func.return
func.func @not_contracted(%x: tensor<4x16xf32>, %g: tensor<16xf32>, %w: tensor<4x8xf32>, %v: tensor<8x2xf32>, %u: tensor<3x4xf32>) -> (tensor<16x8xf32>, tensor<8x2xf32>, tensor<3x16xf32>) {
  %n = graph.rmsnorm %x, %g epsilon = 1.000000e-05 : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %a = graph.matmul %n, %w transpose_a : (tensor<4x16xf32>, tensor<4x8xf32>) -> tensor<16x8xf32>
  %r = graph.reshape %n : tensor<4x16xf32> -> tensor<8x8xf32>
  %b = graph.matmul %r, %v : (tensor<8x8xf32>, tensor<8x2xf32>) -> tensor<8x2xf32>
  %c = graph.matmul %u, %n : (tensor<3x4xf32>, tensor<4x16xf32>) -> tensor<3x16xf32>
  %ra = graph.relu %a : tensor<16x8xf32>
  %rb = graph.relu %b : tensor<8x2xf32>
  %rc = graph.relu %c : tensor<3x16xf32>
  func.return %ra, %rb, %rc : tensor<16x8xf32>, tensor<8x2xf32>, tensor<3x16xf32>
}

// -----

// A norm over the last two dimensions, flattened into the contracted one by a reshape.
// CHECK-LABEL: func.func @two_axes
// CHECK:         %n_ms = graph.reduce mean %{{.*}} axes = [1, 2] keepdims : tensor<3x4x8xf32> -> tensor<3x1x1xf32>
// CHECK:         %[[A:.*]] = graph.reshape %n_xg : tensor<3x4x8xf32> -> tensor<3x32xf32>
// CHECK-NEXT:    %y = graph.matmul %[[A]], %w
// CHECK-NEXT:    %[[R:.*]] = graph.reshape %n_rstd : tensor<3x1x1xf32> -> tensor<3x1xf32>
// CHECK-NEXT:    %y_scaled = graph.mul %y, %[[R]] : (tensor<3x5xf32>, tensor<3x1xf32>) -> tensor<3x5xf32>
func.func @two_axes(%x: tensor<3x4x8xf32>, %g: tensor<4x8xf32>, %w: tensor<32x5xf32>) -> tensor<3x5xf32> {
  %n = graph.rmsnorm %x, %g axis = -2 epsilon = 1.000000e-05 : (tensor<3x4x8xf32>, tensor<4x8xf32>) -> tensor<3x4x8xf32>
  %r = graph.reshape %n : tensor<3x4x8xf32> -> tensor<3x32xf32>
  %y = graph.matmul %r, %w : (tensor<3x32xf32>, tensor<32x5xf32>) -> tensor<3x5xf32>
  %e = graph.exp %y : tensor<3x5xf32>
  func.return %e : tensor<3x5xf32>
}
