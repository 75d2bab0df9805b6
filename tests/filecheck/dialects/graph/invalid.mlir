// RUN: plmr-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | filecheck %s

// This is XDSL_VERIFY_DIAG plus --parsing-diagnostics: the last chunks are parse errors,
// which plain --verify-diagnostics reports as a failure (exit status 1) instead of
// printing them. There is one chunk per verifier error of every `graph` op; generic syntax
// is used where the custom syntax cannot express the bad IR. Each expected message must
// directly follow the separator of its chunk's output, so that a chunk which unexpectedly
// verifies cannot borrow the diagnostic of a later chunk.
//
// Three raises of the graph_*.py modules cannot be reached from textual IR (a non-tensor operand is
// rejected by the operand constraints first, `concat_shape([])` is shadowed by ConcatOp's
// own check, and the parser rejects a dense literal of the wrong size); tests/dialects/
// test_graph.py triggers them from Python and checks that this file covers all others.

// Shape helpers: tensors must be ranked and static.
%c = "graph.constant"() <{value = dense<1.0> : vector<4xf32>}> : () -> tensor<4xf32>
// CHECK:      constant value must be a ranked tensor, got vector<4xf32>

// -----

func.func @f(%a: tensor<?x4xf32>) {
  %r = graph.relu %a : tensor<?x4xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: input must have a static shape, got tensor<?x4xf32> (plmr needs static shapes)

// -----

func.func @f(%a: tensor<4x8xf32>, %b: tensor<4x?xf32>) {
  %r = "graph.add"(%a, %b) : (tensor<4x8xf32>, tensor<4x?xf32>) -> tensor<4x8xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: rhs must have a static shape, got tensor<4x?xf32> (plmr needs static shapes)

// -----

// Element types must agree.
func.func @f(%a: tensor<4x8xf32>, %b: tensor<4x8xf16>) {
  %r = "graph.add"(%a, %b) : (tensor<4x8xf32>, tensor<4x8xf16>) -> tensor<4x8xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: lhs and rhs must have the same element type, got f32 and f16

// -----

func.func @f(%a: tensor<4x8xf32>, %b: tensor<8x2xi32>) {
  %r = "graph.matmul"(%a, %b) : (tensor<4x8xf32>, tensor<8x2xi32>) -> tensor<4x2xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: lhs and rhs must have the same element type, got f32 and i32

// -----

// Broadcasting.
func.func @f(%a: tensor<4x8xf32>, %b: tensor<4x3xf32>) {
  %r = "graph.sub"(%a, %b) : (tensor<4x8xf32>, tensor<4x3xf32>) -> tensor<4x8xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: shapes 4x8 and 4x3 are not broadcast-compatible (dimension -1: 8 vs 3)

// -----

func.func @f(%a: tensor<2x4x8xf32>, %b: tensor<3x1x8xf32>) {
  %r = "graph.mul"(%a, %b) : (tensor<2x4x8xf32>, tensor<3x1x8xf32>) -> tensor<3x4x8xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: shapes 2x4x8 and 3x1x8 are not broadcast-compatible (dimension -3: 2 vs 3)

// -----

// Declared result types must equal the inferred ones.
func.func @f(%a: tensor<4x8xf32>, %b: tensor<8xf32>) {
  %r = "graph.div"(%a, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<8xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: result type tensor<8xf32> does not match the inferred type tensor<4x8xf32>

// -----

func.func @f(%a: tensor<4x1xf32>, %b: tensor<8xf32>) {
  %r = "graph.add"(%a, %b) : (tensor<4x1xf32>, tensor<8xf32>) -> tensor<4x8xf16>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: result type tensor<4x8xf16> does not match the inferred type tensor<4x8xf32>

// -----

// graph.matmul
func.func @f(%a: tensor<8xf32>, %b: tensor<8x4xf32>) {
  %r = "graph.matmul"(%a, %b) : (tensor<8xf32>, tensor<8x4xf32>) -> tensor<4xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: matmul operands must have rank >= 2, got 8 and 8x4 (reshape vectors to matrices first)

// -----

func.func @f(%a: tensor<4x8xf32>, %b: tensor<16x8xf32>) {
  %r = "graph.matmul"(%a, %b) : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: contraction dimensions differ: lhs 4x8 has K = 8, rhs 16x8 has K = 16

// -----

func.func @f(%a: tensor<4x8xf32>, %b: tensor<8x16xf32>) {
  %r = graph.matmul %a, %b transpose_a transpose_b : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<8x8xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: contraction dimensions differ: lhs 4x8 (transposed) has K = 4, rhs 8x16 (transposed) has K = 16

// -----

func.func @f(%a: tensor<4x8xf32>, %b: tensor<4x16xf32>) {
  %r = graph.matmul %a, %b transpose_a : (tensor<4x8xf32>, tensor<4x16xf32>) -> tensor<8x8xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: result type tensor<8x8xf32> does not match the inferred type tensor<8x16xf32>

// -----

func.func @f(%a: tensor<2x4x8xf32>, %b: tensor<3x8x16xf32>) {
  %r = "graph.matmul"(%a, %b) : (tensor<2x4x8xf32>, tensor<3x8x16xf32>) -> tensor<2x4x16xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: matmul batch dimensions: shapes 2 and 3 are not broadcast-compatible (dimension -1: 2 vs 3)

// -----

func.func @f(%a: tensor<2x4x8xf32>, %b: tensor<8x16xf32>) {
  %r = graph.matmul %a, %b : (tensor<2x4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: result type tensor<4x16xf32> does not match the inferred type tensor<2x4x16xf32>

// -----

// graph.scale and the float-only unary ops
func.func @f(%a: tensor<?xf32>) {
  %r = graph.scale %a by 2.0 : tensor<?xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: input must have a static shape, got tensor<?xf32> (plmr needs static shapes)

// -----

func.func @f(%a: tensor<4xi32>) {
  %r = graph.scale %a by 0.5 : tensor<4xi32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: 'graph.scale' of an integer tensor needs an integral factor, got 0.5

// -----

func.func @f(%a: tensor<4xi64>) {
  %r = "graph.scale"(%a) <{factor = 0x7FF0000000000000 : f64}> : (tensor<4xi64>) -> tensor<4xi64>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: 'graph.scale' of an integer tensor needs an integral factor, got inf

// -----

func.func @f(%a: tensor<4xi32>) {
  %r = graph.silu %a : tensor<4xi32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: 'graph.silu' needs a floating-point tensor, got tensor<4xi32>

// -----

func.func @f(%a: tensor<4xi32>) {
  %r = graph.sigmoid %a : tensor<4xi32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: 'graph.sigmoid' needs a floating-point tensor, got tensor<4xi32>

// -----

func.func @f(%a: tensor<4xi32>) {
  %r = graph.tanh %a : tensor<4xi32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: 'graph.tanh' needs a floating-point tensor, got tensor<4xi32>

// -----

func.func @f(%a: tensor<4xi32>) {
  %r = graph.exp %a : tensor<4xi32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: 'graph.exp' needs a floating-point tensor, got tensor<4xi32>

// -----

func.func @f(%a: tensor<4xi32>) {
  %r = graph.erf %a : tensor<4xi32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: 'graph.erf' needs a floating-point tensor, got tensor<4xi32>

// -----

func.func @f(%a: tensor<4xi32>) {
  %r = graph.sqrt %a : tensor<4xi32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: 'graph.sqrt' needs a floating-point tensor, got tensor<4xi32>

// -----

func.func @f(%a: tensor<4xi32>) {
  %r = graph.gelu %a tanh : tensor<4xi32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: 'graph.gelu' needs a floating-point tensor, got tensor<4xi32>

// -----

func.func @f(%a: tensor<4x?xf32>) {
  %r = graph.neg %a : tensor<4x?xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: input must have a static shape, got tensor<4x?xf32> (plmr needs static shapes)

// -----

// graph.transpose
func.func @f(%a: tensor<2x4x8xf32>) {
  %r = "graph.transpose"(%a) <{perm = array<i64: 0, 1>}> : (tensor<2x4x8xf32>) -> tensor<2x4xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: perm [0, 1] is not a permutation of the 3 dimensions of a 2x4x8 tensor

// -----

func.func @f(%a: tensor<2x4x8xf32>) {
  %r = graph.transpose %a perm = [0, 2, 2] : tensor<2x4x8xf32> -> tensor<2x8x8xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: perm [0, 2, 2] is not a permutation of the 3 dimensions of a 2x4x8 tensor

// -----

func.func @f(%a: tensor<2x4x8xf32>) {
  %r = graph.transpose %a perm = [0, 2, 1] : tensor<2x4x8xf32> -> tensor<2x4x8xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: result type tensor<2x4x8xf32> does not match the inferred type tensor<2x8x4xf32>

// -----

// graph.reshape
func.func @f(%a: tensor<2x4x8xf32>) {
  %r = graph.reshape %a : tensor<2x4x8xf32> -> tensor<8x8xf16>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: reshape cannot change the element type (f32 to f16)

// -----

func.func @f(%a: tensor<2x4x8xf32>) {
  %r = graph.reshape %a : tensor<2x4x8xf32> -> tensor<8x9xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: reshape from 2x4x8 (64 elements) to 8x9 (72 elements) changes the element count

// -----

func.func @f(%a: tensor<2x4x8xf32>) {
  %r = graph.reshape %a : tensor<2x4x8xf32> -> tensor<?x8xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: result must have a static shape, got tensor<?x8xf32> (plmr needs static shapes)

// -----

// graph.reduce
func.func @f(%a: tensor<4x8xf32>) {
  %r = graph.reduce sum %a axes = [] : tensor<4x8xf32> -> tensor<4x8xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: reduce needs at least one axis

// -----

func.func @f(%a: tensor<4x8xf32>) {
  %r = graph.reduce max %a axes = [2] : tensor<4x8xf32> -> tensor<4xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: axis 2 is out of range for a tensor of rank 2 (expected -2 <= axis < 2)

// -----

func.func @f(%a: tensor<4x8xf32>) {
  %r = graph.reduce min %a axes = [-3] : tensor<4x8xf32> -> tensor<8xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: axis -3 is out of range for a tensor of rank 2 (expected -2 <= axis < 2)

// -----

func.func @f(%a: tensor<4x8xf32>) {
  %r = graph.reduce mean %a axes = [1, -1] : tensor<4x8xf32> -> tensor<4xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: axes [1, -1] contain a repeated axis

// -----

func.func @f(%a: tensor<4x8xf32>) {
  %r = graph.reduce sum %a axes = [1] : tensor<4x8xf32> -> tensor<4x1xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: result type tensor<4x1xf32> does not match the inferred type tensor<4xf32>

// -----

func.func @f(%a: tensor<4x8xf32>) {
  %r = graph.reduce sum %a axes = [1] keepdims : tensor<4x8xf32> -> tensor<4xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: result type tensor<4xf32> does not match the inferred type tensor<4x1xf32>

// -----

// graph.softmax
func.func @f(%a: tensor<4x8xi32>) {
  %r = graph.softmax %a : tensor<4x8xi32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: 'graph.softmax' needs a floating-point tensor, got tensor<4x8xi32>

// -----

func.func @f(%a: tensor<4x8xf32>) {
  %r = graph.softmax %a axis = 2 : tensor<4x8xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: axis 2 is out of range for a tensor of rank 2 (expected -2 <= axis < 2)

// -----

func.func @f(%a: tensor<f32>) {
  %r = graph.softmax %a : tensor<f32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: axis -1 is out of range: a rank-0 tensor has no axes

// -----

func.func @f(%a: tensor<4x16xi32>, %g: tensor<16xi32>) {
  %r = graph.layernorm %a, %g : (tensor<4x16xi32>, tensor<16xi32>) -> tensor<4x16xi32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: 'graph.layernorm' needs a floating-point tensor, got tensor<4x16xi32>

// -----

func.func @f(%a: tensor<4x16xf32>, %g: tensor<16xf32>) {
  %r = graph.layernorm %a, %g axis = 2 : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: axis 2 is out of range for a tensor of rank 2 (expected -2 <= axis < 2)

// -----

func.func @f(%a: tensor<4x16xf32>, %g: tensor<8xf32>) {
  %r = graph.layernorm %a, %g : (tensor<4x16xf32>, tensor<8xf32>) -> tensor<4x16xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: scale of shape 8 does not broadcast to the normalized shape 16

// -----

func.func @f(%a: tensor<4x16xf32>, %g: tensor<1x16xf32>) {
  %r = graph.layernorm %a, %g : (tensor<4x16xf32>, tensor<1x16xf32>) -> tensor<4x16xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: scale of shape 1x16 does not broadcast to the normalized shape 16

// -----

func.func @f(%a: tensor<4x16xf32>, %g: tensor<16xf32>, %b: tensor<4xf32>) {
  %r = graph.layernorm %a, %g, %b : (tensor<4x16xf32>, tensor<16xf32>, tensor<4xf32>) -> tensor<4x16xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: bias of shape 4 does not broadcast to the normalized shape 16

// -----

func.func @f(%a: tensor<4x16xf32>, %g: tensor<16xf16>) {
  %r = graph.layernorm %a, %g : (tensor<4x16xf32>, tensor<16xf16>) -> tensor<4x16xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: input and scale must have the same element type, got f32 and f16

// -----

func.func @f(%a: tensor<4x16xf32>, %g: tensor<16xf32>, %b: tensor<16xf16>) {
  %r = graph.layernorm %a, %g, %b : (tensor<4x16xf32>, tensor<16xf32>, tensor<16xf16>) -> tensor<4x16xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: input and bias must have the same element type, got f32 and f16

// -----

func.func @f(%a: tensor<4x16xf32>, %g: tensor<16xf32>) {
  %r = "graph.layernorm"(%a, %g) <{axis = -1 : i64, epsilon = 1.0e-05 : f64}> : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<16x4xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: result type tensor<16x4xf32> does not match the inferred type tensor<4x16xf32>

// -----

// graph.rmsnorm
func.func @f(%a: tensor<4x16xi8>, %w: tensor<16xi8>) {
  %r = graph.rmsnorm %a, %w : (tensor<4x16xi8>, tensor<16xi8>) -> tensor<4x16xi8>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: 'graph.rmsnorm' needs a floating-point tensor, got tensor<4x16xi8>

// -----

func.func @f(%a: tensor<4x16xf32>, %w: tensor<16xf32>) {
  %r = graph.rmsnorm %a, %w axis = -3 : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: axis -3 is out of range for a tensor of rank 2 (expected -2 <= axis < 2)

// -----

func.func @f(%a: tensor<4x16xf32>, %w: tensor<4x16xf32>) {
  %r = graph.rmsnorm %a, %w : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: weight of shape 4x16 does not broadcast to the normalized shape 16

// -----

func.func @f(%a: tensor<4x16xf32>, %w: tensor<16xf64>) {
  %r = graph.rmsnorm %a, %w : (tensor<4x16xf32>, tensor<16xf64>) -> tensor<4x16xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: input and weight must have the same element type, got f32 and f64

// -----

// graph.concat
func.func @f() {
  %r = "graph.concat"() <{axis = 0 : i64}> : () -> tensor<4xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: concat needs at least one input

// -----

func.func @f(%a: tensor<4x8xf32>, %b: tensor<4x2xf32>) {
  %r = graph.concat %a, %b axis = 2 : (tensor<4x8xf32>, tensor<4x2xf32>) -> tensor<4x10xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: axis 2 is out of range for a tensor of rank 2 (expected -2 <= axis < 2)

// -----

func.func @f(%a: tensor<4x8xf32>, %b: tensor<4x2xf32>, %c: tensor<3x2xf32>) {
  %r = graph.concat %a, %b, %c axis = 1 : (tensor<4x8xf32>, tensor<4x2xf32>, tensor<3x2xf32>) -> tensor<4x12xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: concat input 2 has shape 3x2, which differs from input 0 (4x8) outside axis 1

// -----

func.func @f(%a: tensor<4x8xf32>, %b: tensor<4x2x1xf32>) {
  %r = graph.concat %a, %b axis = 1 : (tensor<4x8xf32>, tensor<4x2x1xf32>) -> tensor<4x10xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: concat input 1 has shape 4x2x1, which differs from input 0 (4x8) outside axis 1

// -----

func.func @f(%a: tensor<4x8xf32>, %b: tensor<4x2xf32>, %c: tensor<4x2xf16>) {
  %r = graph.concat %a, %b, %c axis = 1 : (tensor<4x8xf32>, tensor<4x2xf32>, tensor<4x2xf16>) -> tensor<4x12xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: input 0 and input 2 must have the same element type, got f32 and f16

// -----

func.func @f(%a: tensor<4x8xf32>, %b: tensor<4x2xf32>) {
  %r = graph.concat %a, %b axis = -1 : (tensor<4x8xf32>, tensor<4x2xf32>) -> tensor<8x10xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: result type tensor<8x10xf32> does not match the inferred type tensor<4x10xf32>

// -----

// graph.split
func.func @f(%a: tensor<4x24xf32>) {
  %r:2 = graph.split %a axis = 2 sizes = [12, 12] : tensor<4x24xf32> -> (tensor<4x12xf32>, tensor<4x12xf32>)
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: axis 2 is out of range for a tensor of rank 2 (expected -2 <= axis < 2)

// -----

func.func @f(%a: tensor<4x24xf32>) {
  %r:2 = "graph.split"(%a) <{axis = 1 : i64, sizes = array<i64: -4, 28>}> : (tensor<4x24xf32>) -> (tensor<4x4xf32>, tensor<4x28xf32>)
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: split sizes [-4, 28] must be non-negative

// -----

func.func @f(%a: tensor<4x24xf32>) {
  %r:2 = graph.split %a axis = 1 sizes = [8, 8] : tensor<4x24xf32> -> (tensor<4x8xf32>, tensor<4x8xf32>)
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: split sizes [8, 8] sum to 16, but axis 1 of 4x24 has size 24

// -----

func.func @f(%a: tensor<4x24xf32>) {
  %r:3 = graph.split %a axis = 1 sizes = [12, 12] : tensor<4x24xf32> -> (tensor<4x12xf32>, tensor<4x12xf32>, tensor<4x12xf32>)
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: expected 2 results, got 3

// -----

func.func @f(%a: tensor<4x24xf32>) {
  %r:2 = graph.split %a axis = -1 sizes = [8, 16] : tensor<4x24xf32> -> (tensor<4x8xf32>, tensor<4x8xf32>)
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: result 1 type tensor<4x8xf32> does not match the inferred type tensor<4x16xf32>

// -----

// graph.conv2d
func.func @f(%x: tensor<3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  %r = graph.conv2d %x, %w : (tensor<3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<4x6x6xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: conv2d input must be NCHW (rank 4), got 3x8x8

// -----

func.func @f(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3xf32>) {
  %r = graph.conv2d %x, %w : (tensor<1x3x8x8xf32>, tensor<4x3x3xf32>) -> tensor<1x4x6x6xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: conv2d weight must be MCkHkW (rank 4), got 4x3x3

// -----

func.func @f(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  %r = graph.conv2d %x, %w strides = [0, 1] : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: strides must be two positive integers, got [0, 1]

// -----

func.func @f(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  %r = graph.conv2d %x, %w strides = [1, 1, 1] : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: strides must be two positive integers, got [1, 1, 1]

// -----

func.func @f(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  %r = graph.conv2d %x, %w pads = [1, 1] : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: pads must be four non-negative integers [top, left, bottom, right], got [1, 1]

// -----

func.func @f(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  %r = graph.conv2d %x, %w pads = [1, -1, 1, 1] : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x8x8xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: pads must be four non-negative integers [top, left, bottom, right], got [1, -1, 1, 1]

// -----

func.func @f(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  %r = graph.conv2d %x, %w dilations = [1, 0] : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x6x6xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: dilations must be two positive integers, got [1, 0]

// -----

func.func @f(%x: tensor<1x4x8x8xf32>, %w: tensor<6x2x3x3xf32>) {
  %r = graph.conv2d %x, %w groups = 3 : (tensor<1x4x8x8xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x6x6xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: groups = 3 must be positive and divide both the 4 input channels and the 6 output channels

// -----

func.func @f(%x: tensor<1x4x8x8xf32>, %w: tensor<6x2x3x3xf32>) {
  %r = graph.conv2d %x, %w groups = 0 : (tensor<1x4x8x8xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x6x6xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: groups = 0 must be positive and divide both the 4 input channels and the 6 output channels

// -----

func.func @f(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>) {
  %r = graph.conv2d %x, %w groups = 2 : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x6x6xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: conv2d weight has 4 channels per group, expected 2 (4 input channels / 2 groups)

// -----

func.func @f(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x5x5xf32>) {
  %r = graph.conv2d %x, %w dilations = [2, 2] : (tensor<1x3x8x8xf32>, tensor<4x3x5x5xf32>) -> tensor<1x4x0x0xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: conv2d kernel 5x5 does not fit the padded 8x8 input

// -----

func.func @f(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<3xf32>) {
  %r = graph.conv2d %x, %w, %b : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<3xf32>) -> tensor<1x4x6x6xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: conv2d bias must have shape 4 (one per output channel), got 3

// -----

func.func @f(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<1x4xf32>) {
  %r = graph.conv2d %x, %w, %b : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<1x4xf32>) -> tensor<1x4x6x6xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: conv2d bias must have shape 4 (one per output channel), got 1x4

// -----

func.func @f(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>, %b: tensor<4xf16>) {
  %r = graph.conv2d %x, %w, %b : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>, tensor<4xf16>) -> tensor<1x4x6x6xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: input and bias must have the same element type, got f32 and f16

// -----

func.func @f(%x: tensor<1x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  %r = graph.conv2d %x, %w strides = [2, 2] : (tensor<1x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<1x4x4x4xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: result type tensor<1x4x4x4xf32> does not match the inferred type tensor<1x4x3x3xf32>

// -----

// graph.pool
func.func @f(%x: tensor<4x8x8xf32>) {
  %r = graph.pool max %x kernel = [2, 2] : tensor<4x8x8xf32> -> tensor<4x7x7xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: pool input must be NCHW (rank 4), got 4x8x8

// -----

func.func @f(%x: tensor<1x4x8x8xf32>) {
  %r = graph.pool max %x kernel = [2] : tensor<1x4x8x8xf32> -> tensor<1x4x7x7xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: kernel must be two positive integers, got [2]

// -----

func.func @f(%x: tensor<1x4x8x8xf32>) {
  %r = graph.pool avg %x kernel = [0, 2] : tensor<1x4x8x8xf32> -> tensor<1x4x9x7xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: kernel must be two positive integers, got [0, 2]

// -----

func.func @f(%x: tensor<1x4x8x8xf32>) {
  %r = graph.pool avg %x kernel = [2, 2] strides = [2, -2] : tensor<1x4x8x8xf32> -> tensor<1x4x4x4xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: strides must be two positive integers, got [2, -2]

// -----

func.func @f(%x: tensor<1x4x8x8xf32>) {
  %r = graph.pool avg %x kernel = [2, 2] pads = [0, 0, 0, 0, 0] : tensor<1x4x8x8xf32> -> tensor<1x4x7x7xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: pads must be four non-negative integers [top, left, bottom, right], got [0, 0, 0, 0, 0]

// -----

func.func @f(%x: tensor<1x4x8x8xf32>) {
  %r = graph.pool max %x kernel = [3, 3] pads = [1, 1, 3, 1] : tensor<1x4x8x8xf32> -> tensor<1x4x9x8xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: pads [1, 1, 3, 1] must be smaller than the kernel [3, 3]

// -----

func.func @f(%x: tensor<1x4x2x8xf32>) {
  %r = graph.pool max %x kernel = [3, 3] : tensor<1x4x2x8xf32> -> tensor<1x4x0x6xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: pool kernel 3x3 does not fit the padded 2x8 input

// -----

func.func @f(%x: tensor<1x4x8x8xf32>) {
  %r = graph.pool max %x kernel = [3, 3] pads = [1, 1, 1, 1] count_include_pad : tensor<1x4x8x8xf32> -> tensor<1x4x8x8xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: count_include_pad only applies to avg pooling

// -----

func.func @f(%x: tensor<1x4x8x8xf32>) {
  %r = graph.pool avg %x kernel = [2, 2] strides = [2, 2] : tensor<1x4x8x8xf32> -> tensor<1x4x3x3xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: result type tensor<1x4x3x3xf32> does not match the inferred type tensor<1x4x4x4xf32>

// -----

// graph.constant
%c = "graph.constant"() <{value = dense<1.0> : tensor<4xf32>}> : () -> tensor<8xf32>
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: result type tensor<8xf32> does not match the inferred type tensor<4xf32>

// -----

%c = "graph.constant"() <{value = dense<1> : tensor<4xi32>}> : () -> tensor<4xi64>
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: result type tensor<4xi64> does not match the inferred type tensor<4xi32>

// -----

// graph.gather
func.func @f(%d: tensor<f32>, %i: tensor<3xi64>) {
  %r = graph.gather %d, %i : (tensor<f32>, tensor<3xi64>) -> tensor<3xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: gather data must have rank >= 1

// -----

func.func @f(%d: tensor<100x16xf32>, %i: tensor<8xf32>) {
  %r = graph.gather %d, %i : (tensor<100x16xf32>, tensor<8xf32>) -> tensor<8x16xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: gather indices must be integers, got tensor<8xf32>

// -----

func.func @f(%d: tensor<100x16xf32>, %i: tensor<8xi64>) {
  %r = graph.gather %d, %i axis = 2 : (tensor<100x16xf32>, tensor<8xi64>) -> tensor<8x16xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: axis 2 is out of range for a tensor of rank 2 (expected -2 <= axis < 2)

// -----

func.func @f(%d: tensor<100x16xf32>, %i: tensor<2x8xi32>) {
  %r = graph.gather %d, %i axis = -1 : (tensor<100x16xf32>, tensor<2x8xi32>) -> tensor<2x8x16xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: result type tensor<2x8x16xf32> does not match the inferred type tensor<100x2x8xf32>

// -----

func.func @f(%d: tensor<100x16xf32>, %i: tensor<8x?xi64>) {
  %r = graph.gather %d, %i : (tensor<100x16xf32>, tensor<8x?xi64>) -> tensor<8x16xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: indices must have a static shape, got tensor<8x?xi64> (plmr needs static shapes)

// -----

// The ops of ONNX models: i1 operands.
func.func @f(%c: tensor<4xf32>, %a: tensor<4xf32>) {
  %r = graph.where %c, %a, %a : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: 'graph.where' needs an i1 condition, got tensor<4xf32>

// -----

func.func @f(%c: tensor<4xi1>, %a: tensor<4xf32>, %b: tensor<4xf16>) {
  %r = "graph.where"(%c, %a, %b) : (tensor<4xi1>, tensor<4xf32>, tensor<4xf16>) -> tensor<4xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: lhs and rhs must have the same element type, got f32 and f16

// -----

func.func @f(%c: tensor<4x1xi1>, %a: tensor<3xf32>, %b: tensor<2x1xf32>) {
  %r = "graph.where"(%c, %a, %b) : (tensor<4x1xi1>, tensor<3xf32>, tensor<2x1xf32>) -> tensor<4x3xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: shapes 4x3 and 2x1 are not broadcast-compatible (dimension -2: 4 vs 2)

// -----

func.func @f(%a: tensor<4xf32>) {
  %r = graph.not %a : tensor<4xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: 'graph.not' needs an i1 input, got tensor<4xf32>

// -----

func.func @f(%a: tensor<4xi32>) {
  %r = graph.and %a, %a : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: 'graph.and' needs an i1 lhs, got tensor<4xi32>

// -----

func.func @f(%a: tensor<4xf32>, %b: tensor<4xi32>) {
  %r = "graph.cmp"(%a, %b) <{predicate = #graph<cmp_predicate lt>}> : (tensor<4xf32>, tensor<4xi32>) -> tensor<4xi1>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: lhs and rhs must have the same element type, got f32 and i32

// -----

func.func @f(%a: tensor<4xf32>) {
  %r = graph.cmp gt %a, %a : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: result type tensor<4xf32> does not match the inferred type tensor<4xi1>

// -----

// graph.cast converts between floats and integers and keeps the shape.
func.func @f(%a: tensor<4xindex>) {
  %r = graph.cast %a : tensor<4xindex> -> tensor<4xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: 'graph.cast' converts between float and integer tensors, but its input is tensor<4xindex>

// -----

func.func @f(%a: tensor<4xf32>) {
  %r = graph.cast %a : tensor<4xf32> -> tensor<4x1xi64>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: 'graph.cast' cannot change the shape (4 to 4x1)

// -----

func.func @f(%a: tensor<4xi32>) {
  %r = graph.pow %a by 2.0 : tensor<4xi32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: 'graph.pow' needs a floating-point tensor, got tensor<4xi32>

// -----

func.func @f(%a: tensor<4xi32>) {
  %r = graph.log %a : tensor<4xi32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: 'graph.log' needs a floating-point tensor, got tensor<4xi32>

// -----

// graph.slice: one normalised start, end and step per dimension.
func.func @f(%a: tensor<4x8xf32>) {
  %r = graph.slice %a starts = [0] ends = [4, 8] steps = [1, 1] : tensor<4x8xf32> -> tensor<4x8xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: starts has 1 entries, but the input has rank 2 (give one per dimension)

// -----

func.func @f(%a: tensor<4x8xf32>) {
  %r = graph.slice %a starts = [0, 0] ends = [4, 8] steps = [1, 0] : tensor<4x8xf32> -> tensor<4x8xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: slice step of dimension 1 must not be 0

// -----

func.func @f(%a: tensor<0x8xf32>) {
  %r = graph.slice %a starts = [0, 0] ends = [1, 8] steps = [1, 1] : tensor<0x8xf32> -> tensor<0x8xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: dimension 0 is empty, so its slice needs start = end = 0, got start 0 and end 1

// -----

func.func @f(%a: tensor<4x8xf32>) {
  %r = graph.slice %a starts = [-1, 0] ends = [4, 8] steps = [1, 1] : tensor<4x8xf32> -> tensor<4x8xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: slice start -1 of dimension 0 is out of range (expected 0 <= start < 4; normalise negative starts first)

// -----

func.func @f(%a: tensor<4x8xf32>) {
  %r = graph.slice %a starts = [0, 2] ends = [4, -1] steps = [1, 1] : tensor<4x8xf32> -> tensor<4x8xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: slice end -1 of dimension 1 is out of range for step 1 (expected 0 <= end <= 8; clamp ends first)

// -----

func.func @f(%a: tensor<4x8xf32>) {
  %r = graph.slice %a starts = [3, 0] ends = [-1, 8] steps = [-2, 3] : tensor<4x8xf32> -> tensor<2x2xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: result type tensor<2x2xf32> does not match the inferred type tensor<2x3xf32>

// -----

// graph.expand: the result type holds the broadcast shape.
func.func @f(%a: tensor<4x1xf32>) {
  %r = graph.expand %a : tensor<4x1xf32> -> tensor<1x8xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: expanding 4x1 to 1x8 gives 4x8; the result type must hold the broadcast shape

// -----

func.func @f(%a: tensor<4x1xf32>) {
  %r = graph.expand %a : tensor<4x1xf32> -> tensor<3x8xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: shapes 4x1 and 3x8 are not broadcast-compatible (dimension -2: 4 vs 3)

// -----

// graph.pad.
func.func @f(%a: tensor<4x8xf32>) {
  %r = graph.pad %a pads = [1, 1, 1] mode = constant value = 0.0 : tensor<4x8xf32> -> tensor<6x10xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: pads must be 4 non-negative integers (the begin pads of the 2 dimensions, then their end pads), got [1, 1, 1]

// -----

func.func @f(%a: tensor<4x8xf32>) {
  %r = graph.pad %a pads = [4, 0, 0, 0] mode = reflect value = 0.0 : tensor<4x8xf32> -> tensor<8x8xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: reflect padding of dimension 0 by 4 needs a dimension larger than the padding, but it has size 4

// -----

func.func @f(%a: tensor<4x0xf32>) {
  %r = graph.pad %a pads = [0, 0, 0, 1] mode = edge value = 0.0 : tensor<4x0xf32> -> tensor<4x1xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: edge padding of dimension 1 needs a non-empty dimension to repeat

// -----

func.func @f(%a: tensor<4xi32>) {
  %r = graph.pad %a pads = [1, 1] mode = constant value = 0.5 : tensor<4xi32> -> tensor<6xi32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: 'graph.pad' of an integer tensor needs an integral value, got 0.5

// -----

// graph.gather_elements.
func.func @f(%d: tensor<4x8xf32>, %i: tensor<4x3xf32>) {
  %r = graph.gather_elements %d, %i axis = 1 : (tensor<4x8xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: gather_elements indices must be integers, got tensor<4x3xf32>

// -----

func.func @f(%d: tensor<f32>, %i: tensor<i64>) {
  %r = graph.gather_elements %d, %i axis = 0 : (tensor<f32>, tensor<i64>) -> tensor<f32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: gather_elements data must have rank >= 1

// -----

func.func @f(%d: tensor<4x8xf32>, %i: tensor<3xi64>) {
  %r = graph.gather_elements %d, %i axis = 0 : (tensor<4x8xf32>, tensor<3xi64>) -> tensor<3xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: gather_elements indices must have the rank of the data (2), got 3

// -----

func.func @f(%d: tensor<4x8xf32>, %i: tensor<5x3xi64>) {
  %r = graph.gather_elements %d, %i axis = 1 : (tensor<4x8xf32>, tensor<5x3xi64>) -> tensor<5x3xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: gather_elements indices 5x3 exceed the data 4x8 in dimension 0 (5 > 4), which is not the axis

// -----

func.func @f(%d: tensor<4x8xf32>, %i: tensor<4x3xi64>) {
  %r = graph.gather_elements %d, %i axis = 2 : (tensor<4x8xf32>, tensor<4x3xi64>) -> tensor<4x3xf32>
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: axis 2 is out of range for a tensor of rank 2 (expected -2 <= axis < 2)

// -----

// graph.weight: a tensor name, a file, a static shape, a non-negative offset.
%w = "graph.weight"() <{name = "", file = "w.safetensors"}> : () -> tensor<4xf32>
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: a weight needs a non-empty tensor name

// -----

%w = "graph.weight"() <{name = "fc.weight", file = ""}> : () -> tensor<4xf32>
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: weight 'fc.weight' names no file

// -----

%w = "graph.weight"() <{name = "fc.weight", file = "w.safetensors"}> : () -> tensor<?x4xf32>
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: weight 'fc.weight' needs a static shape, got tensor<?x4xf32>

// -----

%w = "graph.weight"() <{name = "fc.weight", file = "w.data", offset = -8 : i64}> : () -> tensor<4xf32>
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: weight 'fc.weight' has a negative offset -8

// -----

// A derived weight: rotate blocks that divide the last axis, parts that add up.
%w = graph.weight "q" in "m.onnx.data" rotate 6 : tensor<4x8xf32>
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: weight 'q': rotate 6 does not divide its last dimension (tensor<4x8xf32>)

// -----

%w = graph.weight concat 1 ("q" in "m.onnx.data" : tensor<4x8xf32>, "k" in "m.onnx.data" : tensor<4x4xf32>) : tensor<4x16xf32>
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: weight 'q+k': its parts give 12 along axis 1, its type 16

// -----

%w = graph.weight "q" in "m.onnx.data" rotate 3 : tensor<4x6xf32>
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: weight 'q': rotate takes an even block size, got 3

// -----

// A weight viewed by heads has the heads leading its type, then K x D.
%w = graph.weight "q" in "m.onnx.data" heads [2] : tensor<4x8x2xf32>
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: weight 'q': heads [2] needs the type 2xKxD, got tensor<4x8x2xf32>

// -----

%w = graph.weight "o" in "m.onnx.data" rows [2, 4] : tensor<8x16xf32>
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: weight 'o': rows [2, 4] needs the type 2x4xM (and no heads), got tensor<8x16xf32>

// -----

%w = graph.weight concat 1 ("q" in "m.onnx.data" : f32, "k" in "m.onnx.data" : tensor<4x8xf32>) : tensor<4x16xf32>
// CHECK:      {{^}}//{{ -----$}}
// CHECK:      a weight's type must be a tensor type

// -----

%w = "graph.weight"() <{name = "q+k", file = "", parts = [{name = "q"}, {name = "k", file = "m.onnx.data", type = tensor<4x8xf32>}], axis = 1 : i64}> : () -> tensor<4x16xf32>
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: weight 'q+k': malformed parts (each needs a name, a file or parts, and a type)

// -----

%w = graph.weight concat 1 ("q" in "m.onnx.data" : tensor<4x8xf32>) : tensor<4x8xf32>
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: weight 'q': a concatenation needs two parts

// -----

%w = graph.weight concat 2 ("q" in "m.onnx.data" : tensor<4x8xf32>, "k" in "m.onnx.data" : tensor<4x8xf32>) : tensor<4x16xf32>
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: weight 'q+k': axis 2 is out of range for rank 2

// -----

%w = graph.weight concat 1 ("q" in "m.onnx.data" : tensor<4x8xf16>, "k" in "m.onnx.data" : tensor<4x8xf32>) : tensor<4x16xf32>
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: weight 'q+k': part 'q' (tensor<4x8xf16>) does not match tensor<4x16xf32> in rank and element type

// -----

%w = graph.weight concat 1 ("q" in "m.onnx.data" : tensor<4x8xf32>, "k" in "m.onnx.data" : tensor<2x8xf32>) : tensor<4x16xf32>
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: weight 'q+k': part 'k' (tensor<2x8xf32>) differs from tensor<4x16xf32> off axis 1

// -----

// graph.constant's custom syntax only accepts dense elements (parse errors).
%c = graph.constant 1.0 : f32
// CHECK:      {{^}}//{{ -----$}}
// CHECK:      expected a dense elements attribute, e.g. dense<1.0> : tensor<4xf32>

// -----

%c = graph.constant array<i64: 1, 2>
// CHECK:      {{^}}//{{ -----$}}
// CHECK:      expected a dense elements attribute, e.g. dense<1.0> : tensor<4xf32>

// -----

%c = graph.constant dense<[1.0, 2.0]> : tensor<3xf32>
// CHECK:      {{^}}//{{ -----$}}
// CHECK:      Shape mismatch in dense literal. Expected [3] shape from the type, but got [2] shape.

// -----

// graph.weight's custom syntax: a tensor type (a parse error).
%w = graph.weight "fc.weight" in "w.safetensors" : vector<4xf32>
// CHECK:      {{^}}//{{ -----$}}
// CHECK:      a weight's type must be a tensor type
