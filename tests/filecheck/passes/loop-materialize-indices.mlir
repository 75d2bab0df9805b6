// RUN: plmr-opt %s -p loop-materialize-indices --split-input-file | filecheck %s
// RUN: plmr-opt %s -p 'loop-materialize-indices,convert-loop-to-tile{tile-sizes=4,4 fit=true}' --split-input-file | filecheck %s --check-prefix=TILE

// A concatenation of computed values selects on `j < 6`: the index is read from a
// constant [0, ..., 8] and compared as an i64; the reads at `j` and `j - 6` stay indices.

// CHECK-LABEL: func.func @concat
// CHECK-NEXT:    %iota9 = arith.constant dense<[0, 1, 2, 3, 4, 5, 6, 7, 8]> : tensor<9xi64>
// CHECK:         loop.nest (%i, %j) to (4, 9)
// CHECK:           %[[J:.*]] = loop.read %iota9[%j] : tensor<9xi64>
// CHECK-NEXT:      %[[C6:.*]] = arith.constant 6 : i64
// CHECK-NEXT:      %lt = arith.cmpi slt, %[[J]], %[[C6]] : i64
// CHECK:           loop.read %a[%i, %j] padding
// CHECK:           %k = arith.subi %j, %c6 : index
// CHECK:           loop.read %b[%i, %k] padding
// CHECK:           arith.select %lt

// The blocker loads blocks of the constant like any tensor and compares them in a map.

// TILE-LABEL: func.func @concat
// TILE:         %iota9 = arith.constant dense<[0, 1, 2, 3, 4, 5, 6, 7, 8]> : tensor<9xi64>
// TILE:         tile.for %j = 0 to 9 step
// TILE:           tile.load %iota9[%j]
// TILE:           tile.map
// TILE:             arith.cmpi slt, %{{.*}}, %{{.*}} : i64
// TILE-NOT:     loop.nest
func.func @concat(%a: tensor<4x6xf32>, %b: tensor<4x3xf32>) -> tensor<4x9xf32> {
  %y = loop.nest (%i, %j) to (4, 9) [parallel, parallel] -> tensor<4x9xf32> {
    %c6 = arith.constant 6 : index
    %lt = arith.cmpi slt, %j, %c6 : index
    %x = loop.read %a[%i, %j] padding 0.0 : tensor<4x6xf32>
    %k = arith.subi %j, %c6 : index
    %z = loop.read %b[%i, %k] padding 0.0 : tensor<4x3xf32>
    %v = arith.select %lt, %x, %z : f32
    loop.yield %v : f32
  }
  func.return %y : tensor<4x9xf32>
}

// -----

// A causal mask with an offset (`j <= i + 2`): both indices are read, one constant per
// extent, and the sum is redone in i64.

// CHECK-LABEL: func.func @causal
// CHECK-DAG:     %iota8 = arith.constant dense<[0, 1, 2, 3, 4, 5, 6, 7]> : tensor<8xi64>
// CHECK-DAG:     %iota4 = arith.constant dense<[0, 1, 2, 3]> : tensor<4xi64>
// CHECK:         loop.nest (%i, %j) to (4, 8)
// CHECK:           %[[J:.*]] = loop.read %iota8[%j] : tensor<8xi64>
// CHECK-NEXT:      %[[I:.*]] = loop.read %iota4[%i] : tensor<4xi64>
// CHECK-NEXT:      %[[C2:.*]] = arith.constant 2 : i64
// CHECK-NEXT:      %[[S:.*]] = arith.addi %[[I]], %[[C2]] : i64
// CHECK-NEXT:      %ok = arith.cmpi sle, %[[J]], %[[S]] : i64

// TILE-LABEL: func.func @causal
// TILE-NOT:     loop.nest
func.func @causal(%s: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %y = loop.nest (%i, %j) to (4, 8) [parallel, parallel] -> tensor<4x8xf32> {
    %c2 = arith.constant 2 : index
    %lim = arith.addi %i, %c2 : index
    %ok = arith.cmpi sle, %j, %lim : index
    %x = loop.read %s[%i, %j] : tensor<4x8xf32>
    %ninf = arith.constant -3.40282347E+38 : f32
    %v = arith.select %ok, %x, %ninf : f32
    loop.yield %v : f32
  }
  func.return %y : tensor<4x8xf32>
}

// -----

// An index cast to an integer is the i64 value (truncated to i32); the float of a
// position (a `Range` of run-time values) follows.

// CHECK-LABEL: func.func @positions
// CHECK:         %[[P:.*]] = loop.read %iota16[%k] : tensor<16xi64>
// CHECK-NOT:     arith.index_cast
// CHECK:         %[[T:.*]] = arith.trunci %[[P]] : i64 to i32
// CHECK-NEXT:    arith.sitofp %[[T]] : i32 to f32

// TILE-LABEL: func.func @positions
// TILE:         tile.load %iota16
// TILE-NOT:     loop.nest
func.func @positions(%w: tensor<16xf32>) -> tensor<16xf32> {
  %y = loop.nest (%k) to (16) [parallel] -> tensor<16xf32> {
    %n = arith.index_cast %k : index to i32
    %f = arith.sitofp %n : i32 to f32
    %x = loop.read %w[%k] : tensor<16xf32>
    %v = arith.mulf %f, %x : f32
    loop.yield %v : f32
  }
  func.return %y : tensor<16xf32>
}

// -----

// An index computed from data (a gather's `index_cast` of a loaded value) is not a loop
// index: it stays as it is.

// CHECK-LABEL: func.func @gathered
// CHECK-NOT:     iota
// CHECK:         %[[K:.*]] = arith.index_cast %{{.*}} : i64 to index
// CHECK:         loop.read %t[%[[K]], %j]

// TILE-LABEL: func.func @gathered
func.func @gathered(%t: tensor<8x4xf32>, %ids: tensor<2xi64>) -> tensor<2x4xf32> {
  %y = loop.nest (%i, %j) to (2, 4) [parallel, parallel] -> tensor<2x4xf32> {
    %id = loop.read %ids[%i] : tensor<2xi64>
    %k = arith.index_cast %id : i64 to index
    %v = loop.read %t[%k, %j] : tensor<8x4xf32>
    loop.yield %v : f32
  }
  func.return %y : tensor<2x4xf32>
}
