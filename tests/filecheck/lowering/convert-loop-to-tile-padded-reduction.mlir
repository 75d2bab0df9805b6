// RUN: plmr-opt %s -p 'convert-graph-to-loop,convert-loop-to-tile{tile-sizes=16,16 fit=true fit-grid=3,4 spread=true}' | filecheck %s --check-prefix=TILE
// RUN: plmr-opt %s -p 'convert-graph-to-loop,convert-loop-to-tile{tile-sizes=16,16 fit=true fit-grid=3,4 spread=true},convert-tile-to-mesh{grid=3,4 fit-tiles=true}' | filecheck %s --check-prefix=MESH

// Reductions of 50 on a 3x4 grid, which no axis divides: with `fit` each is one padded
// block of 13 per PE (the last ending at 52) where a padding of its reads leaves the
// combine as it is: zeros for the product, -inf for the maximum.

// TILE:      %p = tile.for
// TILE:          tile.for %i2 = 0 to 50 step 13 {{.*}} reduction {
// TILE-NEXT:       tile.load %x[%i0, %i2] padding 0.000000e+00 : tensor<2x50xf32> -> tensor<2x13xf32>
// TILE-NEXT:       tile.load %w[%i2, %i1] padding 0.000000e+00 : tensor<50x7xf32> -> tensor<13x7xf32>
// TILE:      %m = tile.for
// TILE:        tile.for %i2_1 = 0 to 50 step 13 {{.*}} reduction {
// TILE-NEXT:     tile.load %x[%i0_1, %i2_1] padding 0xfff0000000000000 : tensor<2x50xf32> -> tensor<1x13xf32>

// On the mesh the product's reduction is split over x, 13 per PE: each load is limited
// to where the tensor ends in the PE's share, 50 - 13 · px (2 on the last PE, whatever
// its share holds past it).

// MESH:      %p = mesh.spmd
// MESH:        ^bb0(%py: index, %px: index, %[[X:.*]]: tensor<2x13xf32>, %[[W:.*]]: tensor<13x7xf32>):
// MESH:          tile.for %i2 = 0 to 13 step 13 {{.*}} reduction {
// MESH-NEXT:       %[[C13:.*]] = arith.constant 13 : index
// MESH-NEXT:       %[[ORG:.*]] = arith.muli %px, %[[C13]] : index
// MESH-NEXT:       %[[GLOBAL:.*]] = arith.addi %[[ORG]], %i2 : index
// MESH-NEXT:       %[[ROWS:.*]] = arith.constant 2 : index
// MESH-NEXT:       %[[START:.*]] = arith.subi %[[GLOBAL]], %i2 : index
// MESH-NEXT:       %[[END:.*]] = arith.constant 50 : index
// MESH-NEXT:       %[[LIMIT:.*]] = arith.subi %[[END]], %[[START]] : index
// MESH-NEXT:       tile.load %[[X]][%i0, %i2] limits[%[[ROWS]], %[[LIMIT]]] padding 0.000000e+00 : tensor<2x13xf32> -> tensor<2x13xf32>
// MESH:            tile.load %[[W]][%i2, %i1] limits[%{{.*}}, %{{.*}}] padding 0.000000e+00 : tensor<13x7xf32> -> tensor<13x7xf32>
// MESH:          mesh.allreduce sum %{{.*}} axis x : tensor<2x7xf32>

func.func @main(%x: tensor<2x50xf32>, %w: tensor<50x7xf32>) -> (tensor<2x7xf32>, tensor<2x1xf32>) {
  %p = graph.matmul %x, %w : (tensor<2x50xf32>, tensor<50x7xf32>) -> tensor<2x7xf32>
  %m = graph.reduce max %x axes = [1] keepdims : tensor<2x50xf32> -> tensor<2x1xf32>
  func.return %p, %m : tensor<2x7xf32>, tensor<2x1xf32>
}
