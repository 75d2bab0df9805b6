// RUN: not plmr-opt %s -p 'convert-loop-to-tile{tile-sizes=2,4}' 2>&1 | filecheck %s --check-prefix=PAST
// RUN: xdsl-opt %s -p 'convert-loop-to-tile{tile-sizes=2,4}' --verify-diagnostics 2>&1 | filecheck %s --check-prefix=DIAG
// RUN: not plmr-opt %s -p 'convert-tile-to-mesh{grid=0,0}' 2>&1 | filecheck %s --check-prefix=OPTION
// RUN: xdsl-opt %s -p 'plmr-compile{grid=0,0}' --verify-diagnostics 2>&1 | filecheck %s --check-prefix=COMPILE

// An unpadded read one column past the end of %x (indices 1..8 of a dimension of 8).
// PAST: plmr-opt: error: convert-loop-to-tile: the loop.read of the nest computing %e of tensor<4x8xf32> reads indices 1..8 of dimension 1 (size 8): past the end of its tensor; fix the index or give the read a padding value
// PAST-NOT: Traceback
// DIAG: convert-loop-to-tile: the loop.read of the nest computing %e of tensor<4x8xf32> reads indices 1..8 of dimension 1 (size 8)
// DIAG-NOT: Traceback
// OPTION: plmr-opt: error: convert-tile-to-mesh: grid must be two positive sizes ROWS,COLS, got [0, 0]
// COMPILE: plmr-compile: grid must be two positive sizes ROWS,COLS, got [0, 0]
// COMPILE-NOT: Traceback

func.func @main(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = loop.nest (%i, %j) to (4, 8) [parallel, parallel] -> tensor<4x8xf32> {
    %c1 = arith.constant 1 : index
    %j1 = arith.addi %j, %c1 : index
    %a = loop.read %x[%i, %j1] : tensor<4x8xf32>
    %b = math.exp %a : f32
    loop.yield %b : f32
  }
  func.return %e : tensor<4x8xf32>
}
