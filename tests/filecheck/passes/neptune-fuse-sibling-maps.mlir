// RUN: plmr-opt %s -p convert-graph-to-loop,neptune-fuse --split-input-file | filecheck %s

// Two maps of the same extents that do not read each other, both results of the
// program (stored, not inlined): one nest computes both.

// CHECK-LABEL: func.func @two_maps
// CHECK:       %a, %b = loop.nest (%i0, %i1) to (4, 8) [parallel, parallel] -> (tensor<4x8xf32>, tensor<4x8xf32>) {
// CHECK:         arith.mulf
// CHECK:         arith.addf
// CHECK:         loop.yield %{{.*}}, %{{.*}} : f32, f32
// CHECK-NOT:   loop.nest
// CHECK:       func.return %a, %b
func.func @two_maps(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %a = graph.mul %x, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %b = graph.add %x, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %a, %b : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// The second map reads the first: they stay two nests.

// CHECK-LABEL: func.func @dependent_maps
// CHECK:       %a = loop.nest (%i0, %i1) to (4, 8) [parallel, parallel] -> tensor<4x8xf32> {
// CHECK:       %b = loop.nest (%{{.*}}, %{{.*}}) to (4, 8) [parallel, parallel] -> tensor<4x8xf32> {
// CHECK:         loop.read %a[
func.func @dependent_maps(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %a = graph.mul %x, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %b = graph.add %a, %y : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %a, %b : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Different extents: two nests.

// CHECK-LABEL: func.func @other_extents
// CHECK:       %a = loop.nest (%i0, %i1) to (4, 8) [parallel, parallel] -> tensor<4x8xf32> {
// CHECK:       %b = loop.nest (%{{.*}}, %{{.*}}) to (8, 4) [parallel, parallel] -> tensor<8x4xf32> {
func.func @other_extents(%x: tensor<4x8xf32>, %y: tensor<8x4xf32>) -> (tensor<4x8xf32>, tensor<8x4xf32>) {
  %a = graph.mul %x, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %b = graph.add %y, %y : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<8x4xf32>
  func.return %a, %b : tensor<4x8xf32>, tensor<8x4xf32>
}
