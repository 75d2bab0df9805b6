// RUN: XDSL_ROUNDTRIP
// RUN: XDSL_GENERIC_ROUNDTRIP

// `mesh.allgather`: the blocks of the first result[dim] / input[dim] PEs along the
// axis, concatenated along `dim`, on every PE of the line. Here the 12 columns of each
// PE row's 4 rows are split over x (3 per PE, 4 PEs): every PE gathers its rows whole,
// then the first two PEs' blocks alone (the rest contribute nothing). The values are
// tested in tests/runtime/test_allgather.py.

// CHECK:      %w = mesh.allgather %b axis x dim 1 : tensor<4x3xf32> -> tensor<4x12xf32>
// CHECK-NEXT: %h = mesh.allgather %b axis x dim 1 algorithm pipeline k = 3 : tensor<4x3xf32> -> tensor<4x6xf32>
// CHECK-GENERIC:      "mesh.allgather"(%b) <{axis = #mesh<axis x>, dim = 1 : i64, algorithm = #mesh<algorithm ktree>, k = 2 : i64}> : (tensor<4x3xf32>) -> tensor<4x12xf32>
// CHECK-GENERIC-NEXT: "mesh.allgather"(%b) <{axis = #mesh<axis x>, dim = 1 : i64, algorithm = #mesh<algorithm pipeline>, k = 3 : i64}> : (tensor<4x3xf32>) -> tensor<4x6xf32>

mesh.program @p(%a: tensor<8x12xf32>) -> (tensor<8x12xf32>, tensor<8x6xf32>) device "wse2" grid [2, 4] {
  %d = mesh.scatter %a : tensor<8x12xf32> -> !mesh.dist<tensor<8x12xf32>, #mesh.layout<[y, x]>>
  %e, %f = mesh.spmd(%d) : (!mesh.dist<tensor<8x12xf32>, #mesh.layout<[y, x]>>) -> (!mesh.dist<tensor<8x12xf32>, #mesh.layout<[y, -]>>, !mesh.dist<tensor<8x6xf32>, #mesh.layout<[y, -]>>) {
  ^bb0(%y: index, %x: index, %b: tensor<4x3xf32>):
    %w = mesh.allgather %b axis x dim 1 : tensor<4x3xf32> -> tensor<4x12xf32>
    %h = mesh.allgather %b axis x dim 1 algorithm pipeline k = 3 : tensor<4x3xf32> -> tensor<4x6xf32>
    mesh.yield %w, %h : tensor<4x12xf32>, tensor<4x6xf32>
  }
  %o = mesh.gather %e : !mesh.dist<tensor<8x12xf32>, #mesh.layout<[y, -]>> -> tensor<8x12xf32>
  %g = mesh.gather %f : !mesh.dist<tensor<8x6xf32>, #mesh.layout<[y, -]>> -> tensor<8x6xf32>
  mesh.return %o, %g : tensor<8x12xf32>, tensor<8x6xf32>
}
