// RUN: plmr-opt %s -p graph-fold-rotate-half --split-input-file | filecheck %s
// RUN: plmr import %examples/hf/llama_external.onnx | plmr-opt -p graph-fold-rotate-half | filecheck %s --check-prefix=EXPORT
// RUN: plmr import %examples/hf/llama_decode.onnx -o %t.mlir
// RUN: plmr-opt %t.mlir -p graph-canonicalize,graph-fold-rotate-half | filecheck %s --check-prefix=DECODE

// rotate_half of a projection by a constant: the constant's columns rotated
// ([a, b] -> [-b, a]), read by one more matmul of the same input.

// CHECK-LABEL: func.func @single
// CHECK-NEXT:    %w = graph.constant dense<[[1.000000e+00, 2.000000e+00, 3.000000e+00, 4.000000e+00], [5.000000e+00, 6.000000e+00, 7.000000e+00, 8.000000e+00]]> : tensor<2x4xf32>
// CHECK-NEXT:    %q = graph.matmul %x, %w : (tensor<1x2xf32>, tensor<2x4xf32>) -> tensor<1x4xf32>
// CHECK-NEXT:    %0 = graph.constant dense<[[-3.000000e+00, -4.000000e+00, 1.000000e+00, 2.000000e+00], [-7.000000e+00, -8.000000e+00, 5.000000e+00, 6.000000e+00]]> : tensor<2x4xf32>
// CHECK-NEXT:    %r = graph.matmul %x, %0 : (tensor<1x2xf32>, tensor<2x4xf32>) -> tensor<1x4xf32>
// CHECK-NEXT:    %y = graph.add %q, %r : (tensor<1x4xf32>, tensor<1x4xf32>) -> tensor<1x4xf32>
// CHECK-NEXT:    func.return %y : tensor<1x4xf32>
// CHECK-NOT:     graph.neg
func.func @single(%x: tensor<1x2xf32>) -> tensor<1x4xf32> {
  %w = graph.constant dense<[[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]]> : tensor<2x4xf32>
  %q = graph.matmul %x, %w : (tensor<1x2xf32>, tensor<2x4xf32>) -> tensor<1x4xf32>
  %lo = graph.slice %q starts = [0, 0] ends = [1, 2] steps = [1, 1] : tensor<1x4xf32> -> tensor<1x2xf32>
  %hi = graph.slice %q starts = [0, 2] ends = [1, 4] steps = [1, 1] : tensor<1x4xf32> -> tensor<1x2xf32>
  %n = graph.neg %hi : tensor<1x2xf32>
  %r = graph.concat %n, %lo axis = 1 : (tensor<1x2xf32>, tensor<1x2xf32>) -> tensor<1x4xf32>
  %y = graph.add %q, %r : (tensor<1x4xf32>, tensor<1x4xf32>) -> tensor<1x4xf32>
  func.return %y : tensor<1x4xf32>
}

// -----

// The export's form: the projection viewed as 2 heads of 4 (reshape, transpose), the
// rotation per head. The view is rebuilt on the new matmul.

// CHECK-LABEL: func.func @heads
// CHECK:         %0 = graph.constant dense<{{.*}}> : tensor<2x8xf32>
// CHECK-NEXT:    %r_proj = graph.matmul %x, %0 : (tensor<3x2xf32>, tensor<2x8xf32>) -> tensor<3x8xf32>
// CHECK-NEXT:    %[[V:.*]] = graph.reshape %r_proj : tensor<3x8xf32> -> tensor<3x2x4xf32>
// CHECK-NEXT:    %r = graph.transpose %[[V]] perm = [1, 0, 2] : tensor<3x2x4xf32> -> tensor<2x3x4xf32>
// CHECK-NEXT:    %y = graph.add %t, %r : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
// CHECK-NOT:     graph.slice
func.func @heads(%x: tensor<3x2xf32>) -> tensor<2x3x4xf32> {
  %w = graph.constant dense<[[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0], [-1.0, 0.5, 0.25, 2.0, 1.5, -2.0, 3.0, 1.0]]> : tensor<2x8xf32>
  %q = graph.matmul %x, %w : (tensor<3x2xf32>, tensor<2x8xf32>) -> tensor<3x8xf32>
  %v = graph.reshape %q : tensor<3x8xf32> -> tensor<3x2x4xf32>
  %t = graph.transpose %v perm = [1, 0, 2] : tensor<3x2x4xf32> -> tensor<2x3x4xf32>
  %lo = graph.slice %t starts = [0, 0, 0] ends = [2, 3, 2] steps = [1, 1, 1] : tensor<2x3x4xf32> -> tensor<2x3x2xf32>
  %hi = graph.slice %t starts = [0, 0, 2] ends = [2, 3, 4] steps = [1, 1, 1] : tensor<2x3x4xf32> -> tensor<2x3x2xf32>
  %n = graph.neg %hi : tensor<2x3x2xf32>
  %r = graph.concat %n, %lo axis = -1 : (tensor<2x3x2xf32>, tensor<2x3x2xf32>) -> tensor<2x3x4xf32>
  %y = graph.add %t, %r : (tensor<2x3x4xf32>, tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
  func.return %y : tensor<2x3x4xf32>
}

// -----

// graph-canonicalize's form of rotate_half: a product by the h x h signed permutation
// (here h = 4, heads of a projection by a weight by reference) folds too; the reference
// says `rotate 4` and nothing is read.

// CHECK-LABEL: func.func @canonical
// CHECK-NEXT:    %w = graph.weight "q" in "{{.*}}q.onnx.data" at 64 : tensor<2x8xf32>
// CHECK-NEXT:    %q = graph.matmul %x, %w : (tensor<3x2xf32>, tensor<2x8xf32>) -> tensor<3x8xf32>
// CHECK-NEXT:    %t = graph.reshape %q : tensor<3x8xf32> -> tensor<3x2x4xf32>
// CHECK-NEXT:    %0 = graph.weight "q" in "{{.*}}q.onnx.data" at 64 rotate 4 : tensor<2x8xf32>
// CHECK-NEXT:    %r_proj = graph.matmul %x, %0 : (tensor<3x2xf32>, tensor<2x8xf32>) -> tensor<3x8xf32>
// CHECK-NEXT:    %r = graph.reshape %r_proj : tensor<3x8xf32> -> tensor<3x2x4xf32>
// CHECK-NEXT:    %y = graph.add %t, %r : (tensor<3x2x4xf32>, tensor<3x2x4xf32>) -> tensor<3x2x4xf32>
// CHECK-NEXT:    func.return %y : tensor<3x2x4xf32>
func.func @canonical(%x: tensor<3x2xf32>) -> tensor<3x2x4xf32> {
  %w = graph.weight "q" in "q.onnx.data" at 64 : tensor<2x8xf32>
  %q = graph.matmul %x, %w : (tensor<3x2xf32>, tensor<2x8xf32>) -> tensor<3x8xf32>
  %t = graph.reshape %q : tensor<3x8xf32> -> tensor<3x2x4xf32>
  %p = graph.constant dense<[[0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0], [-1.0, 0.0, 0.0, 0.0], [0.0, -1.0, 0.0, 0.0]]> : tensor<4x4xf32>
  %r = graph.matmul %t, %p : (tensor<3x2x4xf32>, tensor<4x4xf32>) -> tensor<3x2x4xf32>
  %y = graph.add %t, %r : (tensor<3x2x4xf32>, tensor<3x2x4xf32>) -> tensor<3x2x4xf32>
  func.return %y : tensor<3x2x4xf32>
}

// -----

// Qwen2's biased projection, x·W + b: the bias is rotated with the weight.

// CHECK-LABEL: func.func @biased
// CHECK:         %0 = graph.constant dense<[[-3.000000e+00, -4.000000e+00, 1.000000e+00, 2.000000e+00], [-7.000000e+00, -8.000000e+00, 5.000000e+00, 6.000000e+00]]> : tensor<2x4xf32>
// CHECK-NEXT:    %r_proj = graph.matmul %x, %0 : (tensor<1x2xf32>, tensor<2x4xf32>) -> tensor<1x4xf32>
// CHECK-NEXT:    %1 = graph.constant dense<[-3.000000e-01, -4.000000e-01, 1.000000e-01, 2.000000e-01]> : tensor<4xf32>
// CHECK-NEXT:    %r = graph.add %r_proj, %1 : (tensor<1x4xf32>, tensor<4xf32>) -> tensor<1x4xf32>
// CHECK-NEXT:    %y = graph.add %q, %r : (tensor<1x4xf32>, tensor<1x4xf32>) -> tensor<1x4xf32>
func.func @biased(%x: tensor<1x2xf32>) -> tensor<1x4xf32> {
  %w = graph.constant dense<[[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]]> : tensor<2x4xf32>
  %b = graph.constant dense<[0.1, 0.2, 0.3, 0.4]> : tensor<4xf32>
  %p = graph.matmul %x, %w : (tensor<1x2xf32>, tensor<2x4xf32>) -> tensor<1x4xf32>
  %q = graph.add %p, %b : (tensor<1x4xf32>, tensor<4xf32>) -> tensor<1x4xf32>
  %lo = graph.slice %q starts = [0, 0] ends = [1, 2] steps = [1, 1] : tensor<1x4xf32> -> tensor<1x2xf32>
  %hi = graph.slice %q starts = [0, 2] ends = [1, 4] steps = [1, 1] : tensor<1x4xf32> -> tensor<1x2xf32>
  %n = graph.neg %hi : tensor<1x2xf32>
  %r = graph.concat %n, %lo axis = 1 : (tensor<1x2xf32>, tensor<1x2xf32>) -> tensor<1x4xf32>
  %y = graph.add %q, %r : (tensor<1x4xf32>, tensor<1x4xf32>) -> tensor<1x4xf32>
  func.return %y : tensor<1x4xf32>
}

// -----

// Left alone: a transpose that moves the last axis (the rotation would not be per
// column of the weight), halves swapped the other way, a computed right operand, and
// products by permutations that are not rotate_half (the inverse rotation among them).

// CHECK-LABEL: func.func @not_rotations
// CHECK-COUNT-2: graph.neg
// CHECK-NOT:     graph.constant dense<[[-
// CHECK:         %v = graph.matmul %t, %p1
// CHECK:         %v2 = graph.matmul %q, %p2
func.func @not_rotations(%x: tensor<2x2xf32>, %b: tensor<2x4xf32>) -> (tensor<4x2xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<4x2xf32>, tensor<2x4xf32>) {
  %w = graph.constant dense<[[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]]> : tensor<2x4xf32>
  %q = graph.matmul %x, %w : (tensor<2x2xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %t = graph.transpose %q perm = [1, 0] : tensor<2x4xf32> -> tensor<4x2xf32>
  %lo = graph.slice %t starts = [0, 0] ends = [4, 1] steps = [1, 1] : tensor<4x2xf32> -> tensor<4x1xf32>
  %hi = graph.slice %t starts = [0, 1] ends = [4, 2] steps = [1, 1] : tensor<4x2xf32> -> tensor<4x1xf32>
  %n = graph.neg %hi : tensor<4x1xf32>
  %r = graph.concat %n, %lo axis = 1 : (tensor<4x1xf32>, tensor<4x1xf32>) -> tensor<4x2xf32>
  %lo2 = graph.slice %q starts = [0, 0] ends = [2, 2] steps = [1, 1] : tensor<2x4xf32> -> tensor<2x2xf32>
  %hi2 = graph.slice %q starts = [0, 2] ends = [2, 4] steps = [1, 1] : tensor<2x4xf32> -> tensor<2x2xf32>
  %n2 = graph.neg %lo2 : tensor<2x2xf32>
  %s = graph.concat %n2, %hi2 axis = 1 : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x4xf32>
  %p = graph.matmul %x, %b : (tensor<2x2xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
  %plo = graph.slice %p starts = [0, 0] ends = [2, 2] steps = [1, 1] : tensor<2x4xf32> -> tensor<2x2xf32>
  %phi = graph.slice %p starts = [0, 2] ends = [2, 4] steps = [1, 1] : tensor<2x4xf32> -> tensor<2x2xf32>
  %pn = graph.neg %phi : tensor<2x2xf32>
  %u = graph.concat %pn, %plo axis = 1 : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x4xf32>
  %p1 = graph.constant dense<[[0.0, 1.0], [-1.0, 0.0]]> : tensor<2x2xf32>
  %v = graph.matmul %t, %p1 : (tensor<4x2xf32>, tensor<2x2xf32>) -> tensor<4x2xf32>
  %p2 = graph.constant dense<[[0.0, 0.0, -1.0, 0.0], [0.0, 0.0, 0.0, -1.0], [1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]]> : tensor<4x4xf32>
  %v2 = graph.matmul %q, %p2 : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32>
  func.return %r, %s, %u, %v, %v2 : tensor<4x2xf32>, tensor<2x4xf32>, tensor<2x4xf32>, tensor<4x2xf32>, tensor<2x4xf32>
}

// The by-reference export: Q and K of each of its 2 layers read their weight rotated per
// head of 16, a reference (nothing read at compile time); no slice, neg or concat left.

// EXPORT:     graph.weight "val_88" in "{{.*}}llama_external.onnx.data" at {{[0-9]+}} rotate 16 : tensor<64x64xf32>
// EXPORT:     graph.weight "val_95" in "{{.*}}llama_external.onnx.data" at {{[0-9]+}} rotate 16 : tensor<64x32xf32>
// EXPORT-NOT: graph.neg
// EXPORT-NOT: graph.concat

// The decode export after graph-canonicalize (rotate_half as products by R): Q and K of
// both layers fold, and no product by a 16 x 16 permutation is left.

// DECODE:     graph.weight "val_45" in "{{.*}}" rotate 16 : tensor<64x64xf32>
// DECODE:     graph.weight "val_52" in "{{.*}}" rotate 16 : tensor<64x32xf32>
// DECODE-NOT: tensor<16x16xf32>) ->
