// RUN: plmr-opt %s -p 'convert-loop-to-tile{tile-sizes=8,8 fit=true fit-grid=3,3}' | filecheck %s --check-prefix=WHOLE
// RUN: plmr-opt %s -p 'convert-loop-to-tile{tile-sizes=8,8 fit=true fit-grid=3,3 spread=true}' | filecheck %s --check-prefix=SPREAD
// RUN: plmr-opt %s -p 'convert-loop-to-tile{tile-sizes=8,8 fit=true fit-grid=4,4 spread=true}' | filecheck %s --check-prefix=EVEN

// An LM head, logits[L, V] = x[L, K]·W[K, V] (L = 8 rows, K = 64, V = 128), on 3x3 PEs:
// no axis divides V or K in blocks of up to 8, so both are kept whole (one block, the
// whole 32 KiB W on a PE). With `spread`, a dimension at least as long as an axis is cut
// in the largest blocks whose count splits over the axis as the padded layout does
// (ceil(extent / 3) elements per PE): V in blocks of 1 (43 per PE), K in blocks of 2
// (22 per PE). L is shorter than 8 blocks: unchanged. Where an axis divides the
// dimension (4x4), `spread` changes nothing.

// WHOLE-LABEL: func.func @lm_head
// WHOLE:       tile.for %{{.*}} = 0 to 8 step 8 {{.*}} parallel
// WHOLE:         tile.for %{{.*}} = 0 to 128 step 128 {{.*}} parallel
// WHOLE:           tile.for %{{.*}} = 0 to 64 step 64 {{.*}} reduction
// WHOLE:             tile.load %w[{{.*}}] : tensor<64x128xf32> -> tensor<64x128xf32>

// SPREAD-LABEL: func.func @lm_head
// SPREAD:       tile.for %{{.*}} = 0 to 8 step 8 {{.*}} parallel
// SPREAD:         tile.for %{{.*}} = 0 to 128 step 1 {{.*}} parallel
// SPREAD:           tile.for %{{.*}} = 0 to 64 step 2 {{.*}} reduction
// SPREAD:             tile.load %w[{{.*}}] : tensor<64x128xf32> -> tensor<2x1xf32>

// EVEN-LABEL: func.func @lm_head
// EVEN:       tile.for %{{.*}} = 0 to 8 step 8 {{.*}} parallel
// EVEN:         tile.for %{{.*}} = 0 to 128 step 8 {{.*}} parallel
// EVEN:           tile.for %{{.*}} = 0 to 64 step 8 {{.*}} reduction
// EVEN:             tile.load %w[{{.*}}] : tensor<64x128xf32> -> tensor<8x8xf32>

func.func @lm_head(%x: tensor<8x64xf32>, %w: tensor<64x128xf32>) -> tensor<8x128xf32> {
  %0 = arith.constant 0.000000e+00 : f32
  %logits = loop.nest (%l, %v, %k) to (8, 128, 64) [parallel, parallel, reduction] init(%acc = %0 : f32) -> tensor<8x128xf32> {
    %a = loop.read %x[%l, %k] : tensor<8x64xf32>
    %b = loop.read %w[%k, %v] : tensor<64x128xf32>
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    loop.yield %s : f32
  }
  func.return %logits : tensor<8x128xf32>
}
