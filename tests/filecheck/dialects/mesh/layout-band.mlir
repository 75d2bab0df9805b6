// RUN: XDSL_ROUNDTRIP
// RUN: XDSL_GENERIC_ROUNDTRIP

// Banded layouts: `band x 3` cuts the 7 columns into 2 bands of 3 (column 6 holds
// padding); the heads (dim 0) are split over the bands and the head dimension (dim 2)
// is blocked within each band, so the scores reduce the head dimension with an
// allreduce inside each band (`segment = 3`). The scores keep the heads in bands,
// replicated within a band.

// CHECK:      %dq = mesh.scatter %q : tensor<2x3x5xf32> -> !mesh.dist<tensor<2x3x5xf32>, #mesh.layout<[x, -, x], band x 3>>
// CHECK-NEXT: %dk = mesh.scatter %k : tensor<2x8x5xf32> -> !mesh.dist<tensor<2x8x5xf32>, #mesh.layout<[x, y, x], band x 3>>
// CHECK:      %t = mesh.allreduce sum %p3 axis x segment = 3 : tensor<1x3x2xf32>
// CHECK:      mesh.gather %s : !mesh.dist<tensor<2x3x8xf32>, #mesh.layout<[x, -, y], band x 3>> -> tensor<2x3x8xf32>
// CHECK-GENERIC: !mesh.dist<tensor<2x8x5xf32>, #mesh.layout<[x, y, x], band x 3>>

mesh.program @scores(%q: tensor<2x3x5xf32>, %k: tensor<2x8x5xf32>) -> tensor<2x3x8xf32> device "wse2" grid [4, 7] {
  %dq = mesh.scatter %q : tensor<2x3x5xf32> -> !mesh.dist<tensor<2x3x5xf32>, #mesh.layout<[x, -, x], band x 3>>
  %dk = mesh.scatter %k : tensor<2x8x5xf32> -> !mesh.dist<tensor<2x8x5xf32>, #mesh.layout<[x, y, x], band x 3>>
  %s = mesh.spmd(%dq, %dk) : (!mesh.dist<tensor<2x3x5xf32>, #mesh.layout<[x, -, x], band x 3>>, !mesh.dist<tensor<2x8x5xf32>, #mesh.layout<[x, y, x], band x 3>>) -> !mesh.dist<tensor<2x3x8xf32>, #mesh.layout<[x, -, y], band x 3>> {
  ^bb0(%y: index, %x: index, %bq: tensor<1x3x2xf32>, %bk: tensor<1x2x2xf32>):
    %q2 = tile.reshape %bq : tensor<1x3x2xf32> -> tensor<3x2xf32>
    %k2 = tile.reshape %bk : tensor<1x2x2xf32> -> tensor<2x2xf32>
    %z = tile.fill 0.0 : tensor<3x2xf32>
    %p = tile.dot %q2, %k2, %z transpose_b : (tensor<3x2xf32>, tensor<2x2xf32>, tensor<3x2xf32>) -> tensor<3x2xf32>
    %p3 = tile.reshape %p : tensor<3x2xf32> -> tensor<1x3x2xf32>
    %t = mesh.allreduce sum %p3 axis x segment = 3 : tensor<1x3x2xf32>
    mesh.yield %t : tensor<1x3x2xf32>
  }
  %o = mesh.gather %s : !mesh.dist<tensor<2x3x8xf32>, #mesh.layout<[x, -, y], band x 3>> -> tensor<2x3x8xf32>
  mesh.return %o : tensor<2x3x8xf32>
}
