// RUN: plmr-opt %s -p mesh-pack-allreduces | filecheck %s
// RUN: plmr-opt %s -p mesh-pack-allreduces{max-elements=8} | filecheck %s --check-prefix=SMALL

// Within one nest: the head gathers three values split over y (a zero tensor with the
// PE's block stored at its place, summed along y), as a cache append gathers its new K,
// rotated K and V rows. The three allreduces become one of 4 + 4 + 8 values at the place
// of the last; each result is loaded back (and reshaped) where it was read.

// CHECK-LABEL: mesh.program @head
// CHECK:         %g = mesh.spmd(%da, %db, %dc)
// CHECK:           %pc = tile.store %bc, %zc[%y, %zero] : tensor<1x4xf32> -> tensor<2x4xf32>
// CHECK-NEXT:      %[[Z0:.*]] = arith.constant 0 : index
// CHECK-NEXT:      %[[O4:.*]] = arith.constant 4 : index
// CHECK-NEXT:      %[[O8:.*]] = arith.constant 8 : index
// CHECK-NEXT:      %[[BUF:.*]] = tile.fill 0.000000e+00 : tensor<16xf32>
// CHECK-NEXT:      %[[S1:.*]] = tile.store %pa, %[[BUF]][%[[Z0]]] : tensor<4xf32> -> tensor<16xf32>
// CHECK-NEXT:      %[[S2:.*]] = tile.store %pb, %[[S1]][%[[O4]]] : tensor<4xf32> -> tensor<16xf32>
// CHECK-NEXT:      %[[FC:.*]] = tile.reshape %pc : tensor<2x4xf32> -> tensor<8xf32>
// CHECK-NEXT:      %[[S3:.*]] = tile.store %[[FC]], %[[S2]][%[[O8]]] : tensor<8xf32> -> tensor<16xf32>
// CHECK-NEXT:      %[[AR:.*]] = mesh.allreduce sum %[[S3]] axis y k = 3 {colors = [1 : i64]} : tensor<16xf32>
// CHECK-NEXT:      %ra = tile.load %[[AR]][%[[Z0]]] : tensor<16xf32> -> tensor<4xf32>
// CHECK-NEXT:      %rb = tile.load %[[AR]][%[[O4]]] : tensor<16xf32> -> tensor<4xf32>
// CHECK-NEXT:      %[[LC:.*]] = tile.load %[[AR]][%[[O8]]] : tensor<16xf32> -> tensor<8xf32>
// CHECK-NEXT:      %rc = tile.reshape %[[LC]] : tensor<8xf32> -> tensor<2x4xf32>
// CHECK-NOT:       mesh.allreduce
// CHECK:           mesh.yield

// With max-elements = 8: the first two (4 + 4 values) pack, the third stays apart.
// SMALL-LABEL: mesh.program @head
// SMALL:         mesh.allreduce sum %{{.*}} axis y k = 3 {colors = [1 : i64]} : tensor<8xf32>
// SMALL:         mesh.allreduce sum %pc axis y k = 3 {colors = [3 : i64]} : tensor<2x4xf32>
// SMALL-NOT:     mesh.allreduce
// SMALL:         mesh.return

mesh.program @head(%a: tensor<4xf32>, %b: tensor<4xf32>, %c: tensor<2x4xf32>) -> tensor<2x4xf32> device "test-small" grid [2, 2] {
  %da = mesh.scatter %a : tensor<4xf32> -> !mesh.dist<tensor<4xf32>, #mesh.layout<[y]>>
  %db = mesh.scatter %b : tensor<4xf32> -> !mesh.dist<tensor<4xf32>, #mesh.layout<[y]>>
  %dc = mesh.scatter %c : tensor<2x4xf32> -> !mesh.dist<tensor<2x4xf32>, #mesh.layout<[y, -]>>
  %g = mesh.spmd(%da, %db, %dc) : (!mesh.dist<tensor<4xf32>, #mesh.layout<[y]>>, !mesh.dist<tensor<4xf32>, #mesh.layout<[y]>>, !mesh.dist<tensor<2x4xf32>, #mesh.layout<[y, -]>>) -> !mesh.dist<tensor<2x4xf32>, #mesh.layout<[-, -]>> {
  ^bb0(%y: index, %x: index, %ba: tensor<2xf32>, %bb: tensor<2xf32>, %bc: tensor<1x4xf32>):
    %two = arith.constant 2 : index
    %zero = arith.constant 0 : index
    %o2 = arith.muli %y, %two : index
    %za = tile.fill 0.000000e+00 : tensor<4xf32>
    %pa = tile.store %ba, %za[%o2] : tensor<2xf32> -> tensor<4xf32>
    %ra = mesh.allreduce sum %pa axis y k = 3 {colors = [1]} : tensor<4xf32>
    %zb = tile.fill 0.000000e+00 : tensor<4xf32>
    %pb = tile.store %bb, %zb[%o2] : tensor<2xf32> -> tensor<4xf32>
    %rb = mesh.allreduce sum %pb axis y k = 3 {colors = [2]} : tensor<4xf32>
    %zc = tile.fill 0.000000e+00 : tensor<2x4xf32>
    %pc = tile.store %bc, %zc[%y, %zero] : tensor<1x4xf32> -> tensor<2x4xf32>
    %rc = mesh.allreduce sum %pc axis y k = 3 {colors = [3]} : tensor<2x4xf32>
    %ab = tile.map add %ra, %rb : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %row = tile.reshape %ab : tensor<4xf32> -> tensor<1x4xf32>
    %out = tile.map mul %rc, %row : (tensor<2x4xf32>, tensor<1x4xf32>) -> tensor<2x4xf32>
    mesh.yield %out : tensor<2x4xf32>
  }
  %r = mesh.gather %g : !mesh.dist<tensor<2x4xf32>, #mesh.layout<[-, -]>> -> tensor<2x4xf32>
  mesh.return %r : tensor<2x4xf32>
}

// Left alone: payloads computed from an earlier result (%rd reads %ra; %re reads %rd
// through %early), another axis (%rx), another kind (%rm).

// CHECK-LABEL: mesh.program @kept
// CHECK-COUNT-5: mesh.allreduce
// CHECK-NOT:     mesh.allreduce
// CHECK:         mesh.return

mesh.program @kept(%a: tensor<4xf32>) -> tensor<4xf32> device "test-small" grid [2, 2] {
  %da = mesh.scatter %a : tensor<4xf32> -> !mesh.dist<tensor<4xf32>, #mesh.layout<[y]>>
  %g = mesh.spmd(%da) : (!mesh.dist<tensor<4xf32>, #mesh.layout<[y]>>) -> !mesh.dist<tensor<4xf32>, #mesh.layout<[-]>> {
  ^bb0(%y: index, %x: index, %ba: tensor<2xf32>):
    %two = arith.constant 2 : index
    %o2 = arith.muli %y, %two : index
    %za = tile.fill 0.000000e+00 : tensor<4xf32>
    %pa = tile.store %ba, %za[%o2] : tensor<2xf32> -> tensor<4xf32>
    %ra = mesh.allreduce sum %pa axis y : tensor<4xf32>
    %pd = tile.map neg %ra : (tensor<4xf32>) -> tensor<4xf32>
    %rd = mesh.allreduce sum %pd axis y : tensor<4xf32>
    %rx = mesh.allreduce sum %pa axis x : tensor<4xf32>
    %rm = mesh.allreduce max %pa axis y : tensor<4xf32>
    %early = tile.map add %rd, %rx : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %re = mesh.allreduce sum %early axis y : tensor<4xf32>
    %s = tile.map add %re, %rm : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    mesh.yield %s : tensor<4xf32>
  }
  %r = mesh.gather %g : !mesh.dist<tensor<4xf32>, #mesh.layout<[-]>> -> tensor<4xf32>
  mesh.return %r : tensor<4xf32>
}
