// RUN: plmr-opt %s -p 'convert-loop-to-tile{tile-sizes=5,5 fit=true fit-grid=420,420}' | filecheck %s
// RUN: plmr-opt %s -p 'convert-loop-to-tile{tile-sizes=5,5 fit=true fit-grid=4,4}' | filecheck %s --check-prefix=SMALL
// RUN: plmr-opt %s -p 'convert-loop-to-tile{tile-sizes=5,5 fit=true}' | filecheck %s --check-prefix=NOGRID
// RUN: not plmr-opt %s -p 'convert-loop-to-tile{tile-sizes=5,5 fit=true fit-grid=0,4}' 2>&1 | filecheck %s --check-prefix=ERROR

// A GEMV y = x·W whose product is written W·x (the vector on the right): the vector
// goes on the left of the tile.dot, one row of instructions as wide as the block.
// With fit and the grid: the reduction (4200 = 420 · 2 · 5) keeps blocks of 5, whose
// count 420 divides; the output (128) has no divisor <= 5 that an axis of 420 can
// split, so it is one block (one allreduce, not 32). On a 4x4 grid blocks of 4 split
// evenly; without a grid, fit only takes the largest divisor.

// CHECK-LABEL: func.func @gemv
// CHECK:       tile.for %{{.*}} = 0 to 128 step 128 {{.*}} parallel
// CHECK:         tile.for %{{.*}} = 0 to 4200 step 5 {{.*}} reduction
// CHECK-DAG:       %[[W:.*]] = tile.load %w[{{.*}}] : tensor<4200x128xf32> -> tensor<5x128xf32>
// CHECK-DAG:       tile.load %x[{{.*}}] : tensor<1x4200xf32> -> tensor<1x5xf32>
// CHECK:           tile.dot %{{.*}}, %[[W]] : (tensor<1x5xf32>, tensor<5x128xf32>) -> tensor<1x128xf32>

// SMALL:       tile.for %{{.*}} = 0 to 128 step 4 {{.*}} parallel
// SMALL:         tile.for %{{.*}} = 0 to 4200 step 5 {{.*}} reduction

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
