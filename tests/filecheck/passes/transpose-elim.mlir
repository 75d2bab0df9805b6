// RUN: plmr-opt %s -p transpose-elim | filecheck %s

// A transpose of a transpose cancels.
// CHECK-LABEL: func.func @cancel
// CHECK-NEXT:    func.return %x : tensor<4x8xf32>
func.func @cancel(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %t = graph.transpose %x perm = [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
  %u = graph.transpose %t perm = [1, 0] : tensor<8x4xf32> -> tensor<4x8xf32>
  func.return %u : tensor<4x8xf32>
}

// Two transposes compose into one.
// CHECK-LABEL: func.func @compose
// CHECK-NEXT:    %{{.*}} = graph.transpose %x perm = [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
// CHECK-NEXT:    func.return
func.func @compose(%x: tensor<2x3x4xf32>) -> tensor<4x2x3xf32> {
  %t = graph.transpose %x perm = [1, 0, 2] : tensor<2x3x4xf32> -> tensor<3x2x4xf32>
  %u = graph.transpose %t perm = [2, 1, 0] : tensor<3x2x4xf32> -> tensor<4x2x3xf32>
  func.return %u : tensor<4x2x3xf32>
}

// Transposes of matmul operands become the matmul's flags.
// CHECK-LABEL: func.func @absorb
// CHECK-NEXT:    %{{.*}} = graph.matmul %a, %b transpose_a transpose_b : (tensor<8x4xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
// CHECK-NEXT:    func.return
func.func @absorb(%a: tensor<8x4xf32>, %b: tensor<16x8xf32>) -> tensor<4x16xf32> {
  %at = graph.transpose %a perm = [1, 0] : tensor<8x4xf32> -> tensor<4x8xf32>
  %bt = graph.transpose %b perm = [1, 0] : tensor<16x8xf32> -> tensor<8x16xf32>
  %c = graph.matmul %at, %bt : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  func.return %c : tensor<4x16xf32>
}

// A transpose of a flag cancels the flag; batch dimensions stay in place.
// CHECK-LABEL: func.func @absorb_batched
// CHECK-NEXT:    %{{.*}} = graph.matmul %q, %k : (tensor<2x8x4xf32>, tensor<2x4x8xf32>) -> tensor<2x8x8xf32>
func.func @absorb_batched(%q: tensor<2x8x4xf32>, %k: tensor<2x4x8xf32>) -> tensor<2x8x8xf32> {
  %kt = graph.transpose %k perm = [0, 2, 1] : tensor<2x4x8xf32> -> tensor<2x8x4xf32>
  %s = graph.matmul %q, %kt transpose_b : (tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> tensor<2x8x8xf32>
  func.return %s : tensor<2x8x8xf32>
}

// (A·B)ᵀ = Bᵀ·Aᵀ: the transpose of a matmul result swaps the operands and flags.
// CHECK-LABEL: func.func @transposed_product
// CHECK-NEXT:    %{{.*}} = graph.matmul %b, %a transpose_a transpose_b : (tensor<8x16xf32>, tensor<4x8xf32>) -> tensor<16x4xf32>
// CHECK-NEXT:    func.return
func.func @transposed_product(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) -> tensor<16x4xf32> {
  %c = graph.matmul %a, %b : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %t = graph.transpose %c perm = [1, 0] : tensor<4x16xf32> -> tensor<16x4xf32>
  func.return %t : tensor<16x4xf32>
}

// A transpose sinks below elementwise ops and then folds into the consuming matmul.
// CHECK-LABEL: func.func @through_elementwise
// CHECK-NEXT:    %{{.*}} = graph.relu %x : tensor<8x4xf32>
// CHECK-NEXT:    %{{.*}} = graph.scale %{{.*}} by 2.000000e+00 : tensor<8x4xf32>
// CHECK-NEXT:    %{{.*}} = graph.matmul %{{.*}}, %w transpose_a : (tensor<8x4xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
// CHECK-NEXT:    func.return
func.func @through_elementwise(%x: tensor<8x4xf32>, %w: tensor<8x16xf32>) -> tensor<4x16xf32> {
  %t = graph.transpose %x perm = [1, 0] : tensor<8x4xf32> -> tensor<4x8xf32>
  %r = graph.relu %t : tensor<4x8xf32>
  %s = graph.scale %r by 2.0 : tensor<4x8xf32>
  %c = graph.matmul %s, %w : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  func.return %c : tensor<4x16xf32>
}

// Two transposed operands of an add share one transpose, which then cancels.
// CHECK-LABEL: func.func @binary
// CHECK-NEXT:    %{{.*}} = graph.add %a, %b : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    func.return
func.func @binary(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %at = graph.transpose %a perm = [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
  %bt = graph.transpose %b perm = [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
  %s = graph.add %at, %bt : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  %u = graph.transpose %s perm = [1, 0] : tensor<8x4xf32> -> tensor<4x8xf32>
  func.return %u : tensor<4x8xf32>
}

// With a constant operand, the constant is pre-transposed instead.
// CHECK-LABEL: func.func @binary_constant
// CHECK-NEXT:    %{{.*}} = graph.constant dense<{{\[}}[1.000000e+00, 3.000000e+00], [2.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>
// CHECK-NEXT:    %{{.*}} = graph.mul %a, %{{.*}} : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
// CHECK-NEXT:    func.return
func.func @binary_constant(%a: tensor<2x2xf32>) -> tensor<2x2xf32> {
  %c = graph.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %at = graph.transpose %a perm = [1, 0] : tensor<2x2xf32> -> tensor<2x2xf32>
  %m = graph.mul %at, %c : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
  %u = graph.transpose %m perm = [1, 0] : tensor<2x2xf32> -> tensor<2x2xf32>
  func.return %u : tensor<2x2xf32>
}

// Transposed weights are folded into a pre-transposed constant.
// CHECK-LABEL: func.func @fold_constant
// CHECK-NEXT:    %{{.*}} = graph.constant dense<{{\[}}[1.000000e+00, 4.000000e+00], [2.000000e+00, 5.000000e+00], [3.000000e+00, 6.000000e+00]]> : tensor<3x2xf32>
// CHECK-NEXT:    %{{.*}} = graph.relu %{{.*}} : tensor<3x2xf32>
// CHECK-NEXT:    func.return
func.func @fold_constant() -> tensor<3x2xf32> {
  %w = graph.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %t = graph.transpose %w perm = [1, 0] : tensor<2x3xf32> -> tensor<3x2xf32>
  %r = graph.relu %t : tensor<3x2xf32>
  func.return %r : tensor<3x2xf32>
}

// Concats of equally transposed tensors concatenate first.
// CHECK-LABEL: func.func @concat
// CHECK-NEXT:    %{{.*}} = graph.concat %a, %b axis = 0 : (tensor<4x8xf32>, tensor<2x8xf32>) -> tensor<6x8xf32>
// CHECK-NEXT:    %{{.*}} = graph.transpose %{{.*}} perm = [1, 0] : tensor<6x8xf32> -> tensor<8x6xf32>
// CHECK-NEXT:    func.return
func.func @concat(%a: tensor<4x8xf32>, %b: tensor<2x8xf32>) -> tensor<8x6xf32> {
  %at = graph.transpose %a perm = [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
  %bt = graph.transpose %b perm = [1, 0] : tensor<2x8xf32> -> tensor<8x2xf32>
  %c = graph.concat %at, %bt axis = 1 : (tensor<8x4xf32>, tensor<8x2xf32>) -> tensor<8x6xf32>
  func.return %c : tensor<8x6xf32>
}

// A transpose with other users stays where it is.
// CHECK-LABEL: func.func @shared
// CHECK-NEXT:    %t = graph.transpose %x perm = [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
// CHECK-NEXT:    %r = graph.relu %t : tensor<8x4xf32>
// CHECK-NEXT:    func.return %t, %r
func.func @shared(%x: tensor<4x8xf32>) -> (tensor<8x4xf32>, tensor<8x4xf32>) {
  %t = graph.transpose %x perm = [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
  %r = graph.relu %t : tensor<8x4xf32>
  func.return %t, %r : tensor<8x4xf32>, tensor<8x4xf32>
}

// A transpose after an activation of a matmul moves onto the matmul and vanishes.
// CHECK-LABEL: func.func @activation_of_product
// CHECK-NEXT:    %{{.*}} = graph.matmul %w, %x transpose_b : (tensor<16x8xf32>, tensor<4x8xf32>) -> tensor<16x4xf32>
// CHECK-NEXT:    %{{.*}} = graph.relu %{{.*}} : tensor<16x4xf32>
// CHECK-NEXT:    func.return
func.func @activation_of_product(%x: tensor<4x8xf32>, %w: tensor<16x8xf32>) -> tensor<16x4xf32> {
  %wt = graph.transpose %w perm = [1, 0] : tensor<16x8xf32> -> tensor<8x16xf32>
  %y = graph.matmul %x, %wt : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %r = graph.relu %y : tensor<4x16xf32>
  %t = graph.transpose %r perm = [1, 0] : tensor<4x16xf32> -> tensor<16x4xf32>
  func.return %t : tensor<16x4xf32>
}
