// RUN: plmr-opt %s -p 'convert-loop-to-tile{tile-sizes=8,16}' --split-input-file | filecheck %s
// RUN: not plmr-opt %s -p 'convert-loop-to-tile{tile-sizes=6,16}' --split-input-file 2>&1 | filecheck %s --check-prefix=ERROR

// A matmul nest: both output dimensions are blocked by 8 (each reuses the other
// operand), the reduction by 16; the product over the block is a tile.dot.

// CHECK-LABEL: func.func @matmul
// CHECK:       %[[OUT:.*]] = tensor.empty() : tensor<16x32xf32>
// CHECK:       %c = tile.for %i0 = 0 to 16 step 8 iter_args(%{{.*}} = %[[OUT]]) -> (tensor<16x32xf32>) parallel {
// CHECK:         tile.for %i1 = 0 to 32 step 8 iter_args
// CHECK:           %[[Z:.*]] = tile.fill 0.000000e+00 : tensor<8x8xf32>
// CHECK:           %[[ACC:.*]] = tile.for %i2 = 0 to 64 step 16 iter_args(%[[A:.*]] = %[[Z]]) -> (tensor<8x8xf32>) reduction {
// CHECK-NEXT:        %[[L:.*]] = tile.load %a[%i0, %i2] : tensor<16x64xf32> -> tensor<8x16xf32>
// CHECK-NEXT:        %[[R:.*]] = tile.load %b[%i2, %i1] : tensor<64x32xf32> -> tensor<16x8xf32>
// CHECK-NEXT:        %[[D:.*]] = tile.dot %[[L]], %[[R]] : (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
// CHECK-NEXT:        %[[N:.*]] = tile.map add %[[A]], %[[D]] : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
// CHECK-NEXT:        tile.yield %[[N]] : tensor<8x8xf32>
// CHECK:           tile.store %[[ACC]], %{{.*}}[%i0, %i1] : tensor<8x8xf32> -> tensor<16x32xf32>

// ERROR: plmr-opt: error: convert-loop-to-tile: tile size 6 does not divide the extent 16 of dimension %i0 of the nest computing %c
func.func @matmul(%a: tensor<16x64xf32>, %b: tensor<64x32xf32>) -> tensor<16x32xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %c = loop.nest (%i0, %i1, %i2) to (16, 32, 64) [parallel, parallel, reduction] init(%acc = %zero : f32) -> tensor<16x32xf32> {
    %x = loop.read %a[%i0, %i2] : tensor<16x64xf32>
    %y = loop.read %b[%i2, %i1] : tensor<64x32xf32>
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %acc, %p : f32
    loop.yield %s : f32
  }
  func.return %c : tensor<16x32xf32>
}

// -----

// A fused attention nest (rolling update) becomes FlashAttention: per block of 8 query
// rows, the query block is loaded once, a reduction tile.for over blocks of 16 keys
// carries m, l and acc, and the division is the epilogue before the only store.

// CHECK-LABEL: func.func @flash
// CHECK:       %o = tile.for %i = 0 to 16 step 8 iter_args(%{{.*}}) -> (tensor<16x32xf32>) parallel {
// CHECK:         %[[Q:.*]] = tile.load %q[%i, %{{.*}}] : tensor<16x32xf32> -> tensor<8x32xf32>
// CHECK:         %{{.*}}, %{{.*}}, %{{.*}} = tile.for %j = 0 to 64 step 16 iter_args(%[[M:.*]] = %{{.*}}, %[[L:.*]] = %{{.*}}, %[[ACC:.*]] = %{{.*}}) -> (tensor<8xf32>, tensor<8xf32>, tensor<8x32xf32>) reduction {
// CHECK:           %[[K:.*]] = tile.load %k[%j, %{{.*}}] : tensor<64x32xf32> -> tensor<16x32xf32>
// CHECK-NEXT:      %[[S:.*]] = tile.dot %[[Q]], %[[K]] transpose_b : (tensor<8x32xf32>, tensor<16x32xf32>) -> tensor<8x16xf32>
// CHECK:           tile.reduce max %[[S]] axis = 1 : tensor<8x16xf32> -> tensor<8x1xf32>
// CHECK:           %[[MN:.*]] = tile.map max %[[M]], %{{.*}} : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
// CHECK:           %[[P:.*]] = tile.map exp %{{.*}} : (tensor<8x16xf32>) -> tensor<8x16xf32>
// CHECK:           tile.reduce sum %[[P]] axis = 1
// CHECK:           %[[DM:.*]] = tile.map sub %[[M]], %[[MN]] : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
// CHECK-NEXT:      %[[R:.*]] = tile.map exp %[[DM]] : (tensor<8xf32>) -> tensor<8xf32>
// CHECK-NEXT:      %{{.*}} = tile.map mul %[[L]], %[[R]] : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
// CHECK:           %[[V:.*]] = tile.load %v[%j, %{{.*}}] : tensor<64x32xf32> -> tensor<16x32xf32>
// CHECK-NEXT:      %[[PV:.*]] = tile.dot %[[P]], %[[V]] : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
// CHECK:           tile.map mul %[[ACC]], %{{.*}} : (tensor<8x32xf32>, tensor<8x1xf32>) -> tensor<8x32xf32>
// CHECK:           tile.yield
// CHECK:         tile.map div %{{.*}}, %{{.*}} : (tensor<8x32xf32>, tensor<8x1xf32>) -> tensor<8x32xf32>
// CHECK:         %{{.*}} = tile.store %{{.*}}, %{{.*}}[%i, %{{.*}}] : tensor<8x32xf32> -> tensor<16x32xf32>
// CHECK-NOT:   tile.store
// CHECK:       func.return %o
func.func @flash(%q: tensor<16x32xf32>, %k: tensor<64x32xf32>, %v: tensor<64x32xf32>) -> tensor<16x32xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %lo = arith.constant -3.40282347e+38 : f32
  %zeros = arith.constant dense<0.000000e+00> : tensor<32xf32>
  %m, %l, %acc = loop.nest (%i, %j) to (16, 64) [parallel, reduction] init(%m0 = %lo : f32, %l0 = %zero : f32, %a0 = %zeros : tensor<32xf32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16x32xf32>) {
    %s = loop.nest (%d) to (32) [reduction] init(%t = %zero : f32) -> f32 {
      %x = loop.read %q[%i, %d] : tensor<16x32xf32>
      %y = loop.read %k[%j, %d] : tensor<64x32xf32>
      %xy = arith.mulf %x, %y : f32
      %t2 = arith.addf %t, %xy : f32
      loop.yield %t2 : f32
    }
    %mn = arith.maximumf %m0, %s : f32
    %sd = arith.subf %s, %mn : f32
    %p = math.exp %sd : f32
    %md = arith.subf %m0, %mn : f32
    %r = math.exp %md : f32
    %lr = arith.mulf %l0, %r : f32
    %ln = arith.addf %lr, %p : f32
    %an = loop.nest (%e) to (32) [parallel] -> tensor<32xf32> {
      %w = loop.read %v[%j, %e] : tensor<64x32xf32>
      %pw = arith.mulf %w, %p : f32
      %old = loop.read %a0[%e] : tensor<32xf32>
      %ar = arith.mulf %old, %r : f32
      %new = arith.addf %ar, %pw : f32
      loop.yield %new : f32
    }
    loop.yield %mn, %ln, %an : f32, f32, tensor<32xf32>
  }
  %o = loop.nest (%i, %e) to (16, 32) [parallel, parallel] -> tensor<16x32xf32> {
    %lv = loop.read %l[%i] : tensor<16xf32>
    %av = loop.read %acc[%i, %e] : tensor<16x32xf32>
    %ov = arith.divf %av, %lv : f32
    loop.yield %ov : f32
  }
  func.return %o : tensor<16x32xf32>
}

// -----

// An index the blocker cannot express (data-dependent) keeps the nest at the loop level.

// CHECK-LABEL: func.func @gather
// CHECK:       loop.nest
// CHECK:       } {loop.remark = "convert-loop-to-tile: left at the loop level: it reads tensor<16xf32> at indices it cannot block"}
func.func @gather(%data: tensor<16xf32>, %idx: tensor<8xi64>) -> tensor<8xf32> {
  %g = loop.nest (%i) to (8) [parallel] -> tensor<8xf32> {
    %raw = loop.read %idx[%i] : tensor<8xi64>
    %j = arith.index_cast %raw : i64 to index
    %x = loop.read %data[%j] : tensor<16xf32>
    loop.yield %x : f32
  }
  func.return %g : tensor<8xf32>
}
