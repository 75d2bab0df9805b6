// RUN: plmr-opt %s -p 'convert-loop-to-tile{tile-sizes=4,4}' --split-input-file | filecheck %s

// A padded read whose indices are a shift of a nested dimension (`n - 8`: the second
// part of a concatenation, the features partial rotary embeddings pass through) and a
// computed index of a top-level one (`i / 2`: a KV head of grouped-query attention):
// only the computed index is a block of one element; the shifted one is a padded window
// of the whole nested dimension, loaded from before the tensor's start.

// CHECK-LABEL: func.func @shifted_nested(
// CHECK-NOT:   loop.remark
// CHECK:       tile.for %i = 0 to 4 step 1 {{.*}} parallel {
// CHECK:         %[[H:.*]] = arith.divui %i, %{{.*}} : index
// CHECK-NEXT:    %[[M:.*]] = arith.constant -8 : index
// CHECK-NEXT:    %{{.*}} = tile.load %x[%[[H]], %[[M]]] padding 0.000000e+00 : tensor<2x8xf32> -> tensor<1x16xf32>
// CHECK:         %{{.*}} = tile.load %y[%i, %{{.*}}] : tensor<4x16xf32> -> tensor<1x16xf32>
// CHECK:         %{{.*}} = tile.dot %{{.*}}, %{{.*}} : (tensor<1x16xf32>, tensor<16x1xf32>) -> tensor<1x1xf32>
// CHECK-NOT:   loop.nest
func.func @shifted_nested(%x: tensor<2x8xf32>, %y: tensor<4x16xf32>) -> tensor<4xf32> {
  %z = arith.constant 0.000000e+00 : f32
  %r = loop.nest (%i) to (4) [parallel] -> tensor<4xf32> {
    %s = loop.nest (%n) to (16) [reduction] init(%acc = %z : f32) -> f32 {
      %c2 = arith.constant 2 : index
      %c8 = arith.constant 8 : index
      %h = arith.divui %i, %c2 : index
      %m = arith.subi %n, %c8 : index
      %a = loop.read %x[%h, %m] padding 0.000000e+00 : tensor<2x8xf32>
      %b = loop.read %y[%i, %n] : tensor<4x16xf32>
      %p = arith.mulf %a, %b : f32
      %t = arith.addf %acc, %p : f32
      loop.yield %t : f32
    }
    loop.yield %s : f32
  }
  func.return %r : tensor<4xf32>
}

// -----

// A rank-0 map (`graph.floor` of a scalar) is a nest with one reduction dimension of one
// element whose body ignores the accumulator: the body runs once, so the yield is a map
// of the initial value and the loaded scalar, not a combine `acc ⊕ g`.

// CHECK-LABEL: func.func @rank0_map(
// CHECK-NOT:   loop.remark
// CHECK:         %[[X:.*]] = tile.load %x[] : tensor<f32> -> tensor<f32>
// CHECK-NEXT:    %[[F:.*]] = tile.map %[[X]] : (tensor<f32>) -> tensor<f32> {
// CHECK-NEXT:    ^{{.*}}(%[[E:.*]]: f32):
// CHECK-NEXT:      %[[R:.*]] = math.floor %[[E]] : f32
// CHECK-NEXT:      tile.yield %[[R]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    %{{.*}} = tile.store %[[F]], %{{.*}}[] : tensor<f32> -> tensor<f32>
// CHECK-NOT:   loop.nest
func.func @rank0_map(%x: tensor<f32>) -> tensor<f32> {
  %z = arith.constant 0.000000e+00 : f32
  %r = loop.nest (%i) to (1) [reduction] init(%acc = %z : f32) -> tensor<f32> {
    %a = loop.read %x[] : tensor<f32>
    %f = math.floor %a : f32
    loop.yield %f : f32
  }
  func.return %r : tensor<f32>
}

// -----

// Over reduction dimensions of one element, a yield that reads the accumulator other
// than as `acc ⊕ g` is a map of the initial value too.

// CHECK-LABEL: func.func @unit_reduction_of_acc(
// CHECK-NOT:   loop.remark
// CHECK:       tile.for %i = 0 to 8 step 4
// CHECK:         %[[INIT:.*]] = tile.fill 2.000000e+00 : tensor<4xf32>
// CHECK:         %[[X:.*]] = tile.load %x[%i, %{{.*}}] : tensor<8x1xf32> -> tensor<4x1xf32>
// CHECK:         %[[XS:.*]] = tile.reshape %[[X]] : tensor<4x1xf32> -> tensor<4xf32>
// CHECK-NEXT:    %[[P:.*]] = tile.map mul %[[INIT]], %[[XS]] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-NEXT:    %{{.*}} = tile.map exp %[[P]] : (tensor<4xf32>) -> tensor<4xf32>
// CHECK-NOT:   loop.nest
func.func @unit_reduction_of_acc(%x: tensor<8x1xf32>) -> tensor<8xf32> {
  %two = arith.constant 2.000000e+00 : f32
  %r = loop.nest (%i, %k) to (8, 1) [parallel, reduction] init(%acc = %two : f32) -> tensor<8xf32> {
    %a = loop.read %x[%i, %k] : tensor<8x1xf32>
    %p = arith.mulf %acc, %a : f32
    %e = math.exp %p : f32
    loop.yield %e : f32
  }
  func.return %r : tensor<8xf32>
}

// -----

// A nest without loops (every dimension one element, a reflect pad sliced to one
// element): the offsets of its loads are known at compile time and are constants, not
// index arithmetic at the function's top.

// CHECK-LABEL: func.func @offsets_fold(
// CHECK-NOT:   arith.minsi
// CHECK-NOT:   arith.maxsi
// CHECK-NOT:   arith.subi
// CHECK:         %[[R:.*]] = arith.constant 1 : index
// CHECK-NEXT:    %[[C:.*]] = arith.constant 0 : index
// CHECK-NEXT:    %{{.*}} = tile.load %x[%[[R]], %[[C]]] : tensor<3x2xf32> -> tensor<1x1xf32>
// CHECK-NOT:   loop.nest
func.func @offsets_fold(%x: tensor<3x2xf32>) -> tensor<1x1xf32> {
  %r = loop.nest (%i0, %i1) to (1, 1) [parallel, parallel] -> tensor<1x1xf32> {
    %c2 = arith.constant 2 : index
    %c0 = arith.constant 0 : index
    %col = arith.minsi %c2, %c0 : index
    %c3 = arith.constant 3 : index
    %cm3 = arith.constant -3 : index
    %m = arith.maxsi %c3, %cm3 : index
    %c4 = arith.constant 4 : index
    %n = arith.subi %c4, %m : index
    %row = arith.minsi %m, %n : index
    %a = loop.read %x[%row, %col] : tensor<3x2xf32>
    loop.yield %a : f32
  }
  func.return %r : tensor<1x1xf32>
}

// -----

// A reduction over the heads' concatenated columns (an attention's output projection
// fused with the heads' normalisation, `k = h·8 + c` over 2 KV heads of 2 query heads
// each): the per-head sum is read at `k / 16` and `(k / 8) % 2`, the head's output at
// `k % 8` too. Blocks of 4 start at multiples of 4, which divides 8 and 16, so within a
// block the head is one and the column runs along the block: `k` is blocked (4 columns
// of the output and one sum, both loaded at the block's start), not cut into blocks of
// one element.

// CHECK-LABEL: func.func @head_digits(
// CHECK-NOT:   loop.remark
// CHECK:         tile.for %k = 0 to 32 step 4 {{.*}} reduction {
// CHECK:           %[[G:.*]] = arith.divui %k, %{{.*}} : index
// CHECK:           %[[D:.*]] = arith.divui %k, %{{.*}} : index
// CHECK:           %[[H:.*]] = arith.remui %[[D]], %{{.*}} : index
// CHECK:           %[[C:.*]] = arith.remui %k, %{{.*}} : index
// CHECK-NEXT:      %[[O:.*]] = tile.load %o[%[[G]], %[[H]], %[[C]]] : tensor<2x2x8xf32> -> tensor<1x1x4xf32>
// CHECK:           %[[S:.*]] = tile.load %s[%{{.*}}, %{{.*}}] : tensor<2x2xf32> -> tensor<1x1xf32>
// CHECK:           %{{.*}} = tile.map div %{{.*}}, %{{.*}} : (tensor<4xf32>, tensor<1xf32>) -> tensor<4xf32>
// CHECK-NEXT:      %{{.*}} = tile.load %w[%k, %j] : tensor<32x8xf32> -> tensor<4x4xf32>
// CHECK:           %{{.*}} = tile.dot %{{.*}}, %{{.*}} : (tensor<1x4xf32>, tensor<4x4xf32>) -> tensor<1x4xf32>
// CHECK-NOT:   loop.nest
func.func @head_digits(%s: tensor<2x2xf32>, %o: tensor<2x2x8xf32>, %w: tensor<32x8xf32>) -> tensor<8xf32> {
  %z = arith.constant 0.000000e+00 : f32
  %r = loop.nest (%j, %k) to (8, 32) [parallel, reduction] init(%acc = %z : f32) -> tensor<8xf32> {
    %c16 = arith.constant 16 : index
    %g = arith.divui %k, %c16 : index
    %c8 = arith.constant 8 : index
    %d = arith.divui %k, %c8 : index
    %c2 = arith.constant 2 : index
    %h = arith.remui %d, %c2 : index
    %sum = loop.read %s[%g, %h] : tensor<2x2xf32>
    %c = arith.remui %k, %c8 : index
    %x = loop.read %o[%g, %h, %c] : tensor<2x2x8xf32>
    %n = arith.divf %x, %sum : f32
    %wt = loop.read %w[%k, %j] : tensor<32x8xf32>
    %p = arith.mulf %n, %wt : f32
    %t = arith.addf %acc, %p : f32
    loop.yield %t : f32
  }
  func.return %r : tensor<8xf32>
}
