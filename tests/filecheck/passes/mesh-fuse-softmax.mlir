// RUN: plmr-opt %s -p mesh-fuse-softmax{always=true} | filecheck %s
// RUN: plmr-opt %s -p mesh-fuse-softmax | filecheck %s --check-prefix=TIMED

// By the runtime's timing, @split on 4 PEs (k = 3) is slower fused: the tree's latency
// saved does not pay for the softmax combines and the packing. @unweighted (k = 2) fuses.
// TIMED-LABEL: mesh.program @split
// TIMED:         mesh.allreduce max %m axis x k = 3
// TIMED-LABEL: mesh.program @ring
// TIMED-LABEL: mesh.program @unweighted
// TIMED:         mesh.allreduce softmax

// A softmax over 32 positions split over the 4 PEs of x (flash-decoding): each PE's
// maximum %m, sum %l and output %o are merged by a max allreduce and two sum
// allreduces of the partials rescaled by exp(m - M). The pass packs [m, l, o] per row
// into one buffer and merges it with one softmax allreduce; the maximum, the sum and
// the output are its columns.

// CHECK-LABEL: mesh.program @split
// CHECK:         %o = tile.dot %e, %vb, %z
// CHECK-NEXT:    %[[M:.*]] = tile.reshape %m : tensor<4xf32> -> tensor<4x1xf32>
// CHECK-NEXT:    %[[L:.*]] = tile.reshape %l : tensor<4xf32> -> tensor<4x1xf32>
// CHECK-NEXT:    %[[BUF:.*]] = tile.fill 0.000000e+00 : tensor<4x5xf32>
// CHECK-NEXT:    %[[ZERO:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %[[B1:.*]] = tile.store %[[M]], %[[BUF]][%[[ZERO]], %[[ZERO]]] : tensor<4x1xf32> -> tensor<4x5xf32>
// CHECK-NEXT:    %[[ONE:.*]] = arith.constant 1 : index
// CHECK-NEXT:    %[[B2:.*]] = tile.store %[[L]], %[[B1]][%[[ZERO]], %[[ONE]]] : tensor<4x1xf32> -> tensor<4x5xf32>
// CHECK-NEXT:    %[[TWO:.*]] = arith.constant 2 : index
// CHECK-NEXT:    %[[B3:.*]] = tile.store %o, %[[B2]][%[[ZERO]], %[[TWO]]] : tensor<4x3xf32> -> tensor<4x5xf32>
// CHECK-NEXT:    %[[R:.*]] = mesh.allreduce softmax %[[B3]] axis x k = 3 : tensor<4x5xf32>
// CHECK-NEXT:    %[[RM:.*]] = tile.load %[[R]][%[[ZERO]], %[[ZERO]]] : tensor<4x5xf32> -> tensor<4x1xf32>
// CHECK-NEXT:    %[[GM:.*]] = tile.reshape %[[RM]] : tensor<4x1xf32> -> tensor<4xf32>
// CHECK-NEXT:    %[[RL:.*]] = tile.load %[[R]][%[[ZERO]], %[[ONE]]] : tensor<4x5xf32> -> tensor<4x1xf32>
// CHECK-NEXT:    %[[GL:.*]] = tile.reshape %[[RL]] : tensor<4x1xf32> -> tensor<4xf32>
// CHECK-NEXT:    %[[GO:.*]] = tile.load %[[R]][%[[ZERO]], %[[TWO]]] : tensor<4x5xf32> -> tensor<4x3xf32>
// CHECK-NOT:     mesh.allreduce
// CHECK:         %lb = tile.reshape %[[GL]] : tensor<4xf32> -> tensor<4x1xf32>
// CHECK-NEXT:    %out = tile.map div %[[GO]], %lb
// CHECK-NEXT:    mesh.yield %out, %[[GM]] : tensor<4x3xf32>, tensor<4xf32>

// A ring allreduce would split rows: nothing changes.
// CHECK-LABEL: mesh.program @ring
// CHECK:         mesh.allreduce max %m axis x algorithm ring
// CHECK:         mesh.allreduce sum %ls axis x algorithm ring
// CHECK-NOT:     softmax

// A sum of something the factor does not weight (%l itself) stays apart; the weighted
// output still fuses with the maximum.
// CHECK-LABEL: mesh.program @unweighted
// CHECK:         mesh.allreduce softmax %{{.*}} axis x : tensor<4x4xf32>
// CHECK:         %L = mesh.allreduce sum %l axis x : tensor<4xf32>
// CHECK-NOT:     mesh.allreduce

mesh.program @split(%s: tensor<4x32xf32>, %v: tensor<32x3xf32>) -> (tensor<4x3xf32>, tensor<4xf32>) device "test-small" grid [1, 4] {
  %sd = mesh.scatter %s : tensor<4x32xf32> -> !mesh.dist<tensor<4x32xf32>, #mesh.layout<[-, x]>>
  %vd = mesh.scatter %v : tensor<32x3xf32> -> !mesh.dist<tensor<32x3xf32>, #mesh.layout<[x, -]>>
  %r, %mx = mesh.spmd(%sd, %vd) : (!mesh.dist<tensor<4x32xf32>, #mesh.layout<[-, x]>>, !mesh.dist<tensor<32x3xf32>, #mesh.layout<[x, -]>>) -> (!mesh.dist<tensor<4x3xf32>, #mesh.layout<[-, -]>>, !mesh.dist<tensor<4xf32>, #mesh.layout<[-]>>) {
  ^bb0(%y: index, %x: index, %sb: tensor<4x8xf32>, %vb: tensor<8x3xf32>):
    %m1 = tile.reduce max %sb axis = 1 : tensor<4x8xf32> -> tensor<4x1xf32>
    %d0 = tile.map sub %sb, %m1 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
    %e = tile.map exp %d0 : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %l1 = tile.reduce sum %e axis = 1 : tensor<4x8xf32> -> tensor<4x1xf32>
    %m = tile.reshape %m1 : tensor<4x1xf32> -> tensor<4xf32>
    %l = tile.reshape %l1 : tensor<4x1xf32> -> tensor<4xf32>
    %z = tile.fill 0.000000e+00 : tensor<4x3xf32>
    %o = tile.dot %e, %vb, %z : (tensor<4x8xf32>, tensor<8x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
    %M = mesh.allreduce max %m axis x k = 3 : tensor<4xf32>
    %d = tile.map sub %m, %M : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %f = tile.map exp %d : (tensor<4xf32>) -> tensor<4xf32>
    %ls = tile.map mul %l, %f : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %L = mesh.allreduce sum %ls axis x k = 3 : tensor<4xf32>
    %fr = tile.reshape %f : tensor<4xf32> -> tensor<4x1xf32>
    %os = tile.map mul %o, %fr : (tensor<4x3xf32>, tensor<4x1xf32>) -> tensor<4x3xf32>
    %O = mesh.allreduce sum %os axis x k = 3 : tensor<4x3xf32>
    %lb = tile.reshape %L : tensor<4xf32> -> tensor<4x1xf32>
    %out = tile.map div %O, %lb : (tensor<4x3xf32>, tensor<4x1xf32>) -> tensor<4x3xf32>
    mesh.yield %out, %M : tensor<4x3xf32>, tensor<4xf32>
  }
  %ro = mesh.gather %r : !mesh.dist<tensor<4x3xf32>, #mesh.layout<[-, -]>> -> tensor<4x3xf32>
  %rm = mesh.gather %mx : !mesh.dist<tensor<4xf32>, #mesh.layout<[-]>> -> tensor<4xf32>
  mesh.return %ro, %rm : tensor<4x3xf32>, tensor<4xf32>
}

mesh.program @ring(%s: tensor<4x32xf32>) -> tensor<4xf32> device "test-small" grid [1, 4] {
  %sd = mesh.scatter %s : tensor<4x32xf32> -> !mesh.dist<tensor<4x32xf32>, #mesh.layout<[-, x]>>
  %r = mesh.spmd(%sd) : (!mesh.dist<tensor<4x32xf32>, #mesh.layout<[-, x]>>) -> !mesh.dist<tensor<4xf32>, #mesh.layout<[-]>> {
  ^bb0(%y: index, %x: index, %sb: tensor<4x8xf32>):
    %m1 = tile.reduce max %sb axis = 1 : tensor<4x8xf32> -> tensor<4x1xf32>
    %d0 = tile.map sub %sb, %m1 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
    %e = tile.map exp %d0 : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %l1 = tile.reduce sum %e axis = 1 : tensor<4x8xf32> -> tensor<4x1xf32>
    %m = tile.reshape %m1 : tensor<4x1xf32> -> tensor<4xf32>
    %l = tile.reshape %l1 : tensor<4x1xf32> -> tensor<4xf32>
    %M = mesh.allreduce max %m axis x algorithm ring : tensor<4xf32>
    %d = tile.map sub %m, %M : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %f = tile.map exp %d : (tensor<4xf32>) -> tensor<4xf32>
    %ls = tile.map mul %l, %f : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %L = mesh.allreduce sum %ls axis x algorithm ring : tensor<4xf32>
    mesh.yield %L : tensor<4xf32>
  }
  %rl = mesh.gather %r : !mesh.dist<tensor<4xf32>, #mesh.layout<[-]>> -> tensor<4xf32>
  mesh.return %rl : tensor<4xf32>
}

mesh.program @unweighted(%s: tensor<4x32xf32>, %v: tensor<32x3xf32>) -> (tensor<4x3xf32>, tensor<4xf32>) device "test-small" grid [1, 4] {
  %sd = mesh.scatter %s : tensor<4x32xf32> -> !mesh.dist<tensor<4x32xf32>, #mesh.layout<[-, x]>>
  %vd = mesh.scatter %v : tensor<32x3xf32> -> !mesh.dist<tensor<32x3xf32>, #mesh.layout<[x, -]>>
  %r, %sum = mesh.spmd(%sd, %vd) : (!mesh.dist<tensor<4x32xf32>, #mesh.layout<[-, x]>>, !mesh.dist<tensor<32x3xf32>, #mesh.layout<[x, -]>>) -> (!mesh.dist<tensor<4x3xf32>, #mesh.layout<[-, -]>>, !mesh.dist<tensor<4xf32>, #mesh.layout<[-]>>) {
  ^bb0(%y: index, %x: index, %sb: tensor<4x8xf32>, %vb: tensor<8x3xf32>):
    %m1 = tile.reduce max %sb axis = 1 : tensor<4x8xf32> -> tensor<4x1xf32>
    %d0 = tile.map sub %sb, %m1 : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
    %e = tile.map exp %d0 : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %l1 = tile.reduce sum %e axis = 1 : tensor<4x8xf32> -> tensor<4x1xf32>
    %m = tile.reshape %m1 : tensor<4x1xf32> -> tensor<4xf32>
    %l = tile.reshape %l1 : tensor<4x1xf32> -> tensor<4xf32>
    %z = tile.fill 0.000000e+00 : tensor<4x3xf32>
    %o = tile.dot %e, %vb, %z : (tensor<4x8xf32>, tensor<8x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
    %M = mesh.allreduce max %m axis x : tensor<4xf32>
    %d = tile.map sub %m, %M : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    %f = tile.map exp %d : (tensor<4xf32>) -> tensor<4xf32>
    %L = mesh.allreduce sum %l axis x : tensor<4xf32>
    %fr = tile.reshape %f : tensor<4xf32> -> tensor<4x1xf32>
    %os = tile.map mul %o, %fr : (tensor<4x3xf32>, tensor<4x1xf32>) -> tensor<4x3xf32>
    %O = mesh.allreduce sum %os axis x : tensor<4x3xf32>
    mesh.yield %O, %L : tensor<4x3xf32>, tensor<4xf32>
  }
  %ro = mesh.gather %r : !mesh.dist<tensor<4x3xf32>, #mesh.layout<[-, -]>> -> tensor<4x3xf32>
  %rs = mesh.gather %sum : !mesh.dist<tensor<4xf32>, #mesh.layout<[-]>> -> tensor<4xf32>
  mesh.return %ro, %rs : tensor<4x3xf32>, tensor<4xf32>
}
