// RUN: plmr-opt %s -p convert-graph-to-loop,loop-split-heads --split-input-file | filecheck %s

// A projection batched over two heads, then the sum over the heads: one nest per head
// reading its head's weights at a constant index; the sum over heads is unrolled into
// one nest adding the heads' tensors; the batched tensor, also returned, is reassembled
// from the heads' tensors by one-hot weights.

// CHECK-LABEL: func.func @proj
// CHECK:         %[[Q0:.*]] = loop.nest (%{{.*}}, %{{.*}}, %{{.*}}) to (8, 4, 16) [parallel, parallel, reduction]
// CHECK:           %[[C0:.*]] = arith.constant 0 : index
// CHECK:           loop.read %wq[%[[C0]], %{{.*}}, %{{.*}}] : tensor<2x16x4xf32>
// CHECK:         %[[Q1:.*]] = loop.nest (%{{.*}}, %{{.*}}, %{{.*}}) to (8, 4, 16) [parallel, parallel, reduction]
// CHECK:           %[[C1:.*]] = arith.constant 1 : index
// CHECK:           loop.read %wq[%[[C1]], %{{.*}}, %{{.*}}] : tensor<2x16x4xf32>
// CHECK:         %[[EYE:.*]] = arith.constant dense<{{\[\[}}1.000000e+00, 0.000000e+00], [0.000000e+00, 1.000000e+00]]> : tensor<2x2xf32>
// CHECK:         %q = loop.nest (%[[H:.*]], %[[L:.*]], %[[D:.*]]) to (2, 8, 4) [parallel, parallel, parallel]
// CHECK:           loop.read %[[Q0]][%[[L]], %[[D]]] : tensor<8x4xf32>
// CHECK:           loop.read %[[EYE]][%[[H]], %{{.*}}] : tensor<2x2xf32>
// CHECK:           loop.read %[[Q1]][%[[L]], %[[D]]] : tensor<8x4xf32>
// CHECK:         %r = loop.nest (%{{.*}}, %{{.*}}) to (8, 4) [parallel, parallel] -> tensor<8x4xf32>
// CHECK-NOT:       init
// CHECK:           loop.read %[[Q0]]
// CHECK:           loop.read %[[Q1]]
// CHECK:         func.return %r, %q
func.func @proj(%a: tensor<8x16xf32>, %wq: tensor<2x16x4xf32>) -> (tensor<8x4xf32>, tensor<2x8x4xf32>) {
  %q = graph.matmul %a, %wq : (tensor<8x16xf32>, tensor<2x16x4xf32>) -> tensor<2x8x4xf32>
  %r = graph.reduce sum %q axes = [0] : tensor<2x8x4xf32> -> tensor<8x4xf32>
  func.return %r, %q : tensor<8x4xf32>, tensor<2x8x4xf32>
}

// -----

// A consumer that reads a head's slice at its own parallel head index is split with it
// (the element-wise scaling of each head), and its reads go to the head's tensor.

// CHECK-LABEL: func.func @chain
// CHECK:         %[[P0:.*]] = loop.nest {{.*}} to (8, 4, 16)
// CHECK:         %[[P1:.*]] = loop.nest {{.*}} to (8, 4, 16)
// CHECK:         %{{.*}} = loop.nest (%[[L0:.*]], %[[D0:.*]]) to (8, 4) [parallel, parallel]
// CHECK:           loop.read %[[P0]][%[[L0]], %[[D0]]] : tensor<8x4xf32>
// CHECK:         %{{.*}} = loop.nest (%[[L1:.*]], %[[D1:.*]]) to (8, 4) [parallel, parallel]
// CHECK:           loop.read %[[P1]][%[[L1]], %[[D1]]] : tensor<8x4xf32>
func.func @chain(%a: tensor<8x16xf32>, %wq: tensor<2x16x4xf32>) -> tensor<8x4xf32> {
  %q = graph.matmul %a, %wq : (tensor<8x16xf32>, tensor<2x16x4xf32>) -> tensor<2x8x4xf32>
  %e = graph.exp %q : tensor<2x8x4xf32>
  %r = graph.reduce max %e axes = [0] : tensor<2x8x4xf32> -> tensor<8x4xf32>
  func.return %r : tensor<8x4xf32>
}

// -----

// Nothing batched: the pass leaves the program alone.

// CHECK-LABEL: func.func @plain
// CHECK:         %m = loop.nest (%{{.*}}, %{{.*}}, %{{.*}}) to (8, 4, 16) [parallel, parallel, reduction]
// CHECK-NEXT:      loop.read %a
func.func @plain(%a: tensor<8x16xf32>, %w: tensor<16x4xf32>) -> tensor<8x4xf32> {
  %m = graph.matmul %a, %w : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  func.return %m : tensor<8x4xf32>
}
