// RUN: plmr-opt %s -p 'convert-tile-to-mesh{grid=4,4 device="wse2:sram_kib=24"}' | filecheck %s
// RUN: plmr-opt %s -p 'convert-tile-to-mesh{grid=2,4}' | filecheck %s --check-prefix=RECT
// RUN: plmr-opt %s -p 'convert-tile-to-mesh{grid=4,4 gemm=cannon device="wse2:sram_kib=24"}' | filecheck %s --check-prefix=TORUS
// RUN: plmr-opt %s -p 'convert-tile-to-mesh{grid=4,4 gemm=summa device="wse2:sram_kib=24"}' | filecheck %s --check-prefix=SUMMA
// RUN: not plmr-opt %s -p 'convert-tile-to-mesh{grid=1,1}' 2>&1 | filecheck %s --check-prefix=SRAM
// RUN: not plmr-opt %s -p 'convert-tile-to-mesh{grid=3,3}' 2>&1 | filecheck %s --check-prefix=GRID
// RUN: not plmr-opt %s -p 'convert-tile-to-mesh{grid=4,4 gemm=foo}' 2>&1 | filecheck %s --check-prefix=OPT

// A 128x128x128 GEMM blocked by 16 on PEs with 24 KiB: its operands are too large to
// replicate (a PE cannot hold whole rows of A and columns of B), so the
// reduction over %k circulates A along x and B along y (Cannon, with WaferLLM's
// interleaved rings by default), on operands placed pre-aligned (skewed) at scatter
// time. The output stays where it is computed: rows over y, columns over x.

// CHECK:      mesh.program @gemm(%a: tensor<128x128xf32>, %b: tensor<128x128xf32>) -> tensor<128x128xf32> device "wse2:sram_kib=24" grid [4, 4] {
// CHECK-NEXT:   %a_1 = mesh.scatter %a : tensor<128x128xf32> -> !mesh.dist<tensor<128x128xf32>, #mesh.layout<[y, x], skew x interleaved chunks 4>>
// CHECK-NEXT:   %b_1 = mesh.scatter %b : tensor<128x128xf32> -> !mesh.dist<tensor<128x128xf32>, #mesh.layout<[y, x], skew y interleaved chunks 4>>
// CHECK-NEXT:   %c = mesh.spmd(%a_1, %b_1) : {{.*}} -> !mesh.dist<tensor<128x128xf32>, #mesh.layout<[y, x]>> {
// CHECK-NEXT:   ^bb0(%py: index, %px: index, %{{.*}}: tensor<32x32xf32>, %{{.*}}: tensor<32x32xf32>):
// CHECK:          tile.for %i = 0 to 32 step 16
// CHECK:            tile.for %j = 0 to 32 step 16
// CHECK:              tile.for %step = 0 to 3 step 1 {{.*}} reduction {
// CHECK-NEXT:           mesh.shift %{{.*}} axis x ring interleaved : tensor<32x32xf32>
// CHECK-NEXT:           mesh.shift %{{.*}} axis y ring interleaved : tensor<32x32xf32>
// CHECK:                tile.for %k = 0 to 32 step 16 {{.*}} reduction {
// CHECK:                  tile.dot
// CHECK:              tile.for %k_1 = 0 to 32 step 16 {{.*}} reduction {
// CHECK:        mesh.yield %{{.*}} : tensor<32x32xf32>
// CHECK:        %{{.*}} = mesh.gather %c : !mesh.dist<tensor<128x128xf32>, #mesh.layout<[y, x]>> -> tensor<128x128xf32>
// CHECK-NOT:  tile.transpose

// A 2x4 grid: K is cut into lcm(2, 4) = 4 chunks, 1 per PE along x and 2 along y; the
// two-PE columns form a torus ring, the four-PE rows an interleaved one; B passes on one
// of its two chunks per step.

// RECT:      mesh.scatter %a : {{.*}} #mesh.layout<[y, x], skew x interleaved chunks 4>>
// RECT:      mesh.scatter %b : {{.*}} #mesh.layout<[y, x], skew y interleaved chunks 4>>
// RECT:      tile.for %step = 0 to 3 step 1
// RECT:        mesh.shift %{{.*}} axis x ring interleaved : tensor<64x32xf32>
// RECT:        mesh.shift %{{.*}} axis y ring torus : tensor<32x32xf32>

// TORUS:     #mesh.layout<[y, x], skew x torus chunks 4>
// TORUS:     mesh.shift %{{.*}} axis x ring torus
// TORUS:     mesh.shift %{{.*}} axis y ring torus

// SUMMA places the operands unskewed and broadcasts each chunk from its owner.
// SUMMA:     mesh.scatter %a : {{.*}} #mesh.layout<[y, x]>>
// SUMMA:     mesh.scatter %b : {{.*}} #mesh.layout<[y, x]>>
// SUMMA:     tile.for %step = 0 to 4 step 1
// SUMMA:       mesh.broadcast %{{.*}} axis x root %{{.*}} : tensor<32x32xf32>
// SUMMA:       mesh.broadcast %{{.*}} axis y root %{{.*}} : tensor<32x32xf32>
// SUMMA-NOT: mesh.shift

// SRAM: plmr-opt: error: convert-tile-to-mesh: the nest computing %c does not fit a 1x1 grid of wse2: its smallest per-PE placement (no loop split) needs 196608 bytes of SRAM, a PE has 49152 (no loop's block count (%i: 8, %j: 8) is a multiple of the 1 or 1 PEs of an axis); use a larger grid, smaller tiles or a device with more SRAM

// GRID: plmr-opt: error: convert-tile-to-mesh: the nest computing %c does not fit a 3x3 grid of wse2: {{.*}} (no loop's block count (%i: 8, %j: 8) is a multiple of the 3 or 3 PEs of an axis: `plmr compile --fit-tiles` gives the last PEs a padded share)

// OPT: plmr-opt: error: convert-tile-to-mesh: unknown gemm 'foo' (choose meshgemm, cannon, summa)

func.func @gemm(%a: tensor<128x128xf32>, %b: tensor<128x128xf32>) -> tensor<128x128xf32> {
  %e = tensor.empty() : tensor<128x128xf32>
  %c = tile.for %i = 0 to 128 step 16 iter_args(%o = %e) -> (tensor<128x128xf32>) parallel {
    %r = tile.for %j = 0 to 128 step 16 iter_args(%o2 = %o) -> (tensor<128x128xf32>) parallel {
      %z = tile.fill 0.0 : tensor<16x16xf32>
      %acc = tile.for %k = 0 to 128 step 16 iter_args(%c0 = %z) -> (tensor<16x16xf32>) reduction {
        %x = tile.load %a[%i, %k] : tensor<128x128xf32> -> tensor<16x16xf32>
        %y = tile.load %b[%k, %j] : tensor<128x128xf32> -> tensor<16x16xf32>
        %d = tile.dot %x, %y, %c0 : (tensor<16x16xf32>, tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
        tile.yield %d : tensor<16x16xf32>
      }
      %s = tile.store %acc, %o2[%i, %j] : tensor<16x16xf32> -> tensor<128x128xf32>
      tile.yield %s : tensor<128x128xf32>
    }
    tile.yield %r : tensor<128x128xf32>
  }
  func.return %c : tensor<128x128xf32>
}
