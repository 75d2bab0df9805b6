// RUN: XDSL_ROUNDTRIP
// RUN: XDSL_GENERIC_ROUNDTRIP

// Segmented collectives: `segment = S` cuts the axis into consecutive segments of S PEs
// that reduce or broadcast on their own (a 7-row axis: segments of 3 on rows 0-2 and
// 3-5, row 6 idle). Absent, the collective spans the whole axis.

// CHECK:      %s = mesh.allreduce sum %b axis y segment = 3 : tensor<2x1xf32>
// CHECK-NEXT: %t = mesh.reduce max %s axis y root %r groups = 2 segment = 3 : tensor<2x1xf32>
// CHECK-NEXT: %u = mesh.broadcast %t axis x root %r segment = 2 : tensor<2x1xf32>
// CHECK-NEXT: %v = mesh.allreduce min %u axis y algorithm ring segment = 7 : tensor<2x1xf32>
// CHECK-GENERIC: "mesh.allreduce"(%b) <{kind = #mesh<combine sum>, axis = #mesh<axis y>, segment = 3 : i64, algorithm = #mesh<algorithm ktree>, k = 2 : i64}>
// CHECK-GENERIC: "mesh.broadcast"(%t, %r) <{axis = #mesh<axis x>, segment = 2 : i64}>

mesh.program @p(%a: tensor<8x4xf32>) -> tensor<8x4xf32> device "wse2" grid [7, 4] {
  %d = mesh.scatter %a : tensor<8x4xf32> -> !mesh.dist<tensor<8x4xf32>, #mesh.layout<[y, x]>>
  %e = mesh.spmd(%d) : (!mesh.dist<tensor<8x4xf32>, #mesh.layout<[y, x]>>) -> !mesh.dist<tensor<8x4xf32>, #mesh.layout<[y, x]>> {
  ^bb0(%y: index, %x: index, %b: tensor<2x1xf32>):
    %r = arith.constant 1 : index
    %s = mesh.allreduce sum %b axis y segment = 3 : tensor<2x1xf32>
    %t = mesh.reduce max %s axis y root %r groups = 2 segment = 3 : tensor<2x1xf32>
    %u = mesh.broadcast %t axis x root %r segment = 2 : tensor<2x1xf32>
    %v = mesh.allreduce min %u axis y algorithm ring segment = 7 : tensor<2x1xf32>
    mesh.yield %v : tensor<2x1xf32>
  }
  %o = mesh.gather %e : !mesh.dist<tensor<8x4xf32>, #mesh.layout<[y, x]>> -> tensor<8x4xf32>
  mesh.return %o : tensor<8x4xf32>
}
