// RUN: plmr-opt %s -p 'plmr-compile{grid=4,4 tile-sizes=4,4 substitute=false route=false}' | filecheck %s

// A reduction over two dimensions (decode's output projection, Σ over the head
// dimension and the heads): the outer one (16) splits over an axis, the inner one (the
// heads) runs whole on each PE inside it, and the PEs' partial sums are allreduced once
// at the end of the nest.

// CHECK-LABEL: mesh.program @heads_projection
// CHECK:       mesh.scatter %o : tensor<16x2x1xf32> -> !mesh.dist<tensor<16x2x1xf32>, #mesh.layout<[y, -, -]>>
// CHECK:       mesh.scatter %w : tensor<16x2x24xf32> -> !mesh.dist<tensor<16x2x24xf32>, #mesh.layout<[y, -, -]>>
// CHECK:       %[[OUT:.*]] = tile.for %i0 = 0 to 24 step 4 {{.*}} parallel {
// CHECK:         tile.for %i1 = 0 to 4 step 1 {{.*}} reduction {
// CHECK:           tile.for %i2 = 0 to 2 step 2 {{.*}} reduction {
// CHECK:             tile.dot
// CHECK:             tile.map add
// CHECK:       %[[SUM:.*]] = mesh.allreduce sum %[[OUT]] axis y : tensor<24xf32>
// CHECK-NEXT:  mesh.yield %[[SUM]] : tensor<24xf32>
func.func @heads_projection(%o: tensor<16x2x1xf32>, %w: tensor<16x2x24xf32>) -> tensor<24xf32> {
  %p = graph.mul %o, %w : (tensor<16x2x1xf32>, tensor<16x2x24xf32>) -> tensor<16x2x24xf32>
  %r = graph.reduce sum %p axes = [0, 1] : tensor<16x2x24xf32> -> tensor<24xf32>
  func.return %r : tensor<24xf32>
}
