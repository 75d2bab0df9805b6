// RUN: plmr-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | filecheck %s

// This is XDSL_VERIFY_DIAG plus --parsing-diagnostics: some chunks (unknown enum values
// and the last ones) are parse errors, which plain --verify-diagnostics reports as a
// failure (exit status 1) instead of printing them. There is one chunk per verifier error of every `tile` op (and a few of
// the graph shape helpers the tile verifiers share); generic syntax is used where the
// custom syntax cannot express the bad IR. Each expected message must directly follow the
// separator of its chunk's output, so that a chunk which unexpectedly verifies cannot
// borrow the diagnostic of a later chunk. tests/dialects/test_tile.py checks that this
// file reaches every `raise VerifyException` of the tile_*.py modules.

// tile.fill: blocks have static shapes.
%z = tile.fill 0.0 : tensor<?x16xf32>
// CHECK:      result must have a static shape, got tensor<?x16xf32> (plmr needs static shapes)

// -----

// tile.load / tile.store: the block has the tensor's rank, one offset per dimension, and
// fits in the tensor.
func.func @f(%a: tensor<64x64xf32>, %i: index) {
  %b = tile.load %a[%i] : tensor<64x64xf32> -> tensor<16xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: block 16 must have the rank of the tensor 64x64

// -----

// tile.lookup: integer ids, an axis of the table, the result the table's shape with the
// axis replaced by the ids'.
func.func @f(%t: tensor<16x8xf32>, %i: tensor<3xf32>) {
  %e = tile.lookup %t[%i] axis = 0 : (tensor<16x8xf32>, tensor<3xf32>) -> tensor<3x8xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: tile.lookup ids must be integers, got tensor<3xf32>

// -----

func.func @f(%t: tensor<16x8xf32>, %i: tensor<3xi64>) {
  %e = tile.lookup %t[%i] axis = 0 : (tensor<16x8xf32>, tensor<3xi64>) -> tensor<8x3xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: result type tensor<8x3xf32> does not match the inferred type tensor<3x8xf32>

// -----

func.func @f(%t: tensor<16x8xf32>, %i: tensor<3xi64>) {
  %e = tile.lookup %t[%i] axis = 2 : (tensor<16x8xf32>, tensor<3xi64>) -> tensor<3x8xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: tile.lookup axis 2 is out of range for a table of rank 2

// -----

func.func @f(%t: tensor<f32>, %i: tensor<3xi64>) {
  %e = tile.lookup %t[%i] axis = 0 : (tensor<f32>, tensor<3xi64>) -> tensor<3xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: tile.lookup needs a table of rank at least 1

// -----

func.func @f(%a: tensor<64x64xf32>, %i: index) {
  %b = tile.load %a[%i] : tensor<64x64xf32> -> tensor<16x16xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: expected 2 offsets (one per dimension), got 1

// -----

func.func @f(%a: tensor<64x64xf32>, %i: index) {
  %b = tile.load %a[%i, %i, %i] : tensor<64x64xf32> -> tensor<16x16xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: expected 2 offsets (one per dimension), got 3

// -----

// tile.load limits: one per dimension of the tensor, and a padding for what they cut.
func.func @f(%a: tensor<64x64xf32>, %i: index) {
  %b = tile.load %a[%i, %i] limits[%i] padding 0.000000e+00 : tensor<64x64xf32> -> tensor<16x16xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: expected one limit per dimension of the tensor (2), got 1

// -----

func.func @f(%a: tensor<64x64xf32>, %i: index) {
  %b = tile.load %a[%i, %i] limits[%i, %i] : tensor<64x64xf32> -> tensor<16x16xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: a load with limits needs a padding value

// -----

func.func @f(%a: tensor<64x64xf32>, %i: index) {
  %b = tile.load %a[%i, %i] : tensor<64x64xf32> -> tensor<16x128xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: block 16x128 is larger than the tensor 64x64 in dimension 1

// -----

func.func @f(%a: tensor<64x64xf32>, %i: index) {
  %b = tile.load %a[%i, %i] : tensor<64x64xf32> -> tensor<16x16xf16>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: block element type f16 differs from the tensor's f32

// -----

func.func @f(%a: tensor<64x64xf32>, %i: index) {
  %b = tile.load %a[%i, %i] : tensor<64x64xf32> -> tensor<16x?xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: result must have a static shape, got tensor<16x?xf32> (plmr needs static shapes)

// -----

func.func @f(%a: tensor<64x64xf32>, %b: tensor<16x16xi32>, %i: index) {
  %c = tile.store %b, %a[%i, %i] : tensor<16x16xi32> -> tensor<64x64xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: block element type i32 differs from the tensor's f32

// -----

func.func @f(%a: tensor<64x64xf32>, %b: tensor<2x16x16xf32>, %i: index) {
  %c = tile.store %b, %a[%i, %i] : tensor<2x16x16xf32> -> tensor<64x64xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: block 2x16x16 must have the rank of the tensor 64x64

// -----

func.func @f(%a: tensor<64x64xf32>, %b: tensor<16x16xf32>, %i: index) {
  %c = tile.store %b, %a[%i] : tensor<16x16xf32> -> tensor<64x64xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: expected 2 offsets (one per dimension), got 1

// -----

func.func @f(%a: tensor<8x64xf32>, %b: tensor<16x16xf32>, %i: index) {
  %c = tile.store %b, %a[%i, %i] : tensor<16x16xf32> -> tensor<8x64xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: block 16x16 is larger than the tensor 8x64 in dimension 0

// -----

// tile.dot
func.func @f(%a: tensor<16xf32>, %b: tensor<16x8xf32>) {
  %c = "tile.dot"(%a, %b) : (tensor<16xf32>, tensor<16x8xf32>) -> tensor<8xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: dot operands must have the same rank >= 2, got 16 and 16x8

// -----

func.func @f(%a: tensor<2x16x8xf32>, %b: tensor<8x4xf32>) {
  %c = "tile.dot"(%a, %b) : (tensor<2x16x8xf32>, tensor<8x4xf32>) -> tensor<2x16x4xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: dot operands must have the same rank >= 2, got 2x16x8 and 8x4

// -----

func.func @f(%a: tensor<2x16x8xf32>, %b: tensor<3x8x4xf32>) {
  %c = tile.dot %a, %b : (tensor<2x16x8xf32>, tensor<3x8x4xf32>) -> tensor<2x16x4xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: dot batch dimensions differ: 2 vs 3

// -----

func.func @f(%a: tensor<16x8xf32>, %b: tensor<4x32xf32>) {
  %c = tile.dot %a, %b : (tensor<16x8xf32>, tensor<4x32xf32>) -> tensor<16x32xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: dot contraction dimensions differ: 8 vs 4

// -----

func.func @f(%a: tensor<16x8xf32>, %b: tensor<8x32xf32>) {
  %c = tile.dot %a, %b transpose_a : (tensor<16x8xf32>, tensor<8x32xf32>) -> tensor<8x32xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: dot contraction dimensions differ: 16 vs 8

// -----

func.func @f(%a: tensor<16x8xf32>, %b: tensor<8x32xf16>) {
  %c = tile.dot %a, %b : (tensor<16x8xf32>, tensor<8x32xf16>) -> tensor<16x32xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: dot operands must have the same element type

// -----

func.func @f(%a: tensor<16x8xf32>, %b: tensor<8x32xf32>, %acc: tensor<32x16xf32>) {
  %c = tile.dot %a, %b, %acc : (tensor<16x8xf32>, tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<16x32xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: accumulator type tensor<32x16xf32> must be tensor<16x32xf32>

// -----

func.func @f(%a: tensor<16x8xf16>, %b: tensor<8x32xf16>, %acc: tensor<16x32xf32>) {
  %c = tile.dot %a, %b, %acc : (tensor<16x8xf16>, tensor<8x32xf16>, tensor<16x32xf32>) -> tensor<16x32xf16>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: accumulator type tensor<16x32xf32> must be tensor<16x32xf16>

// -----

func.func @f(%a: tensor<16x8xf32>, %b: tensor<32x8xf32>) {
  %c = tile.dot %a, %b transpose_b : (tensor<16x8xf32>, tensor<32x8xf32>) -> tensor<16x8xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: result type tensor<16x8xf32> does not match the inferred type tensor<16x32xf32>

// -----

// tile.reduce
func.func @f(%s: tensor<16x64xf32>) {
  %m = tile.reduce max %s axis = 1 : tensor<16x64xf32> -> tensor<16xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: result type tensor<16xf32> does not match the inferred type tensor<16x1xf32>

// -----

func.func @f(%s: tensor<16x64xf32>) {
  %m = tile.reduce sum %s axis = 0 : tensor<16x64xf32> -> tensor<16x1xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: result type tensor<16x1xf32> does not match the inferred type tensor<1x64xf32>

// -----

func.func @f(%s: tensor<16x64xf32>) {
  %m = tile.reduce min %s axis = 2 : tensor<16x64xf32> -> tensor<16x1xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: axis 2 is out of range for a tensor of rank 2 (expected -2 <= axis < 2)

// -----

func.func @f(%s: tensor<f32>) {
  %m = tile.reduce sum %s axis = 0 : tensor<f32> -> tensor<f32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: axis 0 is out of range: a rank-0 tensor has no axes

// -----

func.func @f(%s: tensor<16x64xf32>) {
  %m = "tile.reduce"(%s) <{kind = #tile<reduce_kind mean>, axis = 1 : i64}> : (tensor<16x64xf32>) -> tensor<16x1xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK:      Expected `sum`, `max`, or `min`.

// -----

// tile.map
func.func @f() {
  %r = "tile.map"() <{kind = "exp"}> ({
  }) : () -> tensor<4xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: tile.map needs at least one input

// -----

func.func @f(%x: tensor<16x64xf32>, %m: tensor<16x1xf32>) {
  %r = tile.map sub %x, %m : (tensor<16x64xf32>, tensor<16x1xf32>) -> tensor<16x1xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: result shape 16x1 is not the broadcast shape 16x64 of the inputs

// -----

func.func @f(%x: tensor<16x64xf32>, %y: tensor<16x32xf32>) {
  %r = tile.map add %x, %y : (tensor<16x64xf32>, tensor<16x32xf32>) -> tensor<16x64xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: shapes 16x64 and 16x32 are not broadcast-compatible (dimension -1: 64 vs 32)

// -----

func.func @f(%x: tensor<4xf32>) {
  %r = tile.map exp %x : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%v: f32):
    tile.yield %v : f32
  }
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: tile.map has both a kind and a body; give one

// -----

func.func @f(%x: tensor<4xf32>) {
  %r = tile.map %x : (tensor<4xf32>) -> tensor<4xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: tile.map needs a kind (e.g. exp) or a body

// -----

func.func @f(%x: tensor<4xf32>) {
  %r = tile.map exp %x, %x : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: tile.map exp takes 1 input, got 2

// -----

func.func @f(%x: tensor<4xf32>) {
  %r = tile.map add %x : (tensor<4xf32>) -> tensor<4xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: tile.map add takes 2 inputs, got 1

// -----

func.func @f(%x: tensor<4xf32>) {
  %r = tile.map softplus %x : (tensor<4xf32>) -> tensor<4xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: unknown tile.map kind 'softplus' (unary: exp, log, cos, sin, neg, abs, relu, sigmoid, tanh, erf, sqrt, rsqrt, recip, gelu, gelu_tanh, silu; binary: add, sub, mul, div, max, min)

// -----

func.func @f(%x: tensor<4xf32>) {
  %r = "tile.map"(%x) ({
  ^bb0(%v: f32):
    "tile.yield"(%v) : (f32) -> ()
  ^bb1:
    "tile.yield"(%v) : (f32) -> ()
  }) : (tensor<4xf32>) -> tensor<4xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: tile.map body must have exactly one block

// -----

func.func @f(%x: tensor<4xf32>, %y: tensor<4xf16>) {
  %r = tile.map %x, %y : (tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32> {
  ^bb0(%a: f32, %b: f32):
    tile.yield %a : f32
  }
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: tile.map body arguments ['f32', 'f32'] must be the input element types ['f32', 'f16']

// -----

func.func @f(%x: tensor<4xf32>) {
  %r = tile.map %x : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0:
    %c = arith.constant 1.0 : f32
    tile.yield %c : f32
  }
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: tile.map body arguments [] must be the input element types ['f32']

// -----

func.func @f(%x: tensor<4xf32>) {
  %r = tile.map %x : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%v: f32):
    "test.termop"() : () -> ()
  }
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: tile.map body must end with tile.yield

// -----

func.func @f(%x: tensor<4xf32>) {
  %r = tile.map %x : (tensor<4xf32>) -> tensor<4xf16> {
  ^bb0(%v: f32):
    tile.yield %v : f32
  }
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: tile.map body must yield one f16, got ['f32']

// -----

func.func @f(%x: tensor<4xf32>) {
  %r = tile.map %x : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%v: f32):
    tile.yield %v, %v : f32, f32
  }
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: tile.map body must yield one f32, got ['f32', 'f32']

// -----

// tile.yield only ends tile.map and tile.for bodies.
func.func @f(%x: tensor<4xf32>) {
  tile.yield %x : tensor<4xf32>
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: 'tile.yield' expects parent op to be one of 'tile.map', 'tile.for'

// -----

// tile.broadcast
func.func @f(%m: tensor<16x1xf32>) {
  %b = tile.broadcast %m : tensor<16x1xf32> -> tensor<16x64xf16>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: broadcast cannot change the element type

// -----

func.func @f(%m: tensor<16x2xf32>) {
  %b = tile.broadcast %m : tensor<16x2xf32> -> tensor<16x64xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: cannot broadcast 16x2 to 16x64

// -----

func.func @f(%m: tensor<16x64xf32>) {
  %b = tile.broadcast %m : tensor<16x64xf32> -> tensor<64xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: cannot broadcast 16x64 to 64

// -----

func.func @f(%m: tensor<16x64xf32>) {
  %b = tile.broadcast %m : tensor<16x64xf32> -> tensor<16x1xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: cannot broadcast 16x64 to 16x1

// -----

// tile.cast
func.func @f(%x: tensor<16x8xf32>) {
  %h = tile.cast %x : tensor<16x8xf32> -> tensor<8x16xf16>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: cast cannot change the shape

// -----

// tile.transpose
func.func @f(%x: tensor<16x8xf32>) {
  %t = tile.transpose %x perm = [1, 0] : tensor<16x8xf32> -> tensor<16x8xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: result type tensor<16x8xf32> does not match the inferred type tensor<8x16xf32>

// -----

func.func @f(%x: tensor<16x8xf32>) {
  %t = tile.transpose %x perm = [1, 0] : tensor<16x8xf32> -> tensor<8x16xf16>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: result type tensor<8x16xf16> does not match the inferred type tensor<8x16xf32>

// -----

func.func @f(%x: tensor<16x8xf32>) {
  %t = tile.transpose %x perm = [1, 1] : tensor<16x8xf32> -> tensor<8x8xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: perm [1, 1] is not a permutation of the 2 dimensions of a 16x8 tensor

// -----

// tile.reshape
func.func @f(%x: tensor<4x16xf32>) {
  %r = tile.reshape %x : tensor<4x16xf32> -> tensor<65xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: reshape from 4x16 to 65 changes the element count

// -----

func.func @f(%x: tensor<4x16xf32>) {
  %r = tile.reshape %x : tensor<4x16xf32> -> tensor<64xi32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: reshape cannot change the element type

// -----

// tile.for
tile.for %i = 0 to 4 step 0 parallel {
  tile.yield
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: step must be positive, got 0

// -----

tile.for %i = 4 to 0 step -1 parallel {
  tile.yield
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: step must be positive, got -1

// -----

"tile.for"() <{lb = 0 : i64, ub = 4 : i64, step = 1 : i64, kind = #tile<loop_kind parallel>}> ({
^bb0:
  "tile.yield"() : () -> ()
}) : () -> ()
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: the body's first argument must be the index (index)

// -----

"tile.for"() <{lb = 0 : i64, ub = 4 : i64, step = 1 : i64, kind = #tile<loop_kind parallel>}> ({
^bb0(%i: i64):
  "tile.yield"() : () -> ()
}) : () -> ()
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: the body's first argument must be the index (index)

// -----

func.func @f(%x: tensor<4xf32>) {
  %r = "tile.for"(%x) <{lb = 0 : i64, ub = 4 : i64, step = 1 : i64, kind = #tile<loop_kind reduction>}> ({
  ^bb0(%i: index, %c: tensor<4xf16>):
    "tile.yield"(%x) : (tensor<4xf32>) -> ()
  }) : (tensor<4xf32>) -> tensor<4xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: the body's arguments after the index must match the iter_args types

// -----

func.func @f(%x: tensor<4xf32>) {
  %r = "tile.for"(%x) <{lb = 0 : i64, ub = 4 : i64, step = 1 : i64, kind = #tile<loop_kind reduction>}> ({
  ^bb0(%i: index):
    "tile.yield"(%x) : (tensor<4xf32>) -> ()
  }) : (tensor<4xf32>) -> tensor<4xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: the body's arguments after the index must match the iter_args types

// -----

func.func @f(%x: tensor<4xf32>) {
  %r = "tile.for"(%x) <{lb = 0 : i64, ub = 4 : i64, step = 1 : i64, kind = #tile<loop_kind reduction>}> ({
  ^bb0(%i: index, %c: tensor<4xf32>):
    "tile.yield"(%c) : (tensor<4xf32>) -> ()
  }) : (tensor<4xf32>) -> tensor<8xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: results must match the iter_args types

// -----

func.func @f(%x: tensor<4xf32>) {
  "tile.for"(%x) <{lb = 0 : i64, ub = 4 : i64, step = 1 : i64, kind = #tile<loop_kind reduction>}> ({
  ^bb0(%i: index, %c: tensor<4xf32>):
    "tile.yield"(%c) : (tensor<4xf32>) -> ()
  }) : (tensor<4xf32>) -> ()
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: results must match the iter_args types

// -----

"tile.for"() <{lb = 0 : i64, ub = 4 : i64, step = 1 : i64, kind = #tile<loop_kind parallel>}> ({
^bb0(%i: index):
  "test.termop"() : () -> ()
}) : () -> ()
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: tile.for body must end with tile.yield

// -----

func.func @f(%x: tensor<4xf32>) {
  %r = tile.for %i = 0 to 4 step 1 iter_args(%c = %x) -> (tensor<4xf32>) reduction {
    %h = tile.cast %c : tensor<4xf32> -> tensor<4xf16>
    tile.yield %h : tensor<4xf16>
  }
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: tile.yield types ['tensor<4xf16>'] must match the iter_args types ['tensor<4xf32>']

// -----

func.func @f(%x: tensor<4xf32>) {
  %r = tile.for %i = 0 to 4 step 1 iter_args(%c = %x) -> (tensor<4xf32>) reduction {
    tile.yield
  }
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: tile.yield types [] must match the iter_args types ['tensor<4xf32>']

// -----

"tile.for"() <{lb = 0 : i64, ub = 4 : i64, step = 1 : i64, kind = #tile<loop_kind serial>}> ({
^bb0(%i: index):
  "tile.yield"() : () -> ()
}) : () -> ()
// CHECK:      {{^}}//{{ -----$}}
// CHECK:      Expected `parallel`, or `reduction`.

// -----

// Parse errors: tile.for needs one type per iter_arg, a known loop kind, and tile.fill a
// float literal or the bit pattern of an f64.
func.func @f(%x: tensor<4xf32>) {
  %r = tile.for %i = 0 to 4 step 1 iter_args(%c = %x) -> (tensor<4xf32>, tensor<4xf32>) parallel {
    tile.yield %c : tensor<4xf32>
  }
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK:      expected 1 iter_args types, got 2

// -----

tile.for %i = 0 to 4 step 1 sequential {
  tile.yield
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK:      Expected `parallel`, or `reduction`.

// -----

%z = tile.fill 0x1FFF0000000000000 : tensor<4xf32>
// CHECK:      {{^}}//{{ -----$}}
// CHECK:      expected the bit pattern of an f64

// -----

%z = tile.fill : tensor<4xf32>
// CHECK:      {{^}}//{{ -----$}}
// CHECK:      integer or float literal expected
