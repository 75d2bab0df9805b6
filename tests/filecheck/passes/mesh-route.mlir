// RUN: plmr-opt %s -p mesh-route | filecheck %s
// RUN: plmr-opt %s -p mesh-route,mesh-route | filecheck %s

// The route tables `mesh-route` emits for each kind of collective: every collective gets
// the `colors` it uses, and the program one `mesh.route` per rule (rows/cols are
// [start, stop, step] progressions; a rule covers the whole grid across the collective's
// axis), marked `generated`. Running the pass twice gives the same tables (the generated
// rules are replaced; hand-written ones are kept, see @kept).
//
// A router holds one configuration per color: one input port and its output ports. A
// transfer takes the first color on which every router of its path is free or already
// configured exactly as it needs. The expected tables were derived by hand from the plans
// (target/collectives.py), transfers in plan order:
// - linear shift on 5 PEs: p -> p+1 for p < 4. 0->1 takes color 0 (router 0 ramp->east,
//   router 1 west->ramp); 1->2 needs ramp->east at router 1: color 1; 2->3 fits color 0,
//   3->4 color 1. Even steps on color 0, odd steps on color 1.
// - torus shift on 5 PEs: the same, and the wrap-around 4 -> 0 westwards (3 pass-through
//   hops), which finds router 3 receiving from the west on color 0 and router 4 on color
//   1: color 2. Routers 1-3 hold 3 colors.
// - interleaved shift on 5 PEs (WaferLLM's INTERLEAVE): the ring 0->2->4->3->1->0, every
//   link 1 or 2 hops. 0->2 color 0; 1->0 (router 1 relays 0->2 on color 0) color 1;
//   2->4 color 1 (router 2 receives 0->2 on color 0); 3->1 crosses router 2, busy on
//   colors 0 and 1: color 2; 4->3 color 0. Three colors, as in WaferLLM: at routers 1-3
//   one color sends, one relays and one receives.
//   Distance -2 runs the reverse ring 0->1->3->4->2->0 twice (both steps share the
//   colors). Each of its transfers crosses a router that holds colors 0-2 in other
//   configurations, so it takes colors 3-6: 0->1 and 3->4 color 3, 1->3 color 4
//   (router 1 receives 0->1 on color 3), 2->0 color 5 (router 1 receives 0->1 on color
//   3, router 2 relays 1->3 on color 4), 4->2 color 6 (router 4 receives 3->4 on color
//   3, router 3 receives 1->3 on color 4, router 2 sends 2->0 on color 5). Routers 1-3
//   hold 6 colors.
// - broadcast along y from row 0 on 4 rows: a multicast chain south, every router
//   delivering to its PE and forwarding: one color.
// - K-tree allreduce along y on 8 rows, K = 2, 2 groups: phase 1 chains {0,1,3}->2 and
//   {4,5,7}->6 (stage 1: 0->1, 3->2, 4->5, 7->6 on color 0; stage 2: 1->2, 5->6, which
//   start where color 0 delivers, on color 1), phase 2 2->6 (a 4-hop path; router 2
//   holds colors 0 and 1 already: color 2), then a multicast from 6 both ways (router 0
//   sends on color 0, router 1 on color 1, router 2 on color 2: color 3).
// - @kept: hand-written rules of color 0 (row 0 sends south) stay as written; the linear
//   shift along x routes around them on colors 1 and 2.

// CHECK-LABEL: mesh.program @linear
// CHECK:         mesh.shift %b axis x ring linear {colors = [0 : i64, 1 : i64]} : tensor<1x4xf32>
// CHECK:         mesh.gather
// CHECK-NEXT:    mesh.route color 0 rows [0, 2, 1] cols [0, 3, 2] from ramp to ["east"] {generated}
// CHECK-NEXT:    mesh.route color 0 rows [0, 2, 1] cols [1, 4, 2] from west to ["ramp"] {generated}
// CHECK-NEXT:    mesh.route color 1 rows [0, 2, 1] cols [1, 4, 2] from ramp to ["east"] {generated}
// CHECK-NEXT:    mesh.route color 1 rows [0, 2, 1] cols [2, 5, 2] from west to ["ramp"] {generated}
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
// CHECK:         mesh.shift %b axis x ring torus {colors = [0 : i64, 1 : i64, 2 : i64]} : tensor<1x4xf32>
// CHECK:         mesh.gather
// CHECK-NEXT:    mesh.route color 0 rows [0, 2, 1] cols [0, 3, 2] from ramp to ["east"] {generated}
// CHECK-NEXT:    mesh.route color 0 rows [0, 2, 1] cols [1, 4, 2] from west to ["ramp"] {generated}
// CHECK-NEXT:    mesh.route color 1 rows [0, 2, 1] cols [1, 4, 2] from ramp to ["east"] {generated}
// CHECK-NEXT:    mesh.route color 1 rows [0, 2, 1] cols [2, 5, 2] from west to ["ramp"] {generated}
// CHECK-NEXT:    mesh.route color 2 rows [0, 2, 1] cols [0, 1, 1] from east to ["ramp"] {generated}
// CHECK-NEXT:    mesh.route color 2 rows [0, 2, 1] cols [1, 4, 1] from east to ["west"] {generated}
// CHECK-NEXT:    mesh.route color 2 rows [0, 2, 1] cols [4, 5, 1] from ramp to ["west"] {generated}
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
// CHECK:         mesh.shift %b axis x ring interleaved {colors = [0 : i64, 1 : i64, 2 : i64]} : tensor<1x4xf32>
// CHECK:         mesh.shift %s axis x ring interleaved distance -2 {colors = [3 : i64, 4 : i64, 5 : i64, 6 : i64]} : tensor<1x4xf32>
// CHECK:         mesh.gather
// CHECK-NEXT:    mesh.route color 0 rows [0, 2, 1] cols [0, 1, 1] from ramp to ["east"] {generated}
// CHECK-NEXT:    mesh.route color 0 rows [0, 2, 1] cols [1, 2, 1] from west to ["east"] {generated}
// CHECK-NEXT:    mesh.route color 0 rows [0, 2, 1] cols [2, 3, 1] from west to ["ramp"] {generated}
// CHECK-NEXT:    mesh.route color 0 rows [0, 2, 1] cols [3, 4, 1] from east to ["ramp"] {generated}
// CHECK-NEXT:    mesh.route color 0 rows [0, 2, 1] cols [4, 5, 1] from ramp to ["west"] {generated}
// CHECK-NEXT:    mesh.route color 1 rows [0, 2, 1] cols [0, 1, 1] from east to ["ramp"] {generated}
// CHECK-NEXT:    mesh.route color 1 rows [0, 2, 1] cols [1, 2, 1] from ramp to ["west"] {generated}
// CHECK-NEXT:    mesh.route color 1 rows [0, 2, 1] cols [2, 3, 1] from ramp to ["east"] {generated}
// CHECK-NEXT:    mesh.route color 1 rows [0, 2, 1] cols [3, 4, 1] from west to ["east"] {generated}
// CHECK-NEXT:    mesh.route color 1 rows [0, 2, 1] cols [4, 5, 1] from west to ["ramp"] {generated}
// CHECK-NEXT:    mesh.route color 2 rows [0, 2, 1] cols [1, 2, 1] from east to ["ramp"] {generated}
// CHECK-NEXT:    mesh.route color 2 rows [0, 2, 1] cols [2, 3, 1] from east to ["west"] {generated}
// CHECK-NEXT:    mesh.route color 2 rows [0, 2, 1] cols [3, 4, 1] from ramp to ["west"] {generated}
// CHECK-NEXT:    mesh.route color 3 rows [0, 2, 1] cols [0, 4, 3] from ramp to ["east"] {generated}
// CHECK-NEXT:    mesh.route color 3 rows [0, 2, 1] cols [1, 5, 3] from west to ["ramp"] {generated}
// CHECK-NEXT:    mesh.route color 4 rows [0, 2, 1] cols [1, 2, 1] from ramp to ["east"] {generated}
// CHECK-NEXT:    mesh.route color 4 rows [0, 2, 1] cols [2, 3, 1] from west to ["east"] {generated}
// CHECK-NEXT:    mesh.route color 4 rows [0, 2, 1] cols [3, 4, 1] from west to ["ramp"] {generated}
// CHECK-NEXT:    mesh.route color 5 rows [0, 2, 1] cols [0, 1, 1] from east to ["ramp"] {generated}
// CHECK-NEXT:    mesh.route color 5 rows [0, 2, 1] cols [1, 2, 1] from east to ["west"] {generated}
// CHECK-NEXT:    mesh.route color 5 rows [0, 2, 1] cols [2, 3, 1] from ramp to ["west"] {generated}
// CHECK-NEXT:    mesh.route color 6 rows [0, 2, 1] cols [2, 3, 1] from east to ["ramp"] {generated}
// CHECK-NEXT:    mesh.route color 6 rows [0, 2, 1] cols [3, 4, 1] from east to ["west"] {generated}
// CHECK-NEXT:    mesh.route color 6 rows [0, 2, 1] cols [4, 5, 1] from ramp to ["west"] {generated}
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
// CHECK-NEXT:    mesh.route color 0 rows [0, 1, 1] cols [0, 3, 1] from ramp to ["south"] {generated}
// CHECK-NEXT:    mesh.route color 0 rows [1, 3, 1] cols [0, 3, 1] from north to ["ramp", "south"] {generated}
// CHECK-NEXT:    mesh.route color 0 rows [3, 4, 1] cols [0, 3, 1] from north to ["ramp"] {generated}
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
// CHECK:         mesh.allreduce sum %b axis y groups = 2 {colors = [0 : i64, 1 : i64, 2 : i64, 3 : i64]} : tensor<1x4xf32>
// CHECK:         mesh.gather
// CHECK-NEXT:    mesh.route color 0 rows [0, 5, 4] cols [0, 1, 1] from ramp to ["south"] {generated}
// CHECK-NEXT:    mesh.route color 0 rows [1, 6, 4] cols [0, 1, 1] from north to ["ramp"] {generated}
// CHECK-NEXT:    mesh.route color 0 rows [2, 7, 4] cols [0, 1, 1] from south to ["ramp"] {generated}
// CHECK-NEXT:    mesh.route color 0 rows [3, 8, 4] cols [0, 1, 1] from ramp to ["north"] {generated}
// CHECK-NEXT:    mesh.route color 1 rows [1, 6, 4] cols [0, 1, 1] from ramp to ["south"] {generated}
// CHECK-NEXT:    mesh.route color 1 rows [2, 7, 4] cols [0, 1, 1] from north to ["ramp"] {generated}
// CHECK-NEXT:    mesh.route color 2 rows [2, 3, 1] cols [0, 1, 1] from ramp to ["south"] {generated}
// CHECK-NEXT:    mesh.route color 2 rows [3, 6, 1] cols [0, 1, 1] from north to ["south"] {generated}
// CHECK-NEXT:    mesh.route color 2 rows [6, 7, 1] cols [0, 1, 1] from north to ["ramp"] {generated}
// CHECK-NEXT:    mesh.route color 3 rows [0, 1, 1] cols [0, 1, 1] from south to ["ramp"] {generated}
// CHECK-NEXT:    mesh.route color 3 rows [1, 6, 1] cols [0, 1, 1] from south to ["ramp", "north"] {generated}
// CHECK-NEXT:    mesh.route color 3 rows [6, 7, 1] cols [0, 1, 1] from ramp to ["south", "north"] {generated}
// CHECK-NEXT:    mesh.route color 3 rows [7, 8, 1] cols [0, 1, 1] from north to ["ramp"] {generated}
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

// CHECK-LABEL: mesh.program @kept
// CHECK:         mesh.shift %b axis x ring linear {colors = [1 : i64, 2 : i64]} : tensor<1x4xf32>
// CHECK:         mesh.gather
// CHECK-NEXT:    mesh.route color 0 rows [0, 1, 1] cols [0, 3, 1] from ramp to ["south"]{{$}}
// CHECK-NEXT:    mesh.route color 0 rows [1, 2, 1] cols [0, 3, 1] from north to ["ramp"]{{$}}
// CHECK-NEXT:    mesh.route color 1 rows [0, 2, 1] cols [0, 1, 1] from ramp to ["east"] {generated}
// CHECK-NEXT:    mesh.route color 1 rows [0, 2, 1] cols [1, 2, 1] from west to ["ramp"] {generated}
// CHECK-NEXT:    mesh.route color 2 rows [0, 2, 1] cols [1, 2, 1] from ramp to ["east"] {generated}
// CHECK-NEXT:    mesh.route color 2 rows [0, 2, 1] cols [2, 3, 1] from west to ["ramp"] {generated}
// CHECK-NEXT:    mesh.return
mesh.program @kept(%a: tensor<3x4xf32>) -> tensor<3x4xf32> device "test-small" grid [2, 3] {
  %d = mesh.scatter %a : tensor<3x4xf32> -> !mesh.dist<tensor<3x4xf32>, #mesh.layout<[x, -]>>
  %e = mesh.spmd(%d) : (!mesh.dist<tensor<3x4xf32>, #mesh.layout<[x, -]>>) -> !mesh.dist<tensor<3x4xf32>, #mesh.layout<[x, -]>> {
  ^bb0(%y: index, %x: index, %b: tensor<1x4xf32>):
    %s = mesh.shift %b axis x ring linear : tensor<1x4xf32>
    mesh.yield %s : tensor<1x4xf32>
  }
  %r = mesh.gather %e : !mesh.dist<tensor<3x4xf32>, #mesh.layout<[x, -]>> -> tensor<3x4xf32>
  mesh.route color 0 rows [0, 1, 1] cols [0, 3, 1] from ramp to ["south"]
  mesh.route color 0 rows [1, 2, 1] cols [0, 3, 1] from north to ["ramp"]
  mesh.return %r : tensor<3x4xf32>
}
