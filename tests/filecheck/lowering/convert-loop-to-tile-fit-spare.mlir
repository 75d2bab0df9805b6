// RUN: plmr-opt %s -p 'convert-loop-to-tile{tile-sizes=9,9 fit=true fit-grid=480,480}' | filecheck %s
// RUN: plmr-opt %s -p 'convert-loop-to-tile{tile-sizes=9,9 fit=true fit-grid=240,480}' | filecheck %s
// RUN: plmr-opt %s -p 'convert-loop-to-tile{tile-sizes=9,9 fit=true fit-grid=480,1}' | filecheck %s --check-prefix=ONE

// One head's projection in prefill, q[L, hd] = x[L, K]·W[K, hd] (L = K = 960 = 480 · 2,
// hd = 128), and its output projection o[L, N] = a[L, hd]·Wo[hd, N]: L and K (or L and
// N) split evenly over the two axes, so the mapping takes them and the head dimension
// stays on every PE: it is kept whole (one block of 128, one product and one
// allreduce) instead of 128 blocks of 1 spread for an axis it will not get. With one
// axis only, the head dimension may take it: blocks of 1.

// CHECK-LABEL: func.func @proj
// CHECK:       tile.for %{{.*}} = 0 to 960 step {{[24]}} {{.*}} parallel
// CHECK:         tile.for %{{.*}} = 0 to 128 step 128 {{.*}} parallel
// CHECK:           tile.for %{{.*}} = 0 to 960 step {{[24]}} {{.*}} reduction
// CHECK:             tile.load %w[{{.*}}] : tensor<960x128xf32> -> tensor<{{[24]}}x128xf32>
// CHECK-LABEL: func.func @out
// CHECK:       tile.for %{{.*}} = 0 to 128 step 128 {{.*}} reduction
// CHECK:         tile.load %wo[{{.*}}] : tensor<128x960xf32> -> tensor<128x{{[24]}}xf32>

// ONE-LABEL: func.func @proj
// ONE:         tile.for %{{.*}} = 0 to 128 step 1 {{.*}} parallel

func.func @proj(%x: tensor<960x960xf32>, %w: tensor<960x128xf32>) -> tensor<960x128xf32> {
  %0 = arith.constant 0.000000e+00 : f32
  %q = loop.nest (%l, %d, %k) to (960, 128, 960) [parallel, parallel, reduction] init(%acc = %0 : f32) -> tensor<960x128xf32> {
    %a = loop.read %x[%l, %k] : tensor<960x960xf32>
    %b = loop.read %w[%k, %d] : tensor<960x128xf32>
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    loop.yield %s : f32
  }
  func.return %q : tensor<960x128xf32>
}

func.func @out(%a: tensor<960x128xf32>, %wo: tensor<128x960xf32>) -> tensor<960x960xf32> {
  %0 = arith.constant 0.000000e+00 : f32
  %o = loop.nest (%l, %n, %d) to (960, 960, 128) [parallel, parallel, reduction] init(%acc = %0 : f32) -> tensor<960x960xf32> {
    %x = loop.read %a[%l, %d] : tensor<960x128xf32>
    %y = loop.read %wo[%d, %n] : tensor<128x960xf32>
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    loop.yield %s : f32
  }
  func.return %o : tensor<960x960xf32>
}
