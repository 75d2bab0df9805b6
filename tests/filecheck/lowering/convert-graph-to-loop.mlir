// RUN: plmr-opt %s -p convert-graph-to-loop --split-input-file | filecheck %s

// A softmax is four nests: max, exp, sum, divide.

// CHECK-LABEL: func.func @softmax
// CHECK:       %p_max = loop.nest (%i0, %i1) to (4, 8) [parallel, reduction] init(%acc = %{{.*}} : f32) -> tensor<4xf32> {
// CHECK:         arith.maximumf %acc, %{{.*}} : f32
// CHECK:       %p_exp = loop.nest (%{{.*}}, %{{.*}}) to (4, 8) [parallel, parallel] -> tensor<4x8xf32> {
// CHECK:         math.exp
// CHECK:       %p_sum = loop.nest (%{{.*}}, %{{.*}}) to (4, 8) [parallel, reduction]
// CHECK:         arith.addf
// CHECK:       %p = loop.nest (%{{.*}}, %{{.*}}) to (4, 8) [parallel, parallel] -> tensor<4x8xf32> {
// CHECK:         arith.divf
// CHECK:       func.return %p : tensor<4x8xf32>
func.func @softmax(%s: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %p = graph.softmax %s : tensor<4x8xf32>
  func.return %p : tensor<4x8xf32>
}

// -----

// A matmul is one reduction nest; a transposed operand swaps the read indices.

// CHECK-LABEL: func.func @matmul
// CHECK:       %c = loop.nest (%i0, %i1, %i2) to (4, 16, 8) [parallel, parallel, reduction] init(%acc = %{{.*}} : f32) -> tensor<4x16xf32> {
// CHECK-NEXT:    %{{.*}} = loop.read %a[%i0, %i2] : tensor<4x8xf32>
// CHECK-NEXT:    %{{.*}} = loop.read %b[%i1, %i2] : tensor<16x8xf32>
// CHECK-NEXT:    %{{.*}} = arith.mulf
// CHECK-NEXT:    %{{.*}} = arith.addf %acc, %{{.*}} : f32
func.func @matmul(%a: tensor<4x8xf32>, %b: tensor<16x8xf32>) -> tensor<4x16xf32> {
  %c = graph.matmul %a, %b transpose_b : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  func.return %c : tensor<4x16xf32>
}

// -----

// A layernorm is three nests: mean (a sum), variance, normalise.

// CHECK-LABEL: func.func @layernorm
// CHECK:       %y_sum = loop.nest (%{{.*}}, %{{.*}}) to (2, 16) [parallel, reduction]
// CHECK:       %y_var = loop.nest (%{{.*}}, %{{.*}}) to (2, 16) [parallel, reduction]
// CHECK:         loop.read %y_sum
// CHECK:       %y = loop.nest (%{{.*}}, %{{.*}}) to (2, 16) [parallel, parallel]
// CHECK:         math.sqrt
func.func @layernorm(%x: tensor<2x16xf32>, %g: tensor<16xf32>) -> tensor<2x16xf32> {
  %y = graph.layernorm %x, %g : (tensor<2x16xf32>, tensor<16xf32>) -> tensor<2x16xf32>
  func.return %y : tensor<2x16xf32>
}

// -----

// A convolution is a 7-deep nest whose input read is an index expression with zero
// padding; the bias is a second nest.

// CHECK-LABEL: func.func @conv
// CHECK:       %y_nobias = loop.nest (%i0, %i1, %i2, %i3, %i4, %i5, %i6) to (1, 4, 4, 4, 3, 3, 3) [parallel, parallel, parallel, parallel, reduction, reduction, reduction]
// CHECK:         %[[H:.*]] = arith.muli %i2, %{{.*}} : index
// CHECK:         arith.addi %[[H]], %i5 : index
// CHECK:         loop.read %x[%i0, %i4, %{{.*}}, %{{.*}}] padding 0.000000e+00 : tensor<1x3x8x8xf32>
// CHECK:       %y = loop.nest (%{{.*}}) to (1, 4, 4, 4) [parallel, parallel, parallel, parallel]
func.func @conv(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4xf32>) -> tensor<1x4x4x4xf32> {
  %y = graph.conv2d %x, %w, %b strides = [2, 2] pads = [1, 1, 1, 1] : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf32>) -> tensor<1x4x4x4xf32>
  func.return %y : tensor<1x4x4x4xf32>
}

// -----

// A max-pool starts from -inf and pads with it: a window of -inf (a padded mask) stays
// -inf, as in the reference.

// CHECK-LABEL: func.func @max_pool
// CHECK:         %[[NEG_INF:.*]] = arith.constant 0xff800000 : f32
// CHECK:         loop.nest ({{.*}}) to (1, 2, 2, 2, 3, 3) [parallel, parallel, parallel, parallel, reduction, reduction] init(%acc = %[[NEG_INF]] : f32)
// CHECK:           loop.read %x[{{.*}}] padding 0xfff0000000000000 : tensor<1x2x4x4xf32>
// CHECK:           arith.maximumf %acc
func.func @max_pool(%x: tensor<1x2x4x4xf32>) -> tensor<1x2x2x2xf32> {
  %p = graph.pool max %x kernel = [3, 3] strides = [2, 2] pads = [1, 1, 0, 0] : tensor<1x2x4x4xf32> -> tensor<1x2x2x2xf32>
  func.return %p : tensor<1x2x2x2xf32>
}
