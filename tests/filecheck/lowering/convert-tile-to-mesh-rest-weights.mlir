// RUN: plmr-opt %s -p 'convert-graph-to-loop,convert-loop-to-tile{tile-sizes=2,4},convert-tile-to-mesh{grid=4,4 rest-weights=true}' | filecheck %s
// RUN: plmr-opt %s -p 'convert-graph-to-loop,convert-loop-to-tile{tile-sizes=2,4},convert-tile-to-mesh{grid=4,4}' | filecheck %s --check-prefix=COPIES

// The product reads %w (a model weight: `plmr.weight_args`) with its columns over x and
// its rows whole, a copy on each of the 4 PEs along y. With `rest-weights` the weight is
// placed split along y too (its share of the grid: 4x2 a PE) and gathered at the head of
// the spmd: one `mesh.allgather` along y concatenates the 4 PEs' 4x2 blocks into 16x2.
// %x is an input, not a weight: it is placed as the product reads it.

// CHECK:      %x_1 = mesh.scatter %x : tensor<8x16xf32> -> !mesh.dist<tensor<8x16xf32>, #mesh.layout<[y, -]>>
// CHECK-NEXT: %w_1 = mesh.scatter %w : tensor<16x6xf32> -> !mesh.dist<tensor<16x6xf32>, #mesh.layout<[y, x]>>
// CHECK-NEXT: %y = mesh.spmd(%x_1, %w_1)
// CHECK-NEXT: ^bb0(%py: index, %px: index, %0: tensor<2x16xf32>, %1: tensor<4x2xf32>):
// CHECK-NEXT:   %2 = mesh.allgather %1 axis y dim 0 : tensor<4x2xf32> -> tensor<16x2xf32>
// CHECK-NOT:    mesh.allreduce
// CHECK:        tile.load %2[%i2, %i1] : tensor<16x2xf32> -> tensor<4x2xf32>

// COPIES:      %w_1 = mesh.scatter %w : tensor<16x6xf32> -> !mesh.dist<tensor<16x6xf32>, #mesh.layout<[-, x]>>
// COPIES-NEXT: %y = mesh.spmd(%x_1, %w_1)
// COPIES-NOT:  mesh.allgather

func.func @main(%x: tensor<8x16xf32>, %w: tensor<16x6xf32>) -> tensor<8x6xf32> attributes {plmr.weight_args = [1 : i64]} {
  %y = graph.matmul %x, %w : (tensor<8x16xf32>, tensor<16x6xf32>) -> tensor<8x6xf32>
  func.return %y : tensor<8x6xf32>
}
