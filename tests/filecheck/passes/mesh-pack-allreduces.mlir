// RUN: plmr-opt %s -p mesh-pack-allreduces | filecheck %s
// RUN: plmr-opt %s -p mesh-pack-allreduces{max-elements=8} | filecheck %s --check-prefix=SMALL

// Two nests that sum along x and do not read each other become one nest with one
// allreduce of both payloads (4 + 6 values), stored side by side and loaded back. The
// first nest's allreduce sits in a loop of one trip (inlined: its induction variable is
// the lower bound; the loop's initial value is then dead, and goes); the scatter between
// the nests moves above the first; an operand of both nests (%da) is one block argument.

// CHECK-LABEL: mesh.program @pair
// CHECK-NEXT:    %da = mesh.scatter %a
// CHECK-NEXT:    %db = mesh.scatter %b
// CHECK-NEXT:    %s, %t = mesh.spmd(%da, %db) : ({{.*}}) -> (!mesh.dist<tensor<4xf32>, #mesh.layout<[-]>>, !mesh.dist<tensor<2x3xf32>, #mesh.layout<[-, -]>>) {
// CHECK-NEXT:    ^bb0(%y: index, %x: index, %blk: tensor<4x4xf32>, %blk_1: tensor<2x3x4xf32>):
// CHECK-NEXT:      %p = tile.reduce sum %blk axis = 1
// CHECK-NEXT:      %q = tile.reshape %p : tensor<4x1xf32> -> tensor<4xf32>
// CHECK-NEXT:      %p_1 = tile.reduce sum %blk_1 axis = 2
// CHECK-NEXT:      %q_1 = tile.reshape %p_1 : tensor<2x3x1xf32> -> tensor<2x3xf32>
// CHECK-NEXT:      %[[ZERO:.*]] = arith.constant 0 : index
// CHECK-NEXT:      %[[FOUR:.*]] = arith.constant 4 : index
// CHECK-NEXT:      %[[FLAT:.*]] = tile.reshape %q_1 : tensor<2x3xf32> -> tensor<6xf32>
// CHECK-NEXT:      %[[BUF:.*]] = tile.fill 0.000000e+00 : tensor<10xf32>
// CHECK-NEXT:      %[[S1:.*]] = tile.store %q, %[[BUF]][%[[ZERO]]] : tensor<4xf32> -> tensor<10xf32>
// CHECK-NEXT:      %[[S2:.*]] = tile.store %[[FLAT]], %[[S1]][%[[FOUR]]] : tensor<6xf32> -> tensor<10xf32>
// CHECK-NEXT:      %[[AR:.*]] = mesh.allreduce sum %[[S2]] axis x k = 3 {colors = [1 : i64]} : tensor<10xf32>
// CHECK-NEXT:      %[[RA:.*]] = tile.load %[[AR]][%[[ZERO]]] : tensor<10xf32> -> tensor<4xf32>
// CHECK-NEXT:      %[[LB:.*]] = tile.load %[[AR]][%[[FOUR]]] : tensor<10xf32> -> tensor<6xf32>
// CHECK-NEXT:      %[[RB:.*]] = tile.reshape %[[LB]] : tensor<6xf32> -> tensor<2x3xf32>
// CHECK-NEXT:      %n = tile.map neg %[[RA]]
// CHECK-NEXT:      mesh.yield %n, %[[RB]] : tensor<4xf32>, tensor<2x3xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    %ra = mesh.gather %s
// CHECK-NEXT:    %rb = mesh.gather %t
// CHECK-NOT:     mesh.spmd

// With max-elements = 8 the 10 values are too many: nothing changes.
// SMALL-LABEL: mesh.program @pair
// SMALL:         %s = mesh.spmd(%da)
// SMALL:         mesh.allreduce sum %q axis x k = 3 {colors = [1 : i64]} : tensor<4xf32>
// SMALL:         %t = mesh.spmd(%db, %da)
// SMALL:         mesh.allreduce sum %q_1 axis x k = 3 {colors = [2 : i64]} : tensor<2x3xf32>

mesh.program @pair(%a: tensor<4x8xf32>, %b: tensor<2x3x8xf32>) -> (tensor<4xf32>, tensor<2x3xf32>) device "test-small" grid [2, 2] {
  %da = mesh.scatter %a : tensor<4x8xf32> -> !mesh.dist<tensor<4x8xf32>, #mesh.layout<[-, x]>>
  %s = mesh.spmd(%da) : (!mesh.dist<tensor<4x8xf32>, #mesh.layout<[-, x]>>) -> !mesh.dist<tensor<4xf32>, #mesh.layout<[-]>> {
  ^bb0(%y: index, %x: index, %blk: tensor<4x4xf32>):
    %z = tile.fill 0.000000e+00 : tensor<4xf32>
    %l = tile.for %i = 0 to 4 step 4 iter_args(%acc = %z) -> (tensor<4xf32>) parallel {
      %p = tile.reduce sum %blk axis = 1 : tensor<4x4xf32> -> tensor<4x1xf32>
      %q = tile.reshape %p : tensor<4x1xf32> -> tensor<4xf32>
      %r = mesh.allreduce sum %q axis x k = 3 {colors = [1]} : tensor<4xf32>
      %n = tile.map neg %r : (tensor<4xf32>) -> tensor<4xf32>
      tile.yield %n : tensor<4xf32>
    }
    mesh.yield %l : tensor<4xf32>
  }
  %db = mesh.scatter %b : tensor<2x3x8xf32> -> !mesh.dist<tensor<2x3x8xf32>, #mesh.layout<[-, -, x]>>
  %t = mesh.spmd(%db, %da) : (!mesh.dist<tensor<2x3x8xf32>, #mesh.layout<[-, -, x]>>, !mesh.dist<tensor<4x8xf32>, #mesh.layout<[-, x]>>) -> !mesh.dist<tensor<2x3xf32>, #mesh.layout<[-, -]>> {
  ^bb0(%y: index, %x: index, %blk: tensor<2x3x4xf32>, %other: tensor<4x4xf32>):
    %p = tile.reduce sum %blk axis = 2 : tensor<2x3x4xf32> -> tensor<2x3x1xf32>
    %q = tile.reshape %p : tensor<2x3x1xf32> -> tensor<2x3xf32>
    %r = mesh.allreduce sum %q axis x k = 3 {colors = [2]} : tensor<2x3xf32>
    mesh.yield %r : tensor<2x3xf32>
  }
  %ra = mesh.gather %s : !mesh.dist<tensor<4xf32>, #mesh.layout<[-]>> -> tensor<4xf32>
  %rb = mesh.gather %t : !mesh.dist<tensor<2x3xf32>, #mesh.layout<[-, -]>> -> tensor<2x3xf32>
  mesh.return %ra, %rb : tensor<4xf32>, tensor<2x3xf32>
}

// Three siblings: the third joins the merged pair (one allreduce of 3 values: the
// pair's packed 2 and the third's 1).

// CHECK-LABEL: mesh.program @three
// CHECK:         %s1, %s2, %s3 = mesh.spmd(%d)
// CHECK:         mesh.allreduce max %{{.*}} axis y : tensor<3xf32>
// CHECK-NOT:     mesh.allreduce
// CHECK:         mesh.yield %{{.*}}, %{{.*}}, %{{.*}} : tensor<1xf32>, tensor<1xf32>, tensor<1xf32>
// CHECK-NOT:     mesh.spmd

mesh.program @three(%a: tensor<4x4xf32>) -> (tensor<1xf32>, tensor<1xf32>, tensor<1xf32>) device "test-small" grid [2, 2] {
  %d = mesh.scatter %a : tensor<4x4xf32> -> !mesh.dist<tensor<4x4xf32>, #mesh.layout<[y, x]>>
  %s1 = mesh.spmd(%d) : (!mesh.dist<tensor<4x4xf32>, #mesh.layout<[y, x]>>) -> !mesh.dist<tensor<1xf32>, #mesh.layout<[-]>> {
  ^bb0(%y: index, %x: index, %blk: tensor<2x2xf32>):
    %c = arith.constant 0 : index
    %p = tile.load %blk[%c, %c] : tensor<2x2xf32> -> tensor<1x1xf32>
    %q = tile.reshape %p : tensor<1x1xf32> -> tensor<1xf32>
    %r = mesh.allreduce max %q axis y : tensor<1xf32>
    mesh.yield %r : tensor<1xf32>
  }
  %s2 = mesh.spmd(%d) : (!mesh.dist<tensor<4x4xf32>, #mesh.layout<[y, x]>>) -> !mesh.dist<tensor<1xf32>, #mesh.layout<[-]>> {
  ^bb0(%y: index, %x: index, %blk: tensor<2x2xf32>):
    %c = arith.constant 1 : index
    %p = tile.load %blk[%c, %c] : tensor<2x2xf32> -> tensor<1x1xf32>
    %q = tile.reshape %p : tensor<1x1xf32> -> tensor<1xf32>
    %r = mesh.allreduce max %q axis y : tensor<1xf32>
    mesh.yield %r : tensor<1xf32>
  }
  %s3 = mesh.spmd(%d) : (!mesh.dist<tensor<4x4xf32>, #mesh.layout<[y, x]>>) -> !mesh.dist<tensor<1xf32>, #mesh.layout<[-]>> {
  ^bb0(%y: index, %x: index, %blk: tensor<2x2xf32>):
    %c0 = arith.constant 0 : index
    %c1 = arith.constant 1 : index
    %p = tile.load %blk[%c0, %c1] : tensor<2x2xf32> -> tensor<1x1xf32>
    %q = tile.reshape %p : tensor<1x1xf32> -> tensor<1xf32>
    %r = mesh.allreduce max %q axis y : tensor<1xf32>
    mesh.yield %r : tensor<1xf32>
  }
  %g1 = mesh.gather %s1 : !mesh.dist<tensor<1xf32>, #mesh.layout<[-]>> -> tensor<1xf32>
  %g2 = mesh.gather %s2 : !mesh.dist<tensor<1xf32>, #mesh.layout<[-]>> -> tensor<1xf32>
  %g3 = mesh.gather %s3 : !mesh.dist<tensor<1xf32>, #mesh.layout<[-]>> -> tensor<1xf32>
  mesh.return %g1, %g2, %g3 : tensor<1xf32>, tensor<1xf32>, tensor<1xf32>
}

// Left alone: a nest that reads the other's result (%dep), or a nest between them that
// does (%via: %mid cannot move above %s or %dep); allreduces along different axes (%ax), of different kinds (%kd),
// with different K (%kk); an allreduce in a loop of two trips (%loop).

// CHECK-LABEL: mesh.program @apart
// CHECK:         %s = mesh.spmd(%d)
// CHECK:         %dep = mesh.spmd(%d, %s)
// CHECK:         %mid = mesh.spmd(%s)
// CHECK:         %via = mesh.spmd(%mid)
// CHECK:         %ax = mesh.spmd(%d)
// CHECK:         %kd = mesh.spmd(%d)
// CHECK:         %kk = mesh.spmd(%d)
// CHECK:         %loop = mesh.spmd(%d)
// CHECK:         mesh.return

mesh.program @apart(%a: tensor<4x4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) device "test-small" grid [2, 2] {
  %d = mesh.scatter %a : tensor<4x4xf32> -> !mesh.dist<tensor<4x4xf32>, #mesh.layout<[y, x]>>
  %s = mesh.spmd(%d) : (!mesh.dist<tensor<4x4xf32>, #mesh.layout<[y, x]>>) -> !mesh.dist<tensor<4xf32>, #mesh.layout<[y]>> {
  ^bb0(%y: index, %x: index, %blk: tensor<2x2xf32>):
    %p = tile.reduce sum %blk axis = 1 : tensor<2x2xf32> -> tensor<2x1xf32>
    %q = tile.reshape %p : tensor<2x1xf32> -> tensor<2xf32>
    %r = mesh.allreduce sum %q axis x : tensor<2xf32>
    mesh.yield %r : tensor<2xf32>
  }
  %dep = mesh.spmd(%d, %s) : (!mesh.dist<tensor<4x4xf32>, #mesh.layout<[y, x]>>, !mesh.dist<tensor<4xf32>, #mesh.layout<[y]>>) -> !mesh.dist<tensor<4xf32>, #mesh.layout<[y]>> {
  ^bb0(%y: index, %x: index, %blk: tensor<2x2xf32>, %v: tensor<2xf32>):
    %p = tile.reduce sum %blk axis = 1 : tensor<2x2xf32> -> tensor<2x1xf32>
    %q = tile.reshape %p : tensor<2x1xf32> -> tensor<2xf32>
    %w = tile.map add %q, %v : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
    %r = mesh.allreduce sum %w axis x : tensor<2xf32>
    mesh.yield %r : tensor<2xf32>
  }
  %mid = mesh.spmd(%s) : (!mesh.dist<tensor<4xf32>, #mesh.layout<[y]>>) -> !mesh.dist<tensor<4xf32>, #mesh.layout<[y]>> {
  ^bb0(%y: index, %x: index, %v: tensor<2xf32>):
    %w = tile.map neg %v : (tensor<2xf32>) -> tensor<2xf32>
    mesh.yield %w : tensor<2xf32>
  }
  %via = mesh.spmd(%mid) : (!mesh.dist<tensor<4xf32>, #mesh.layout<[y]>>) -> !mesh.dist<tensor<4xf32>, #mesh.layout<[y]>> {
  ^bb0(%y: index, %x: index, %v: tensor<2xf32>):
    %r = mesh.allreduce sum %v axis x : tensor<2xf32>
    mesh.yield %r : tensor<2xf32>
  }
  %ax = mesh.spmd(%d) : (!mesh.dist<tensor<4x4xf32>, #mesh.layout<[y, x]>>) -> !mesh.dist<tensor<4xf32>, #mesh.layout<[x]>> {
  ^bb0(%y: index, %x: index, %blk: tensor<2x2xf32>):
    %p = tile.reduce sum %blk axis = 0 : tensor<2x2xf32> -> tensor<1x2xf32>
    %q = tile.reshape %p : tensor<1x2xf32> -> tensor<2xf32>
    %r = mesh.allreduce sum %q axis y : tensor<2xf32>
    mesh.yield %r : tensor<2xf32>
  }
  %kd = mesh.spmd(%d) : (!mesh.dist<tensor<4x4xf32>, #mesh.layout<[y, x]>>) -> !mesh.dist<tensor<4xf32>, #mesh.layout<[y]>> {
  ^bb0(%y: index, %x: index, %blk: tensor<2x2xf32>):
    %p = tile.reduce max %blk axis = 1 : tensor<2x2xf32> -> tensor<2x1xf32>
    %q = tile.reshape %p : tensor<2x1xf32> -> tensor<2xf32>
    %r = mesh.allreduce max %q axis x : tensor<2xf32>
    mesh.yield %r : tensor<2xf32>
  }
  %kk = mesh.spmd(%d) : (!mesh.dist<tensor<4x4xf32>, #mesh.layout<[y, x]>>) -> !mesh.dist<tensor<4xf32>, #mesh.layout<[y]>> {
  ^bb0(%y: index, %x: index, %blk: tensor<2x2xf32>):
    %p = tile.reduce sum %blk axis = 1 : tensor<2x2xf32> -> tensor<2x1xf32>
    %q = tile.reshape %p : tensor<2x1xf32> -> tensor<2xf32>
    %r = mesh.allreduce sum %q axis x k = 1 : tensor<2xf32>
    mesh.yield %r : tensor<2xf32>
  }
  %loop = mesh.spmd(%d) : (!mesh.dist<tensor<4x4xf32>, #mesh.layout<[y, x]>>) -> !mesh.dist<tensor<4xf32>, #mesh.layout<[y]>> {
  ^bb0(%y: index, %x: index, %blk: tensor<2x2xf32>):
    %z = tile.fill 0.000000e+00 : tensor<2xf32>
    %l = tile.for %i = 0 to 2 step 1 iter_args(%acc = %z) -> (tensor<2xf32>) parallel {
      %p = tile.reduce sum %blk axis = 1 : tensor<2x2xf32> -> tensor<2x1xf32>
      %q = tile.reshape %p : tensor<2x1xf32> -> tensor<2xf32>
      %r = mesh.allreduce sum %q axis x : tensor<2xf32>
      %w = tile.map add %acc, %r : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
      tile.yield %w : tensor<2xf32>
    }
    mesh.yield %l : tensor<2xf32>
  }
  %g1 = mesh.gather %dep : !mesh.dist<tensor<4xf32>, #mesh.layout<[y]>> -> tensor<4xf32>
  %g2 = mesh.gather %via : !mesh.dist<tensor<4xf32>, #mesh.layout<[y]>> -> tensor<4xf32>
  %g3 = mesh.gather %ax : !mesh.dist<tensor<4xf32>, #mesh.layout<[x]>> -> tensor<4xf32>
  %g4 = mesh.gather %kd : !mesh.dist<tensor<4xf32>, #mesh.layout<[y]>> -> tensor<4xf32>
  %g5 = mesh.gather %kk : !mesh.dist<tensor<4xf32>, #mesh.layout<[y]>> -> tensor<4xf32>
  %g6 = mesh.gather %loop : !mesh.dist<tensor<4xf32>, #mesh.layout<[y]>> -> tensor<4xf32>
  mesh.return %g1, %g2, %g3, %g4, %g5, %g6 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// Two nests that gather the same operand the same way (a table both read, spread over x
// and wanted whole): in the merged body the two payloads are one value (the heads' common
// subexpressions are one), reduced by one allreduce of 4 values, not a packed one of 8.

// CHECK-LABEL: mesh.program @same_payload
// CHECK:         %u, %v = mesh.spmd(%dt, %dw)
// CHECK:           %[[W:.*]] = tile.store %blk, %{{.*}}[%{{.*}}] : tensor<2xf32> -> tensor<4xf32>
// CHECK-NEXT:      %[[R:.*]] = mesh.allreduce sum %[[W]] axis x k = 3 {colors = [1 : i64]} : tensor<4xf32>
// CHECK-NEXT:      %u_1 = tile.map neg %[[R]]
// CHECK-NEXT:      %v_1 = tile.map mul %[[R]], %blk_1
// CHECK-NEXT:      mesh.yield %u_1, %v_1 : tensor<4xf32>, tensor<4xf32>
// CHECK-NOT:     mesh.allreduce

mesh.program @same_payload(%t: tensor<4xf32>, %w: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) device "test-small" grid [2, 2] {
  %dt = mesh.scatter %t : tensor<4xf32> -> !mesh.dist<tensor<4xf32>, #mesh.layout<[x]>>
  %u = mesh.spmd(%dt) : (!mesh.dist<tensor<4xf32>, #mesh.layout<[x]>>) -> !mesh.dist<tensor<4xf32>, #mesh.layout<[-]>> {
  ^bb0(%y: index, %x: index, %blk: tensor<2xf32>):
    %z = tile.fill 0.000000e+00 : tensor<4xf32>
    %c2 = arith.constant 2 : index
    %at = arith.muli %x, %c2 : index
    %put = tile.store %blk, %z[%at] : tensor<2xf32> -> tensor<4xf32>
    %all = mesh.allreduce sum %put axis x k = 3 {colors = [1]} : tensor<4xf32>
    %u_1 = tile.map neg %all : (tensor<4xf32>) -> tensor<4xf32>
    mesh.yield %u_1 : tensor<4xf32>
  }
  %dw = mesh.scatter %w : tensor<4xf32> -> !mesh.dist<tensor<4xf32>, #mesh.layout<[-]>>
  %v = mesh.spmd(%dt, %dw) : (!mesh.dist<tensor<4xf32>, #mesh.layout<[x]>>, !mesh.dist<tensor<4xf32>, #mesh.layout<[-]>>) -> !mesh.dist<tensor<4xf32>, #mesh.layout<[-]>> {
  ^bb0(%y: index, %x: index, %blk: tensor<2xf32>, %blk_1: tensor<4xf32>):
    %z = tile.fill 0.000000e+00 : tensor<4xf32>
    %c2 = arith.constant 2 : index
    %at = arith.muli %x, %c2 : index
    %put = tile.store %blk, %z[%at] : tensor<2xf32> -> tensor<4xf32>
    %all = mesh.allreduce sum %put axis x k = 3 {colors = [2]} : tensor<4xf32>
    %v_1 = tile.map mul %all, %blk_1 : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    mesh.yield %v_1 : tensor<4xf32>
  }
  %ru = mesh.gather %u : !mesh.dist<tensor<4xf32>, #mesh.layout<[-]>> -> tensor<4xf32>
  %rv = mesh.gather %v : !mesh.dist<tensor<4xf32>, #mesh.layout<[-]>> -> tensor<4xf32>
  mesh.return %ru, %rv : tensor<4xf32>, tensor<4xf32>
}
