// RUN: plmr-opt %s -p graph-fold-heads --split-input-file | filecheck %s --check-prefixes=CHECK,ONE
// RUN: plmr-opt %s -p 'graph-fold-heads{rows=true}' --split-input-file | filecheck %s --check-prefixes=CHECK,ROWS
// RUN: plmr import %examples/hf/llama_decode.onnx -o %t.mlir
// RUN: plmr-opt %t.mlir -p graph-kv-state,graph-canonicalize{unrepeat-kv=false},graph-fold-rotate-half,graph-fold-repeat-kv{max-rows=1},transpose-elim,graph-defer-norm-scale{max-rows=1},graph-fold-heads | filecheck %s --check-prefix=DECODE

// A one-row projection viewed as 2 heads of 4, through the norm's per-row scale: the
// weight becomes one 4x4 weight per head (columns 4h..4h+3 of %w), the product is
// [2, 1, 4] from the start and the scale is applied on that shape.

// CHECK-LABEL: func.func @heads
// CHECK-NEXT:    %[[ROW:.*]] = graph.reshape %x : tensor<1x4xf32> -> tensor<1x1x4xf32>
// CHECK-NEXT:    %[[W:.*]] = graph.constant dense<{{\[\[\[}}0.000000e+00, 1.000000e+00, 2.000000e+00, 3.000000e+00], [8.000000e+00, 9.000000e+00, 1.000000e+01, 1.100000e+01]{{.*}}]]]> : tensor<2x4x4xf32>
// CHECK-NEXT:    %q = graph.matmul %[[ROW]], %[[W]] : (tensor<1x1x4xf32>, tensor<2x4x4xf32>) -> tensor<2x1x4xf32>
// CHECK-NEXT:    %s = graph.mul %q, %r : (tensor<2x1x4xf32>, tensor<1x1xf32>) -> tensor<2x1x4xf32>
// CHECK-NEXT:    %h = graph.reshape %s : tensor<2x1x4xf32> -> tensor<1x2x1x4xf32>
// CHECK-NEXT:    func.return %h : tensor<1x2x1x4xf32>
func.func @heads(%x: tensor<1x4xf32>, %r: tensor<1x1xf32>) -> tensor<1x2x1x4xf32> {
  %w = graph.constant dense<[[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], [8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0], [16.0, 17.0, 18.0, 19.0, 20.0, 21.0, 22.0, 23.0], [24.0, 25.0, 26.0, 27.0, 28.0, 29.0, 30.0, 31.0]]> : tensor<4x8xf32>
  %q = graph.matmul %x, %w : (tensor<1x4xf32>, tensor<4x8xf32>) -> tensor<1x8xf32>
  %s = graph.mul %q, %r : (tensor<1x8xf32>, tensor<1x1xf32>) -> tensor<1x8xf32>
  %h = graph.reshape %s : tensor<1x8xf32> -> tensor<1x2x1x4xf32>
  func.return %h : tensor<1x2x1x4xf32>
}

// -----

// RoPE on whole heads, then the heads regrouped per KV head ([1, 4, 1, 4] -> [1, 2, 2, 4],
// graph-fold-repeat-kv's form): the last reshape wins, so the product is grouped from the
// start; cos/sin (one value per feature of a head) broadcast on the new shape. The
// weights are references: `heads [2, 2]`, with the rotation of the second projection.

// CHECK-LABEL: func.func @grouped_rope
// CHECK-NEXT:    %[[ROW:.*]] = graph.reshape %x : tensor<1x4xf32> -> tensor<1x1x1x4xf32>
// CHECK-NEXT:    %[[W:.*]] = graph.weight "q" in "{{.*}}q.onnx.data" at 64 heads [2, 2] : tensor<2x2x4x4xf32>
// CHECK-NEXT:    %q = graph.matmul %[[ROW]], %[[W]] : (tensor<1x1x1x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x1x4xf32>
// CHECK-NEXT:    %qc = graph.mul %q, %cos : (tensor<2x2x1x4xf32>, tensor<1x4xf32>) -> tensor<2x2x1x4xf32>
// CHECK-NEXT:    %[[ROW2:.*]] = graph.reshape %x : tensor<1x4xf32> -> tensor<1x1x1x4xf32>
// CHECK-NEXT:    %[[WR:.*]] = graph.weight "q" in "{{.*}}q.onnx.data" at 64 rotate 4 heads [2, 2] : tensor<2x2x4x4xf32>
// CHECK-NEXT:    %qr = graph.matmul %[[ROW2]], %[[WR]] : (tensor<1x1x1x4xf32>, tensor<2x2x4x4xf32>) -> tensor<2x2x1x4xf32>
// CHECK-NEXT:    %qs = graph.mul %qr, %sin : (tensor<2x2x1x4xf32>, tensor<1x4xf32>) -> tensor<2x2x1x4xf32>
// CHECK-NEXT:    %roped = graph.add %qc, %qs : (tensor<2x2x1x4xf32>, tensor<2x2x1x4xf32>) -> tensor<2x2x1x4xf32>
// CHECK-NEXT:    %g = graph.reshape %roped : tensor<2x2x1x4xf32> -> tensor<1x2x2x4xf32>
// CHECK-NEXT:    func.return %g : tensor<1x2x2x4xf32>
func.func @grouped_rope(%x: tensor<1x4xf32>, %cos: tensor<1x4xf32>, %sin: tensor<1x4xf32>) -> tensor<1x2x2x4xf32> {
  %w = graph.weight "q" in "q.onnx.data" at 64 : tensor<4x16xf32>
  %q = graph.matmul %x, %w : (tensor<1x4xf32>, tensor<4x16xf32>) -> tensor<1x16xf32>
  %qh = graph.reshape %q : tensor<1x16xf32> -> tensor<1x4x1x4xf32>
  %qc = graph.mul %qh, %cos : (tensor<1x4x1x4xf32>, tensor<1x4xf32>) -> tensor<1x4x1x4xf32>
  %wr = graph.weight "q" in "q.onnx.data" at 64 rotate 4 : tensor<4x16xf32>
  %qr = graph.matmul %x, %wr : (tensor<1x4xf32>, tensor<4x16xf32>) -> tensor<1x16xf32>
  %qrh = graph.reshape %qr : tensor<1x16xf32> -> tensor<1x4x1x4xf32>
  %qs = graph.mul %qrh, %sin : (tensor<1x4x1x4xf32>, tensor<1x4xf32>) -> tensor<1x4x1x4xf32>
  %roped = graph.add %qc, %qs : (tensor<1x4x1x4xf32>, tensor<1x4x1x4xf32>) -> tensor<1x4x1x4xf32>
  %g = graph.reshape %roped : tensor<1x4x1x4xf32> -> tensor<1x2x2x4xf32>
  func.return %g : tensor<1x2x2x4xf32>
}

// -----

// The output projection of heads merged back into one row: the sum over the heads of
// each head's row times its rows of the weight (`rows [2, 4]`), the head dimension
// outermost.

// CHECK-LABEL: func.func @output
// CHECK-NEXT:    %y_row = graph.reshape %o : tensor<1x2x1x4xf32> -> tensor<2x4x1xf32>
// CHECK-NEXT:    %y_rows = graph.weight "o" in "{{.*}}q.onnx.data" at 64 rows [2, 4] : tensor<2x4x3xf32>
// CHECK-NEXT:    %y_heads = graph.transpose %y_row perm = [1, 0, 2] : tensor<2x4x1xf32> -> tensor<4x2x1xf32>
// CHECK-NEXT:    %y_by_dim = graph.transpose %y_rows perm = [1, 0, 2] : tensor<2x4x3xf32> -> tensor<4x2x3xf32>
// CHECK-NEXT:    %y_by_head = graph.mul %y_heads, %y_by_dim : (tensor<4x2x1xf32>, tensor<4x2x3xf32>) -> tensor<4x2x3xf32>
// CHECK-NEXT:    %y_sum = graph.reduce sum %y_by_head axes = [0, 1] : tensor<4x2x3xf32> -> tensor<3xf32>
// CHECK-NEXT:    %y = graph.reshape %y_sum : tensor<3xf32> -> tensor<1x3xf32>
// CHECK-NEXT:    func.return %y : tensor<1x3xf32>
func.func @output(%o: tensor<1x2x1x4xf32>) -> tensor<1x3xf32> {
  %flat = graph.reshape %o : tensor<1x2x1x4xf32> -> tensor<1x8xf32>
  %w = graph.weight "o" in "q.onnx.data" at 64 : tensor<8x3xf32>
  %y = graph.matmul %flat, %w : (tensor<1x8xf32>, tensor<8x3xf32>) -> tensor<1x3xf32>
  func.return %y : tensor<1x3xf32>
}

// -----

// Left alone: a projection of two rows (a prefill's: its heads are blocked with its
// rows), a reshape that does not split the last dimension into heads, a projection
// whose flat value is also read elsewhere, and a split of a matmul by a computed weight.

// CHECK-LABEL: func.func @not_heads
// CHECK-NEXT:    %w = graph.constant dense<5.000000e-01> : tensor<4x8xf32>
// CHECK-NEXT:    %q = graph.matmul %x2, %w : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
// CHECK-NEXT:    %a = graph.reshape %q : tensor<2x8xf32> -> tensor<2x2x4xf32>
// CHECK-NEXT:    %p = graph.matmul %x, %w : (tensor<1x4xf32>, tensor<4x8xf32>) -> tensor<1x8xf32>
// CHECK-NEXT:    %b = graph.reshape %p : tensor<1x8xf32> -> tensor<8x1xf32>
// CHECK-NEXT:    %u = graph.matmul %x, %w : (tensor<1x4xf32>, tensor<4x8xf32>) -> tensor<1x8xf32>
// CHECK-NEXT:    %c = graph.reshape %u : tensor<1x8xf32> -> tensor<1x2x4xf32>
// CHECK-NEXT:    %v = graph.matmul %x, %m : (tensor<1x4xf32>, tensor<4x8xf32>) -> tensor<1x8xf32>
// CHECK-NEXT:    %d = graph.reshape %v : tensor<1x8xf32> -> tensor<1x2x4xf32>
func.func @not_heads(%x2: tensor<2x4xf32>, %x: tensor<1x4xf32>, %m: tensor<4x8xf32>) -> (tensor<2x2x4xf32>, tensor<8x1xf32>, tensor<1x2x4xf32>, tensor<1x8xf32>, tensor<1x2x4xf32>) {
  %w = graph.constant dense<0.5> : tensor<4x8xf32>
  %q = graph.matmul %x2, %w : (tensor<2x4xf32>, tensor<4x8xf32>) -> tensor<2x8xf32>
  %a = graph.reshape %q : tensor<2x8xf32> -> tensor<2x2x4xf32>
  %p = graph.matmul %x, %w : (tensor<1x4xf32>, tensor<4x8xf32>) -> tensor<1x8xf32>
  %b = graph.reshape %p : tensor<1x8xf32> -> tensor<8x1xf32>
  %u = graph.matmul %x, %w : (tensor<1x4xf32>, tensor<4x8xf32>) -> tensor<1x8xf32>
  %c = graph.reshape %u : tensor<1x8xf32> -> tensor<1x2x4xf32>
  %v = graph.matmul %x, %m : (tensor<1x4xf32>, tensor<4x8xf32>) -> tensor<1x8xf32>
  %d = graph.reshape %v : tensor<1x8xf32> -> tensor<1x2x4xf32>
  func.return %a, %b, %c, %u, %d : tensor<2x2x4xf32>, tensor<8x1xf32>, tensor<1x2x4xf32>, tensor<1x8xf32>, tensor<1x2x4xf32>
}

// -----

// With `rows`: a projection of 3 rows (a prefill's) split into 2 heads of 2 and the rows moved behind
// the heads ([1, 3, 4] -> [1, 3, 2, 2] -> [1, 2, 3, 2]): one 4x2 weight per head
// (`heads [2]`), the rows' product batched over the heads from the start.

// Without `rows` (plmr compile's setting) it stays as it is.

// CHECK-LABEL: func.func @prefill_heads
// ONE-NEXT:      %w = graph.weight
// ONE-NEXT:      %q = graph.matmul %x, %w : (tensor<1x3x4xf32>, tensor<4x4xf32>) -> tensor<1x3x4xf32>
// ROWS-NEXT:     %q_heads = graph.weight "q" in "{{.*}}q.onnx.data" at 64 heads [2] : tensor<2x4x2xf32>
// ROWS-NEXT:     %q = graph.matmul %x, %q_heads : (tensor<1x3x4xf32>, tensor<2x4x2xf32>) -> tensor<2x3x2xf32>
// ROWS-NEXT:     %t = graph.reshape %q : tensor<2x3x2xf32> -> tensor<1x2x3x2xf32>
// ROWS-NEXT:     func.return %t : tensor<1x2x3x2xf32>
func.func @prefill_heads(%x: tensor<1x3x4xf32>) -> tensor<1x2x3x2xf32> {
  %w = graph.weight "q" in "q.onnx.data" at 64 : tensor<4x4xf32>
  %q = graph.matmul %x, %w : (tensor<1x3x4xf32>, tensor<4x4xf32>) -> tensor<1x3x4xf32>
  %h = graph.reshape %q : tensor<1x3x4xf32> -> tensor<1x3x2x2xf32>
  %t = graph.transpose %h perm = [0, 2, 1, 3] : tensor<1x3x2x2xf32> -> tensor<1x2x3x2xf32>
  func.return %t : tensor<1x2x3x2xf32>
}

// -----

// With `rows`: the heads of 3 rows merged back and projected ([1, 2, 3, 2] -> [1, 3, 2, 2] -> [1, 3, 4]
// times W): each head's rows times its rows of W (`rows [2, 2]`), summed over the heads.

// CHECK-LABEL: func.func @prefill_output
// ONE-NEXT:      %t = graph.transpose %o
// ROWS-NEXT:     %y_rows = graph.weight "o" in "{{.*}}q.onnx.data" at 64 rows [2, 2] : tensor<2x2x3xf32>
// ROWS-NEXT:     %y_by_head = graph.matmul %o, %y_rows : (tensor<1x2x3x2xf32>, tensor<2x2x3xf32>) -> tensor<1x2x3x3xf32>
// ROWS-NEXT:     %y = graph.reduce sum %y_by_head axes = [1] : tensor<1x2x3x3xf32> -> tensor<1x3x3xf32>
// ROWS-NEXT:     func.return %y : tensor<1x3x3xf32>
func.func @prefill_output(%o: tensor<1x2x3x2xf32>) -> tensor<1x3x3xf32> {
  %t = graph.transpose %o perm = [0, 2, 1, 3] : tensor<1x2x3x2xf32> -> tensor<1x3x2x2xf32>
  %flat = graph.reshape %t : tensor<1x3x2x2xf32> -> tensor<1x3x4xf32>
  %w = graph.weight "o" in "q.onnx.data" at 64 : tensor<4x3xf32>
  %y = graph.matmul %flat, %w : (tensor<1x3x4xf32>, tensor<4x3xf32>) -> tensor<1x3x3xf32>
  func.return %y : tensor<1x3x3xf32>
}

// The checked-in LLaMA decode export (hidden 64, 4/2 heads of 16, 2 layers, weights
// inline): per layer, Q and its rotation grouped per KV head, K, its rotation and V per
// KV head, and the output projection summed by head; no flat projection is left to
// split into heads.

// DECODE-NOT:  -> tensor<1x1x32xf32>
// DECODE:      graph.matmul %{{.*}}, %{{.*}} : (tensor<1x1x64xf32>, tensor<2x64x16xf32>) -> tensor<2x1x16xf32>
// DECODE:      graph.matmul %{{.*}}, %{{.*}} : (tensor<1x1x64xf32>, tensor<2x64x16xf32>) -> tensor<2x1x16xf32>
// DECODE:      graph.matmul %{{.*}}, %{{.*}} : (tensor<1x1x64xf32>, tensor<2x64x16xf32>) -> tensor<2x1x16xf32>
// DECODE:      graph.matmul %{{.*}}, %{{.*}} : (tensor<1x1x1x64xf32>, tensor<2x2x64x16xf32>) -> tensor<2x2x1x16xf32>
// DECODE:      graph.matmul %{{.*}}, %{{.*}} : (tensor<1x1x1x64xf32>, tensor<2x2x64x16xf32>) -> tensor<2x2x1x16xf32>
// DECODE:      graph.reduce sum %{{.*}} axes = [0, 1, 2] : tensor<16x2x2x64xf32> -> tensor<64xf32>
// DECODE-NOT:  -> tensor<1x1x32xf32>
// DECODE:      graph.reduce sum %{{.*}} axes = [0, 1, 2] : tensor<16x2x2x64xf32> -> tensor<64xf32>
