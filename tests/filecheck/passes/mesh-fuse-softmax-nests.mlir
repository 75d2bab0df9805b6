// RUN: plmr-opt %s -p mesh-fuse-softmax{always=true} | filecheck %s
// RUN: plmr-opt %s -p mesh-fuse-softmax | filecheck %s --check-prefix=TIMED

// A split-K softmax written as three nests (a decode step's attention: the
// probabilities are stored, read by the sum and by P·V): the maximum's nest allreduces
// the PEs' maxima, the next takes exp(s - M), the last sums l and P·V (packed) along x.
// The pass makes them one nest: the exponentials read the PE's own maximum and one
// softmax allreduce of the rows [m, l, o] rescales and sums them; the sums go back to
// the payload's places. On 4 PEs the runtime's timing keeps the three allreduces.
// TIMED-LABEL: mesh.program @three
// TIMED:         mesh.allreduce max
// TIMED:         mesh.allreduce sum

// CHECK-LABEL: mesh.program @three
// CHECK:         %{{.*}} = mesh.spmd(%sd, %vd) : (!mesh.dist<tensor<2x16xf32>, #mesh.layout<[-, x]>>, !mesh.dist<tensor<16x3xf32>, #mesh.layout<[x, -]>>) -> !mesh.dist<tensor<8xf32>, #mesh.layout<[-]>> {
// CHECK-NEXT:    ^{{.*}}(%{{.*}}: index, %{{.*}}: index, %[[S:.*]]: tensor<2x4xf32>, %[[V:.*]]: tensor<4x3xf32>):
// CHECK-NEXT:      %[[M1:.*]] = tile.reduce max %[[S]] axis = 1 : tensor<2x4xf32> -> tensor<2x1xf32>
// CHECK-NEXT:      %[[M:.*]] = tile.reshape %[[M1]] : tensor<2x1xf32> -> tensor<2xf32>
// CHECK-NEXT:      %[[MR:.*]] = tile.reshape %[[M]] : tensor<2xf32> -> tensor<2x1xf32>
// CHECK-NEXT:      %[[D:.*]] = tile.map sub %[[S]], %[[MR]]
// CHECK-NEXT:      %[[E:.*]] = tile.map exp %[[D]]
// CHECK-NEXT:      %[[L1:.*]] = tile.reduce sum %[[E]] axis = 1
// CHECK:           %[[O:.*]] = tile.dot %[[E]], %[[V]]
// CHECK:           %[[ZERO:.*]] = arith.constant 0 : index
// CHECK-NEXT:      %[[MROWS:.*]] = tile.reshape %[[M]] : tensor<2xf32> -> tensor<2x1xf32>
// CHECK-NEXT:      %[[BUF:.*]] = tile.fill 0.000000e+00 : tensor<2x5xf32>
// CHECK-NEXT:      %[[B1:.*]] = tile.store %[[MROWS]], %[[BUF]][%[[ZERO]], %[[ZERO]]] : tensor<2x1xf32> -> tensor<2x5xf32>
// CHECK-NEXT:      %[[ONE:.*]] = arith.constant 1 : index
// CHECK-NEXT:      %[[LR:.*]] = tile.reshape %{{.*}} : tensor<2xf32> -> tensor<2x1xf32>
// CHECK-NEXT:      %[[B2:.*]] = tile.store %[[LR]], %[[B1]][%[[ZERO]], %[[ONE]]] : tensor<2x1xf32> -> tensor<2x5xf32>
// CHECK-NEXT:      %[[TWO:.*]] = arith.constant 2 : index
// CHECK-NEXT:      %[[OR:.*]] = tile.reshape %{{.*}} : tensor<6xf32> -> tensor<2x3xf32>
// CHECK-NEXT:      %[[B3:.*]] = tile.store %[[OR]], %[[B2]][%[[ZERO]], %[[TWO]]] : tensor<2x3xf32> -> tensor<2x5xf32>
// CHECK-NEXT:      %[[R:.*]] = mesh.allreduce softmax %[[B3]] axis x : tensor<2x5xf32>
// CHECK-NEXT:      %[[P:.*]] = tile.fill 0.000000e+00 : tensor<8xf32>
// CHECK-NEXT:      %[[RL:.*]] = tile.load %[[R]][%[[ZERO]], %[[ONE]]] : tensor<2x5xf32> -> tensor<2x1xf32>
// CHECK-NEXT:      %[[FL:.*]] = tile.reshape %[[RL]] : tensor<2x1xf32> -> tensor<2xf32>
// CHECK-NEXT:      %[[AT0:.*]] = arith.constant 0 : index
// CHECK-NEXT:      %[[P1:.*]] = tile.store %[[FL]], %[[P]][%[[AT0]]] : tensor<2xf32> -> tensor<8xf32>
// CHECK-NEXT:      %[[RO:.*]] = tile.load %[[R]][%[[ZERO]], %[[TWO]]] : tensor<2x5xf32> -> tensor<2x3xf32>
// CHECK-NEXT:      %[[FO:.*]] = tile.reshape %[[RO]] : tensor<2x3xf32> -> tensor<6xf32>
// CHECK-NEXT:      %[[AT2:.*]] = arith.constant 2 : index
// CHECK-NEXT:      %[[P2:.*]] = tile.store %[[FO]], %[[P1]][%[[AT2]]] : tensor<6xf32> -> tensor<8xf32>
// CHECK-NEXT:      mesh.yield %[[P2]] : tensor<8xf32>
// CHECK-NOT:     mesh.allreduce max
// CHECK-NOT:     mesh.allreduce sum

// The exponentials are also read by a fourth nest (which would see them scaled by the
// PE's own maximum): nothing changes.
// CHECK-LABEL: mesh.program @shared
// CHECK:         mesh.allreduce max
// CHECK:         mesh.allreduce sum
// CHECK-NOT:     softmax

// The sum of the squared exponentials is not linear in them: nothing changes.
// CHECK-LABEL: mesh.program @square
// CHECK:         mesh.allreduce max
// CHECK:         mesh.allreduce sum
// CHECK-NOT:     softmax

mesh.program @three(%s: tensor<2x16xf32>, %v: tensor<16x3xf32>) -> tensor<8xf32> device "test-small" grid [1, 4] {
  %sd = mesh.scatter %s : tensor<2x16xf32> -> !mesh.dist<tensor<2x16xf32>, #mesh.layout<[-, x]>>
  %vd = mesh.scatter %v : tensor<16x3xf32> -> !mesh.dist<tensor<16x3xf32>, #mesh.layout<[x, -]>>
  %mx = mesh.spmd(%sd) : (!mesh.dist<tensor<2x16xf32>, #mesh.layout<[-, x]>>) -> !mesh.dist<tensor<2xf32>, #mesh.layout<[-]>> {
  ^bb0(%y: index, %x: index, %sb: tensor<2x4xf32>):
    %m1 = tile.reduce max %sb axis = 1 : tensor<2x4xf32> -> tensor<2x1xf32>
    %m = tile.reshape %m1 : tensor<2x1xf32> -> tensor<2xf32>
    %M = mesh.allreduce max %m axis x : tensor<2xf32>
    mesh.yield %M : tensor<2xf32>
  }
  %e = mesh.spmd(%sd, %mx) : (!mesh.dist<tensor<2x16xf32>, #mesh.layout<[-, x]>>, !mesh.dist<tensor<2xf32>, #mesh.layout<[-]>>) -> !mesh.dist<tensor<2x16xf32>, #mesh.layout<[-, x]>> {
  ^bb0(%y: index, %x: index, %sb: tensor<2x4xf32>, %mb: tensor<2xf32>):
    %mr = tile.reshape %mb : tensor<2xf32> -> tensor<2x1xf32>
    %d = tile.map sub %sb, %mr : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
    %ex = tile.map exp %d : (tensor<2x4xf32>) -> tensor<2x4xf32>
    mesh.yield %ex : tensor<2x4xf32>
  }
  %lo = mesh.spmd(%e, %vd) : (!mesh.dist<tensor<2x16xf32>, #mesh.layout<[-, x]>>, !mesh.dist<tensor<16x3xf32>, #mesh.layout<[x, -]>>) -> !mesh.dist<tensor<8xf32>, #mesh.layout<[-]>> {
  ^bb0(%y: index, %x: index, %eb: tensor<2x4xf32>, %vb: tensor<4x3xf32>):
    %l1 = tile.reduce sum %eb axis = 1 : tensor<2x4xf32> -> tensor<2x1xf32>
    %l = tile.reshape %l1 : tensor<2x1xf32> -> tensor<2xf32>
    %z = tile.fill 0.000000e+00 : tensor<2x3xf32>
    %o = tile.dot %eb, %vb, %z : (tensor<2x4xf32>, tensor<4x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>
    %of = tile.reshape %o : tensor<2x3xf32> -> tensor<6xf32>
    %c0 = arith.constant 0 : index
    %c2 = arith.constant 2 : index
    %buf = tile.fill 0.000000e+00 : tensor<8xf32>
    %b1 = tile.store %l, %buf[%c0] : tensor<2xf32> -> tensor<8xf32>
    %b2 = tile.store %of, %b1[%c2] : tensor<6xf32> -> tensor<8xf32>
    %r = mesh.allreduce sum %b2 axis x : tensor<8xf32>
    mesh.yield %r : tensor<8xf32>
  }
  %out = mesh.gather %lo : !mesh.dist<tensor<8xf32>, #mesh.layout<[-]>> -> tensor<8xf32>
  mesh.return %out : tensor<8xf32>
}

mesh.program @shared(%s: tensor<2x16xf32>) -> (tensor<2xf32>, tensor<2x16xf32>) device "test-small" grid [1, 4] {
  %sd = mesh.scatter %s : tensor<2x16xf32> -> !mesh.dist<tensor<2x16xf32>, #mesh.layout<[-, x]>>
  %mx = mesh.spmd(%sd) : (!mesh.dist<tensor<2x16xf32>, #mesh.layout<[-, x]>>) -> !mesh.dist<tensor<2xf32>, #mesh.layout<[-]>> {
  ^bb0(%y: index, %x: index, %sb: tensor<2x4xf32>):
    %m1 = tile.reduce max %sb axis = 1 : tensor<2x4xf32> -> tensor<2x1xf32>
    %m = tile.reshape %m1 : tensor<2x1xf32> -> tensor<2xf32>
    %M = mesh.allreduce max %m axis x : tensor<2xf32>
    mesh.yield %M : tensor<2xf32>
  }
  %e = mesh.spmd(%sd, %mx) : (!mesh.dist<tensor<2x16xf32>, #mesh.layout<[-, x]>>, !mesh.dist<tensor<2xf32>, #mesh.layout<[-]>>) -> !mesh.dist<tensor<2x16xf32>, #mesh.layout<[-, x]>> {
  ^bb0(%y: index, %x: index, %sb: tensor<2x4xf32>, %mb: tensor<2xf32>):
    %mr = tile.reshape %mb : tensor<2xf32> -> tensor<2x1xf32>
    %d = tile.map sub %sb, %mr : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
    %ex = tile.map exp %d : (tensor<2x4xf32>) -> tensor<2x4xf32>
    mesh.yield %ex : tensor<2x4xf32>
  }
  %l = mesh.spmd(%e) : (!mesh.dist<tensor<2x16xf32>, #mesh.layout<[-, x]>>) -> !mesh.dist<tensor<2xf32>, #mesh.layout<[-]>> {
  ^bb0(%y: index, %x: index, %eb: tensor<2x4xf32>):
    %l1 = tile.reduce sum %eb axis = 1 : tensor<2x4xf32> -> tensor<2x1xf32>
    %l2 = tile.reshape %l1 : tensor<2x1xf32> -> tensor<2xf32>
    %r = mesh.allreduce sum %l2 axis x : tensor<2xf32>
    mesh.yield %r : tensor<2xf32>
  }
  %lo = mesh.gather %l : !mesh.dist<tensor<2xf32>, #mesh.layout<[-]>> -> tensor<2xf32>
  %eo = mesh.gather %e : !mesh.dist<tensor<2x16xf32>, #mesh.layout<[-, x]>> -> tensor<2x16xf32>
  mesh.return %lo, %eo : tensor<2xf32>, tensor<2x16xf32>
}

mesh.program @square(%s: tensor<2x16xf32>) -> tensor<2xf32> device "test-small" grid [1, 4] {
  %sd = mesh.scatter %s : tensor<2x16xf32> -> !mesh.dist<tensor<2x16xf32>, #mesh.layout<[-, x]>>
  %mx = mesh.spmd(%sd) : (!mesh.dist<tensor<2x16xf32>, #mesh.layout<[-, x]>>) -> !mesh.dist<tensor<2xf32>, #mesh.layout<[-]>> {
  ^bb0(%y: index, %x: index, %sb: tensor<2x4xf32>):
    %m1 = tile.reduce max %sb axis = 1 : tensor<2x4xf32> -> tensor<2x1xf32>
    %m = tile.reshape %m1 : tensor<2x1xf32> -> tensor<2xf32>
    %M = mesh.allreduce max %m axis x : tensor<2xf32>
    mesh.yield %M : tensor<2xf32>
  }
  %e = mesh.spmd(%sd, %mx) : (!mesh.dist<tensor<2x16xf32>, #mesh.layout<[-, x]>>, !mesh.dist<tensor<2xf32>, #mesh.layout<[-]>>) -> !mesh.dist<tensor<2x16xf32>, #mesh.layout<[-, x]>> {
  ^bb0(%y: index, %x: index, %sb: tensor<2x4xf32>, %mb: tensor<2xf32>):
    %mr = tile.reshape %mb : tensor<2xf32> -> tensor<2x1xf32>
    %d = tile.map sub %sb, %mr : (tensor<2x4xf32>, tensor<2x1xf32>) -> tensor<2x4xf32>
    %ex = tile.map exp %d : (tensor<2x4xf32>) -> tensor<2x4xf32>
    mesh.yield %ex : tensor<2x4xf32>
  }
  %l = mesh.spmd(%e) : (!mesh.dist<tensor<2x16xf32>, #mesh.layout<[-, x]>>) -> !mesh.dist<tensor<2xf32>, #mesh.layout<[-]>> {
  ^bb0(%y: index, %x: index, %eb: tensor<2x4xf32>):
    %sq = tile.map mul %eb, %eb : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32>
    %l1 = tile.reduce sum %sq axis = 1 : tensor<2x4xf32> -> tensor<2x1xf32>
    %l2 = tile.reshape %l1 : tensor<2x1xf32> -> tensor<2xf32>
    %r = mesh.allreduce sum %l2 axis x : tensor<2xf32>
    mesh.yield %r : tensor<2xf32>
  }
  %lo = mesh.gather %l : !mesh.dist<tensor<2xf32>, #mesh.layout<[-]>> -> tensor<2xf32>
  mesh.return %lo : tensor<2xf32>
}
