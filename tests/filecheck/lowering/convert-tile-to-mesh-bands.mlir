// RUN: plmr-opt %s -p 'convert-graph-to-loop,convert-loop-to-tile{tile-sizes=8,8 fit=true fit-grid=100,40 bands=true},convert-tile-to-mesh{grid=100,40}' | filecheck %s

// Decode attention of 4 heads (head dimension 96) over 40 positions on 100x40 PEs. The
// blocking cuts the 4 heads in blocks of 1 (`bands`), and the planner gives every head
// a band of 25 rows with its head dimension blocked within (4 elements per PE): the
// scores reduce the head dimension within each band (an allreduce in segments of 25,
// no multicast: every PE of the band needs the scores), the softmax keeps the heads
// over the bands and the positions over x, and P·V's output is banded like the query.

// CHECK-LABEL: mesh.program @attn
// CHECK:       mesh.scatter %q : tensor<4x1x96xf32> -> !mesh.dist<tensor<4x1x96xf32>, #mesh.layout<[y, -, y], band y 25>>
// CHECK:       mesh.scatter %k : tensor<4x40x96xf32> -> !mesh.dist<tensor<4x40x96xf32>, #mesh.layout<[y, x, y], band y 25>>
// CHECK:       %s = mesh.spmd({{.*}}) -> !mesh.dist<tensor<4x1x40xf32>, #mesh.layout<[y, -, x], band y 25>> {
// CHECK:         %[[W:.*]] = arith.constant 25 : index
// CHECK-NEXT:    %{{.*}} = arith.divui %py, %[[W]] : index
// CHECK:         %{{.*}} = arith.remui %py, %{{.*}} : index
// CHECK:         tile.for %i0 = 0 to 1 step 1
// CHECK:         tile.for %i3 = 0 to 4 step 1 {{.*}} reduction {
// CHECK:         mesh.allreduce sum %{{.*}} axis y segment = 25 : tensor<f32>
// CHECK-NOT:     mesh.broadcast
// CHECK:       %p_max = mesh.spmd(%s) : ({{.*}}) -> !mesh.dist<tensor<4x1xf32>, #mesh.layout<[y, -], band y 25>> {
// CHECK:         mesh.allreduce max %{{.*}} axis x : tensor<f32>
// CHECK:       %p_exp = mesh.spmd(%s, %p_max)
// CHECK:       %p_sum = mesh.spmd(%p_exp)
// CHECK:       mesh.scatter %v : tensor<4x40x96xf32> -> !mesh.dist<tensor<4x40x96xf32>, #mesh.layout<[y, x, y], band y 25>>
// CHECK:       %o = mesh.spmd({{.*}}) -> !mesh.dist<tensor<4x1x96xf32>, #mesh.layout<[y, -, y], band y 25>> {
// CHECK:         tile.for %i2_5 = 0 to 4 step 1
// CHECK:         mesh.allreduce sum %{{.*}} axis x : tensor<1x1x4xf32>
// CHECK:       mesh.gather %o
func.func @attn(%q: tensor<4x1x96xf32>, %k: tensor<4x40x96xf32>, %v: tensor<4x40x96xf32>) -> tensor<4x1x96xf32> {
  %s = graph.matmul %q, %k transpose_b : (tensor<4x1x96xf32>, tensor<4x40x96xf32>) -> tensor<4x1x40xf32>
  %p = graph.softmax %s : tensor<4x1x40xf32>
  %o = graph.matmul %p, %v : (tensor<4x1x40xf32>, tensor<4x40x96xf32>) -> tensor<4x1x96xf32>
  func.return %o : tensor<4x1x96xf32>
}
