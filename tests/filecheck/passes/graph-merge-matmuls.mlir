// RUN: plmr-opt %s -p graph-merge-matmuls --split-input-file | filecheck %s
// RUN: plmr import %examples/hf/llama_decode.onnx | plmr-opt -p graph-canonicalize,graph-merge-matmuls | filecheck %s --check-prefix=EXPORT

// Q, K and V read the same input through constant weights: one matmul, split back.

// CHECK-LABEL: func.func @qkv
// CHECK-NEXT:    %0 = graph.constant dense<{{.*}}> : tensor<4x8xf32>
// CHECK-NEXT:    %1 = graph.matmul %x, %0 : (tensor<1x4xf32>, tensor<4x8xf32>) -> tensor<1x8xf32>
// CHECK-NEXT:    %q, %k, %v = graph.split %1 axis = 1 sizes = [4, 2, 2] : tensor<1x8xf32> -> (tensor<1x4xf32>, tensor<1x2xf32>, tensor<1x2xf32>)
// CHECK-NEXT:    %s = graph.add %k, %v : (tensor<1x2xf32>, tensor<1x2xf32>) -> tensor<1x2xf32>
// CHECK-NEXT:    func.return %q, %s : tensor<1x4xf32>, tensor<1x2xf32>
func.func @qkv(%x: tensor<1x4xf32>) -> (tensor<1x4xf32>, tensor<1x2xf32>) {
  %wq = graph.constant dense<[[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [9.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0]]> : tensor<4x4xf32>
  %wk = graph.constant dense<[[0.5, -1.0], [2.0, 0.25], [-3.0, 1.5], [1.0, 1.0]]> : tensor<4x2xf32>
  %wv = graph.constant dense<[[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]]> : tensor<4x2xf32>
  %q = graph.matmul %x, %wq : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
  %k = graph.matmul %x, %wk : (tensor<1x4xf32>, tensor<4x2xf32>) -> tensor<1x2xf32>
  %v = graph.matmul %x, %wv : (tensor<1x4xf32>, tensor<4x2xf32>) -> tensor<1x2xf32>
  %s = graph.add %k, %v : (tensor<1x2xf32>, tensor<1x2xf32>) -> tensor<1x2xf32>
  func.return %q, %s : tensor<1x4xf32>, tensor<1x2xf32>
}

// -----

// Transposed weights ([out, in]) are concatenated along their first dimension; a batched
// input splits along its last one.

// CHECK-LABEL: func.func @transposed
// CHECK-NEXT:    %0 = graph.constant dense<{{.*}}> : tensor<5x3xf32>
// CHECK-NEXT:    %1 = graph.matmul %x, %0 transpose_b : (tensor<2x1x3xf32>, tensor<5x3xf32>) -> tensor<2x1x5xf32>
// CHECK-NEXT:    %a, %b = graph.split %1 axis = 2 sizes = [2, 3] : tensor<2x1x5xf32> -> (tensor<2x1x2xf32>, tensor<2x1x3xf32>)
func.func @transposed(%x: tensor<2x1x3xf32>) -> (tensor<2x1x2xf32>, tensor<2x1x3xf32>) {
  %wa = graph.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %wb = graph.constant dense<[[1.0, -1.0, 0.5], [0.0, 2.0, 1.0], [3.0, 0.0, -2.0]]> : tensor<3x3xf32>
  %a = graph.matmul %x, %wa transpose_b : (tensor<2x1x3xf32>, tensor<2x3xf32>) -> tensor<2x1x2xf32>
  %b = graph.matmul %x, %wb transpose_b : (tensor<2x1x3xf32>, tensor<3x3xf32>) -> tensor<2x1x3xf32>
  func.return %a, %b : tensor<2x1x2xf32>, tensor<2x1x3xf32>
}

// -----

// Nothing merges: different inputs, a computed right operand, different transpose flags.

// CHECK-LABEL: func.func @apart
// CHECK-COUNT-4: graph.matmul
// CHECK-NOT:     graph.split
func.func @apart(%x: tensor<1x4xf32>, %y: tensor<1x4xf32>, %w: tensor<4x2xf32>) -> (tensor<1x2xf32>, tensor<1x2xf32>, tensor<1x2xf32>, tensor<1x2xf32>) {
  %c = graph.constant dense<1.0> : tensor<4x2xf32>
  %d = graph.constant dense<2.0> : tensor<2x4xf32>
  %a = graph.matmul %x, %c : (tensor<1x4xf32>, tensor<4x2xf32>) -> tensor<1x2xf32>
  %b = graph.matmul %y, %c : (tensor<1x4xf32>, tensor<4x2xf32>) -> tensor<1x2xf32>
  %e = graph.matmul %x, %w : (tensor<1x4xf32>, tensor<4x2xf32>) -> tensor<1x2xf32>
  %f = graph.matmul %x, %d transpose_b : (tensor<1x4xf32>, tensor<2x4xf32>) -> tensor<1x2xf32>
  func.return %a, %b, %e, %f : tensor<1x2xf32>, tensor<1x2xf32>, tensor<1x2xf32>, tensor<1x2xf32>
}

// -----

// Weights by reference stay references: the merged weight is their concatenation,
// `graph.weight concat`, which nothing reads at compile time (the runtime concatenates
// the parts when it places the weight). A by-reference weight and an inline constant do
// not merge with each other.

// CHECK-LABEL: func.func @by_reference
// CHECK-NEXT:    %c = graph.constant dense<1.000000e+00> : tensor<4x2xf32>
// CHECK-NEXT:    %0 = graph.weight concat 1 ("q" in "{{.*}}w.onnx.data" at 0 : tensor<4x4xf32>, "k" in "{{.*}}w.onnx.data" at 64 rotate 2 : tensor<4x2xf32>) : tensor<4x6xf32>
// CHECK-NEXT:    %1 = graph.matmul %x, %0 : (tensor<1x4xf32>, tensor<4x6xf32>) -> tensor<1x6xf32>
// CHECK-NEXT:    %q, %k = graph.split %1 axis = 1 sizes = [4, 2] : tensor<1x6xf32> -> (tensor<1x4xf32>, tensor<1x2xf32>)
// CHECK-NEXT:    %e = graph.matmul %x, %c : (tensor<1x4xf32>, tensor<4x2xf32>) -> tensor<1x2xf32>
func.func @by_reference(%x: tensor<1x4xf32>) -> (tensor<1x4xf32>, tensor<1x2xf32>, tensor<1x2xf32>) {
  %wq = graph.weight "q" in "w.onnx.data" at 0 : tensor<4x4xf32>
  %wk = graph.weight "k" in "w.onnx.data" at 64 rotate 2 : tensor<4x2xf32>
  %c = graph.constant dense<1.0> : tensor<4x2xf32>
  %q = graph.matmul %x, %wq : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
  %k = graph.matmul %x, %wk : (tensor<1x4xf32>, tensor<4x2xf32>) -> tensor<1x2xf32>
  %e = graph.matmul %x, %c : (tensor<1x4xf32>, tensor<4x2xf32>) -> tensor<1x2xf32>
  func.return %q, %k, %e : tensor<1x4xf32>, tensor<1x2xf32>, tensor<1x2xf32>
}

// The decode export (2 layers): per layer, Q, K and V become one matmul, gate and up
// another.

// EXPORT-COUNT-2: graph.split {{%[0-9]+}} axis = 2 sizes = [64, 32, 32]{{.*}}
// EXPORT-NOT:     graph.split {{%[0-9]+}} axis = 2 sizes = [64, 32, 32]
