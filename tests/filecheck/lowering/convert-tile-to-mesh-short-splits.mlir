// RUN: plmr-opt %s -p 'plmr-compile{grid=4,4 tile-sizes=16,16 substitute=false route=false}' | filecheck %s

// Two heads of a decode step's attention on 4x4. The scores come over x (the
// positions). The softmax's nests could also split the two heads over y, which no value
// before them is split over, and halve their own compute there. But every reader then
// gathers them along y: P.V splits the head dimension over y, and the output projection
// reads the sums whole. So the planner ranks such a split with the gathers its readers
// pay. The heads stay whole on every PE, the exponentials need no gather, and the sum
// and P.V share one allreduce (mesh-pack-allreduces). Without that term the program
// simulates slower (tests/lowering/test_tile_to_mesh_cost.py).

// CHECK-LABEL: mesh.program @heads_attention
// CHECK:       %s = mesh.spmd
// CHECK-SAME:    -> !mesh.dist<tensor<2x64xf32>, #mesh.layout<[-, x]>>
// CHECK:       %m = mesh.spmd(%s)
// CHECK-SAME:    -> !mesh.dist<tensor<2x1xf32>, #mesh.layout<[-, -]>>
// CHECK:         mesh.allreduce max %{{.*}} axis x : tensor<2x1xf32>
// CHECK:       %e = mesh.spmd(%s, %m)
// CHECK-SAME:    -> !mesh.dist<tensor<2x64xf32>, #mesh.layout<[-, x]>>
// CHECK-NOT:     mesh.allreduce
// CHECK:       %l, %o = mesh.spmd(%e, %v_1)
// CHECK-SAME:    -> (!mesh.dist<tensor<2x1xf32>, #mesh.layout<[-, -]>>, !mesh.dist<tensor<2x64xf32>, #mesh.layout<[-, y]>>)
// CHECK:         mesh.allreduce sum %{{.*}} axis x : tensor<34xf32>
// CHECK-NOT:     mesh.allreduce
// CHECK:       %y = mesh.spmd(%o, %l, %w_1)
func.func @heads_attention(%q: tensor<2x16xf32>, %k: tensor<16x64xf32>, %v: tensor<64x64xf32>, %w: tensor<2x64x32xf32>) -> tensor<32xf32> {
  %s = graph.matmul %q, %k : (tensor<2x16xf32>, tensor<16x64xf32>) -> tensor<2x64xf32>
  %m = graph.reduce max %s axes = [-1] keepdims : tensor<2x64xf32> -> tensor<2x1xf32>
  %d = graph.sub %s, %m : (tensor<2x64xf32>, tensor<2x1xf32>) -> tensor<2x64xf32>
  %e = graph.exp %d : tensor<2x64xf32>
  %l = graph.reduce sum %e axes = [-1] keepdims : tensor<2x64xf32> -> tensor<2x1xf32>
  %o = graph.matmul %e, %v : (tensor<2x64xf32>, tensor<64x64xf32>) -> tensor<2x64xf32>
  %r = graph.div %o, %l : (tensor<2x64xf32>, tensor<2x1xf32>) -> tensor<2x64xf32>
  %r3 = graph.reshape %r : tensor<2x64xf32> -> tensor<2x64x1xf32>
  %p = graph.mul %r3, %w : (tensor<2x64x1xf32>, tensor<2x64x32xf32>) -> tensor<2x64x32xf32>
  %y = graph.reduce sum %p axes = [0, 1] : tensor<2x64x32xf32> -> tensor<32xf32>
  func.return %y : tensor<32xf32>
}
