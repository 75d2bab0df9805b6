// RUN: plmr-opt %s -p mesh-route | filecheck %s
// RUN: plmr-opt %s -p mesh-route,mesh-route | filecheck %s

// The route tables `mesh-route` emits for each kind of collective: every collective gets
// the `colors` it uses, and the program one `mesh.route` per rule (rows/cols are
// [start, stop, step] progressions; a rule covers the whole grid across the collective's
// axis). Running the pass twice gives the same tables (old rules are replaced).
//
// The expected tables were derived by hand from the plans (runtime/collectives.py):
// - linear shift on 5 PEs: p -> p+1 for p < 4.
// - torus shift on 5 PEs: p -> p+1, and 4 -> 0 back across the line (3 pass-through hops).
// - interleaved shift on 5 PEs (WaferLLM's INTERLEAVE): the ring 0->2->4->3->1->0, every
//   link 1 or 2 hops; odd PEs relay 0->2 and 2->4 eastwards, even PEs 3->1 westwards.
//   Distance -2 runs the reverse ring 0->1->3->4->2->0 twice; its routes clash with the
//   forward ring's at routers 1-3, so it takes a second color (both steps share it).
// - broadcast along y from row 0 on 4 rows: a multicast chain south, every router
//   delivering to its PE and forwarding.
// - K-tree allreduce along y on 8 rows, K = 2, 2 groups: phase 1 chains {0,1,3}->2 and
//   {4,5,7}->6 (0->1->2, 3->2; 4->5->6, 7->6), phase 2 2->6 (a 4-hop path), then a
//   multicast from 6 both ways. Phase 1 fits one color; 2->6 would pass router 5 from the
//   north, where 5 already delivers 4->5 to its ramp, and the multicast would enter
//   router 2 from the south, where 2 already delivers 3->2: both take color 1.

// CHECK-LABEL: mesh.program @linear
// CHECK:         mesh.shift %b axis x ring linear {colors = [0 : i64]} : tensor<1x4xf32>
// CHECK:         mesh.gather
// CHECK-NEXT:    mesh.route color 0 rows [0, 2, 1] cols [0, 4, 1] from ramp to ["east"]
// CHECK-NEXT:    mesh.route color 0 rows [0, 2, 1] cols [1, 5, 1] from west to ["ramp"]
// CHECK-NEXT:    mesh.return
mesh.program @linear(%a: tensor<5x4xf32>) -> tensor<5x4xf32> device "test-small" grid [2, 5] {
  %d = mesh.scatter %a : tensor<5x4xf32> -> !mesh.dist<tensor<5x4xf32>, #mesh.layout<[x, -]>>
  %e = mesh.spmd(%d) : (!mesh.dist<tensor<5x4xf32>, #mesh.layout<[x, -]>>) -> !mesh.dist<tensor<5x4xf32>, #mesh.layout<[x, -]>> {
  ^bb0(%y: index, %x: index, %b: tensor<1x4xf32>):
    %s = mesh.shift %b axis x ring linear : tensor<1x4xf32>
    mesh.yield %s : tensor<1x4xf32>
  }
  %r = mesh.gather %e : !mesh.dist<tensor<5x4xf32>, #mesh.layout<[x, -]>> -> tensor<5x4xf32>
  mesh.return %r : tensor<5x4xf32>
}

// CHECK-LABEL: mesh.program @torus
// CHECK:         mesh.shift %b axis x ring torus {colors = [0 : i64]} : tensor<1x4xf32>
// CHECK:         mesh.gather
// CHECK-NEXT:    mesh.route color 0 rows [0, 2, 1] cols [0, 4, 1] from ramp to ["east"]
// CHECK-NEXT:    mesh.route color 0 rows [0, 2, 1] cols [0, 1, 1] from east to ["ramp"]
// CHECK-NEXT:    mesh.route color 0 rows [0, 2, 1] cols [1, 5, 1] from west to ["ramp"]
// CHECK-NEXT:    mesh.route color 0 rows [0, 2, 1] cols [1, 4, 1] from east to ["west"]
// CHECK-NEXT:    mesh.route color 0 rows [0, 2, 1] cols [4, 5, 1] from ramp to ["west"]
// CHECK-NEXT:    mesh.return
mesh.program @torus(%a: tensor<5x4xf32>) -> tensor<5x4xf32> device "test-small" grid [2, 5] {
  %d = mesh.scatter %a : tensor<5x4xf32> -> !mesh.dist<tensor<5x4xf32>, #mesh.layout<[x, -]>>
  %e = mesh.spmd(%d) : (!mesh.dist<tensor<5x4xf32>, #mesh.layout<[x, -]>>) -> !mesh.dist<tensor<5x4xf32>, #mesh.layout<[x, -]>> {
  ^bb0(%y: index, %x: index, %b: tensor<1x4xf32>):
    %s = mesh.shift %b axis x ring torus : tensor<1x4xf32>
    mesh.yield %s : tensor<1x4xf32>
  }
  %r = mesh.gather %e : !mesh.dist<tensor<5x4xf32>, #mesh.layout<[x, -]>> -> tensor<5x4xf32>
  mesh.return %r : tensor<5x4xf32>
}

// CHECK-LABEL: mesh.program @interleaved
// CHECK:         mesh.shift %b axis x ring interleaved {colors = [0 : i64]} : tensor<1x4xf32>
// CHECK:         mesh.shift %s axis x ring interleaved distance -2 {colors = [1 : i64]} : tensor<1x4xf32>
// CHECK:         mesh.gather
// CHECK-NEXT:    mesh.route color 0 rows [0, 2, 1] cols [0, 3, 2] from ramp to ["east"]
// CHECK-NEXT:    mesh.route color 0 rows [0, 2, 1] cols [0, 2, 1] from east to ["ramp"]
// CHECK-NEXT:    mesh.route color 0 rows [0, 2, 1] cols [3, 4, 1] from east to ["ramp"]
// CHECK-NEXT:    mesh.route color 0 rows [0, 2, 1] cols [1, 4, 2] from west to ["east"]
// CHECK-NEXT:    mesh.route color 0 rows [0, 2, 1] cols [1, 4, 2] from ramp to ["west"]
// CHECK-NEXT:    mesh.route color 0 rows [0, 2, 1] cols [4, 5, 1] from ramp to ["west"]
// CHECK-NEXT:    mesh.route color 0 rows [0, 2, 1] cols [2, 5, 2] from west to ["ramp"]
// CHECK-NEXT:    mesh.route color 0 rows [0, 2, 1] cols [2, 3, 1] from east to ["west"]
// CHECK-NEXT:    mesh.route color 1 rows [0, 2, 1] cols [0, 2, 1] from ramp to ["east"]
// CHECK-NEXT:    mesh.route color 1 rows [0, 2, 1] cols [3, 4, 1] from ramp to ["east"]
// CHECK-NEXT:    mesh.route color 1 rows [0, 2, 1] cols [0, 3, 2] from east to ["ramp"]
// CHECK-NEXT:    mesh.route color 1 rows [0, 2, 1] cols [1, 4, 2] from west to ["ramp"]
// CHECK-NEXT:    mesh.route color 1 rows [0, 2, 1] cols [4, 5, 1] from west to ["ramp"]
// CHECK-NEXT:    mesh.route color 1 rows [0, 2, 1] cols [1, 4, 2] from east to ["west"]
// CHECK-NEXT:    mesh.route color 1 rows [0, 2, 1] cols [2, 3, 1] from west to ["east"]
// CHECK-NEXT:    mesh.route color 1 rows [0, 2, 1] cols [2, 5, 2] from ramp to ["west"]
// CHECK-NEXT:    mesh.return
mesh.program @interleaved(%a: tensor<5x4xf32>) -> tensor<5x4xf32> device "test-small" grid [2, 5] {
  %d = mesh.scatter %a : tensor<5x4xf32> -> !mesh.dist<tensor<5x4xf32>, #mesh.layout<[x, -]>>
  %e = mesh.spmd(%d) : (!mesh.dist<tensor<5x4xf32>, #mesh.layout<[x, -]>>) -> !mesh.dist<tensor<5x4xf32>, #mesh.layout<[x, -]>> {
  ^bb0(%y: index, %x: index, %b: tensor<1x4xf32>):
    %s = mesh.shift %b axis x ring interleaved : tensor<1x4xf32>
    %t = mesh.shift %s axis x ring interleaved distance -2 : tensor<1x4xf32>
    mesh.yield %t : tensor<1x4xf32>
  }
  %r = mesh.gather %e : !mesh.dist<tensor<5x4xf32>, #mesh.layout<[x, -]>> -> tensor<5x4xf32>
  mesh.return %r : tensor<5x4xf32>
}

// CHECK-LABEL: mesh.program @broadcast
// CHECK:         mesh.broadcast %b axis y root %c0 {colors = [0 : i64]} : tensor<1x4xf32>
// CHECK:         mesh.gather
// CHECK-NEXT:    mesh.route color 0 rows [0, 1, 1] cols [0, 3, 1] from ramp to ["south"]
// CHECK-NEXT:    mesh.route color 0 rows [1, 3, 1] cols [0, 3, 1] from north to ["ramp", "south"]
// CHECK-NEXT:    mesh.route color 0 rows [3, 4, 1] cols [0, 3, 1] from north to ["ramp"]
// CHECK-NEXT:    mesh.return
mesh.program @broadcast(%a: tensor<4x4xf32>) -> tensor<4x4xf32> device "test-small" grid [4, 3] {
  %d = mesh.scatter %a : tensor<4x4xf32> -> !mesh.dist<tensor<4x4xf32>, #mesh.layout<[y, -]>>
  %e = mesh.spmd(%d) : (!mesh.dist<tensor<4x4xf32>, #mesh.layout<[y, -]>>) -> !mesh.dist<tensor<4x4xf32>, #mesh.layout<[y, -]>> {
  ^bb0(%y: index, %x: index, %b: tensor<1x4xf32>):
    %c0 = arith.constant 0 : index
    %s = mesh.broadcast %b axis y root %c0 : tensor<1x4xf32>
    mesh.yield %s : tensor<1x4xf32>
  }
  %r = mesh.gather %e : !mesh.dist<tensor<4x4xf32>, #mesh.layout<[y, -]>> -> tensor<4x4xf32>
  mesh.return %r : tensor<4x4xf32>
}

// CHECK-LABEL: mesh.program @ktree
// CHECK:         mesh.allreduce sum %b axis y groups = 2 {colors = [0 : i64, 1 : i64]} : tensor<1x4xf32>
// CHECK:         mesh.gather
// CHECK-NEXT:    mesh.route color 0 rows [0, 2, 1] cols [0, 1, 1] from ramp to ["south"]
// CHECK-NEXT:    mesh.route color 0 rows [4, 6, 1] cols [0, 1, 1] from ramp to ["south"]
// CHECK-NEXT:    mesh.route color 0 rows [1, 3, 1] cols [0, 1, 1] from north to ["ramp"]
// CHECK-NEXT:    mesh.route color 0 rows [5, 7, 1] cols [0, 1, 1] from north to ["ramp"]
// CHECK-NEXT:    mesh.route color 0 rows [2, 7, 4] cols [0, 1, 1] from south to ["ramp"]
// CHECK-NEXT:    mesh.route color 0 rows [3, 8, 4] cols [0, 1, 1] from ramp to ["north"]
// CHECK-NEXT:    mesh.route color 1 rows [0, 1, 1] cols [0, 1, 1] from south to ["ramp"]
// CHECK-NEXT:    mesh.route color 1 rows [1, 6, 1] cols [0, 1, 1] from south to ["ramp", "north"]
// CHECK-NEXT:    mesh.route color 1 rows [2, 3, 1] cols [0, 1, 1] from ramp to ["south"]
// CHECK-NEXT:    mesh.route color 1 rows [3, 6, 1] cols [0, 1, 1] from north to ["south"]
// CHECK-NEXT:    mesh.route color 1 rows [6, 8, 1] cols [0, 1, 1] from north to ["ramp"]
// CHECK-NEXT:    mesh.route color 1 rows [6, 7, 1] cols [0, 1, 1] from ramp to ["south", "north"]
// CHECK-NEXT:    mesh.return
mesh.program @ktree(%a: tensor<8x4xf32>) -> tensor<1x4xf32> device "test-small" grid [8, 1] {
  %d = mesh.scatter %a : tensor<8x4xf32> -> !mesh.dist<tensor<8x4xf32>, #mesh.layout<[y, -]>>
  %e = mesh.spmd(%d) : (!mesh.dist<tensor<8x4xf32>, #mesh.layout<[y, -]>>) -> !mesh.dist<tensor<1x4xf32>, #mesh.layout<[-, -]>> {
  ^bb0(%y: index, %x: index, %b: tensor<1x4xf32>):
    %s = mesh.allreduce sum %b axis y algorithm ktree groups = 2 : tensor<1x4xf32>
    mesh.yield %s : tensor<1x4xf32>
  }
  %r = mesh.gather %e : !mesh.dist<tensor<1x4xf32>, #mesh.layout<[-, -]>> -> tensor<1x4xf32>
  mesh.return %r : tensor<1x4xf32>
}
