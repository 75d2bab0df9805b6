// RUN: XDSL_ROUNDTRIP
// RUN: XDSL_GENERIC_ROUNDTRIP

// `mesh.diagonal_broadcast`: each line's diagonal PE multicasts its block along the
// line (rows along x, PE (y, y) the root of row y; columns along y, PE (x, x) of column
// x). A block split over x becomes split over y, replicated along x. The values and the
// routes are tested in tests/runtime/test_diagonal_broadcast.py.

// CHECK:      %t = mesh.diagonal_broadcast %b axis x : tensor<2x4xf32>
// CHECK-GENERIC: "mesh.diagonal_broadcast"(%b) <{axis = #mesh<axis x>}> : (tensor<2x4xf32>) -> tensor<2x4xf32>

mesh.program @p(%a: tensor<6x4xf32>) -> tensor<6x4xf32> device "wse2" grid [3, 3] {
  %d = mesh.scatter %a : tensor<6x4xf32> -> !mesh.dist<tensor<6x4xf32>, #mesh.layout<[x, -]>>
  %e = mesh.spmd(%d) : (!mesh.dist<tensor<6x4xf32>, #mesh.layout<[x, -]>>) -> !mesh.dist<tensor<6x4xf32>, #mesh.layout<[y, -]>> {
  ^bb0(%y: index, %x: index, %b: tensor<2x4xf32>):
    %t = mesh.diagonal_broadcast %b axis x : tensor<2x4xf32>
    mesh.yield %t : tensor<2x4xf32>
  }
  %o = mesh.gather %e : !mesh.dist<tensor<6x4xf32>, #mesh.layout<[y, -]>> -> tensor<6x4xf32>
  mesh.return %o : tensor<6x4xf32>
}
