// RUN: XDSL_ROUNDTRIP
// RUN: XDSL_GENERIC_ROUNDTRIP

// Every `tile` op in every syntactic variant: optional accumulators, unit flags and
// attribute dictionaries present and absent, batched dots, every named map kind (unary,
// binary, broadcasting) and map bodies, every reduce kind and negative axes, non-finite
// fill values, and nested tile.for loops with and without iteration arguments. CHECK lines
// hold the custom form after a generic round trip; CHECK-GENERIC lines the generic form,
// in which properties print in `<{...}>` and a named tile.map has an empty region.

// CHECK: builtin.module {
// CHECK-GENERIC: "builtin.module"() ({

// tile.fill: float, integer and rank-0 blocks; infinities and NaN print as the bit
// pattern of the f64 value (and parse back).

// CHECK-LABEL: func.func @fill() -> tensor<16x16xf32> {
// CHECK-NEXT:    %z = tile.fill 0.000000e+00 : tensor<16x16xf32>
// CHECK-NEXT:    %one = tile.fill 1.000000e+00 : tensor<16x1xf16>
// CHECK-NEXT:    %ninf = tile.fill 0xfff0000000000000 : tensor<16x1xf32>
// CHECK-NEXT:    %pinf = tile.fill 0x7ff0000000000000 : tensor<16x1xf32>
// CHECK-NEXT:    %nan = tile.fill 0x7ff8000000000000 : tensor<2xf16>
// CHECK-NEXT:    %neg = tile.fill -2.500000e+00 : tensor<8xbf16>
// CHECK-NEXT:    %i = tile.fill 3.000000e+00 : tensor<4x4xi32>
// CHECK-NEXT:    %s = tile.fill 4.000000e+00 : tensor<f32>
// CHECK-NEXT:    %a = tile.fill 1.000000e+00 {note = "x"} : tensor<2x3x4xf64>
// CHECK-NEXT:    func.return %z : tensor<16x16xf32>
// CHECK-NEXT:  }

// CHECK-GENERIC-LABEL: "func.func"() <{sym_name = "fill", function_type = () -> tensor<16x16xf32>}> ({
// CHECK-GENERIC:         %z = "tile.fill"() <{value = 0.000000e+00 : f64}> : () -> tensor<16x16xf32>
// CHECK-GENERIC:         %ninf = "tile.fill"() <{value = 0xfff0000000000000 : f64}> : () -> tensor<16x1xf32>
// CHECK-GENERIC:         %nan = "tile.fill"() <{value = 0x7ff8000000000000 : f64}> : () -> tensor<2xf16>
// CHECK-GENERIC:         %neg = "tile.fill"() <{value = -2.500000e+00 : f64}> : () -> tensor<8xbf16>
// CHECK-GENERIC:         %a = "tile.fill"() <{value = 1.000000e+00 : f64}> {note = "x"} : () -> tensor<2x3x4xf64>

func.func @fill() -> tensor<16x16xf32> {
  %z = tile.fill 0.0 : tensor<16x16xf32>
  %one = tile.fill 1.0 : tensor<16x1xf16>
  %ninf = tile.fill 0xFFF0000000000000 : tensor<16x1xf32>
  %pinf = tile.fill 0x7ff0000000000000 : tensor<16x1xf32>
  %nan = tile.fill 0x7FF8000000000000 : tensor<2xf16>
  %neg = tile.fill -2.5 : tensor<8xbf16>
  %i = tile.fill 3.0 : tensor<4x4xi32>
  %s = tile.fill 4.0e+00 : tensor<f32>
  %a = tile.fill 1.0 {note = "x"} : tensor<2x3x4xf64>
  func.return %z : tensor<16x16xf32>
}

// tile.load / tile.store of 1-D, 2-D and 3-D blocks, with constant and argument offsets,
// and a clipped store.

// CHECK-LABEL: func.func @load_store(%A: tensor<64x64xf32>, %V: tensor<128xf16>, %T: tensor<4x32x32xi32>, %i: index, %j: index) -> tensor<64x64xf32> {
// CHECK-NEXT:    %c0 = arith.constant 0 : index
// CHECK-NEXT:    %b = tile.load %A[%i, %j] : tensor<64x64xf32> -> tensor<16x16xf32>
// CHECK-NEXT:    %row = tile.load %A[%i, %c0] : tensor<64x64xf32> -> tensor<1x64xf32>
// CHECK-NEXT:    %all = tile.load %A[%c0, %c0] : tensor<64x64xf32> -> tensor<64x64xf32>
// CHECK-NEXT:    %v = tile.load %V[%i] : tensor<128xf16> -> tensor<32xf16>
// CHECK-NEXT:    %t = tile.load %T[%c0, %i, %j] {note} : tensor<4x32x32xi32> -> tensor<2x8x8xi32>
// CHECK-NEXT:    %A2 = tile.store %b, %A[%j, %i] : tensor<16x16xf32> -> tensor<64x64xf32>
// CHECK-NEXT:    %A3 = tile.store %row, %A2[%c0, %c0] : tensor<1x64xf32> -> tensor<64x64xf32>
// CHECK-NEXT:    %V2 = tile.store %v, %V[%j] clip : tensor<32xf16> -> tensor<128xf16>
// CHECK-NEXT:    %T2 = tile.store %t, %T[%c0, %c0, %c0] {note} : tensor<2x8x8xi32> -> tensor<4x32x32xi32>
// CHECK-NEXT:    func.return %A3 : tensor<64x64xf32>
// CHECK-NEXT:  }

// CHECK-GENERIC-LABEL: "func.func"() <{sym_name = "load_store", function_type = (tensor<64x64xf32>, tensor<128xf16>, tensor<4x32x32xi32>, index, index) -> tensor<64x64xf32>}> ({
// CHECK-GENERIC:         %b = "tile.load"(%A, %i, %j) <{operandSegmentSizes = array<i32: 1, 2, 0>}> : (tensor<64x64xf32>, index, index) -> tensor<16x16xf32>
// CHECK-GENERIC:         %t = "tile.load"(%T, %c0, %i, %j) <{operandSegmentSizes = array<i32: 1, 3, 0>}> {note} : (tensor<4x32x32xi32>, index, index, index) -> tensor<2x8x8xi32>
// CHECK-GENERIC:         %A2 = "tile.store"(%b, %A, %j, %i) : (tensor<16x16xf32>, tensor<64x64xf32>, index, index) -> tensor<64x64xf32>
// CHECK-GENERIC:         %T2 = "tile.store"(%t, %T, %c0, %c0, %c0) {note} : (tensor<2x8x8xi32>, tensor<4x32x32xi32>, index, index, index) -> tensor<4x32x32xi32>

func.func @load_store(%A: tensor<64x64xf32>, %V: tensor<128xf16>, %T: tensor<4x32x32xi32>, %i: index, %j: index) -> tensor<64x64xf32> {
  %c0 = arith.constant 0 : index
  %b = tile.load %A[%i, %j] : tensor<64x64xf32> -> tensor<16x16xf32>
  %row = tile.load %A[%i, %c0] : tensor<64x64xf32> -> tensor<1x64xf32>
  %all = tile.load %A[%c0, %c0] : tensor<64x64xf32> -> tensor<64x64xf32>
  %v = tile.load %V[%i] : tensor<128xf16> -> tensor<32xf16>
  %t = tile.load %T[%c0, %i, %j] {note} : tensor<4x32x32xi32> -> tensor<2x8x8xi32>
  %A2 = tile.store %b, %A[%j, %i] : tensor<16x16xf32> -> tensor<64x64xf32>
  %A3 = tile.store %row, %A2[%c0, %c0] : tensor<1x64xf32> -> tensor<64x64xf32>
  %V2 = tile.store %v, %V[%j] clip : tensor<32xf16> -> tensor<128xf16>
  %T2 = tile.store %t, %T[%c0, %c0, %c0] {note} : tensor<2x8x8xi32> -> tensor<4x32x32xi32>
  func.return %A3 : tensor<64x64xf32>
}

// tile.dot without and with an accumulator, every combination of transposes, batched
// (leading dims), integer operands.

// CHECK-LABEL: func.func @dot(%a: tensor<16x8xf32>, %at: tensor<8x16xf32>, %b: tensor<8x32xf32>, %bt: tensor<32x8xf32>, %acc: tensor<16x32xf32>, %x: tensor<4x16x8xf16>, %y: tensor<4x8x32xf16>, %yt: tensor<4x32x8xf16>, %bacc: tensor<4x16x32xf16>, %ia: tensor<2x3xi32>, %ib: tensor<3x5xi32>) -> tensor<16x32xf32> {
// CHECK-NEXT:    %d0 = tile.dot %a, %b : (tensor<16x8xf32>, tensor<8x32xf32>) -> tensor<16x32xf32>
// CHECK-NEXT:    %d1 = tile.dot %a, %b, %acc : (tensor<16x8xf32>, tensor<8x32xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
// CHECK-NEXT:    %d2 = tile.dot %at, %b transpose_a : (tensor<8x16xf32>, tensor<8x32xf32>) -> tensor<16x32xf32>
// CHECK-NEXT:    %d3 = tile.dot %a, %bt transpose_b : (tensor<16x8xf32>, tensor<32x8xf32>) -> tensor<16x32xf32>
// CHECK-NEXT:    %d4 = tile.dot %at, %bt transpose_a transpose_b : (tensor<8x16xf32>, tensor<32x8xf32>) -> tensor<16x32xf32>
// CHECK-NEXT:    %d5 = tile.dot %at, %bt, %d4 transpose_a transpose_b : (tensor<8x16xf32>, tensor<32x8xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
// CHECK-NEXT:    %d6 = tile.dot %a, %bt, %acc transpose_b {note} : (tensor<16x8xf32>, tensor<32x8xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
// CHECK-NEXT:    %b0 = tile.dot %x, %y : (tensor<4x16x8xf16>, tensor<4x8x32xf16>) -> tensor<4x16x32xf16>
// CHECK-NEXT:    %b1 = tile.dot %x, %yt, %bacc transpose_b : (tensor<4x16x8xf16>, tensor<4x32x8xf16>, tensor<4x16x32xf16>) -> tensor<4x16x32xf16>
// CHECK-NEXT:    %i0 = tile.dot %ia, %ib : (tensor<2x3xi32>, tensor<3x5xi32>) -> tensor<2x5xi32>
// CHECK-NEXT:    %v = tile.dot %a, %at : (tensor<16x8xf32>, tensor<8x16xf32>) -> tensor<16x16xf32>
// CHECK-NEXT:    func.return %d6 : tensor<16x32xf32>
// CHECK-NEXT:  }

// CHECK-GENERIC-LABEL: "func.func"() <{sym_name = "dot", function_type = (tensor<16x8xf32>, tensor<8x16xf32>, tensor<8x32xf32>, tensor<32x8xf32>, tensor<16x32xf32>, tensor<4x16x8xf16>, tensor<4x8x32xf16>, tensor<4x32x8xf16>, tensor<4x16x32xf16>, tensor<2x3xi32>, tensor<3x5xi32>) -> tensor<16x32xf32>}> ({
// CHECK-GENERIC:         %d0 = "tile.dot"(%a, %b) : (tensor<16x8xf32>, tensor<8x32xf32>) -> tensor<16x32xf32>
// CHECK-GENERIC:         %d1 = "tile.dot"(%a, %b, %acc) : (tensor<16x8xf32>, tensor<8x32xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
// CHECK-GENERIC:         %d2 = "tile.dot"(%at, %b) <{transpose_a}> : (tensor<8x16xf32>, tensor<8x32xf32>) -> tensor<16x32xf32>
// CHECK-GENERIC:         %d3 = "tile.dot"(%a, %bt) <{transpose_b}> : (tensor<16x8xf32>, tensor<32x8xf32>) -> tensor<16x32xf32>
// CHECK-GENERIC:         %d4 = "tile.dot"(%at, %bt) <{transpose_a, transpose_b}> : (tensor<8x16xf32>, tensor<32x8xf32>) -> tensor<16x32xf32>
// CHECK-GENERIC:         %d5 = "tile.dot"(%at, %bt, %d4) <{transpose_a, transpose_b}> : (tensor<8x16xf32>, tensor<32x8xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
// CHECK-GENERIC:         %d6 = "tile.dot"(%a, %bt, %acc) <{transpose_b}> {note} : (tensor<16x8xf32>, tensor<32x8xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
// CHECK-GENERIC:         %b1 = "tile.dot"(%x, %yt, %bacc) <{transpose_b}> : (tensor<4x16x8xf16>, tensor<4x32x8xf16>, tensor<4x16x32xf16>) -> tensor<4x16x32xf16>

func.func @dot(%a: tensor<16x8xf32>, %at: tensor<8x16xf32>, %b: tensor<8x32xf32>, %bt: tensor<32x8xf32>, %acc: tensor<16x32xf32>, %x: tensor<4x16x8xf16>, %y: tensor<4x8x32xf16>, %yt: tensor<4x32x8xf16>, %bacc: tensor<4x16x32xf16>, %ia: tensor<2x3xi32>, %ib: tensor<3x5xi32>) -> tensor<16x32xf32> {
  %d0 = tile.dot %a, %b : (tensor<16x8xf32>, tensor<8x32xf32>) -> tensor<16x32xf32>
  %d1 = tile.dot %a, %b, %acc : (tensor<16x8xf32>, tensor<8x32xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
  %d2 = tile.dot %at, %b transpose_a : (tensor<8x16xf32>, tensor<8x32xf32>) -> tensor<16x32xf32>
  %d3 = tile.dot %a, %bt transpose_b : (tensor<16x8xf32>, tensor<32x8xf32>) -> tensor<16x32xf32>
  %d4 = tile.dot %at, %bt transpose_a transpose_b : (tensor<8x16xf32>, tensor<32x8xf32>) -> tensor<16x32xf32>
  %d5 = tile.dot %at, %bt, %d4 transpose_a transpose_b : (tensor<8x16xf32>, tensor<32x8xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
  %d6 = tile.dot %a, %bt, %acc transpose_b {note} : (tensor<16x8xf32>, tensor<32x8xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
  %b0 = tile.dot %x, %y : (tensor<4x16x8xf16>, tensor<4x8x32xf16>) -> tensor<4x16x32xf16>
  %b1 = tile.dot %x, %yt, %bacc transpose_b : (tensor<4x16x8xf16>, tensor<4x32x8xf16>, tensor<4x16x32xf16>) -> tensor<4x16x32xf16>
  %i0 = tile.dot %ia, %ib : (tensor<2x3xi32>, tensor<3x5xi32>) -> tensor<2x5xi32>
  %v = tile.dot %a, %at : (tensor<16x8xf32>, tensor<8x16xf32>) -> tensor<16x16xf32>
  func.return %d6 : tensor<16x32xf32>
}

// tile.reduce: each kind, positive and negative axes, f32 / f16 / i32.

// CHECK-LABEL: func.func @reduce(%s: tensor<16x64xf32>, %t: tensor<2x4x8xf16>, %v: tensor<8xi32>) -> tensor<16x1xf32> {
// CHECK-NEXT:    %sum = tile.reduce sum %s axis = 1 : tensor<16x64xf32> -> tensor<16x1xf32>
// CHECK-NEXT:    %max = tile.reduce max %s axis = 0 : tensor<16x64xf32> -> tensor<1x64xf32>
// CHECK-NEXT:    %min = tile.reduce min %s axis = -1 : tensor<16x64xf32> -> tensor<16x1xf32>
// CHECK-NEXT:    %neg = tile.reduce sum %t axis = -2 : tensor<2x4x8xf16> -> tensor<2x1x8xf16>
// CHECK-NEXT:    %mid = tile.reduce max %t axis = 1 {note} : tensor<2x4x8xf16> -> tensor<2x1x8xf16>
// CHECK-NEXT:    %vec = tile.reduce min %v axis = 0 : tensor<8xi32> -> tensor<1xi32>
// CHECK-NEXT:    func.return %sum : tensor<16x1xf32>
// CHECK-NEXT:  }

// CHECK-GENERIC-LABEL: "func.func"() <{sym_name = "reduce", function_type = (tensor<16x64xf32>, tensor<2x4x8xf16>, tensor<8xi32>) -> tensor<16x1xf32>}> ({
// CHECK-GENERIC:         %sum = "tile.reduce"(%s) <{kind = #tile<reduce_kind sum>, axis = 1 : i64}> : (tensor<16x64xf32>) -> tensor<16x1xf32>
// CHECK-GENERIC:         %max = "tile.reduce"(%s) <{kind = #tile<reduce_kind max>, axis = 0 : i64}> : (tensor<16x64xf32>) -> tensor<1x64xf32>
// CHECK-GENERIC:         %min = "tile.reduce"(%s) <{kind = #tile<reduce_kind min>, axis = -1 : i64}> : (tensor<16x64xf32>) -> tensor<16x1xf32>
// CHECK-GENERIC:         %neg = "tile.reduce"(%t) <{kind = #tile<reduce_kind sum>, axis = -2 : i64}> : (tensor<2x4x8xf16>) -> tensor<2x1x8xf16>
// CHECK-GENERIC:         %mid = "tile.reduce"(%t) <{kind = #tile<reduce_kind max>, axis = 1 : i64}> {note} : (tensor<2x4x8xf16>) -> tensor<2x1x8xf16>

func.func @reduce(%s: tensor<16x64xf32>, %t: tensor<2x4x8xf16>, %v: tensor<8xi32>) -> tensor<16x1xf32> {
  %sum = tile.reduce sum %s axis = 1 : tensor<16x64xf32> -> tensor<16x1xf32>
  %max = tile.reduce max %s axis = 0 : tensor<16x64xf32> -> tensor<1x64xf32>
  %min = tile.reduce min %s axis = -1 : tensor<16x64xf32> -> tensor<16x1xf32>
  %neg = tile.reduce sum %t axis = -2 : tensor<2x4x8xf16> -> tensor<2x1x8xf16>
  %mid = tile.reduce max %t axis = 1 {note} : tensor<2x4x8xf16> -> tensor<2x1x8xf16>
  %vec = tile.reduce min %v axis = 0 : tensor<8xi32> -> tensor<1xi32>
  func.return %sum : tensor<16x1xf32>
}

// tile.map with every named kind: unary, binary, and binary with numpy broadcasting
// (size-1 dims, missing leading dims, rank-0 operands).

// CHECK-LABEL: func.func @map_kinds(%x: tensor<16x64xf32>, %m: tensor<16x1xf32>, %r: tensor<64xf32>, %c: tensor<1x64xf32>, %s: tensor<f32>, %i: tensor<4xi32>) -> tensor<16x64xf32> {
// CHECK-NEXT:    %exp = tile.map exp %x : (tensor<16x64xf32>) -> tensor<16x64xf32>
// CHECK-NEXT:    %log = tile.map log %x : (tensor<16x64xf32>) -> tensor<16x64xf32>
// CHECK-NEXT:    %neg = tile.map neg %x : (tensor<16x64xf32>) -> tensor<16x64xf32>
// CHECK-NEXT:    %abs = tile.map abs %x : (tensor<16x64xf32>) -> tensor<16x64xf32>
// CHECK-NEXT:    %relu = tile.map relu %x : (tensor<16x64xf32>) -> tensor<16x64xf32>
// CHECK-NEXT:    %sig = tile.map sigmoid %x : (tensor<16x64xf32>) -> tensor<16x64xf32>
// CHECK-NEXT:    %tanh = tile.map tanh %x : (tensor<16x64xf32>) -> tensor<16x64xf32>
// CHECK-NEXT:    %erf = tile.map erf %x : (tensor<16x64xf32>) -> tensor<16x64xf32>
// CHECK-NEXT:    %sqrt = tile.map sqrt %x : (tensor<16x64xf32>) -> tensor<16x64xf32>
// CHECK-NEXT:    %rsqrt = tile.map rsqrt %m : (tensor<16x1xf32>) -> tensor<16x1xf32>
// CHECK-NEXT:    %recip = tile.map recip %m : (tensor<16x1xf32>) -> tensor<16x1xf32>
// CHECK-NEXT:    %gelu = tile.map gelu %x : (tensor<16x64xf32>) -> tensor<16x64xf32>
// CHECK-NEXT:    %gelut = tile.map gelu_tanh %x : (tensor<16x64xf32>) -> tensor<16x64xf32>
// CHECK-NEXT:    %silu = tile.map silu %x : (tensor<16x64xf32>) -> tensor<16x64xf32>
// CHECK-NEXT:    %add = tile.map add %x, %x : (tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<16x64xf32>
// CHECK-NEXT:    %sub = tile.map sub %x, %m : (tensor<16x64xf32>, tensor<16x1xf32>) -> tensor<16x64xf32>
// CHECK-NEXT:    %mul = tile.map mul %x, %r : (tensor<16x64xf32>, tensor<64xf32>) -> tensor<16x64xf32>
// CHECK-NEXT:    %div = tile.map div %m, %c : (tensor<16x1xf32>, tensor<1x64xf32>) -> tensor<16x64xf32>
// CHECK-NEXT:    %max = tile.map max %s, %x : (tensor<f32>, tensor<16x64xf32>) -> tensor<16x64xf32>
// CHECK-NEXT:    %min = tile.map min %i, %i {note} : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
// CHECK-NEXT:    %ss = tile.map neg %s : (tensor<f32>) -> tensor<f32>
// CHECK-NEXT:    func.return %sub : tensor<16x64xf32>
// CHECK-NEXT:  }

// CHECK-GENERIC-LABEL: "func.func"() <{sym_name = "map_kinds", function_type = (tensor<16x64xf32>, tensor<16x1xf32>, tensor<64xf32>, tensor<1x64xf32>, tensor<f32>, tensor<4xi32>) -> tensor<16x64xf32>}> ({
// CHECK-GENERIC:         %exp = "tile.map"(%x) <{kind = "exp"}> ({
// CHECK-GENERIC-NEXT:    }) : (tensor<16x64xf32>) -> tensor<16x64xf32>
// CHECK-GENERIC:         %sub = "tile.map"(%x, %m) <{kind = "sub"}> ({
// CHECK-GENERIC-NEXT:    }) : (tensor<16x64xf32>, tensor<16x1xf32>) -> tensor<16x64xf32>
// CHECK-GENERIC:         %min = "tile.map"(%i, %i) <{kind = "min"}> ({
// CHECK-GENERIC-NEXT:    }) {note} : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>

func.func @map_kinds(%x: tensor<16x64xf32>, %m: tensor<16x1xf32>, %r: tensor<64xf32>, %c: tensor<1x64xf32>, %s: tensor<f32>, %i: tensor<4xi32>) -> tensor<16x64xf32> {
  %exp = tile.map exp %x : (tensor<16x64xf32>) -> tensor<16x64xf32>
  %log = tile.map log %x : (tensor<16x64xf32>) -> tensor<16x64xf32>
  %neg = tile.map neg %x : (tensor<16x64xf32>) -> tensor<16x64xf32>
  %abs = tile.map abs %x : (tensor<16x64xf32>) -> tensor<16x64xf32>
  %relu = tile.map relu %x : (tensor<16x64xf32>) -> tensor<16x64xf32>
  %sig = tile.map sigmoid %x : (tensor<16x64xf32>) -> tensor<16x64xf32>
  %tanh = tile.map tanh %x : (tensor<16x64xf32>) -> tensor<16x64xf32>
  %erf = tile.map erf %x : (tensor<16x64xf32>) -> tensor<16x64xf32>
  %sqrt = tile.map sqrt %x : (tensor<16x64xf32>) -> tensor<16x64xf32>
  %rsqrt = tile.map rsqrt %m : (tensor<16x1xf32>) -> tensor<16x1xf32>
  %recip = tile.map recip %m : (tensor<16x1xf32>) -> tensor<16x1xf32>
  %gelu = tile.map gelu %x : (tensor<16x64xf32>) -> tensor<16x64xf32>
  %gelut = tile.map gelu_tanh %x : (tensor<16x64xf32>) -> tensor<16x64xf32>
  %silu = tile.map silu %x : (tensor<16x64xf32>) -> tensor<16x64xf32>
  %add = tile.map add %x, %x : (tensor<16x64xf32>, tensor<16x64xf32>) -> tensor<16x64xf32>
  %sub = tile.map sub %x, %m : (tensor<16x64xf32>, tensor<16x1xf32>) -> tensor<16x64xf32>
  %mul = tile.map mul %x, %r : (tensor<16x64xf32>, tensor<64xf32>) -> tensor<16x64xf32>
  %div = tile.map div %m, %c : (tensor<16x1xf32>, tensor<1x64xf32>) -> tensor<16x64xf32>
  %max = tile.map max %s, %x : (tensor<f32>, tensor<16x64xf32>) -> tensor<16x64xf32>
  %min = tile.map min %i, %i {note} : (tensor<4xi32>, tensor<4xi32>) -> tensor<4xi32>
  %ss = tile.map neg %s : (tensor<f32>) -> tensor<f32>
  func.return %sub : tensor<16x64xf32>
}

// tile.map with an arith/math body: unary, binary broadcasting, an i1 result, mixed
// input element types, and a body that yields its argument.

// CHECK-LABEL: func.func @map_bodies(%x: tensor<16x64xf32>, %m: tensor<16x1xf32>, %h: tensor<16x64xf16>) -> tensor<16x64xf32> {
// CHECK-NEXT:    %scaled = tile.map %x : (tensor<16x64xf32>) -> tensor<16x64xf32> {
// CHECK-NEXT:    ^bb0(%v: f32):
// CHECK-NEXT:      %k = arith.constant 1.250000e-01 : f32
// CHECK-NEXT:      %p = arith.mulf %v, %k : f32
// CHECK-NEXT:      tile.yield %p : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    %e = tile.map %x, %m : (tensor<16x64xf32>, tensor<16x1xf32>) -> tensor<16x64xf32> {
// CHECK-NEXT:    ^bb0(%a: f32, %b: f32):
// CHECK-NEXT:      %d = arith.subf %a, %b : f32
// CHECK-NEXT:      %ex = math.exp %d : f32
// CHECK-NEXT:      tile.yield %ex : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    %lt = tile.map %x, %m {note} : (tensor<16x64xf32>, tensor<16x1xf32>) -> tensor<16x64xi1> {
// CHECK-NEXT:    ^bb0(%p0: f32, %p1: f32):
// CHECK-NEXT:      %c = arith.cmpf olt, %p0, %p1 : f32
// CHECK-NEXT:      tile.yield %c : i1
// CHECK-NEXT:    }
// CHECK-NEXT:    %mixed = tile.map %h, %x : (tensor<16x64xf16>, tensor<16x64xf32>) -> tensor<16x64xf32> {
// CHECK-NEXT:    ^bb0(%q0: f16, %q1: f32):
// CHECK-NEXT:      %w = arith.extf %q0 : f16 to f32
// CHECK-NEXT:      %y = arith.addf %w, %q1 : f32
// CHECK-NEXT:      tile.yield %y : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    %id = tile.map %x : (tensor<16x64xf32>) -> tensor<16x64xf32> {
// CHECK-NEXT:    ^bb0(%u: f32):
// CHECK-NEXT:      tile.yield %u : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %e : tensor<16x64xf32>
// CHECK-NEXT:  }

// CHECK-GENERIC-LABEL: "func.func"() <{sym_name = "map_bodies", function_type = (tensor<16x64xf32>, tensor<16x1xf32>, tensor<16x64xf16>) -> tensor<16x64xf32>}> ({
// CHECK-GENERIC-NEXT:  ^bb0(%x: tensor<16x64xf32>, %m: tensor<16x1xf32>, %h: tensor<16x64xf16>):
// CHECK-GENERIC-NEXT:    %scaled = "tile.map"(%x) ({
// CHECK-GENERIC-NEXT:    ^bb0(%v: f32):
// CHECK-GENERIC-NEXT:      %k = "arith.constant"() <{value = 1.250000e-01 : f32}> : () -> f32
// CHECK-GENERIC-NEXT:      %p = "arith.mulf"(%v, %k) <{fastmath = #arith.fastmath<none>}> : (f32, f32) -> f32
// CHECK-GENERIC-NEXT:      "tile.yield"(%p) : (f32) -> ()
// CHECK-GENERIC-NEXT:    }) : (tensor<16x64xf32>) -> tensor<16x64xf32>
// CHECK-GENERIC-NEXT:    %e = "tile.map"(%x, %m) ({
// CHECK-GENERIC-NEXT:    ^bb0(%a: f32, %b: f32):
// CHECK-GENERIC-NEXT:      %d = "arith.subf"(%a, %b) <{fastmath = #arith.fastmath<none>}> : (f32, f32) -> f32
// CHECK-GENERIC-NEXT:      %ex = "math.exp"(%d) <{fastmath = #arith.fastmath<none>}> : (f32) -> f32
// CHECK-GENERIC-NEXT:      "tile.yield"(%ex) : (f32) -> ()
// CHECK-GENERIC-NEXT:    }) : (tensor<16x64xf32>, tensor<16x1xf32>) -> tensor<16x64xf32>
// CHECK-GENERIC-NEXT:    %lt = "tile.map"(%x, %m) ({
// CHECK-GENERIC-NEXT:    ^bb0(%p0: f32, %p1: f32):
// CHECK-GENERIC-NEXT:      %c = "arith.cmpf"(%p0, %p1) <{predicate = 4 : i64, fastmath = #arith.fastmath<none>}> : (f32, f32) -> i1
// CHECK-GENERIC-NEXT:      "tile.yield"(%c) : (i1) -> ()
// CHECK-GENERIC-NEXT:    }) {note} : (tensor<16x64xf32>, tensor<16x1xf32>) -> tensor<16x64xi1>
// CHECK-GENERIC-NEXT:    %mixed = "tile.map"(%h, %x) ({
// CHECK-GENERIC-NEXT:    ^bb0(%q0: f16, %q1: f32):
// CHECK-GENERIC-NEXT:      %w = "arith.extf"(%q0) : (f16) -> f32
// CHECK-GENERIC-NEXT:      %y = "arith.addf"(%w, %q1) <{fastmath = #arith.fastmath<none>}> : (f32, f32) -> f32
// CHECK-GENERIC-NEXT:      "tile.yield"(%y) : (f32) -> ()
// CHECK-GENERIC-NEXT:    }) : (tensor<16x64xf16>, tensor<16x64xf32>) -> tensor<16x64xf32>
// CHECK-GENERIC-NEXT:    %id = "tile.map"(%x) ({
// CHECK-GENERIC-NEXT:    ^bb0(%u: f32):
// CHECK-GENERIC-NEXT:      "tile.yield"(%u) : (f32) -> ()
// CHECK-GENERIC-NEXT:    }) : (tensor<16x64xf32>) -> tensor<16x64xf32>
// CHECK-GENERIC-NEXT:    "func.return"(%e) : (tensor<16x64xf32>) -> ()

func.func @map_bodies(%x: tensor<16x64xf32>, %m: tensor<16x1xf32>, %h: tensor<16x64xf16>) -> tensor<16x64xf32> {
  %scaled = tile.map %x : (tensor<16x64xf32>) -> tensor<16x64xf32> {
  ^bb0(%v: f32):
    %k = arith.constant 1.250000e-01 : f32
    %p = arith.mulf %v, %k : f32
    tile.yield %p : f32
  }
  %e = tile.map %x, %m : (tensor<16x64xf32>, tensor<16x1xf32>) -> tensor<16x64xf32> {
  ^bb0(%a: f32, %b: f32):
    %d = arith.subf %a, %b : f32
    %ex = math.exp %d : f32
    tile.yield %ex : f32
  }
  %lt = tile.map %x, %m {note} : (tensor<16x64xf32>, tensor<16x1xf32>) -> tensor<16x64xi1> {
  ^bb0(%p0: f32, %p1: f32):
    %c = arith.cmpf olt, %p0, %p1 : f32
    tile.yield %c : i1
  }
  %mixed = tile.map %h, %x : (tensor<16x64xf16>, tensor<16x64xf32>) -> tensor<16x64xf32> {
  ^bb0(%q0: f16, %q1: f32):
    %w = arith.extf %q0 : f16 to f32
    %y = arith.addf %w, %q1 : f32
    tile.yield %y : f32
  }
  %id = tile.map %x : (tensor<16x64xf32>) -> tensor<16x64xf32> {
  ^bb0(%u: f32):
    tile.yield %u : f32
  }
  func.return %e : tensor<16x64xf32>
}

// tile.broadcast, tile.cast, tile.transpose and tile.reshape.

// CHECK-LABEL: func.func @data_movement(%m: tensor<16x1xf32>, %r: tensor<64xf32>, %s: tensor<f32>, %x: tensor<16x8xf32>, %t: tensor<2x3x4xf32>, %f: tensor<4x16xf32>) -> tensor<16x64xf32> {
// CHECK-NEXT:    %b0 = tile.broadcast %m : tensor<16x1xf32> -> tensor<16x64xf32>
// CHECK-NEXT:    %b1 = tile.broadcast %r : tensor<64xf32> -> tensor<16x64xf32>
// CHECK-NEXT:    %b2 = tile.broadcast %s : tensor<f32> -> tensor<4x4xf32>
// CHECK-NEXT:    %b3 = tile.broadcast %m {note} : tensor<16x1xf32> -> tensor<2x16x8xf32>
// CHECK-NEXT:    %b4 = tile.broadcast %m : tensor<16x1xf32> -> tensor<16x1xf32>
// CHECK-NEXT:    %c0 = tile.cast %x : tensor<16x8xf32> -> tensor<16x8xf16>
// CHECK-NEXT:    %c1 = tile.cast %c0 : tensor<16x8xf16> -> tensor<16x8xf32>
// CHECK-NEXT:    %c2 = tile.cast %x : tensor<16x8xf32> -> tensor<16x8xi32>
// CHECK-NEXT:    %c3 = tile.cast %c2 {note} : tensor<16x8xi32> -> tensor<16x8xbf16>
// CHECK-NEXT:    %t0 = tile.transpose %x perm = [1, 0] : tensor<16x8xf32> -> tensor<8x16xf32>
// CHECK-NEXT:    %t1 = tile.transpose %t perm = [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
// CHECK-NEXT:    %t2 = tile.transpose %t perm = [0, 1, 2] {note} : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
// CHECK-NEXT:    %r0 = tile.reshape %f : tensor<4x16xf32> -> tensor<64xf32>
// CHECK-NEXT:    %r1 = tile.reshape %r0 : tensor<64xf32> -> tensor<8x8xf32>
// CHECK-NEXT:    %r2 = tile.reshape %r1 {note} : tensor<8x8xf32> -> tensor<1x64x1xf32>
// CHECK-NEXT:    %r3 = tile.reshape %s : tensor<f32> -> tensor<1x1xf32>
// CHECK-NEXT:    func.return %b0 : tensor<16x64xf32>
// CHECK-NEXT:  }

// CHECK-GENERIC-LABEL: "func.func"() <{sym_name = "data_movement", function_type = (tensor<16x1xf32>, tensor<64xf32>, tensor<f32>, tensor<16x8xf32>, tensor<2x3x4xf32>, tensor<4x16xf32>) -> tensor<16x64xf32>}> ({
// CHECK-GENERIC:         %b0 = "tile.broadcast"(%m) : (tensor<16x1xf32>) -> tensor<16x64xf32>
// CHECK-GENERIC:         %b3 = "tile.broadcast"(%m) {note} : (tensor<16x1xf32>) -> tensor<2x16x8xf32>
// CHECK-GENERIC:         %c0 = "tile.cast"(%x) : (tensor<16x8xf32>) -> tensor<16x8xf16>
// CHECK-GENERIC:         %c3 = "tile.cast"(%c2) {note} : (tensor<16x8xi32>) -> tensor<16x8xbf16>
// CHECK-GENERIC:         %t1 = "tile.transpose"(%t) <{perm = array<i64: 2, 0, 1>}> : (tensor<2x3x4xf32>) -> tensor<4x2x3xf32>
// CHECK-GENERIC:         %t2 = "tile.transpose"(%t) <{perm = array<i64: 0, 1, 2>}> {note} : (tensor<2x3x4xf32>) -> tensor<2x3x4xf32>
// CHECK-GENERIC:         %r2 = "tile.reshape"(%r1) {note} : (tensor<8x8xf32>) -> tensor<1x64x1xf32>

func.func @data_movement(%m: tensor<16x1xf32>, %r: tensor<64xf32>, %s: tensor<f32>, %x: tensor<16x8xf32>, %t: tensor<2x3x4xf32>, %f: tensor<4x16xf32>) -> tensor<16x64xf32> {
  %b0 = tile.broadcast %m : tensor<16x1xf32> -> tensor<16x64xf32>
  %b1 = tile.broadcast %r : tensor<64xf32> -> tensor<16x64xf32>
  %b2 = tile.broadcast %s : tensor<f32> -> tensor<4x4xf32>
  %b3 = tile.broadcast %m {note} : tensor<16x1xf32> -> tensor<2x16x8xf32>
  %b4 = tile.broadcast %m : tensor<16x1xf32> -> tensor<16x1xf32>
  %c0 = tile.cast %x : tensor<16x8xf32> -> tensor<16x8xf16>
  %c1 = tile.cast %c0 : tensor<16x8xf16> -> tensor<16x8xf32>
  %c2 = tile.cast %x : tensor<16x8xf32> -> tensor<16x8xi32>
  %c3 = tile.cast %c2 {note} : tensor<16x8xi32> -> tensor<16x8xbf16>
  %t0 = tile.transpose %x perm = [1, 0] : tensor<16x8xf32> -> tensor<8x16xf32>
  %t1 = tile.transpose %t perm = [2, 0, 1] : tensor<2x3x4xf32> -> tensor<4x2x3xf32>
  %t2 = tile.transpose %t perm = [0, 1, 2] {note} : tensor<2x3x4xf32> -> tensor<2x3x4xf32>
  %r0 = tile.reshape %f : tensor<4x16xf32> -> tensor<64xf32>
  %r1 = tile.reshape %r0 : tensor<64xf32> -> tensor<8x8xf32>
  %r2 = tile.reshape %r1 {note} : tensor<8x8xf32> -> tensor<1x64x1xf32>
  %r3 = tile.reshape %s : tensor<f32> -> tensor<1x1xf32>
  func.return %b0 : tensor<16x64xf32>
}

// A blocked matmul: tile.for nests carrying the output tensor (parallel) around a K loop
// carrying an accumulator block (reduction).

// CHECK-LABEL: func.func @matmul(%A: tensor<64x64xf32>, %B: tensor<64x64xf32>, %C: tensor<64x64xf32>) -> tensor<64x64xf32> {
// CHECK-NEXT:    %zero = tile.fill 0.000000e+00 : tensor<16x32xf32>
// CHECK-NEXT:    %ri = tile.for %i = 0 to 64 step 16 iter_args(%ci = %C) -> (tensor<64x64xf32>) parallel {
// CHECK-NEXT:      %rj = tile.for %j = 0 to 64 step 32 iter_args(%cj = %ci) -> (tensor<64x64xf32>) parallel {
// CHECK-NEXT:        %acc = tile.for %k = 0 to 64 step 16 iter_args(%c = %zero) -> (tensor<16x32xf32>) reduction {
// CHECK-NEXT:          %a = tile.load %A[%i, %k] : tensor<64x64xf32> -> tensor<16x16xf32>
// CHECK-NEXT:          %b = tile.load %B[%k, %j] : tensor<64x64xf32> -> tensor<16x32xf32>
// CHECK-NEXT:          %c2 = tile.dot %a, %b, %c : (tensor<16x16xf32>, tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
// CHECK-NEXT:          tile.yield %c2 : tensor<16x32xf32>
// CHECK-NEXT:        }
// CHECK-NEXT:        %cj2 = tile.store %acc, %cj[%i, %j] : tensor<16x32xf32> -> tensor<64x64xf32>
// CHECK-NEXT:        tile.yield %cj2 : tensor<64x64xf32>
// CHECK-NEXT:      }
// CHECK-NEXT:      tile.yield %rj : tensor<64x64xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %ri : tensor<64x64xf32>
// CHECK-NEXT:  }

// CHECK-GENERIC-LABEL: "func.func"() <{sym_name = "matmul", function_type = (tensor<64x64xf32>, tensor<64x64xf32>, tensor<64x64xf32>) -> tensor<64x64xf32>}> ({
// CHECK-GENERIC-NEXT:  ^bb0(%A: tensor<64x64xf32>, %B: tensor<64x64xf32>, %C: tensor<64x64xf32>):
// CHECK-GENERIC-NEXT:    %zero = "tile.fill"() <{value = 0.000000e+00 : f64}> : () -> tensor<16x32xf32>
// CHECK-GENERIC-NEXT:    %ri = "tile.for"(%C) <{lb = 0 : i64, ub = 64 : i64, step = 16 : i64, kind = #tile<loop_kind parallel>}> ({
// CHECK-GENERIC-NEXT:    ^bb0(%i: index, %ci: tensor<64x64xf32>):
// CHECK-GENERIC-NEXT:      %rj = "tile.for"(%ci) <{lb = 0 : i64, ub = 64 : i64, step = 32 : i64, kind = #tile<loop_kind parallel>}> ({
// CHECK-GENERIC-NEXT:      ^bb0(%j: index, %cj: tensor<64x64xf32>):
// CHECK-GENERIC-NEXT:        %acc = "tile.for"(%zero) <{lb = 0 : i64, ub = 64 : i64, step = 16 : i64, kind = #tile<loop_kind reduction>}> ({
// CHECK-GENERIC-NEXT:        ^bb0(%k: index, %c: tensor<16x32xf32>):
// CHECK-GENERIC-NEXT:          %a = "tile.load"(%A, %i, %k) <{operandSegmentSizes = array<i32: 1, 2, 0>}> : (tensor<64x64xf32>, index, index) -> tensor<16x16xf32>
// CHECK-GENERIC-NEXT:          %b = "tile.load"(%B, %k, %j) <{operandSegmentSizes = array<i32: 1, 2, 0>}> : (tensor<64x64xf32>, index, index) -> tensor<16x32xf32>
// CHECK-GENERIC-NEXT:          %c2 = "tile.dot"(%a, %b, %c) : (tensor<16x16xf32>, tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
// CHECK-GENERIC-NEXT:          "tile.yield"(%c2) : (tensor<16x32xf32>) -> ()
// CHECK-GENERIC-NEXT:        }) : (tensor<16x32xf32>) -> tensor<16x32xf32>
// CHECK-GENERIC-NEXT:        %cj2 = "tile.store"(%acc, %cj, %i, %j) : (tensor<16x32xf32>, tensor<64x64xf32>, index, index) -> tensor<64x64xf32>
// CHECK-GENERIC-NEXT:        "tile.yield"(%cj2) : (tensor<64x64xf32>) -> ()
// CHECK-GENERIC-NEXT:      }) : (tensor<64x64xf32>) -> tensor<64x64xf32>
// CHECK-GENERIC-NEXT:      "tile.yield"(%rj) : (tensor<64x64xf32>) -> ()
// CHECK-GENERIC-NEXT:    }) : (tensor<64x64xf32>) -> tensor<64x64xf32>
// CHECK-GENERIC-NEXT:    "func.return"(%ri) : (tensor<64x64xf32>) -> ()

func.func @matmul(%A: tensor<64x64xf32>, %B: tensor<64x64xf32>, %C: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %zero = tile.fill 0.0 : tensor<16x32xf32>
  %ri = tile.for %i = 0 to 64 step 16 iter_args(%ci = %C) -> (tensor<64x64xf32>) parallel {
    %rj = tile.for %j = 0 to 64 step 32 iter_args(%cj = %ci) -> (tensor<64x64xf32>) parallel {
      %acc = tile.for %k = 0 to 64 step 16 iter_args(%c = %zero) -> (tensor<16x32xf32>) reduction {
        %a = tile.load %A[%i, %k] : tensor<64x64xf32> -> tensor<16x16xf32>
        %b = tile.load %B[%k, %j] : tensor<64x64xf32> -> tensor<16x32xf32>
        %c2 = tile.dot %a, %b, %c : (tensor<16x16xf32>, tensor<16x32xf32>, tensor<16x32xf32>) -> tensor<16x32xf32>
        tile.yield %c2 : tensor<16x32xf32>
      }
      %cj2 = tile.store %acc, %cj[%i, %j] : tensor<16x32xf32> -> tensor<64x64xf32>
      tile.yield %cj2 : tensor<64x64xf32>
    }
    tile.yield %rj : tensor<64x64xf32>
  }
  func.return %ri : tensor<64x64xf32>
}

// tile.for without iter_args, nested, with an attribute dictionary, several iter_args,
// negative bounds and a step that does not divide the range, and zero trips.

// CHECK-LABEL: func.func @loops(%x: tensor<4x4xf32>, %y: tensor<4x1xf32>) -> tensor<4x4xf32> {
// CHECK-NEXT:    tile.for %i = 0 to 4 step 1 parallel {
// CHECK-NEXT:      tile.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    tile.for %i1 = 2 to 3 step 5 reduction {
// CHECK-NEXT:      tile.for %j = 0 to 8 step 4 parallel {
// CHECK-NEXT:        tile.yield
// CHECK-NEXT:      }
// CHECK-NEXT:      tile.yield
// CHECK-NEXT:    } {note = 1 : i64}
// CHECK-NEXT:    %r, %r_1 = tile.for %i2 = -4 to 10 step 3 iter_args(%a = %x, %b = %y) -> (tensor<4x4xf32>, tensor<4x1xf32>) reduction {
// CHECK-NEXT:      %a2 = tile.map add %a, %b : (tensor<4x4xf32>, tensor<4x1xf32>) -> tensor<4x4xf32>
// CHECK-NEXT:      tile.yield %a2, %b : tensor<4x4xf32>, tensor<4x1xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    %e = tile.for %i3 = 0 to 0 step 1 iter_args(%a3 = %x) -> (tensor<4x4xf32>) parallel {
// CHECK-NEXT:      tile.yield %x : tensor<4x4xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %r : tensor<4x4xf32>
// CHECK-NEXT:  }

// CHECK-GENERIC-LABEL: "func.func"() <{sym_name = "loops", function_type = (tensor<4x4xf32>, tensor<4x1xf32>) -> tensor<4x4xf32>}> ({
// CHECK-GENERIC-NEXT:  ^bb0(%x: tensor<4x4xf32>, %y: tensor<4x1xf32>):
// CHECK-GENERIC-NEXT:    "tile.for"() <{lb = 0 : i64, ub = 4 : i64, step = 1 : i64, kind = #tile<loop_kind parallel>}> ({
// CHECK-GENERIC-NEXT:    ^bb0(%i: index):
// CHECK-GENERIC-NEXT:      "tile.yield"() : () -> ()
// CHECK-GENERIC-NEXT:    }) : () -> ()
// CHECK-GENERIC-NEXT:    "tile.for"() <{lb = 2 : i64, ub = 3 : i64, step = 5 : i64, kind = #tile<loop_kind reduction>}> ({
// CHECK-GENERIC-NEXT:    ^bb0(%i1: index):
// CHECK-GENERIC-NEXT:      "tile.for"() <{lb = 0 : i64, ub = 8 : i64, step = 4 : i64, kind = #tile<loop_kind parallel>}> ({
// CHECK-GENERIC-NEXT:      ^bb0(%j: index):
// CHECK-GENERIC-NEXT:        "tile.yield"() : () -> ()
// CHECK-GENERIC-NEXT:      }) : () -> ()
// CHECK-GENERIC-NEXT:      "tile.yield"() : () -> ()
// CHECK-GENERIC-NEXT:    }) {note = 1 : i64} : () -> ()
// CHECK-GENERIC-NEXT:    %r, %r_1 = "tile.for"(%x, %y) <{lb = -4 : i64, ub = 10 : i64, step = 3 : i64, kind = #tile<loop_kind reduction>}> ({
// CHECK-GENERIC-NEXT:    ^bb0(%i2: index, %a: tensor<4x4xf32>, %b: tensor<4x1xf32>):
// CHECK-GENERIC-NEXT:      %a2 = "tile.map"(%a, %b) <{kind = "add"}> ({
// CHECK-GENERIC-NEXT:      }) : (tensor<4x4xf32>, tensor<4x1xf32>) -> tensor<4x4xf32>
// CHECK-GENERIC-NEXT:      "tile.yield"(%a2, %b) : (tensor<4x4xf32>, tensor<4x1xf32>) -> ()
// CHECK-GENERIC-NEXT:    }) : (tensor<4x4xf32>, tensor<4x1xf32>) -> (tensor<4x4xf32>, tensor<4x1xf32>)
// CHECK-GENERIC-NEXT:    %e = "tile.for"(%x) <{lb = 0 : i64, ub = 0 : i64, step = 1 : i64, kind = #tile<loop_kind parallel>}> ({
// CHECK-GENERIC-NEXT:    ^bb0(%i3: index, %a3: tensor<4x4xf32>):
// CHECK-GENERIC-NEXT:      "tile.yield"(%x) : (tensor<4x4xf32>) -> ()
// CHECK-GENERIC-NEXT:    }) : (tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK-GENERIC-NEXT:    "func.return"(%r) : (tensor<4x4xf32>) -> ()
// CHECK-GENERIC-NEXT:  }) : () -> ()

func.func @loops(%x: tensor<4x4xf32>, %y: tensor<4x1xf32>) -> tensor<4x4xf32> {
  tile.for %i = 0 to 4 step 1 parallel {
    tile.yield
  }
  tile.for %i1 = 2 to 3 step 5 reduction {
    tile.for %j = 0 to 8 step 4 parallel {
      tile.yield
    }
    tile.yield
  } {note = 1 : i64}
  %r:2 = tile.for %i2 = -4 to 10 step 3 iter_args(%a = %x, %b = %y) -> (tensor<4x4xf32>, tensor<4x1xf32>) reduction {
    %a2 = tile.map add %a, %b : (tensor<4x4xf32>, tensor<4x1xf32>) -> tensor<4x4xf32>
    tile.yield %a2, %b : tensor<4x4xf32>, tensor<4x1xf32>
  }
  %e = tile.for %i3 = 0 to 0 step 1 iter_args(%a3 = %x) -> (tensor<4x4xf32>) parallel {
    tile.yield %x : tensor<4x4xf32>
  }
  func.return %r#0 : tensor<4x4xf32>
}

// A padded tile.load: elements outside the tensor are the padding, so the block may
// start before the tensor and be larger than it.

// CHECK-LABEL: func.func @padded_load(%A: tensor<4x5xf32>, %i: index) -> tensor<6x8xf32> {
// CHECK-NEXT:    %cm2 = arith.constant -2 : index
// CHECK-NEXT:    %p = tile.load %A[%cm2, %i] padding 1.500000e+00 : tensor<4x5xf32> -> tensor<6x8xf32>
// CHECK-NEXT:    %q = tile.load %A[%cm2, %i] limits[%cm2, %i] padding 0.000000e+00 : tensor<4x5xf32> -> tensor<6x8xf32>
// CHECK-NEXT:    func.return %p : tensor<6x8xf32>
// CHECK-NEXT:  }

// CHECK-GENERIC-LABEL: "func.func"() <{sym_name = "padded_load", function_type = (tensor<4x5xf32>, index) -> tensor<6x8xf32>}> ({
// CHECK-GENERIC:         %p = "tile.load"(%A, %cm2, %i) <{padding = 1.500000e+00 : f64, operandSegmentSizes = array<i32: 1, 2, 0>}> : (tensor<4x5xf32>, index, index) -> tensor<6x8xf32>
// CHECK-GENERIC:         %q = "tile.load"(%A, %cm2, %i, %cm2, %i) <{padding = 0.000000e+00 : f64, operandSegmentSizes = array<i32: 1, 2, 2>}> : (tensor<4x5xf32>, index, index, index, index) -> tensor<6x8xf32>

func.func @padded_load(%A: tensor<4x5xf32>, %i: index) -> tensor<6x8xf32> {
  %cm2 = arith.constant -2 : index
  %p = tile.load %A[%cm2, %i] padding 1.5 : tensor<4x5xf32> -> tensor<6x8xf32>
  %q = tile.load %A[%cm2, %i] limits[%cm2, %i] padding 0.0 : tensor<4x5xf32> -> tensor<6x8xf32>
  func.return %p : tensor<6x8xf32>
}

// A host lookup: rows of a table argument by ids, along axis 0 and an inner axis.

// CHECK-LABEL: func.func @lookup(%t: tensor<16x8xf32>, %ids: tensor<2x3xi64>) -> (tensor<2x3x8xf32>, tensor<16x2x3xf32>) {
// CHECK-NEXT:    %e = tile.lookup %t[%ids] axis = 0 : (tensor<16x8xf32>, tensor<2x3xi64>) -> tensor<2x3x8xf32>
// CHECK-NEXT:    %c = tile.lookup %t[%ids] axis = -1 : (tensor<16x8xf32>, tensor<2x3xi64>) -> tensor<16x2x3xf32>
// CHECK-NEXT:    func.return %e, %c : tensor<2x3x8xf32>, tensor<16x2x3xf32>
// CHECK-NEXT:  }

// CHECK-GENERIC:         %e = "tile.lookup"(%t, %ids) <{axis = 0 : i64}> : (tensor<16x8xf32>, tensor<2x3xi64>) -> tensor<2x3x8xf32>

func.func @lookup(%t: tensor<16x8xf32>, %ids: tensor<2x3xi64>) -> (tensor<2x3x8xf32>, tensor<16x2x3xf32>) {
  %e = tile.lookup %t[%ids] axis = 0 : (tensor<16x8xf32>, tensor<2x3xi64>) -> tensor<2x3x8xf32>
  %c = tile.lookup %t[%ids] axis = -1 : (tensor<16x8xf32>, tensor<2x3xi64>) -> tensor<16x2x3xf32>
  func.return %e, %c : tensor<2x3x8xf32>, tensor<16x2x3xf32>
}
