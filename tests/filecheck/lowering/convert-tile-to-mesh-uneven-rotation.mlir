// RUN: plmr-opt %s -p 'convert-tile-to-mesh{grid=3,3 device="wse2:sram_kib=4" fit-tiles=true}' | filecheck %s
// RUN: not plmr-opt %s -p 'convert-tile-to-mesh{grid=3,3 device="wse2:sram_kib=4"}' 2>&1 | filecheck %s --check-prefix=EVEN

// A 40x37x40 GEMM on a 3x3 grid of 4 KiB PEs: only Cannon's rotation fits, and its 37
// reduction blocks do not cut into 3 chunks. With fit-tiles the chunks are of 13 blocks,
// the last padded (39 > 37); every step computes how many blocks of its chunk lie
// before the end (37 - 13 · chunk) and a block past it keeps the accumulator.

// CHECK:      %a_1 = mesh.scatter %a : {{.*}} #mesh.layout<[y, x], skew x interleaved chunks 3>>
// CHECK-NEXT: %b_1 = mesh.scatter %b : {{.*}} #mesh.layout<[y, x], skew y interleaved chunks 3>>
// CHECK:      ^bb0(%py: index, %px: index, %{{.*}}: tensor<14x13xf32>, %{{.*}}: tensor<13x14xf32>):
// CHECK:        tile.for %step = 0 to 2 step 1 {{.*}} reduction {
// CHECK:          mesh.shift %{{.*}} axis x ring interleaved : tensor<14x13xf32>
// CHECK:          mesh.shift %{{.*}} axis y ring interleaved : tensor<13x14xf32>
// CHECK:          %[[CHUNK:[0-9]+]] = arith.remui %{{[0-9]+}}, %{{[0-9]+}} : index
// CHECK-NEXT:     %[[SIZE:[0-9]+]] = arith.constant 13 : index
// CHECK-NEXT:     %[[START:.*]] = arith.muli %[[CHUNK]], %[[SIZE]] : index
// CHECK-NEXT:     %[[END:.*]] = arith.constant 37 : index
// CHECK-NEXT:     %[[LIMIT:.*]] = arith.subi %[[END]], %[[START]] : index
// CHECK-NEXT:     tile.for %k = 0 to 13 step 1 iter_args(%[[ACC:.*]] = %{{.*}}) -> (tensor<2x2xf32>) reduction {
// CHECK:            %[[D:.*]] = tile.dot
// CHECK-NEXT:       %[[VALID:.*]] = arith.cmpi slt, %k, %[[LIMIT]] : index
// CHECK-NEXT:       %[[KEPT:.*]] = tile.select %[[VALID]], %[[D]], %[[ACC]] : tensor<2x2xf32>
// CHECK-NEXT:       tile.yield %[[KEPT]] : tensor<2x2xf32>
// CHECK:        tile.for %k_1 = 0 to 13 step 1
// CHECK:          arith.cmpi slt, %k_1
// CHECK:          tile.select

// Without fit-tiles a rotation cuts the reduction evenly or not at all.
// EVEN: plmr-opt: error: convert-tile-to-mesh: the nest computing %c does not fit a 3x3 grid of wse2

func.func @gemm(%a: tensor<40x37xf32>, %b: tensor<37x40xf32>) -> tensor<40x40xf32> {
  %e = tensor.empty() : tensor<40x40xf32>
  %c = tile.for %i = 0 to 40 step 2 iter_args(%o = %e) -> (tensor<40x40xf32>) parallel {
    %r = tile.for %j = 0 to 40 step 2 iter_args(%o2 = %o) -> (tensor<40x40xf32>) parallel {
      %z = tile.fill 0.0 : tensor<2x2xf32>
      %acc = tile.for %k = 0 to 37 step 1 iter_args(%c0 = %z) -> (tensor<2x2xf32>) reduction {
        %x = tile.load %a[%i, %k] : tensor<40x37xf32> -> tensor<2x1xf32>
        %y = tile.load %b[%k, %j] : tensor<37x40xf32> -> tensor<1x2xf32>
        %d = tile.dot %x, %y, %c0 : (tensor<2x1xf32>, tensor<1x2xf32>, tensor<2x2xf32>) -> tensor<2x2xf32>
        tile.yield %d : tensor<2x2xf32>
      }
      %s = tile.store %acc, %o2[%i, %j] : tensor<2x2xf32> -> tensor<40x40xf32>
      tile.yield %s : tensor<40x40xf32>
    }
    tile.yield %r : tensor<40x40xf32>
  }
  func.return %c : tensor<40x40xf32>
}
