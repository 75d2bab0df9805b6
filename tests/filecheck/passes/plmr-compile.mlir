// RUN: plmr-opt %s -p 'plmr-compile{grid=4,4 substitute=false tile-sizes=16,16}' | filecheck %s
// RUN: plmr-opt %s -p 'plmr-compile{grid=4,4 substitute=false tile-sizes=16,16 gemv=pipeline}' | filecheck %s --check-prefix=PIPE
// RUN: plmr-opt %examples/attention/prefill_causal.mlir -p 'plmr-compile{grid=2,4 substitute=false device="wse2:sram_kib=7"}' | filecheck %s --check-prefix=RING

// Decode: two GEMVs. The vector x is split along y with the rows of W1, each PE
// multiplies its block and a K-tree allreduce along y sums the partial products: the
// result is split along x (with W1's columns) and replicated along y. The second GEMV
// therefore reduces along x, placing W2 pre-transposed ([x, y]): the reduction axes
// alternate and no layout change is needed in between (WaferLLM's MeshGEMV). A PE's
// four 16-wide output blocks are allreduced together, once, at the end of the nest.

// CHECK:      mesh.program @decode(%x: tensor<1x256xf32>, %w1: tensor<256x256xf32>, %w2: tensor<256x256xf32>) -> tensor<1x256xf32> device "wse2" grid [4, 4] {
// CHECK-NEXT:   %x_1 = mesh.scatter %x : tensor<1x256xf32> -> !mesh.dist<tensor<1x256xf32>, #mesh.layout<[-, y]>>
// CHECK-NEXT:   %w1_1 = mesh.scatter %w1 : tensor<256x256xf32> -> !mesh.dist<tensor<256x256xf32>, #mesh.layout<[y, x]>>
// CHECK-NEXT:   %h = mesh.spmd(%x_1, %w1_1) : {{.*}} -> !mesh.dist<tensor<1x256xf32>, #mesh.layout<[-, x]>> {
// CHECK:          mesh.allreduce sum %{{.*}} axis y {colors = [0 : i64, 1 : i64, 2 : i64]} : tensor<1x64xf32>
// CHECK:        %w2_1 = mesh.scatter %w2 : tensor<256x256xf32> -> !mesh.dist<tensor<256x256xf32>, #mesh.layout<[x, y]>>
// CHECK-NEXT:   %o = mesh.spmd(%h, %w2_1) : {{.*}} -> !mesh.dist<tensor<1x256xf32>, #mesh.layout<[-, y]>> {
// CHECK-NOT:      mesh.scatter
// CHECK:          mesh.allreduce sum %{{.*}} axis x {colors = [3 : i64, 4 : i64, 5 : i64]} : tensor<1x64xf32>

// The K-tree's stages (k = 2, groups of 2 on 4 PEs) as route rules on the column: rows
// 0 -> 1 and 2 -> 3 reduce in their groups, 1 -> 3 across the group roots, then 3
// multicasts the sum back up the column.
// CHECK:        mesh.route color 0 rows [0, 3, 2] cols [0, 4, 1] from ramp to ["south"] {generated}
// CHECK-NEXT:   mesh.route color 0 rows [1, 4, 2] cols [0, 4, 1] from north to ["ramp"] {generated}
// CHECK-NEXT:   mesh.route color 1 rows [1, 2, 1] cols [0, 4, 1] from ramp to ["south"] {generated}
// CHECK-NEXT:   mesh.route color 1 rows [2, 3, 1] cols [0, 4, 1] from north to ["south"] {generated}
// CHECK-NEXT:   mesh.route color 1 rows [3, 4, 1] cols [0, 4, 1] from north to ["ramp"] {generated}
// CHECK-NEXT:   mesh.route color 2 rows [0, 1, 1] cols [0, 4, 1] from south to ["ramp"] {generated}
// CHECK-NEXT:   mesh.route color 2 rows [1, 3, 1] cols [0, 4, 1] from south to ["ramp", "north"] {generated}
// CHECK-NEXT:   mesh.route color 2 rows [3, 4, 1] cols [0, 4, 1] from ramp to ["north"] {generated}
// CHECK:        } {plmr.arg_names = ["arg0", "arg1", "arg2"], plmr.result_names = ["out0"], plmr.check = {max_routes = 6 : i64, max_sram_bytes = {{[0-9]+}} : i64, longest_path_hops = 3 : i64}}

// PIPE:         mesh.allreduce sum %{{.*}} axis y algorithm pipeline
// PIPE:         mesh.allreduce sum %{{.*}} axis x algorithm pipeline

// Prefill attention fused by neptune-fuse (FlashAttention's rolling update) on PEs too
// small to hold a head's keys: each PE keeps its query block (heads over y, queries over
// x) while K, V and the key positions circulate along x on the interleaved ring (ring
// attention), the rolling update absorbing one chunk per step. Q·Kᵀ is a dot with
// transpose_b on blocks placed as stored: no transpose runs on the mesh.

// RING:      %q_1 = mesh.scatter %q : tensor<1x2x64x16xf32> -> !mesh.dist<tensor<1x2x64x16xf32>, #mesh.layout<[-, y, x, -]>>
// RING:      %k_1 = mesh.scatter %k : tensor<1x2x64x16xf32> -> !mesh.dist<tensor<1x2x64x16xf32>, #mesh.layout<[-, y, x, -]>>
// RING:      %v_1 = mesh.scatter %v : tensor<1x2x64x16xf32> -> !mesh.dist<tensor<1x2x64x16xf32>, #mesh.layout<[-, y, x, -]>>
// RING:      tile.for %step = 0 to 3 step 1
// RING-NEXT:   mesh.shift %{{.*}} axis x ring interleaved {{.*}} : tensor<1x1x16x16xf32>
// RING-NEXT:   mesh.shift %{{.*}} axis x ring interleaved {{.*}} : tensor<1x1x16x16xf32>
// RING-NEXT:   mesh.shift %{{.*}} axis x ring interleaved {{.*}} : tensor<1x16xf32>
// RING:        tile.dot %{{.*}}, %{{.*}} transpose_b : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
// RING-NOT:  transpose {
// RING-NOT:  tile.transpose

func.func @decode(%x: tensor<1x256xf32>, %w1: tensor<256x256xf32>, %w2: tensor<256x256xf32>) -> tensor<1x256xf32> {
  %h = graph.matmul %x, %w1 : (tensor<1x256xf32>, tensor<256x256xf32>) -> tensor<1x256xf32>
  %o = graph.matmul %h, %w2 : (tensor<1x256xf32>, tensor<256x256xf32>) -> tensor<1x256xf32>
  func.return %o : tensor<1x256xf32>
}
