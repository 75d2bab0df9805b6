// RUN: plmr-opt %s -p graph-canonicalize --split-input-file | filecheck %s

// RoPE's rotate_half, `cat(-x[..., 2:], x[..., :2])`, becomes a product with the constant
// signed permutation R (R[i, j] = ±1 when output j is input i).
// CHECK-LABEL: func.func @rotate_half
// CHECK-NEXT:    %[[R:.*]] = graph.constant dense<{{\[}}[0.000000e+00, 0.000000e+00, 1.000000e+00, 0.000000e+00], [0.000000e+00, 0.000000e+00, 0.000000e+00, 1.000000e+00], [-1.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00], [0.000000e+00, -1.000000e+00, 0.000000e+00, 0.000000e+00]]> : tensor<4x4xf32>
// CHECK-NEXT:    %[[Y:.*]] = graph.matmul %x, %[[R]] : (tensor<1x2x3x4xf32>, tensor<4x4xf32>) -> tensor<1x2x3x4xf32>
// CHECK-NEXT:    %rot = graph.mul %[[Y]], %sin
// CHECK-NOT:     graph.concat
func.func @rotate_half(%x: tensor<1x2x3x4xf32>, %cos: tensor<1x1x3x4xf32>, %sin: tensor<1x1x3x4xf32>) -> tensor<1x2x3x4xf32> {
  %a = graph.slice %x starts = [0, 0, 0, 0] ends = [1, 2, 3, 2] steps = [1, 1, 1, 1] : tensor<1x2x3x4xf32> -> tensor<1x2x3x2xf32>
  %b = graph.slice %x starts = [0, 0, 0, 2] ends = [1, 2, 3, 4] steps = [1, 1, 1, 1] : tensor<1x2x3x4xf32> -> tensor<1x2x3x2xf32>
  %n = graph.neg %b : tensor<1x2x3x2xf32>
  %c = graph.concat %n, %a axis = 3 : (tensor<1x2x3x2xf32>, tensor<1x2x3x2xf32>) -> tensor<1x2x3x4xf32>
  %rot = graph.mul %c, %sin : (tensor<1x2x3x4xf32>, tensor<1x1x3x4xf32>) -> tensor<1x2x3x4xf32>
  %xc = graph.mul %x, %cos : (tensor<1x2x3x4xf32>, tensor<1x1x3x4xf32>) -> tensor<1x2x3x4xf32>
  %y = graph.add %xc, %rot : (tensor<1x2x3x4xf32>, tensor<1x2x3x4xf32>) -> tensor<1x2x3x4xf32>
  func.return %y : tensor<1x2x3x4xf32>
}

// -----

// The halves may come from a split, and the negation may be a scale by -1.
// CHECK-LABEL: func.func @rotate_half_split
// CHECK-NEXT:    %[[R:.*]] = graph.constant dense<{{\[}}[0.000000e+00, 0.000000e+00, 1.000000e+00, 0.000000e+00], [0.000000e+00, 0.000000e+00, 0.000000e+00, 1.000000e+00], [-1.000000e+00, 0.000000e+00, 0.000000e+00, 0.000000e+00], [0.000000e+00, -1.000000e+00, 0.000000e+00, 0.000000e+00]]> : tensor<4x4xf32>
// CHECK-NEXT:    %{{.*}} = graph.matmul %x, %[[R]] : (tensor<3x4xf32>, tensor<4x4xf32>) -> tensor<3x4xf32>
// CHECK-NEXT:    func.return
func.func @rotate_half_split(%x: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %a, %b = graph.split %x axis = -1 sizes = [2, 2] : tensor<3x4xf32> -> (tensor<3x2xf32>, tensor<3x2xf32>)
  %n = graph.scale %b by -1.000000e+00 : tensor<3x2xf32>
  %c = graph.concat %n, %a axis = -1 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x4xf32>
  func.return %c : tensor<3x4xf32>
}

// -----

// Slices of `x` put back in order are `x`.
// CHECK-LABEL: func.func @halves_in_order
// CHECK-NEXT:    func.return %x : tensor<3x4xf32>
func.func @halves_in_order(%x: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %a = graph.slice %x starts = [0, 0] ends = [3, 2] steps = [1, 1] : tensor<3x4xf32> -> tensor<3x2xf32>
  %b = graph.slice %x starts = [0, 2] ends = [3, 4] steps = [1, 1] : tensor<3x4xf32> -> tensor<3x2xf32>
  %c = graph.concat %a, %b axis = 1 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x4xf32>
  func.return %c : tensor<3x4xf32>
}

// -----

// Not rotate_half: halves of two different tensors, a concat along another axis, or
// slices that also cut a leading dimension.
// CHECK-LABEL: func.func @not_rotate_half
// CHECK-NOT:     graph.matmul
// CHECK-COUNT-3: graph.concat
// CHECK-NOT:     graph.matmul
func.func @not_rotate_half(%x: tensor<4x4xf32>, %y: tensor<4x4xf32>) -> (tensor<4x4xf32>, tensor<8x2xf32>, tensor<2x4xf32>) {
  %a = graph.slice %x starts = [0, 0] ends = [4, 2] steps = [1, 1] : tensor<4x4xf32> -> tensor<4x2xf32>
  %b = graph.slice %y starts = [0, 2] ends = [4, 4] steps = [1, 1] : tensor<4x4xf32> -> tensor<4x2xf32>
  %n = graph.neg %b : tensor<4x2xf32>
  %c = graph.concat %n, %a axis = 1 : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<4x4xf32>
  %bx = graph.slice %x starts = [0, 2] ends = [4, 4] steps = [1, 1] : tensor<4x4xf32> -> tensor<4x2xf32>
  %d = graph.concat %bx, %a axis = 0 : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<8x2xf32>
  %e1 = graph.slice %x starts = [0, 0] ends = [2, 2] steps = [1, 1] : tensor<4x4xf32> -> tensor<2x2xf32>
  %e2 = graph.slice %x starts = [0, 2] ends = [2, 4] steps = [1, 1] : tensor<4x4xf32> -> tensor<2x2xf32>
  %e = graph.concat %e2, %e1 axis = 1 : (tensor<2x2xf32>, tensor<2x2xf32>) -> tensor<2x4xf32>
  func.return %c, %d, %e : tensor<4x4xf32>, tensor<8x2xf32>, tensor<2x4xf32>
}
