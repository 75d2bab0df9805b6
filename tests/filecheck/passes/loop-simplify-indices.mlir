// RUN: plmr-opt %s -p convert-graph-to-loop,neptune-fuse,loop-simplify-indices --split-input-file | filecheck %s

// Heads split by reshape and transpose, merged, split again: after fusion the read of %x
// linearises (i1·4 + i3) and delinearises it (/ 4, % 4); with i3 < 4 the div is i1 and
// the rem i3, so the read is a plain index map and the blocker can tile it.

// CHECK-LABEL: func.func @heads
// CHECK:         loop.nest (%[[H:.*]], %[[N:.*]], %[[J:.*]], %[[D:.*]]) to (2, 2, 3, 4)
// CHECK-NOT:       arith.divui
// CHECK-NOT:       arith.remui
// CHECK:           %[[C4:.*]] = arith.constant 4 : index
// CHECK:           %[[HD:.*]] = arith.muli %[[H]], %[[C4]] : index
// CHECK:           %[[COL:.*]] = arith.addi %[[HD]], %[[D]] : index
// CHECK:           loop.read %x[%[[N]], %[[COL]]] : tensor<2x8xf32>
func.func @heads(%x: tensor<2x8xf32>, %w: tensor<2x3x4xf32>) -> tensor<2x2x3xf32> {
  %r = graph.reshape %x : tensor<2x8xf32> -> tensor<2x2x4xf32>
  %t = graph.transpose %r perm = [1, 0, 2] : tensor<2x2x4xf32> -> tensor<2x2x4xf32>
  %m = graph.reshape %t : tensor<2x2x4xf32> -> tensor<2x8xf32>
  %h = graph.reshape %m : tensor<2x8xf32> -> tensor<2x2x4xf32>
  %s = graph.matmul %h, %w transpose_b : (tensor<2x2x4xf32>, tensor<2x3x4xf32>) -> tensor<2x2x3xf32>
  func.return %s : tensor<2x2x3xf32>
}

// -----

// Not provable: %j runs to 5, so i·4 + j may cross into the next row; the div and the
// rem stay.

// CHECK-LABEL: func.func @unproven
// CHECK:         arith.divui
// CHECK:         arith.remui
func.func @unproven(%x: tensor<3x4xf32>) -> tensor<2x5xf32> {
  %y = loop.nest (%i, %j) to (2, 5) [parallel, parallel] -> tensor<2x5xf32> {
    %c4 = arith.constant 4 : index
    %a = arith.muli %i, %c4 : index
    %l = arith.addi %a, %j : index
    %q = arith.divui %l, %c4 : index
    %r = arith.remui %l, %c4 : index
    %v = loop.read %x[%q, %r] : tensor<3x4xf32>
    loop.yield %v : f32
  }
  func.return %y : tensor<2x5xf32>
}

// -----

// Unit loop indices are 0: `(i0 + i1)·8 + i2` is i2, and the read a plain index map.

// CHECK-LABEL: func.func @units
// CHECK:         loop.nest (%{{.*}}, %{{.*}}, %[[I2:.*]], %[[I3:.*]]) to (1, 1, 8, 4)
// CHECK-NOT:       arith.muli
// CHECK:           loop.read %x[%[[I2]], %[[I3]]] : tensor<8x4xf32>
func.func @units(%x: tensor<8x4xf32>) -> tensor<1x1x8x4xf32> {
  %y = loop.nest (%i0, %i1, %i2, %i3) to (1, 1, 8, 4) [parallel, parallel, parallel, parallel] -> tensor<1x1x8x4xf32> {
    %a = arith.addi %i0, %i1 : index
    %c8 = arith.constant 8 : index
    %b = arith.muli %a, %c8 : index
    %r = arith.addi %b, %i2 : index
    %v = loop.read %x[%r, %i3] : tensor<8x4xf32>
    loop.yield %v : f32
  }
  func.return %y : tensor<1x1x8x4xf32>
}
