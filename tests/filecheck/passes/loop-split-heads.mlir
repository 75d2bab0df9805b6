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

// -----

// An exported attention nest: a batch of one before its heads, the keys a reduction and
// the rows of `P·V` a vector accumulator. The heads behind the unit batch are split, each
// nest reading its head at constant indices; the returned tensor is reassembled.

// CHECK-LABEL: func.func @attention
// CHECK:         %[[O0:.*]] = loop.nest (%[[I0:.*]], %[[J0:.*]]) to (4, 3) [parallel, reduction] init(%{{.*}} = %{{.*}} : tensor<2xf32>) -> tensor<4x2xf32>
// CHECK:           %[[B0:.*]] = arith.constant 0 : index
// CHECK-NEXT:      %[[H0:.*]] = arith.constant 0 : index
// CHECK:             loop.read %q[%[[B0]], %[[H0]], %[[I0]], %{{.*}}] : tensor<1x2x4x2xf32>
// CHECK-NEXT:        loop.read %v[%[[B0]], %[[H0]], %[[J0]], %{{.*}}] : tensor<1x2x3x2xf32>
// CHECK:         %[[O1:.*]] = loop.nest (%[[I1:.*]], %[[J1:.*]]) to (4, 3) [parallel, reduction] init(%{{.*}} = %{{.*}} : tensor<2xf32>) -> tensor<4x2xf32>
// CHECK:           %[[B1:.*]] = arith.constant 0 : index
// CHECK-NEXT:      %[[H1:.*]] = arith.constant 1 : index
// CHECK:             loop.read %q[%[[B1]], %[[H1]], %[[I1]], %{{.*}}] : tensor<1x2x4x2xf32>
// CHECK:         %o = loop.nest (%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) to (1, 2, 4, 2) [parallel, parallel, parallel, parallel]
// CHECK:           loop.read %[[O0]]
// CHECK:           loop.read %[[O1]]
// CHECK:         func.return %o
func.func @attention(%q: tensor<1x2x4x2xf32>, %v: tensor<1x2x3x2xf32>) -> tensor<1x2x4x2xf32> {
  %z = arith.constant dense<0.000000e+00> : tensor<2xf32>
  %o = loop.nest (%b, %h, %i, %j) to (1, 2, 4, 3) [parallel, parallel, parallel, reduction] init(%acc = %z : tensor<2xf32>) -> tensor<1x2x4x2xf32> {
    %n = loop.nest (%d) to (2) [parallel] -> tensor<2xf32> {
      %x = loop.read %q[%b, %h, %i, %d] : tensor<1x2x4x2xf32>
      %y = loop.read %v[%b, %h, %j, %d] : tensor<1x2x3x2xf32>
      %a = loop.read %acc[%d] : tensor<2xf32>
      %p = arith.mulf %x, %y : f32
      %s = arith.addf %a, %p : f32
      loop.yield %s : f32
    }
    loop.yield %n : tensor<2xf32>
  }
  func.return %o : tensor<1x2x4x2xf32>
}

// -----

// A batch of one and nothing behind it: nothing to split.

// CHECK-LABEL: func.func @unit
// CHECK:         %m = loop.nest (%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}) to (1, 8, 4, 16) [parallel, parallel, parallel, reduction]
// CHECK-NOT:     loop.nest
func.func @unit(%a: tensor<1x8x16xf32>, %w: tensor<16x4xf32>) -> tensor<1x8x4xf32> {
  %m = graph.matmul %a, %w : (tensor<1x8x16xf32>, tensor<16x4xf32>) -> tensor<1x8x4xf32>
  func.return %m : tensor<1x8x4xf32>
}

// -----

// A view of the heads (a transpose stored as a result) whose body yields the read of a
// split tensor as it is: each head's nest yields its own head's read.

// CHECK-LABEL: func.func @view
// CHECK:         %t_h0 = loop.nest (%{{.*}}, %{{.*}}) to (4, 8) [parallel, parallel] -> tensor<4x8xf32> {
// CHECK:           [[R0:%[0-9]+]] = loop.read %q_h0[%{{.*}}, %{{.*}}] : tensor<8x4xf32>
// CHECK-NEXT:      loop.yield [[R0]] : f32
// CHECK:         %t_h1 = loop.nest (%{{.*}}, %{{.*}}) to (4, 8) [parallel, parallel] -> tensor<4x8xf32> {
// CHECK:           [[R1:%[0-9]+]] = loop.read %q_h1[%{{.*}}, %{{.*}}] : tensor<8x4xf32>
// CHECK-NEXT:      loop.yield [[R1]] : f32
func.func @view(%a: tensor<8x16xf32>, %wq: tensor<2x16x4xf32>) -> (tensor<8x4xf32>, tensor<2x4x8xf32>) {
  %q = graph.matmul %a, %wq : (tensor<8x16xf32>, tensor<2x16x4xf32>) -> tensor<2x8x4xf32>
  %t = graph.transpose %q perm = [0, 2, 1] : tensor<2x8x4xf32> -> tensor<2x4x8xf32>
  %r = graph.reduce sum %q axes = [0] : tensor<2x8x4xf32> -> tensor<8x4xf32>
  func.return %r, %t : tensor<8x4xf32>, tensor<2x4x8xf32>
}
