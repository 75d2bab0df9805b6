// RUN: plmr-opt %s -p graph-fold-repeat-kv --split-input-file | filecheck %s
// RUN: plmr-opt %s -p 'graph-fold-repeat-kv{max-rows=1}' --split-input-file | filecheck %s --check-prefix=ROWS
// RUN: not plmr-opt %s -p 'graph-fold-repeat-kv{max-rows=-1}' 2>&1 | filecheck %s --check-prefix=ERR
// ERR: graph-fold-repeat-kv: max-rows must be 0 (any) or more, got -1
// RUN: plmr import %examples/hf/llama_decode.onnx | plmr-opt -p 'graph-canonicalize{unrepeat-kv=false},graph-fold-repeat-kv' | filecheck %s --check-prefix=EXPORT

// A decode step's attention, 4 query heads over 2 K/V heads, as exports write it: K and
// V repeated by unsqueeze, expand and reshape. The one query row of each of the 2 heads
// of a group become the 2 rows of one matmul against the un-repeated K (Kᵀ as
// `transpose_b`) and V; the repetitions go. The mask over positions, the softmax and
// the NaN guard run on the grouped scores, so nothing is reshaped between the matmuls.

// ROWS-LABEL: func.func @decode
// ROWS:         %s_grouped = graph.matmul %0, %k transpose_b
// CHECK-LABEL: func.func @decode
// CHECK-NEXT:    %0 = graph.reshape %q : tensor<1x4x1x16xf32> -> tensor<1x2x2x16xf32>
// CHECK-NEXT:    %s_grouped = graph.matmul %0, %k transpose_b : (tensor<1x2x2x16xf32>, tensor<1x2x8x16xf32>) -> tensor<1x2x2x8xf32>
// CHECK-NEXT:    %z = graph.add %s_grouped, %m : (tensor<1x2x2x8xf32>, tensor<1x1x1x8xf32>) -> tensor<1x2x2x8xf32>
// CHECK-NEXT:    %p = graph.softmax %z : tensor<1x2x2x8xf32>
// CHECK-NEXT:    %nan = graph.cmp ne %p, %p : (tensor<1x2x2x8xf32>, tensor<1x2x2x8xf32>) -> tensor<1x2x2x8xi1>
// CHECK-NEXT:    %zero = graph.constant dense<0.000000e+00> : tensor<f32>
// CHECK-NEXT:    %g = graph.where %nan, %zero, %p : (tensor<1x2x2x8xi1>, tensor<f32>, tensor<1x2x2x8xf32>) -> tensor<1x2x2x8xf32>
// CHECK-NEXT:    %o_grouped = graph.matmul %g, %v : (tensor<1x2x2x8xf32>, tensor<1x2x8x16xf32>) -> tensor<1x2x2x16xf32>
// CHECK-NEXT:    %o = graph.reshape %o_grouped : tensor<1x2x2x16xf32> -> tensor<1x4x1x16xf32>
// CHECK-NEXT:    func.return %o : tensor<1x4x1x16xf32>
func.func @decode(%q: tensor<1x4x1x16xf32>, %k: tensor<1x2x8x16xf32>, %v: tensor<1x2x8x16xf32>, %m: tensor<1x1x1x8xf32>) -> tensor<1x4x1x16xf32> {
  %ku = graph.reshape %k : tensor<1x2x8x16xf32> -> tensor<1x2x1x8x16xf32>
  %ke = graph.expand %ku : tensor<1x2x1x8x16xf32> -> tensor<1x2x2x8x16xf32>
  %kr = graph.reshape %ke : tensor<1x2x2x8x16xf32> -> tensor<1x4x8x16xf32>
  %s = graph.matmul %q, %kr transpose_b : (tensor<1x4x1x16xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x1x8xf32>
  %z = graph.add %s, %m : (tensor<1x4x1x8xf32>, tensor<1x1x1x8xf32>) -> tensor<1x4x1x8xf32>
  %p = graph.softmax %z : tensor<1x4x1x8xf32>
  %nan = graph.cmp ne %p, %p : (tensor<1x4x1x8xf32>, tensor<1x4x1x8xf32>) -> tensor<1x4x1x8xi1>
  %zero = graph.constant dense<0.0> : tensor<f32>
  %g = graph.where %nan, %zero, %p : (tensor<1x4x1x8xi1>, tensor<f32>, tensor<1x4x1x8xf32>) -> tensor<1x4x1x8xf32>
  %vu = graph.reshape %v : tensor<1x2x8x16xf32> -> tensor<1x2x1x8x16xf32>
  %ve = graph.expand %vu : tensor<1x2x1x8x16xf32> -> tensor<1x2x2x8x16xf32>
  %vr = graph.reshape %ve : tensor<1x2x2x8x16xf32> -> tensor<1x4x8x16xf32>
  %o = graph.matmul %g, %vr : (tensor<1x4x1x8xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x1x16xf32>
  func.return %o : tensor<1x4x1x16xf32>
}

// -----

// A prefill of 3 tokens with 6 query heads over 2 K/V heads (groups of 3): each group's
// [3 heads, 3 tokens] query rows are 9 rows of one matmul. The queries come from a
// reshape, which the regrouping reads from its source. The causal mask, the same for
// every head, is repeated over a group's heads (an index map, 3 x 3 values); the
// scaled scores, also returned, are reshaped back to heads for that. A repetition that
// something else reads stays for it.

// CHECK-LABEL: func.func @prefill
// CHECK-NEXT:    %ku = graph.reshape %k : tensor<1x2x3x4xf32> -> tensor<1x2x1x3x4xf32>
// CHECK-NEXT:    %ke = graph.expand %ku : tensor<1x2x1x3x4xf32> -> tensor<1x2x3x3x4xf32>
// CHECK-NEXT:    %kr = graph.reshape %ke : tensor<1x2x3x3x4xf32> -> tensor<1x6x3x4xf32>
// CHECK-NEXT:    %0 = graph.reshape %x : tensor<1x3x6x4xf32> -> tensor<1x2x9x4xf32>
// CHECK-NEXT:    %s_grouped = graph.matmul %0, %k transpose_b : (tensor<1x2x9x4xf32>, tensor<1x2x3x4xf32>) -> tensor<1x2x9x3xf32>
// CHECK-NEXT:    %t = graph.scale %s_grouped by 5.000000e-01 : tensor<1x2x9x3xf32>
// CHECK-NEXT:    %t_1 = graph.reshape %t : tensor<1x2x9x3xf32> -> tensor<1x6x3x3xf32>
// CHECK-NEXT:    %mask = graph.constant
// CHECK-NEXT:    %1 = graph.reshape %mask : tensor<3x3xf32> -> tensor<1x1x1x3x3xf32>
// CHECK-NEXT:    %2 = graph.expand %1 : tensor<1x1x1x3x3xf32> -> tensor<1x1x3x3x3xf32>
// CHECK-NEXT:    %3 = graph.reshape %2 : tensor<1x1x3x3x3xf32> -> tensor<1x1x9x3xf32>
// CHECK-NEXT:    %z = graph.add %t, %3 : (tensor<1x2x9x3xf32>, tensor<1x1x9x3xf32>) -> tensor<1x2x9x3xf32>
// CHECK-NEXT:    %p = graph.softmax %z : tensor<1x2x9x3xf32>
// CHECK-NEXT:    %o_grouped = graph.matmul %p, %v : (tensor<1x2x9x3xf32>, tensor<1x2x3x4xf32>) -> tensor<1x2x9x4xf32>
// CHECK-NEXT:    %o = graph.reshape %o_grouped : tensor<1x2x9x4xf32> -> tensor<1x6x3x4xf32>
// CHECK-NEXT:    func.return %o, %t_1, %kr : tensor<1x6x3x4xf32>, tensor<1x6x3x3xf32>, tensor<1x6x3x4xf32>
// With `max-rows=1` (as in plmr compile) the 3-row queries are left alone.
// ROWS-LABEL: func.func @prefill
// ROWS:         %s = graph.matmul %q, %kr transpose_b
// ROWS:         %o = graph.matmul %p, %vr
func.func @prefill(%x: tensor<1x3x6x4xf32>, %k: tensor<1x2x3x4xf32>, %v: tensor<1x2x3x4xf32>) -> (tensor<1x6x3x4xf32>, tensor<1x6x3x3xf32>, tensor<1x6x3x4xf32>) {
  %q = graph.reshape %x : tensor<1x3x6x4xf32> -> tensor<1x6x3x4xf32>
  %ku = graph.reshape %k : tensor<1x2x3x4xf32> -> tensor<1x2x1x3x4xf32>
  %ke = graph.expand %ku : tensor<1x2x1x3x4xf32> -> tensor<1x2x3x3x4xf32>
  %kr = graph.reshape %ke : tensor<1x2x3x3x4xf32> -> tensor<1x6x3x4xf32>
  %s = graph.matmul %q, %kr transpose_b : (tensor<1x6x3x4xf32>, tensor<1x6x3x4xf32>) -> tensor<1x6x3x3xf32>
  %t = graph.scale %s by 0.5 : tensor<1x6x3x3xf32>
  %mask = graph.constant dense<[[0.0, -1.0e+30, -1.0e+30], [0.0, 0.0, -1.0e+30], [0.0, 0.0, 0.0]]> : tensor<3x3xf32>
  %z = graph.add %t, %mask : (tensor<1x6x3x3xf32>, tensor<3x3xf32>) -> tensor<1x6x3x3xf32>
  %p = graph.softmax %z : tensor<1x6x3x3xf32>
  %vu = graph.reshape %v : tensor<1x2x3x4xf32> -> tensor<1x2x1x3x4xf32>
  %ve = graph.expand %vu : tensor<1x2x1x3x4xf32> -> tensor<1x2x3x3x4xf32>
  %vr = graph.reshape %ve : tensor<1x2x3x3x4xf32> -> tensor<1x6x3x4xf32>
  %o = graph.matmul %p, %vr : (tensor<1x6x3x3xf32>, tensor<1x6x3x4xf32>) -> tensor<1x6x3x4xf32>
  func.return %o, %t, %kr : tensor<1x6x3x4xf32>, tensor<1x6x3x3xf32>, tensor<1x6x3x4xf32>
}

// -----

// The scores stay in heads when an operand of the ops after them cannot be seen in
// groups (a bias per head, the same for all rows of a 3-row head): only the matmuls
// are regrouped.

// CHECK-LABEL: func.func @per_head_bias
// CHECK-NEXT:    %0 = graph.reshape %q : tensor<1x4x3x4xf32> -> tensor<1x2x6x4xf32>
// CHECK-NEXT:    %s_grouped = graph.matmul %0, %k transpose_b : (tensor<1x2x6x4xf32>, tensor<1x2x5x4xf32>) -> tensor<1x2x6x5xf32>
// CHECK-NEXT:    %s = graph.reshape %s_grouped : tensor<1x2x6x5xf32> -> tensor<1x4x3x5xf32>
// CHECK-NEXT:    %z = graph.add %s, %b : (tensor<1x4x3x5xf32>, tensor<1x4x1x5xf32>) -> tensor<1x4x3x5xf32>
// CHECK-NEXT:    %p = graph.softmax %z : tensor<1x4x3x5xf32>
// CHECK-NEXT:    %1 = graph.reshape %p : tensor<1x4x3x5xf32> -> tensor<1x2x6x5xf32>
// CHECK-NEXT:    %o_grouped = graph.matmul %1, %v : (tensor<1x2x6x5xf32>, tensor<1x2x5x4xf32>) -> tensor<1x2x6x4xf32>
func.func @per_head_bias(%q: tensor<1x4x3x4xf32>, %k: tensor<1x2x5x4xf32>, %v: tensor<1x2x5x4xf32>, %b: tensor<1x4x1x5xf32>) -> tensor<1x4x3x4xf32> {
  %ku = graph.reshape %k : tensor<1x2x5x4xf32> -> tensor<1x2x1x5x4xf32>
  %ke = graph.expand %ku : tensor<1x2x1x5x4xf32> -> tensor<1x2x2x5x4xf32>
  %kr = graph.reshape %ke : tensor<1x2x2x5x4xf32> -> tensor<1x4x5x4xf32>
  %s = graph.matmul %q, %kr transpose_b : (tensor<1x4x3x4xf32>, tensor<1x4x5x4xf32>) -> tensor<1x4x3x5xf32>
  %z = graph.add %s, %b : (tensor<1x4x3x5xf32>, tensor<1x4x1x5xf32>) -> tensor<1x4x3x5xf32>
  %p = graph.softmax %z : tensor<1x4x3x5xf32>
  %vu = graph.reshape %v : tensor<1x2x5x4xf32> -> tensor<1x2x1x5x4xf32>
  %ve = graph.expand %vu : tensor<1x2x1x5x4xf32> -> tensor<1x2x2x5x4xf32>
  %vr = graph.reshape %ve : tensor<1x2x2x5x4xf32> -> tensor<1x4x5x4xf32>
  %o = graph.matmul %p, %vr : (tensor<1x4x3x5xf32>, tensor<1x4x5x4xf32>) -> tensor<1x4x3x4xf32>
  func.return %o : tensor<1x4x3x4xf32>
}

// -----


// A repetition by concatenating one value along its unit dimension, in 3-D (heads
// first, no batch): regrouped the same way.

// CHECK-LABEL: func.func @concat
// CHECK-NEXT:    %0 = graph.reshape %p : tensor<4x2x3xf32> -> tensor<2x4x3xf32>
// CHECK-NEXT:    %1 = graph.reshape %u : tensor<2x1x3x8xf32> -> tensor<2x3x8xf32>
// CHECK-NEXT:    %o_grouped = graph.matmul %0, %1 : (tensor<2x4x3xf32>, tensor<2x3x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT:    %o = graph.reshape %o_grouped : tensor<2x4x8xf32> -> tensor<4x2x8xf32>
// CHECK-NEXT:    func.return %o : tensor<4x2x8xf32>
func.func @concat(%p: tensor<4x2x3xf32>, %u: tensor<2x1x3x8xf32>) -> tensor<4x2x8xf32> {
  %c = graph.concat %u, %u axis = 1 : (tensor<2x1x3x8xf32>, tensor<2x1x3x8xf32>) -> tensor<2x2x3x8xf32>
  %r = graph.reshape %c : tensor<2x2x3x8xf32> -> tensor<4x3x8xf32>
  %o = graph.matmul %p, %r : (tensor<4x2x3xf32>, tensor<4x3x8xf32>) -> tensor<4x2x8xf32>
  func.return %o : tensor<4x2x8xf32>
}

// -----

// Left alone: as many query heads as K/V heads (nothing repeated, H == Hkv), an expand
// that repeats the sequence rather than the heads, a transposed query operand (its rows
// are not consecutive per group), and queries that broadcast over the heads.

// CHECK-LABEL: func.func @not_repeat_kv
// CHECK-NEXT:    %s1 = graph.matmul %q2, %k transpose_b : (tensor<1x2x1x16xf32>, tensor<1x2x8x16xf32>) -> tensor<1x2x1x8xf32>
// CHECK-NEXT:    %e = graph.expand %w : tensor<1x2x1x4x8xf32> -> tensor<1x2x2x4x8xf32>
// CHECK-NEXT:    %r = graph.reshape %e : tensor<1x2x2x4x8xf32> -> tensor<1x2x8x8xf32>
// CHECK-NEXT:    %s2 = graph.matmul %p, %r : (tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
// CHECK-NEXT:    %ku = graph.reshape %k : tensor<1x2x8x16xf32> -> tensor<1x2x1x8x16xf32>
// CHECK-NEXT:    %ke = graph.expand %ku : tensor<1x2x1x8x16xf32> -> tensor<1x2x2x8x16xf32>
// CHECK-NEXT:    %kr = graph.reshape %ke : tensor<1x2x2x8x16xf32> -> tensor<1x4x8x16xf32>
// CHECK-NEXT:    %s3 = graph.matmul %qt, %kr transpose_a transpose_b : (tensor<1x4x16x1xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x1x8xf32>
// CHECK-NEXT:    %s4 = graph.matmul %b, %kr transpose_b : (tensor<1x1x1x16xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x1x8xf32>
func.func @not_repeat_kv(%q2: tensor<1x2x1x16xf32>, %k: tensor<1x2x8x16xf32>, %p: tensor<1x2x8x8xf32>, %w: tensor<1x2x1x4x8xf32>, %qt: tensor<1x4x16x1xf32>, %b: tensor<1x1x1x16xf32>) -> (tensor<1x2x1x8xf32>, tensor<1x2x8x8xf32>, tensor<1x4x1x8xf32>, tensor<1x4x1x8xf32>) {
  %s1 = graph.matmul %q2, %k transpose_b : (tensor<1x2x1x16xf32>, tensor<1x2x8x16xf32>) -> tensor<1x2x1x8xf32>
  %e = graph.expand %w : tensor<1x2x1x4x8xf32> -> tensor<1x2x2x4x8xf32>
  %r = graph.reshape %e : tensor<1x2x2x4x8xf32> -> tensor<1x2x8x8xf32>
  %s2 = graph.matmul %p, %r : (tensor<1x2x8x8xf32>, tensor<1x2x8x8xf32>) -> tensor<1x2x8x8xf32>
  %ku = graph.reshape %k : tensor<1x2x8x16xf32> -> tensor<1x2x1x8x16xf32>
  %ke = graph.expand %ku : tensor<1x2x1x8x16xf32> -> tensor<1x2x2x8x16xf32>
  %kr = graph.reshape %ke : tensor<1x2x2x8x16xf32> -> tensor<1x4x8x16xf32>
  %s3 = graph.matmul %qt, %kr transpose_a transpose_b : (tensor<1x4x16x1xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x1x8xf32>
  %s4 = graph.matmul %b, %kr transpose_b : (tensor<1x1x1x16xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x1x8xf32>
  func.return %s1, %s2, %s3, %s4 : tensor<1x2x1x8xf32>, tensor<1x2x8x8xf32>, tensor<1x4x1x8xf32>, tensor<1x4x1x8xf32>
}

// The LLaMA decode export (2 layers, 4 query heads over 2 K/V heads of 16): in each
// layer the scores and P·V read the cache with the new row, `present`, as it is, the
// mask and softmax between them grouped; no expand is left.

// EXPORT-LABEL: func.func @main
// EXPORT:         graph.matmul %{{.*}}, %{{.*}} transpose_b : (tensor<1x2x2x16xf32>, tensor<1x2x72x16xf32>) -> tensor<1x2x2x72xf32>
// EXPORT-NEXT:    graph.add %{{.*}}, %{{.*}} : (tensor<1x2x2x72xf32>, tensor<1x1x1x72xf32>) -> tensor<1x2x2x72xf32>
// EXPORT-NEXT:    graph.softmax %{{.*}} : tensor<1x2x2x72xf32>
// EXPORT:         graph.matmul %{{.*}}, %present.0.value : (tensor<1x2x2x72xf32>, tensor<1x2x72x16xf32>) -> tensor<1x2x2x16xf32>
// EXPORT:         graph.matmul %{{.*}}, %{{.*}} transpose_b : (tensor<1x2x2x16xf32>, tensor<1x2x72x16xf32>) -> tensor<1x2x2x72xf32>
// EXPORT:         graph.matmul %{{.*}}, %present.1.value : (tensor<1x2x2x72xf32>, tensor<1x2x72x16xf32>) -> tensor<1x2x2x16xf32>
// EXPORT-NOT:     graph.expand
