// RUN: plmr-opt %s -p 'convert-loop-to-tile{tile-sizes=8,8 fit=true fit-grid=3,3 spread=true}' | filecheck %s
// RUN: plmr-opt %s -p 'convert-loop-to-tile{tile-sizes=8,8 fit=true fit-grid=3,3}' | filecheck %s --check-prefix=WHOLE
// RUN: not plmr-opt %s -p 'convert-loop-to-tile{tile-sizes=8,8}' 2>&1 | filecheck %s --check-prefix=PLAIN

// logits[L, V] = x[L, K]·W[K, V] with V = 20 on 3x3 PEs: no axis divides V in blocks of
// up to 8. With `spread`, V is cut in padded blocks of ceil(20 / 3) = 7 (7, 7 and 6
// columns): one block per PE along an axis instead of 7 blocks of 1. The last block
// ends past the tensor: W's block is loaded with zero padding and the result's block
// is stored clipped. Without `spread` V is kept whole; without `fit`, blocks of 8
// (which do not divide 20) are refused, as before.

// CHECK-LABEL: func.func @lm_head
// CHECK:       tile.for %{{.*}} = 0 to 4 step 4 {{.*}} parallel
// CHECK:         tile.for %[[V:.*]] = 0 to 20 step 7 {{.*}} parallel
// CHECK:           tile.fill 0.000000e+00 : tensor<4x7xf32>
// CHECK:           tile.for %{{.*}} = 0 to 12 step 4 {{.*}} reduction
// CHECK:             tile.load %x[{{.*}}] : tensor<4x12xf32> -> tensor<4x4xf32>
// CHECK:             tile.load %w[%{{.*}}, %[[V]]] padding 0.000000e+00 : tensor<12x20xf32> -> tensor<4x7xf32>
// CHECK:           tile.store %{{.*}}, %{{.*}}[%{{.*}}, %[[V]]] clip : tensor<4x7xf32> -> tensor<4x20xf32>

// WHOLE-LABEL: func.func @lm_head
// WHOLE:         tile.for %{{.*}} = 0 to 20 step 20 {{.*}} parallel
// WHOLE-NOT:     clip
// WHOLE-NOT:     padding

// PLAIN: convert-loop-to-tile: tile size 8 does not divide the extent 20 of dimension %v

func.func @lm_head(%x: tensor<4x12xf32>, %w: tensor<12x20xf32>) -> tensor<4x20xf32> {
  %0 = arith.constant 0.000000e+00 : f32
  %logits = loop.nest (%l, %v, %k) to (4, 20, 12) [parallel, parallel, reduction] init(%acc = %0 : f32) -> tensor<4x20xf32> {
    %a = loop.read %x[%l, %k] : tensor<4x12xf32>
    %b = loop.read %w[%k, %v] : tensor<12x20xf32>
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    loop.yield %s : f32
  }
  func.return %logits : tensor<4x20xf32>
}
