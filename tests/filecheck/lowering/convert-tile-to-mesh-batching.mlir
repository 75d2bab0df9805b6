// RUN: plmr-opt %s -p 'plmr-compile{grid=2,2 tile-sizes=8,16 substitute=false route=false}' -o %t.mlir
// RUN: filecheck %s < %t.mlir
// RUN: plmr-opt %t.mlir | filecheck %s --check-prefix=COUNT

// A batched GEMV (2 KV heads of 3 query heads each, as a LLaMA projection): the heads
// split over x, the width over y. The three query heads of a PE stay on it, so their
// three accumulators are stored into the PE's output block and the block is allreduced
// once at the end of the nest, not once per query head.
// The norm's sum of squares is a whole-tensor reduction: its accumulator's fill and the
// reshape and store of its result run inside its mesh.spmd (no spmd of their own).

// CHECK:      mesh.program @norm
// CHECK:        %{{.*}}, %n_ms = mesh.spmd(%{{.*}}) : {{.*}} -> (!mesh.dist<tensor<f32>, #mesh.layout<[]>>, !mesh.dist<tensor<1xf32>, #mesh.layout<[-]>>) {
// CHECK-NEXT:   ^bb0(%py: index, %px: index, %{{.*}}: tensor<1x128xf32>):
// CHECK-NEXT:     %[[Z:.*]] = tile.fill 0.000000e+00 : tensor<f32>
// CHECK-NEXT:     %[[SS:.*]] = tile.for %i1 = 0 to 128 step 16 iter_args(%{{.*}} = %[[Z]]) -> (tensor<f32>) reduction {
// CHECK:          }
// CHECK-NEXT:     %[[ALL:.*]] = mesh.allreduce sum %[[SS]] axis y : tensor<f32>
// CHECK-NEXT:     %[[R:.*]] = tile.reshape %[[ALL]] : tensor<f32> -> tensor<1xf32>
// CHECK:          %[[MS:.*]] = tile.store %[[R]], %{{.*}}[%{{.*}}] : tensor<1xf32> -> tensor<1xf32>
// CHECK-NEXT:     mesh.yield %[[ALL]], %[[MS]] : tensor<f32>, tensor<1xf32>
// CHECK:      mesh.program @proj
// CHECK:        %q = mesh.spmd(
// CHECK:          %[[HEADS:.*]] = tile.for %i0 = 0 to 1 step 1 {{.*}} parallel {
// CHECK:            tile.for %i1 = 0 to 3 step 1 {{.*}} parallel {
// CHECK-NOT:          mesh.allreduce
// CHECK:              tile.for %i4 = 0 to 128 step 16 {{.*}} reduction {
// CHECK-NOT:          mesh.allreduce
// CHECK:              tile.store
// CHECK:          %[[Q:.*]] = mesh.allreduce sum %[[HEADS]] axis y : tensor<1x3x1x8xf32>
// CHECK-NEXT:     mesh.yield %[[Q]] : tensor<1x3x1x8xf32>

// COUNT-LABEL: mesh.program @norm
// COUNT-COUNT-2: mesh.spmd
// COUNT-NOT:     mesh.spmd
// COUNT-LABEL: mesh.program @proj
// COUNT-COUNT-1: mesh.spmd
// COUNT-COUNT-1: mesh.allreduce
// COUNT-NOT:     mesh.allreduce

func.func @norm(%x: tensor<1x256xf32>, %g: tensor<256xf32>) -> tensor<1x256xf32> {
  %n = graph.rmsnorm %x, %g epsilon = 1.000000e-05 : (tensor<1x256xf32>, tensor<256xf32>) -> tensor<1x256xf32>
  func.return %n : tensor<1x256xf32>
}

func.func @proj(%x: tensor<1x1x1x256xf32>, %w: tensor<2x3x256x8xf32>) -> tensor<2x3x1x8xf32> {
  %q = graph.matmul %x, %w : (tensor<1x1x1x256xf32>, tensor<2x3x256x8xf32>) -> tensor<2x3x1x8xf32>
  func.return %q : tensor<2x3x1x8xf32>
}
