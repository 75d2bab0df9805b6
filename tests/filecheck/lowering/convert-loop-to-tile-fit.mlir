// RUN: plmr-opt %s -p 'convert-loop-to-tile{tile-sizes=5,5 fit=true fit-grid=420,420}' | filecheck %s
// RUN: plmr-opt %s -p 'convert-loop-to-tile{tile-sizes=5,5 fit=true fit-grid=1100,1100}' | filecheck %s --check-prefix=WIDE
// RUN: plmr-opt %s -p 'convert-loop-to-tile{tile-sizes=5,5 fit=true fit-grid=4,4}' | filecheck %s --check-prefix=SMALL
// RUN: plmr-opt %s -p 'convert-loop-to-tile{tile-sizes=5,5 fit=true}' | filecheck %s --check-prefix=NOGRID
// RUN: not plmr-opt %s -p 'convert-loop-to-tile{tile-sizes=5,5 fit=true fit-grid=0,4}' 2>&1 | filecheck %s --check-prefix=ERROR

// A GEMV y = x·W whose product is written W·x (the vector on the right): the vector
// goes on the left of the tile.dot, one row of instructions as wide as the block.
// With fit and the grid: the reduction (4200 = 420 · 2 · 5) keeps blocks of 5, whose
// count 420 divides; the output (128) has no divisor <= 5 that an axis of 420 can
// split, and it is shorter than the axis but more than an eighth of it, so it is split
// in blocks of 1 (one element on each of 128 PEs). On 1100 PEs, 128 is less than an
// eighth of an axis: one block (one allreduce, not 32; the reduction takes blocks of 4,
// whose count 1,050 an axis of 1,100 does not divide either). On a 4x4 grid blocks of 4
// split evenly; without a grid, fit only takes the largest divisor.
//
// In @heads (the K projection of 8 KV heads, head dimension 128), the heads are not
// blocked by the sizes (the weights depend on them); on 420 PEs no axis divides 8 and
// 8 heads would occupy less than an eighth of an axis, so they are one block: the
// tile.dot takes all heads at once, the head dimension is split in blocks of 1.

// CHECK-LABEL: func.func @gemv
// CHECK:       tile.for %{{.*}} = 0 to 128 step 1 {{.*}} parallel
// CHECK:         tile.for %{{.*}} = 0 to 4200 step 5 {{.*}} reduction
// CHECK-DAG:       %[[W:.*]] = tile.load %w[{{.*}}] : tensor<4200x128xf32> -> tensor<5x1xf32>
// CHECK-DAG:       tile.load %x[{{.*}}] : tensor<1x4200xf32> -> tensor<1x5xf32>
// CHECK:           tile.dot %{{.*}}, %{{.*}} : (tensor<1x5xf32>, tensor<5x1xf32>) -> tensor<1x1xf32>

// CHECK-LABEL: func.func @heads
// CHECK:       tile.for %{{.*}} = 0 to 8 step 8 {{.*}} parallel
// CHECK:         tile.for %{{.*}} = 0 to 128 step 1 {{.*}} parallel
// CHECK:           tile.for %{{.*}} = 0 to 4200 step 5 {{.*}} reduction
// CHECK-DAG:         tile.load %w[{{.*}}] : tensor<8x4200x128xf32> -> tensor<8x5x1xf32>
// CHECK:             tile.dot {{.*}} -> tensor<1x8xf32>

// WIDE-LABEL:  func.func @gemv
// WIDE:        tile.for %{{.*}} = 0 to 128 step 128 {{.*}} parallel
// WIDE:          tile.for %{{.*}} = 0 to 4200 step 4 {{.*}} reduction
// WIDE:            tile.dot %{{.*}}, %{{.*}} : (tensor<1x4xf32>, tensor<4x128xf32>) -> tensor<1x128xf32>

// SMALL:       tile.for %{{.*}} = 0 to 128 step 4 {{.*}} parallel
// SMALL:         tile.for %{{.*}} = 0 to 4200 step 5 {{.*}} reduction
// SMALL-LABEL: func.func @heads
// SMALL:       tile.for %{{.*}} = 0 to 8 step 1 {{.*}} parallel

// NOGRID:      tile.for %{{.*}} = 0 to 128 step 4 {{.*}} parallel

// ERROR: fit-grid sizes must be positive, got [0, 4]
func.func @gemv(%x: tensor<1x4200xf32>, %w: tensor<4200x128xf32>) -> tensor<1x128xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %y = loop.nest (%i, %j, %k) to (1, 128, 4200) [parallel, parallel, reduction] init(%acc = %zero : f32) -> tensor<1x128xf32> {
    %a = loop.read %w[%k, %j] : tensor<4200x128xf32>
    %b = loop.read %x[%i, %k] : tensor<1x4200xf32>
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    loop.yield %s : f32
  }
  func.return %y : tensor<1x128xf32>
}

func.func @heads(%x: tensor<1x4200xf32>, %w: tensor<8x4200x128xf32>) -> tensor<8x1x128xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %y = loop.nest (%h, %i, %j, %k) to (8, 1, 128, 4200) [parallel, parallel, parallel, reduction] init(%acc = %zero : f32) -> tensor<8x1x128xf32> {
    %a = loop.read %w[%h, %k, %j] : tensor<8x4200x128xf32>
    %b = loop.read %x[%i, %k] : tensor<1x4200xf32>
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    loop.yield %s : f32
  }
  func.return %y : tensor<8x1x128xf32>
}
