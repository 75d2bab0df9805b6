// RUN: plmr-opt %s --split-input-file -p mesh-check-limits --verify-diagnostics | filecheck %s
// RUN: plmr-opt %s --split-input-file -p 'mesh-check-limits{relay=true}' --verify-diagnostics | filecheck %s --check-prefix=RELAY
// RUN: not plmr-opt %s -p mesh-check-limits 2>&1 | filecheck %s --check-prefix=OVERFLOW

// `mesh-check-limits` records the static PLMR figures of every mesh.program — the most
// colors a router holds (R), one PE's peak SRAM (M, at the device's 2-byte elements,
// with a receive buffer per running collective) and the longest message path in hops
// (L) — and rejects programs that exceed their device with one precise message. The
// figures below were computed by hand. The last RUN line checks the same file as one
// module (no splitting): the valid programs pass and the SRAM overflow of @over is the
// error plmr-opt exits with.

// @torus: a 1x4 block (8 B), the shifted block and the shift's receive buffer: 24 B;
// the wrap-around 4 -> 0 is 4 hops. A router holds one route per color: the even steps
// take color 0, the odd steps color 1, and the wrap-around, crossing routers 1-3 where
// both are taken, color 2: 3 colors (see mesh-route.mlir).
// CHECK-LABEL: mesh.program @torus
// CHECK:       } {plmr.check = {max_routes = 3 : i64, max_sram_bytes = 24 : i64, longest_path_hops = 4 : i64}}
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

// @interleaved: the same ring folded (≤ 2 hops), both directions of the ring. The
// forward ring takes colors 0-2, the reverse one (the transfers of mesh-route.mlir's
// distance -2) colors 3-6, and routers 1-3 hold all but one of them: 6 colors.
// CHECK-LABEL: mesh.program @interleaved
// CHECK:       } {plmr.check = {max_routes = 6 : i64, max_sram_bytes = 24 : i64, longest_path_hops = 2 : i64}}
mesh.program @interleaved(%a: tensor<5x4xf32>) -> tensor<5x4xf32> device "test-small" grid [2, 5] {
  %d = mesh.scatter %a : tensor<5x4xf32> -> !mesh.dist<tensor<5x4xf32>, #mesh.layout<[x, -]>>
  %e = mesh.spmd(%d) : (!mesh.dist<tensor<5x4xf32>, #mesh.layout<[x, -]>>) -> !mesh.dist<tensor<5x4xf32>, #mesh.layout<[x, -]>> {
  ^bb0(%y: index, %x: index, %b: tensor<1x4xf32>):
    %s = mesh.shift %b axis x ring interleaved : tensor<1x4xf32>
    %t = mesh.shift %s axis x ring interleaved distance -1 : tensor<1x4xf32>
    mesh.yield %t : tensor<1x4xf32>
  }
  %r = mesh.gather %e : !mesh.dist<tensor<5x4xf32>, #mesh.layout<[x, -]>> -> tensor<5x4xf32>
  mesh.return %r : tensor<5x4xf32>
}

// @gemv: x block 1x2 (4 B) and W block 2x3 (12 B) are live with the product 1x3 (6 B) at
// the tile.dot: 22 B (the allreduce holds 6 + 6 + a 6 B buffer). A pipeline allreduce on
// 4 rows: the chain 0 -> 1 -> 2 -> 3 (0 -> 1 and 2 -> 3 on color 0; 1 -> 2 starts where
// color 0 delivers: color 1) and the multicast back from 3 (3 hops; row 3 receives
// 2 -> 3 on color 0 and row 2 receives 1 -> 2 on color 1: color 2). Rows 1 and 2 hold 3
// colors.
// CHECK-LABEL: mesh.program @gemv
// CHECK:       } {plmr.check = {max_routes = 3 : i64, max_sram_bytes = 22 : i64, longest_path_hops = 3 : i64}}
mesh.program @gemv(%v: tensor<1x8xf32>, %w: tensor<8x6xf32>) -> tensor<1x6xf32> device "wse2" grid [4, 2] {
  %dv = mesh.scatter %v : tensor<1x8xf32> -> !mesh.dist<tensor<1x8xf32>, #mesh.layout<[-, y]>>
  %dw = mesh.scatter %w : tensor<8x6xf32> -> !mesh.dist<tensor<8x6xf32>, #mesh.layout<[y, x]>>
  %e = mesh.spmd(%dv, %dw) : (!mesh.dist<tensor<1x8xf32>, #mesh.layout<[-, y]>>, !mesh.dist<tensor<8x6xf32>, #mesh.layout<[y, x]>>) -> !mesh.dist<tensor<1x6xf32>, #mesh.layout<[-, x]>> {
  ^bb0(%y: index, %x: index, %xb: tensor<1x2xf32>, %wb: tensor<2x3xf32>):
    %p = tile.dot %xb, %wb : (tensor<1x2xf32>, tensor<2x3xf32>) -> tensor<1x3xf32>
    %s = mesh.allreduce sum %p axis y algorithm pipeline : tensor<1x3xf32>
    mesh.yield %s : tensor<1x3xf32>
  }
  %r = mesh.gather %e : !mesh.dist<tensor<1x6xf32>, #mesh.layout<[-, x]>> -> tensor<1x6xf32>
  mesh.return %r : tensor<1x6xf32>
}

// @ktree: K = 2 with 2 groups on 8 rows: colors 0-3 (see mesh-route.mlir), all four at
// rows 2, 5 and 6; the multicast from row 6 to row 0 is the longest path.
// CHECK-LABEL: mesh.program @ktree
// CHECK:       } {plmr.check = {max_routes = 4 : i64, max_sram_bytes = 24 : i64, longest_path_hops = 6 : i64}}
mesh.program @ktree(%a: tensor<8x4xf32>) -> tensor<1x4xf32> device "test-small" grid [8, 1] {
  %d = mesh.scatter %a : tensor<8x4xf32> -> !mesh.dist<tensor<8x4xf32>, #mesh.layout<[y, -]>>
  %e = mesh.spmd(%d) : (!mesh.dist<tensor<8x4xf32>, #mesh.layout<[y, -]>>) -> !mesh.dist<tensor<1x4xf32>, #mesh.layout<[-, -]>> {
  ^bb0(%y: index, %x: index, %b: tensor<1x4xf32>):
    %s = mesh.allreduce sum %b axis y groups = 2 : tensor<1x4xf32>
    mesh.yield %s : tensor<1x4xf32>
  }
  %r = mesh.gather %e : !mesh.dist<tensor<1x4xf32>, #mesh.layout<[-, -]>> -> tensor<1x4xf32>
  mesh.return %r : tensor<1x4xf32>
}

// -----

// SRAM overflow on test-tiny (4 KiB per PE): a 1x1024 block is 2048 B, and the shift
// holds its input, its result and a receive buffer at once: 6144 B.
mesh.program @over(%a: tensor<4x4096xf32>) -> tensor<4x4096xf32> device "test-tiny" grid [4, 4] {
  %d = mesh.scatter %a : tensor<4x4096xf32> -> !mesh.dist<tensor<4x4096xf32>, #mesh.layout<[y, x]>>
  %e = mesh.spmd(%d) : (!mesh.dist<tensor<4x4096xf32>, #mesh.layout<[y, x]>>) -> !mesh.dist<tensor<4x4096xf32>, #mesh.layout<[y, x]>> {
  ^bb0(%y: index, %x: index, %b: tensor<1x1024xf32>):
    %s = mesh.shift %b axis x ring torus : tensor<1x1024xf32>
    mesh.yield %s : tensor<1x1024xf32>
  }
  %r = mesh.gather %e : !mesh.dist<tensor<4x4096xf32>, #mesh.layout<[y, x]>> -> tensor<4x4096xf32>
  mesh.return %r : tensor<4x4096xf32>
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: mesh-check-limits: @over: every PE needs 6144 B of SRAM at `%s = mesh.shift %b axis x ring torus : tensor<1x1024xf32>`, but test-tiny has 4096 B; use a larger grid or smaller blocks
// RELAY:      mesh-check-limits: @over: every PE needs 6144 B of SRAM
// OVERFLOW:      plmr-opt: error: mesh-check-limits: @over: every PE needs 6144 B of SRAM at `%s = mesh.shift %b axis x ring torus : tensor<1x1024xf32>`, but test-tiny has 4096 B; use a larger grid or smaller blocks
// OVERFLOW-NOT:  Traceback

// -----

// Just under the capacity is fine: 1x682 blocks (1364 B) three times: 4092 B. The torus
// shift on 4 PEs takes 3 colors (as @torus), within test-tiny's 5 usable.
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: builtin.module {
// CHECK:      } {plmr.check = {max_routes = 3 : i64, max_sram_bytes = 4092 : i64, longest_path_hops = 3 : i64}}
mesh.program @fits(%a: tensor<4x2728xf32>) -> tensor<4x2728xf32> device "test-tiny" grid [4, 4] {
  %d = mesh.scatter %a : tensor<4x2728xf32> -> !mesh.dist<tensor<4x2728xf32>, #mesh.layout<[y, x]>>
  %e = mesh.spmd(%d) : (!mesh.dist<tensor<4x2728xf32>, #mesh.layout<[y, x]>>) -> !mesh.dist<tensor<4x2728xf32>, #mesh.layout<[y, x]>> {
  ^bb0(%y: index, %x: index, %b: tensor<1x682xf32>):
    %s = mesh.shift %b axis x ring torus : tensor<1x682xf32>
    mesh.yield %s : tensor<1x682xf32>
  }
  %r = mesh.gather %e : !mesh.dist<tensor<4x2728xf32>, #mesh.layout<[y, x]>> -> tensor<4x2728xf32>
  mesh.return %r : tensor<4x2728xf32>
}

// -----

// A grid larger than the device.
mesh.program @wide() -> () device "test-tiny" grid [4, 5] {
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: mesh-check-limits: @wide: the 4x5 grid does not fit test-tiny (4x4 PEs)

// -----

// Collectives that need more colors than the device routes (2 usable here): already the
// forward interleaved ring on 4 PEs (0 -> 2, 1 -> 0, 2 -> 3, 3 -> 1) needs 3: 0 -> 2 takes
// color 0, 1 -> 0 and 2 -> 3 color 1, and 3 -> 1 crosses router 2, which receives 0 -> 2
// on color 0 and sends 2 -> 3 on color 1. With relay, the transfers that do not fit are
// relayed in software and the routes stay within the budget; the torus wrap-around
// 3 -> 0 is the longest path.
mesh.program @colors(%a: tensor<4x4xf32>) -> tensor<4x4xf32> device "test-tiny:colors=4,reserved_colors=2" grid [1, 4] {
  %d = mesh.scatter %a : tensor<4x4xf32> -> !mesh.dist<tensor<4x4xf32>, #mesh.layout<[-, x]>>
  %e = mesh.spmd(%d) : (!mesh.dist<tensor<4x4xf32>, #mesh.layout<[-, x]>>) -> !mesh.dist<tensor<4x4xf32>, #mesh.layout<[-, x]>> {
  ^bb0(%y: index, %x: index, %b: tensor<4x1xf32>):
    %s = mesh.shift %b axis x ring interleaved : tensor<4x1xf32>
    %t = mesh.shift %s axis x ring interleaved distance -1 : tensor<4x1xf32>
    %u = mesh.shift %t axis x ring torus : tensor<4x1xf32>
    mesh.yield %u : tensor<4x1xf32>
  }
  %r = mesh.gather %e : !mesh.dist<tensor<4x4xf32>, #mesh.layout<[-, x]>> -> tensor<4x4xf32>
  mesh.return %r : tensor<4x4xf32>
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: mesh-check-limits: 'mesh.shift' along x needs more than the 2 usable colors of test-tiny at some router (colors 0..1 are taken); use fewer concurrent collectives, a smaller K, or relay mode (mesh-route{relay=true} / --relay)
// RELAY:      mesh.program @colors
// RELAY:      } {plmr.check = {max_routes = 2 : i64, max_sram_bytes = 24 : i64, longest_path_hops = 3 : i64}}

// -----

// Explicit routes that need more colors at one router than the device has.
mesh.program @manual() -> () device "test-tiny:colors=4,reserved_colors=2" grid [2, 2] {
  mesh.route color 0 rows [0, 1, 1] cols [0, 1, 1] from ramp to ["east"]
  mesh.route color 1 rows [0, 1, 1] cols [0, 2, 1] from ramp to ["south"]
  mesh.route color 7 rows [0, 2, 1] cols [0, 1, 1] from west to ["ramp"]
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: mesh-check-limits: @manual: a router needs 3 colors but test-tiny routes at most 2
// RELAY:      mesh.program @manual
// RELAY:      } {plmr.check = {max_routes = 3 : i64, max_sram_bytes = 0 : i64, longest_path_hops = 0 : i64}}
