// RUN: plmr-opt %s -p 'convert-graph-to-loop,neptune-fuse{strategy=rolling}' --split-input-file | filecheck %s

// Decode attention (one query row): the probabilities exp(s − m) are read by the sum and
// by P·V, which reads each again for every index of the head dimension (64); they are no
// larger than V, so they are stored once (one exp per element), not recomputed by both.

// CHECK-LABEL: func.func @decode_attention
// CHECK:       %p = loop.nest (%{{.*}}, %{{.*}}) to (1, 32) [parallel, parallel] -> tensor<1x32xf32> {
// CHECK:         math.exp
// CHECK:       %l = loop.nest (%{{.*}}) to (1, 1, 32) [parallel, parallel, reduction]
// CHECK-NOT:     math.exp
// CHECK:         loop.read %p[
// CHECK:       %pv = loop.nest (%{{.*}}) to (1, 64, 32) [parallel, parallel, reduction]
// CHECK-NOT:     math.exp
// CHECK:         loop.read %p[
// CHECK:       func.return
func.func @decode_attention(%q: tensor<1x64xf32>, %k: tensor<32x64xf32>, %v: tensor<32x64xf32>) -> tensor<1x64xf32> {
  %s = graph.matmul %q, %k transpose_b : (tensor<1x64xf32>, tensor<32x64xf32>) -> tensor<1x32xf32>
  %m = graph.reduce max %s axes = [-1] keepdims : tensor<1x32xf32> -> tensor<1x1xf32>
  %d = graph.sub %s, %m : (tensor<1x32xf32>, tensor<1x1xf32>) -> tensor<1x32xf32>
  %p = graph.exp %d : tensor<1x32xf32>
  %l = graph.reduce sum %p axes = [-1] keepdims : tensor<1x32xf32> -> tensor<1x1xf32>
  %pv = graph.matmul %p, %v : (tensor<1x32xf32>, tensor<32x64xf32>) -> tensor<1x64xf32>
  %o = graph.div %pv, %l : (tensor<1x64xf32>, tensor<1x1xf32>) -> tensor<1x64xf32>
  func.return %o : tensor<1x64xf32>
}

// -----

// A short head dimension (16): the probabilities are inlined into both readers and the
// sum fuses into the max (the online softmax).

// CHECK-LABEL: func.func @short_head
// CHECK-NOT:   to (1, 32) [parallel, parallel]
// CHECK:       %m, %l = loop.nest
// CHECK:         math.exp
// CHECK:       %pv = loop.nest (%{{.*}}) to (1, 16, 32) [parallel, parallel, reduction]
// CHECK:         math.exp
// CHECK:       func.return
func.func @short_head(%q: tensor<1x16xf32>, %k: tensor<32x16xf32>, %v: tensor<32x16xf32>) -> tensor<1x16xf32> {
  %s = graph.matmul %q, %k transpose_b : (tensor<1x16xf32>, tensor<32x16xf32>) -> tensor<1x32xf32>
  %m = graph.reduce max %s axes = [-1] keepdims : tensor<1x32xf32> -> tensor<1x1xf32>
  %d = graph.sub %s, %m : (tensor<1x32xf32>, tensor<1x1xf32>) -> tensor<1x32xf32>
  %p = graph.exp %d : tensor<1x32xf32>
  %l = graph.reduce sum %p axes = [-1] keepdims : tensor<1x32xf32> -> tensor<1x1xf32>
  %pv = graph.matmul %p, %v : (tensor<1x32xf32>, tensor<32x16xf32>) -> tensor<1x16xf32>
  %o = graph.div %pv, %l : (tensor<1x16xf32>, tensor<1x1xf32>) -> tensor<1x16xf32>
  func.return %o : tensor<1x16xf32>
}

// -----

// Prefill (a row per query, 128 queries): the probabilities are larger than V and
// FlashAttention's fusion needs them inlined: max, sum and P·V become one nest.

// CHECK-LABEL: func.func @prefill_attention
// CHECK-NOT:   to (128, 32) [parallel, parallel]
// CHECK:       %p_max, %p_sum, %o_unscaled = loop.nest (%i0, %i1) to (128, 32) [parallel, reduction]
// CHECK-NOT:   -> tensor<128x32xf32>
// CHECK:       func.return
func.func @prefill_attention(%q: tensor<128x64xf32>, %k: tensor<32x64xf32>, %v: tensor<32x64xf32>) -> tensor<128x64xf32> {
  %s = graph.matmul %q, %k transpose_b : (tensor<128x64xf32>, tensor<32x64xf32>) -> tensor<128x32xf32>
  %p = graph.softmax %s : tensor<128x32xf32>
  %o = graph.matmul %p, %v : (tensor<128x32xf32>, tensor<32x64xf32>) -> tensor<128x64xf32>
  func.return %o : tensor<128x64xf32>
}
