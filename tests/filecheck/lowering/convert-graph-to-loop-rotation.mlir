// RUN: plmr-opt %s -p convert-graph-to-loop --split-input-file | filecheck %s

// RoPE's rotate_half as graph-canonicalize writes it, a product by the h x h signed
// permutation R (here h = 4): an index map, `-x[.., j + 2]` for j < 2 and `x[.., j - 2]`
// after, each read padded outside the tensor; no reduction over h.

// CHECK-LABEL: func.func @rotation(%x: tensor<3x4xf32>) -> tensor<3x4xf32> {
// CHECK:         %y = loop.nest (%i0, %i1) to (3, 4) [parallel, parallel] -> tensor<3x4xf32> {
// CHECK-NEXT:      [[H:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:      [[UP:%[0-9]+]] = arith.addi %i1, [[H]] : index
// CHECK-NEXT:      [[H2:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:      [[DOWN:%[0-9]+]] = arith.subi %i1, [[H2]] : index
// CHECK-NEXT:      [[HIGH:%[0-9]+]] = loop.read %x[%i0, [[UP]]] padding 0.000000e+00 : tensor<3x4xf32>
// CHECK-NEXT:      [[NEG:%[0-9]+]] = arith.negf [[HIGH]] : f32
// CHECK-NEXT:      [[H3:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:      [[FIRST:%[0-9]+]] = arith.cmpi slt, %i1, [[H3]] : index
// CHECK-NEXT:      [[LOW:%[0-9]+]] = loop.read %x[%i0, [[DOWN]]] padding 0.000000e+00 : tensor<3x4xf32>
// CHECK-NEXT:      [[OUT:%[0-9]+]] = arith.select [[FIRST]], [[NEG]], [[LOW]] : f32
// CHECK-NEXT:      loop.yield [[OUT]] : f32
// CHECK-NEXT:    }
// CHECK-NOT:     reduction
func.func @rotation(%x: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %r = graph.constant dense<[[0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0], [-1.0, 0.0, 0.0, 0.0], [0.0, -1.0, 0.0, 0.0]]> : tensor<4x4xf32>
  %y = graph.matmul %x, %r : (tensor<3x4xf32>, tensor<4x4xf32>) -> tensor<3x4xf32>
  func.return %y : tensor<3x4xf32>
}

// -----

// The heads of a projection, rotated per head (a batched x, the same R).

// CHECK-LABEL: func.func @heads
// CHECK:         %y = loop.nest (%i0, %i1, %i2, %i3) to (2, 1, 3, 4) [parallel, parallel, parallel, parallel] -> tensor<2x1x3x4xf32> {
// CHECK:           loop.read %x[%i0, %i1, %i2, %{{[0-9]+}}] padding 0.000000e+00 : tensor<2x1x3x4xf32>
// CHECK-NOT:     reduction
func.func @heads(%x: tensor<2x1x3x4xf32>) -> tensor<2x1x3x4xf32> {
  %r = graph.constant dense<[[0.0, 0.0, 1.0, 0.0], [0.0, 0.0, 0.0, 1.0], [-1.0, 0.0, 0.0, 0.0], [0.0, -1.0, 0.0, 0.0]]> : tensor<4x4xf32>
  %y = graph.matmul %x, %r : (tensor<2x1x3x4xf32>, tensor<4x4xf32>) -> tensor<2x1x3x4xf32>
  func.return %y : tensor<2x1x3x4xf32>
}

// -----

// Any other constant, the inverse rotation (R's transpose) included, is a product: a
// reduction over its rows.

// CHECK-LABEL: func.func @not_rotations
// CHECK:         %y = loop.nest (%i0, %i1, %i2) to (3, 4, 4) [parallel, parallel, reduction]
func.func @not_rotations(%x: tensor<3x4xf32>) -> tensor<3x4xf32> {
  %r = graph.constant dense<[[0.0, 0.0, -1.0, 0.0], [0.0, 0.0, 0.0, -1.0], [1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]]> : tensor<4x4xf32>
  %y = graph.matmul %x, %r : (tensor<3x4xf32>, tensor<4x4xf32>) -> tensor<3x4xf32>
  func.return %y : tensor<3x4xf32>
}
