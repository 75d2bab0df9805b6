// RUN: plmr-opt %s -p graph-canonicalize --split-input-file | filecheck %s
// RUN: plmr-opt %s -p 'graph-canonicalize{unrepeat-kv=false}' --split-input-file | filecheck %s --check-prefix=KEEP

// SDPA's NaN guard after a softmax of scores plus a causal mask (-inf above the
// diagonal: every row keeps a finite entry) goes.
// CHECK-LABEL: func.func @guard_causal
// CHECK:         %p = graph.softmax %z : tensor<1x2x4x4xf32>
// CHECK-NEXT:    func.return %p : tensor<1x2x4x4xf32>
func.func @guard_causal(%q: tensor<1x2x4x8xf32>, %k: tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32> {
  %s = graph.matmul %q, %k transpose_b : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x4xf32>
  %mask = graph.constant dense<"0x00000000000080FF000080FF000080FF0000000000000000000080FF000080FF000000000000000000000000000080FF00000000000000000000000000000000"> : tensor<4x4xf32>
  %z = graph.add %s, %mask : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = graph.softmax %z : tensor<1x2x4x4xf32>
  %nan = graph.cmp ne %p, %p : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xi1>
  %zero = graph.constant dense<0.0> : tensor<f32>
  %r = graph.where %nan, %zero, %p : (tensor<1x2x4x4xi1>, tensor<f32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  func.return %r : tensor<1x2x4x4xf32>
}

// -----

// Without a mask, and in the `where(not(isnan(p)), p, 0)` spelling, the guard goes too.
// CHECK-LABEL: func.func @guard_unmasked
// CHECK-NEXT:    %p = graph.softmax %s : tensor<2x4x4xf32>
// CHECK-NEXT:    func.return %p : tensor<2x4x4xf32>
func.func @guard_unmasked(%s: tensor<2x4x4xf32>) -> tensor<2x4x4xf32> {
  %p = graph.softmax %s : tensor<2x4x4xf32>
  %nan = graph.cmp ne %p, %p : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xi1>
  %ok = graph.not %nan : tensor<2x4x4xi1>
  %zero = graph.constant dense<0.0> : tensor<f32>
  %r = graph.where %ok, %p, %zero : (tensor<2x4x4xi1>, tensor<2x4x4xf32>, tensor<f32>) -> tensor<2x4x4xf32>
  func.return %r : tensor<2x4x4xf32>
}

// -----

// The guard stays when a mask row is entirely -inf (its softmax is NaN).
// CHECK-LABEL: func.func @guard_masked_row
// CHECK:         %r = graph.where %nan, %zero, %p
func.func @guard_masked_row(%s: tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32> {
  %mask = graph.constant dense<"0x000080FF000080FF000080FF000080FF0000000000000000000080FF000080FF000000000000000000000000000080FF00000000000000000000000000000000"> : tensor<4x4xf32>
  %z = graph.add %s, %mask : (tensor<1x2x4x4xf32>, tensor<4x4xf32>) -> tensor<1x2x4x4xf32>
  %p = graph.softmax %z : tensor<1x2x4x4xf32>
  %nan = graph.cmp ne %p, %p : (tensor<1x2x4x4xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xi1>
  %zero = graph.constant dense<0.0> : tensor<f32>
  %r = graph.where %nan, %zero, %p : (tensor<1x2x4x4xi1>, tensor<f32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x4xf32>
  func.return %r : tensor<1x2x4x4xf32>
}

// -----

// The guard stays when the mask is an input (BERT's attention_mask), or when the scores
// come through a division that may make them infinite.
// CHECK-LABEL: func.func @guard_unknown
// CHECK:         %r = graph.where %nan, %zero, %p
// CHECK:         %r2 = graph.where %nan2, %zero, %p2
func.func @guard_unknown(%s: tensor<2x4x4xf32>, %m: tensor<2x1x4xf32>, %d: tensor<2x4x4xf32>) -> (tensor<2x4x4xf32>, tensor<2x4x4xf32>) {
  %z = graph.add %s, %m : (tensor<2x4x4xf32>, tensor<2x1x4xf32>) -> tensor<2x4x4xf32>
  %p = graph.softmax %z : tensor<2x4x4xf32>
  %nan = graph.cmp ne %p, %p : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xi1>
  %zero = graph.constant dense<0.0> : tensor<f32>
  %r = graph.where %nan, %zero, %p : (tensor<2x4x4xi1>, tensor<f32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %q = graph.div %s, %d : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %p2 = graph.softmax %q : tensor<2x4x4xf32>
  %nan2 = graph.cmp ne %p2, %p2 : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xi1>
  %r2 = graph.where %nan2, %zero, %p2 : (tensor<2x4x4xi1>, tensor<f32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  func.return %r, %r2 : tensor<2x4x4xf32>, tensor<2x4x4xf32>
}

// -----

// Grouped-query attention as the LLaMA export spells it (2 K/V heads, 4 query heads):
// K and V are repeated by unsqueeze/expand/reshape, Kᵀ flattened to 3-D, transposed and
// scaled. The matmuls take the un-repeated K/V, broadcast over the 2 query heads of
// each group, Kᵀ becomes the `transpose_b` flag, and the softmax runs in the grouped
// shape, so the reshapes between the two matmuls cancel.
// CHECK-LABEL: func.func @gqa
// CHECK-NEXT:    %[[KS:.*]] = graph.scale %k by 5.000000e-01 : tensor<1x2x8x16xf32>
// CHECK-NEXT:    %[[K:.*]] = graph.reshape %[[KS]] : tensor<1x2x8x16xf32> -> tensor<1x2x1x8x16xf32>
// CHECK-NEXT:    %[[Q:.*]] = graph.reshape %q : tensor<1x4x8x16xf32> -> tensor<1x2x2x8x16xf32>
// CHECK-NEXT:    %[[S:.*]] = graph.matmul %[[Q]], %[[K]] transpose_b : (tensor<1x2x2x8x16xf32>, tensor<1x2x1x8x16xf32>) -> tensor<1x2x2x8x8xf32>
// CHECK-NEXT:    %[[P:.*]] = graph.softmax %[[S]] axis = 4 : tensor<1x2x2x8x8xf32>
// CHECK-NEXT:    %[[V:.*]] = graph.reshape %v : tensor<1x2x8x16xf32> -> tensor<1x2x1x8x16xf32>
// CHECK-NEXT:    %[[O:.*]] = graph.matmul %[[P]], %[[V]] : (tensor<1x2x2x8x8xf32>, tensor<1x2x1x8x16xf32>) -> tensor<1x2x2x8x16xf32>
// CHECK-NEXT:    %{{.*}} = graph.reshape %[[O]] : tensor<1x2x2x8x16xf32> -> tensor<1x4x8x16xf32>
// CHECK-NEXT:    func.return
// Without `unrepeat-kv` (as in plmr compile) the repetition stays, Kᵀ still reaches the
// matmul's flag and the scale still moves to the un-repeated K.
// KEEP-LABEL: func.func @gqa
// KEEP-NEXT:    %[[KS:.*]] = graph.scale %k by 5.000000e-01 : tensor<1x2x8x16xf32>
// KEEP-NEXT:    %[[KU:.*]] = graph.reshape %[[KS]] : tensor<1x2x8x16xf32> -> tensor<1x2x1x8x16xf32>
// KEEP-NEXT:    %[[KE:.*]] = graph.expand %[[KU]] : tensor<1x2x1x8x16xf32> -> tensor<1x2x2x8x16xf32>
// KEEP-NEXT:    %[[KR:.*]] = graph.reshape %[[KE]] : tensor<1x2x2x8x16xf32> -> tensor<1x4x8x16xf32>
// KEEP-NEXT:    %{{.*}} = graph.matmul %q, %[[KR]] transpose_b : (tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x8xf32>
func.func @gqa(%q: tensor<1x4x8x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>) -> tensor<1x4x8x16xf32> {
  %ku = graph.reshape %k : tensor<1x2x8x16xf32> -> tensor<1x2x1x8x16xf32>
  %ke = graph.expand %ku : tensor<1x2x1x8x16xf32> -> tensor<1x2x2x8x16xf32>
  %k3 = graph.reshape %ke : tensor<1x2x2x8x16xf32> -> tensor<4x8x16xf32>
  %kt = graph.transpose %k3 perm = [0, 2, 1] : tensor<4x8x16xf32> -> tensor<4x16x8xf32>
  %k4 = graph.reshape %kt : tensor<4x16x8xf32> -> tensor<1x4x16x8xf32>
  %ks = graph.scale %k4 by 5.000000e-01 : tensor<1x4x16x8xf32>
  %s = graph.matmul %q, %ks : (tensor<1x4x8x16xf32>, tensor<1x4x16x8xf32>) -> tensor<1x4x8x8xf32>
  %p = graph.softmax %s : tensor<1x4x8x8xf32>
  %vu = graph.reshape %v : tensor<1x2x8x16xf32> -> tensor<1x2x1x8x16xf32>
  %ve = graph.expand %vu : tensor<1x2x1x8x16xf32> -> tensor<1x2x2x8x16xf32>
  %vr = graph.reshape %ve : tensor<1x2x2x8x16xf32> -> tensor<1x4x8x16xf32>
  %o = graph.matmul %p, %vr : (tensor<1x4x8x8xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  func.return %o : tensor<1x4x8x16xf32>
}

// -----

// A repetition via concat of one value along a unit dimension is recognised too.
// CHECK-LABEL: func.func @gqa_concat
// CHECK-NEXT:    %[[P:.*]] = graph.reshape %p : tensor<4x3x3xf32> -> tensor<2x2x3x3xf32>
// CHECK-NEXT:    %[[O:.*]] = graph.matmul %[[P]], %u : (tensor<2x2x3x3xf32>, tensor<2x1x3x8xf32>) -> tensor<2x2x3x8xf32>
// CHECK-NEXT:    %{{.*}} = graph.reshape %[[O]] : tensor<2x2x3x8xf32> -> tensor<4x3x8xf32>
func.func @gqa_concat(%p: tensor<4x3x3xf32>, %u: tensor<2x1x3x8xf32>) -> tensor<4x3x8xf32> {
  %c = graph.concat %u, %u axis = 1 : (tensor<2x1x3x8xf32>, tensor<2x1x3x8xf32>) -> tensor<2x2x3x8xf32>
  %r = graph.reshape %c : tensor<2x2x3x8xf32> -> tensor<4x3x8xf32>
  %o = graph.matmul %p, %r : (tensor<4x3x3xf32>, tensor<4x3x8xf32>) -> tensor<4x3x8xf32>
  func.return %o : tensor<4x3x8xf32>
}

// -----

// Not a head repetition: the reshape merges the repeated dimension with the following
// one (the sequence), or the query heads broadcast (size 1) over the repeated heads.
// CHECK-LABEL: func.func @gqa_negative
// CHECK:         graph.matmul %p, %r : (tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
// CHECK:         graph.matmul %b, %r2 : (tensor<1x1x8x8xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
func.func @gqa_negative(%p: tensor<1x2x8x8xf32>, %v: tensor<1x2x1x4x8xf32>, %b: tensor<1x1x8x8xf32>, %w: tensor<1x2x8x16xf32>) -> (tensor<1x2x8x8xf32>, tensor<1x4x8x16xf32>) {
  %e = graph.expand %v : tensor<1x2x1x4x8xf32> -> tensor<1x2x2x4x8xf32>
  %r = graph.reshape %e : tensor<1x2x2x4x8xf32> -> tensor<1x2x8x8xf32>
  %o = graph.matmul %p, %r : (tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %wu = graph.reshape %w : tensor<1x2x8x16xf32> -> tensor<1x2x1x8x16xf32>
  %we = graph.expand %wu : tensor<1x2x1x8x16xf32> -> tensor<1x2x2x8x16xf32>
  %r2 = graph.reshape %we : tensor<1x2x2x8x16xf32> -> tensor<1x4x8x16xf32>
  %o2 = graph.matmul %b, %r2 : (tensor<1x1x8x8xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x16xf32>
  func.return %o, %o2 : tensor<1x2x8x8xf32>, tensor<1x4x8x16xf32>
}

// -----

// A mask input on the left of the sum stays a possible mask too.
// CHECK-LABEL: func.func @guard_mask_first
// CHECK:         %r = graph.where %nan, %zero, %p
func.func @guard_mask_first(%q: tensor<2x4x8xf32>, %k: tensor<2x4x8xf32>, %m: tensor<2x4x4xf32>) -> tensor<2x4x4xf32> {
  %s = graph.matmul %q, %k transpose_b : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x4xf32>
  %z = graph.add %m, %s : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  %p = graph.softmax %z : tensor<2x4x4xf32>
  %nan = graph.cmp ne %p, %p : (tensor<2x4x4xf32>, tensor<2x4x4xf32>) -> tensor<2x4x4xi1>
  %zero = graph.constant dense<0.0> : tensor<f32>
  %r = graph.where %nan, %zero, %p : (tensor<2x4x4xi1>, tensor<f32>, tensor<2x4x4xf32>) -> tensor<2x4x4xf32>
  func.return %r : tensor<2x4x4xf32>
}
