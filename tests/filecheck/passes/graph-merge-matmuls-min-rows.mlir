// RUN: plmr-opt %s -p 'graph-merge-matmuls{min-rows=2}' --split-input-file | filecheck %s
// RUN: plmr import %examples/hf/llama_decode.onnx | plmr-opt -p 'graph-canonicalize,graph-merge-matmuls{min-rows=2}' | filecheck %s --check-prefix=DECODE
// RUN: plmr import %examples/hf/llama_prefill.onnx | plmr-opt -p 'graph-canonicalize,graph-merge-matmuls{min-rows=2}' | filecheck %s --check-prefix=PREFILL
// RUN: not plmr-opt %s -p 'graph-merge-matmuls{min-rows=-1}' --split-input-file 2>&1 | filecheck %s --check-prefix=ERR

// With min-rows 2, products of two or more rows merge (a prefill's projections) ...

// CHECK-LABEL: func.func @rows
// CHECK-NEXT:    %0 = graph.constant dense<{{.*}}> : tensor<2x5xf32>
// CHECK-NEXT:    %1 = graph.matmul %x, %0 : (tensor<3x2xf32>, tensor<2x5xf32>) -> tensor<3x5xf32>
// CHECK-NEXT:    %q, %k = graph.split %1 axis = 1 sizes = [3, 2] : tensor<3x5xf32> -> (tensor<3x3xf32>, tensor<3x2xf32>)
func.func @rows(%x: tensor<3x2xf32>) -> (tensor<3x3xf32>, tensor<3x2xf32>) {
  %wq = graph.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %wk = graph.constant dense<[[0.5, -1.0], [2.0, 0.25]]> : tensor<2x2xf32>
  %q = graph.matmul %x, %wq : (tensor<3x2xf32>, tensor<2x3xf32>) -> tensor<3x3xf32>
  %k = graph.matmul %x, %wk : (tensor<3x2xf32>, tensor<2x2xf32>) -> tensor<3x2xf32>
  func.return %q, %k : tensor<3x3xf32>, tensor<3x2xf32>
}

// -----

// ... while one-row products (a decode step's GEMVs, rows counted over every dimension
// but the last) stay apart.

// CHECK-LABEL: func.func @one_row
// CHECK-COUNT-2: graph.matmul
// CHECK-NOT:     graph.split
func.func @one_row(%x: tensor<1x1x2xf32>) -> (tensor<1x1x3xf32>, tensor<1x1x2xf32>) {
  %wq = graph.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %wk = graph.constant dense<[[0.5, -1.0], [2.0, 0.25]]> : tensor<2x2xf32>
  %q = graph.matmul %x, %wq : (tensor<1x1x2xf32>, tensor<2x3xf32>) -> tensor<1x1x3xf32>
  %k = graph.matmul %x, %wk : (tensor<1x1x2xf32>, tensor<2x2xf32>) -> tensor<1x1x2xf32>
  func.return %q, %k : tensor<1x1x3xf32>, tensor<1x1x2xf32>
}

// -----

// One-row projections by heads (graph-fold-heads' form) merge whatever min-rows when they
// read the same row and share the KV heads (2) and the head dimension (2): each weight
// viewed as [2, G, K, D] (K's G is 1), concatenated along G, one product split back;
// a weight with other heads (3) stays apart. By reference the parts are views.

// CHECK-LABEL: func.func @heads
// CHECK-NEXT:    %0 = graph.reshape %x : tensor<1x1x2xf32> -> tensor<1x1x1x2xf32>
// CHECK-NEXT:    %1 = graph.weight concat 1 ("q" in "{{.*}}w.data" at 0 heads [2, 2] : tensor<2x2x2x2xf32>, "k" in "{{.*}}w.data" at 64 heads [2, 1] : tensor<2x1x2x2xf32>) : tensor<2x3x2x2xf32>
// CHECK-NEXT:    %heads_proj = graph.matmul %0, %1 : (tensor<1x1x1x2xf32>, tensor<2x3x2x2xf32>) -> tensor<2x3x1x2xf32>
// CHECK-NEXT:    %q, %2 = graph.split %heads_proj axis = 1 sizes = [2, 1] : tensor<2x3x1x2xf32> -> (tensor<2x2x1x2xf32>, tensor<2x1x1x2xf32>)
// CHECK-NEXT:    %k = graph.reshape %2 : tensor<2x1x1x2xf32> -> tensor<2x1x2xf32>
// CHECK:         %o = graph.matmul %x, %wo : (tensor<1x1x2xf32>, tensor<3x2x2xf32>) -> tensor<3x1x2xf32>
func.func @heads(%x: tensor<1x1x2xf32>) -> (tensor<2x2x1x2xf32>, tensor<2x1x2xf32>, tensor<3x1x2xf32>) {
  %row = graph.reshape %x : tensor<1x1x2xf32> -> tensor<1x1x1x2xf32>
  %wq = graph.weight "q" in "w.data" at 0 heads [2, 2] : tensor<2x2x2x2xf32>
  %q = graph.matmul %row, %wq : (tensor<1x1x1x2xf32>, tensor<2x2x2x2xf32>) -> tensor<2x2x1x2xf32>
  %wk = graph.weight "k" in "w.data" at 64 heads [2] : tensor<2x2x2xf32>
  %k = graph.matmul %x, %wk : (tensor<1x1x2xf32>, tensor<2x2x2xf32>) -> tensor<2x1x2xf32>
  %wo = graph.weight "o" in "w.data" at 0 heads [3] : tensor<3x2x2xf32>
  %o = graph.matmul %x, %wo : (tensor<1x1x2xf32>, tensor<3x2x2xf32>) -> tensor<3x1x2xf32>
  func.return %q, %k, %o : tensor<2x2x1x2xf32>, tensor<2x1x2xf32>, tensor<3x1x2xf32>
}

// -----

// Flat one-row projections of one row with the same N whose results one elementwise op
// combines are one head each: stacked, [1, 2, 1, N], split along the stack (the FFN's
// gate and up). One of the same width read apart (a per-head program's projection)
// stays apart, and so does one whose result is then split into heads (for
// graph-fold-heads).

// CHECK-LABEL: func.func @gate_up
// CHECK:         %[[P:.*]] = graph.matmul %{{.*}}, %{{.*}} : (tensor<1x1x1x2xf32>, tensor<1x2x2x3xf32>) -> tensor<1x2x1x3xf32>
// CHECK-NEXT:    %{{.*}}, %{{.*}} = graph.split %[[P]] axis = 1 sizes = [1, 1]
// CHECK:         %q = graph.matmul %x, %wq : (tensor<1x1x2xf32>, tensor<2x4xf32>) -> tensor<1x1x4xf32>
// CHECK-NEXT:    %h = graph.reshape %q : tensor<1x1x4xf32> -> tensor<1x2x1x2xf32>
// CHECK-NEXT:    %z = graph.matmul %x, %wz : (tensor<1x1x2xf32>, tensor<2x3xf32>) -> tensor<1x1x3xf32>
func.func @gate_up(%x: tensor<1x1x2xf32>) -> (tensor<1x1x3xf32>, tensor<1x2x1x2xf32>, tensor<1x1x3xf32>) {
  %wz = graph.constant dense<[[-1.0, 2.0, 0.5], [3.0, -0.5, 1.0]]> : tensor<2x3xf32>
  %wg = graph.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %wu = graph.constant dense<[[0.5, -1.0, 2.0], [2.0, 0.25, -3.0]]> : tensor<2x3xf32>
  %wq = graph.constant dense<[[0.5, -1.0, 2.0, 1.0], [2.0, 0.25, -3.0, 4.0]]> : tensor<2x4xf32>
  %g = graph.matmul %x, %wg : (tensor<1x1x2xf32>, tensor<2x3xf32>) -> tensor<1x1x3xf32>
  %u = graph.matmul %x, %wu : (tensor<1x1x2xf32>, tensor<2x3xf32>) -> tensor<1x1x3xf32>
  %y = graph.mul %g, %u : (tensor<1x1x3xf32>, tensor<1x1x3xf32>) -> tensor<1x1x3xf32>
  %q = graph.matmul %x, %wq : (tensor<1x1x2xf32>, tensor<2x4xf32>) -> tensor<1x1x4xf32>
  %h = graph.reshape %q : tensor<1x1x4xf32> -> tensor<1x2x1x2xf32>
  %z = graph.matmul %x, %wz : (tensor<1x1x2xf32>, tensor<2x3xf32>) -> tensor<1x1x3xf32>
  func.return %y, %h, %z : tensor<1x1x3xf32>, tensor<1x2x1x2xf32>, tensor<1x1x3xf32>
}

// The decode export keeps its flat projections of Q, K and V apart and stacks each
// layer's gate and up; the prefill export (8 tokens) merges
// Q, K and V into one matmul per layer.

// DECODE-NOT: graph.split {{.*}} axis = 2
// DECODE-COUNT-2: graph.split {{.*}} axis = 1 sizes = [1, 1]
// DECODE-NOT: graph.split {{.*}} axis = 2
// PREFILL-COUNT-2: graph.split {{%[0-9]+}} axis = 2 sizes = [64, 32, 32]{{.*}}

// ERR: graph-merge-matmuls: min-rows=-1 is negative; give the fewest rows a product must have to merge (0: any)
