// RUN: XDSL_ROUNDTRIP
// RUN: XDSL_GENERIC_ROUNDTRIP

// Every `graph` op in every syntactic variant: optional unit flags and properties present
// and absent, default-valued properties (which the custom syntax elides), several results,
// variadic operands, and integer and scalar tensors. CHECK lines hold the custom form after
// a generic round trip; CHECK-GENERIC lines the generic form, in which properties print
// in `<{...}>` and defaults are materialized.

// CHECK: builtin.module {
// CHECK-GENERIC: "builtin.module"() ({

// CHECK-LABEL: func.func @elementwise(%a: tensor<4x8xf32>, %b: tensor<8xf32>, %c: tensor<4x1xf32>, %i: tensor<4x8xi32>, %s: tensor<f32>) -> tensor<4x8xf32> {
// CHECK-NEXT:    %add = graph.add %a, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %sub = graph.sub %a, %c : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %mul = graph.mul %a, %a : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %div = graph.div %c, %b : (tensor<4x1xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %sca = graph.add %s, %a : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %iadd = graph.add %i, %i : (tensor<4x8xi32>, tensor<4x8xi32>) -> tensor<4x8xi32>
// CHECK-NEXT:    %scale = graph.scale %a by 1.250000e-01 : tensor<4x8xf32>
// CHECK-NEXT:    %iscale = graph.scale %i by 2.000000e+00 : tensor<4x8xi32>
// CHECK-NEXT:    %relu = graph.relu %a : tensor<4x8xf32>
// CHECK-NEXT:    %irelu = graph.relu %i : tensor<4x8xi32>
// CHECK-NEXT:    %gelu = graph.gelu %a : tensor<4x8xf32>
// CHECK-NEXT:    %gelut = graph.gelu %a tanh : tensor<4x8xf32>
// CHECK-NEXT:    %silu = graph.silu %a : tensor<4x8xf32>
// CHECK-NEXT:    %sig = graph.sigmoid %a : tensor<4x8xf32>
// CHECK-NEXT:    %tanh = graph.tanh %a : tensor<4x8xf32>
// CHECK-NEXT:    %exp = graph.exp %a : tensor<4x8xf32>
// CHECK-NEXT:    %erf = graph.erf %a : tensor<4x8xf32>
// CHECK-NEXT:    %sqrt = graph.sqrt %a : tensor<4x8xf32>
// CHECK-NEXT:    %neg = graph.neg %a : tensor<4x8xf32>
// CHECK-NEXT:    %ineg = graph.neg %i : tensor<4x8xi32>
// CHECK-NEXT:    %sc = graph.relu %s : tensor<f32>
// CHECK-NEXT:    func.return %neg : tensor<4x8xf32>
// CHECK-NEXT:  }

// CHECK-GENERIC-LABEL: "func.func"() <{sym_name = "elementwise", function_type = (tensor<4x8xf32>, tensor<8xf32>, tensor<4x1xf32>, tensor<4x8xi32>, tensor<f32>) -> tensor<4x8xf32>}> ({
// CHECK-GENERIC:      %add = "graph.add"(%a, %b) : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-GENERIC:      %scale = "graph.scale"(%a) <{factor = 1.250000e-01 : f64}> : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-GENERIC:      %iscale = "graph.scale"(%i) <{factor = 2.000000e+00 : f64}> : (tensor<4x8xi32>) -> tensor<4x8xi32>
// CHECK-GENERIC:      %irelu = "graph.relu"(%i) : (tensor<4x8xi32>) -> tensor<4x8xi32>
// CHECK-GENERIC:      %gelu = "graph.gelu"(%a) : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-GENERIC:      %gelut = "graph.gelu"(%a) <{tanh}> : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-GENERIC:      %sc = "graph.relu"(%s) : (tensor<f32>) -> tensor<f32>

func.func @elementwise(%a: tensor<4x8xf32>, %b: tensor<8xf32>, %c: tensor<4x1xf32>, %i: tensor<4x8xi32>, %s: tensor<f32>) -> tensor<4x8xf32> {
  %add = graph.add %a, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %sub = graph.sub %a, %c : (tensor<4x8xf32>, tensor<4x1xf32>) -> tensor<4x8xf32>
  %mul = graph.mul %a, %a : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %div = graph.div %c, %b : (tensor<4x1xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %sca = graph.add %s, %a : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %iadd = graph.add %i, %i : (tensor<4x8xi32>, tensor<4x8xi32>) -> tensor<4x8xi32>
  %scale = graph.scale %a by 0.125 : tensor<4x8xf32>
  %iscale = graph.scale %i by 2.0 : tensor<4x8xi32>
  %relu = graph.relu %a : tensor<4x8xf32>
  %irelu = graph.relu %i : tensor<4x8xi32>
  %gelu = graph.gelu %a : tensor<4x8xf32>
  %gelut = graph.gelu %a tanh : tensor<4x8xf32>
  %silu = graph.silu %a : tensor<4x8xf32>
  %sig = graph.sigmoid %a : tensor<4x8xf32>
  %tanh = graph.tanh %a : tensor<4x8xf32>
  %exp = graph.exp %a : tensor<4x8xf32>
  %erf = graph.erf %a : tensor<4x8xf32>
  %sqrt = graph.sqrt %a : tensor<4x8xf32>
  %neg = graph.neg %a : tensor<4x8xf32>
  %ineg = graph.neg %i : tensor<4x8xi32>
  %sc = graph.relu %s : tensor<f32>
  func.return %neg : tensor<4x8xf32>
}

// CHECK-LABEL: func.func @matmul(%a: tensor<4x8xf32>, %at: tensor<8x4xf32>, %b: tensor<8x16xf32>, %bt: tensor<16x8xf32>, %x: tensor<2x1x4x8xf32>, %y: tensor<3x8x16xf32>) -> tensor<2x3x4x16xf32> {
// CHECK-NEXT:    %m0 = graph.matmul %a, %b : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
// CHECK-NEXT:    %m1 = graph.matmul %at, %b transpose_a : (tensor<8x4xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
// CHECK-NEXT:    %m2 = graph.matmul %a, %bt transpose_b : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
// CHECK-NEXT:    %m3 = graph.matmul %at, %bt transpose_a transpose_b : (tensor<8x4xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
// CHECK-NEXT:    %m4 = graph.matmul %x, %y : (tensor<2x1x4x8xf32>, tensor<3x8x16xf32>) -> tensor<2x3x4x16xf32>
// CHECK-NEXT:    %m5 = graph.matmul %x, %b : (tensor<2x1x4x8xf32>, tensor<8x16xf32>) -> tensor<2x1x4x16xf32>
// CHECK-NEXT:    func.return %m4 : tensor<2x3x4x16xf32>
// CHECK-NEXT:  }

// CHECK-GENERIC-LABEL: "func.func"() <{sym_name = "matmul", function_type = (tensor<4x8xf32>, tensor<8x4xf32>, tensor<8x16xf32>, tensor<16x8xf32>, tensor<2x1x4x8xf32>, tensor<3x8x16xf32>) -> tensor<2x3x4x16xf32>}> ({
// CHECK-GENERIC:      %m0 = "graph.matmul"(%a, %b) : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
// CHECK-GENERIC:      %m1 = "graph.matmul"(%at, %b) <{transpose_a}> : (tensor<8x4xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
// CHECK-GENERIC:      %m2 = "graph.matmul"(%a, %bt) <{transpose_b}> : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
// CHECK-GENERIC:      %m3 = "graph.matmul"(%at, %bt) <{transpose_a, transpose_b}> : (tensor<8x4xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
// CHECK-GENERIC:      %m4 = "graph.matmul"(%x, %y) : (tensor<2x1x4x8xf32>, tensor<3x8x16xf32>) -> tensor<2x3x4x16xf32>

func.func @matmul(%a: tensor<4x8xf32>, %at: tensor<8x4xf32>, %b: tensor<8x16xf32>, %bt: tensor<16x8xf32>, %x: tensor<2x1x4x8xf32>, %y: tensor<3x8x16xf32>) -> tensor<2x3x4x16xf32> {
  %m0 = graph.matmul %a, %b : (tensor<4x8xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %m1 = graph.matmul %at, %b transpose_a : (tensor<8x4xf32>, tensor<8x16xf32>) -> tensor<4x16xf32>
  %m2 = graph.matmul %a, %bt transpose_b : (tensor<4x8xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %m3 = graph.matmul %at, %bt transpose_a transpose_b : (tensor<8x4xf32>, tensor<16x8xf32>) -> tensor<4x16xf32>
  %m4 = graph.matmul %x, %y : (tensor<2x1x4x8xf32>, tensor<3x8x16xf32>) -> tensor<2x3x4x16xf32>
  %m5 = graph.matmul %x, %b : (tensor<2x1x4x8xf32>, tensor<8x16xf32>) -> tensor<2x1x4x16xf32>
  func.return %m4 : tensor<2x3x4x16xf32>
}

// CHECK-LABEL: func.func @shapes(%a: tensor<2x4x8xf32>, %b: tensor<2x4x2xf32>, %ids: tensor<1x3xi64>, %ids32: tensor<5xi32>) -> tensor<2x8x4xf32> {
// CHECK-NEXT:    %t = graph.transpose %a perm = [0, 2, 1] : tensor<2x4x8xf32> -> tensor<2x8x4xf32>
// CHECK-NEXT:    %r = graph.reshape %a : tensor<2x4x8xf32> -> tensor<8x8xf32>
// CHECK-NEXT:    %r0 = graph.reshape %r : tensor<8x8xf32> -> tensor<64xf32>
// CHECK-NEXT:    %rs = graph.reduce sum %a axes = [1] : tensor<2x4x8xf32> -> tensor<2x8xf32>
// CHECK-NEXT:    %rmax = graph.reduce max %a axes = [-1] keepdims : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
// CHECK-NEXT:    %rmin = graph.reduce min %a axes = [0, 2] : tensor<2x4x8xf32> -> tensor<4xf32>
// CHECK-NEXT:    %rmean = graph.reduce mean %a axes = [0, 1, 2] keepdims : tensor<2x4x8xf32> -> tensor<1x1x1xf32>
// CHECK-NEXT:    %rall = graph.reduce sum %a axes = [2, 0, 1] : tensor<2x4x8xf32> -> tensor<f32>
// CHECK-NEXT:    %rsk = graph.reduce sum %a axes = [-2] keepdims : tensor<2x4x8xf32> -> tensor<2x1x8xf32>
// CHECK-NEXT:    %rmx = graph.reduce max %a axes = [0] : tensor<2x4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %rmk = graph.reduce min %a axes = [1, 2] keepdims : tensor<2x4x8xf32> -> tensor<2x1x1xf32>
// CHECK-NEXT:    %rmn = graph.reduce mean %a axes = [-1] : tensor<2x4x8xf32> -> tensor<2x4xf32>
// CHECK-NEXT:    %sm = graph.softmax %a : tensor<2x4x8xf32>
// CHECK-NEXT:    %sm1 = graph.softmax %a axis = 1 : tensor<2x4x8xf32>
// CHECK-NEXT:    %smd = graph.softmax %a : tensor<2x4x8xf32>
// CHECK-NEXT:    %cat = graph.concat %b, %a, %b axis = 2 : (tensor<2x4x2xf32>, tensor<2x4x8xf32>, tensor<2x4x2xf32>) -> tensor<2x4x12xf32>
// CHECK-NEXT:    %cat1 = graph.concat %a axis = -3 : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT:    %q, %k, %v = graph.split %a axis = 2 sizes = [2, 4, 2] : tensor<2x4x8xf32> -> (tensor<2x4x2xf32>, tensor<2x4x4xf32>, tensor<2x4x2xf32>)
// CHECK-NEXT:    %h, %h_1 = graph.split %a axis = -2 sizes = [1, 3] : tensor<2x4x8xf32> -> (tensor<2x1x8xf32>, tensor<2x3x8xf32>)
// CHECK-NEXT:    %g = graph.gather %a, %ids : (tensor<2x4x8xf32>, tensor<1x3xi64>) -> tensor<1x3x4x8xf32>
// CHECK-NEXT:    %g1 = graph.gather %a, %ids32 axis = 2 : (tensor<2x4x8xf32>, tensor<5xi32>) -> tensor<2x4x5xf32>
// CHECK-NEXT:    func.return %t : tensor<2x8x4xf32>
// CHECK-NEXT:  }

// CHECK-GENERIC-LABEL: "func.func"() <{sym_name = "shapes", function_type = (tensor<2x4x8xf32>, tensor<2x4x2xf32>, tensor<1x3xi64>, tensor<5xi32>) -> tensor<2x8x4xf32>}> ({
// CHECK-GENERIC:      %t = "graph.transpose"(%a) <{perm = array<i64: 0, 2, 1>}> : (tensor<2x4x8xf32>) -> tensor<2x8x4xf32>
// CHECK-GENERIC:      %r = "graph.reshape"(%a) : (tensor<2x4x8xf32>) -> tensor<8x8xf32>
// CHECK-GENERIC:      %rs = "graph.reduce"(%a) <{kind = #graph<reduce_kind sum>, axes = array<i64: 1>}> : (tensor<2x4x8xf32>) -> tensor<2x8xf32>
// CHECK-GENERIC:      %rmax = "graph.reduce"(%a) <{kind = #graph<reduce_kind max>, axes = array<i64: -1>, keepdims}> : (tensor<2x4x8xf32>) -> tensor<2x4x1xf32>
// CHECK-GENERIC:      %rall = "graph.reduce"(%a) <{kind = #graph<reduce_kind sum>, axes = array<i64: 2, 0, 1>}> : (tensor<2x4x8xf32>) -> tensor<f32>
// CHECK-GENERIC:      %rsk = "graph.reduce"(%a) <{kind = #graph<reduce_kind sum>, axes = array<i64: -2>, keepdims}> : (tensor<2x4x8xf32>) -> tensor<2x1x8xf32>
// CHECK-GENERIC:      %rmk = "graph.reduce"(%a) <{kind = #graph<reduce_kind min>, axes = array<i64: 1, 2>, keepdims}> : (tensor<2x4x8xf32>) -> tensor<2x1x1xf32>
// CHECK-GENERIC:      %sm = "graph.softmax"(%a) <{axis = -1 : i64}> : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
// CHECK-GENERIC:      %sm1 = "graph.softmax"(%a) <{axis = 1 : i64}> : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
// CHECK-GENERIC:      %cat = "graph.concat"(%b, %a, %b) <{axis = 2 : i64}> : (tensor<2x4x2xf32>, tensor<2x4x8xf32>, tensor<2x4x2xf32>) -> tensor<2x4x12xf32>
// CHECK-GENERIC:      %cat1 = "graph.concat"(%a) <{axis = -3 : i64}> : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
// CHECK-GENERIC:      %q, %k, %v = "graph.split"(%a) <{axis = 2 : i64, sizes = array<i64: 2, 4, 2>}> : (tensor<2x4x8xf32>) -> (tensor<2x4x2xf32>, tensor<2x4x4xf32>, tensor<2x4x2xf32>)
// CHECK-GENERIC:      %h, %h_1 = "graph.split"(%a) <{axis = -2 : i64, sizes = array<i64: 1, 3>}> : (tensor<2x4x8xf32>) -> (tensor<2x1x8xf32>, tensor<2x3x8xf32>)
// CHECK-GENERIC:      %g = "graph.gather"(%a, %ids) <{axis = 0 : i64}> : (tensor<2x4x8xf32>, tensor<1x3xi64>) -> tensor<1x3x4x8xf32>
// CHECK-GENERIC:      %g1 = "graph.gather"(%a, %ids32) <{axis = 2 : i64}> : (tensor<2x4x8xf32>, tensor<5xi32>) -> tensor<2x4x5xf32>

func.func @shapes(%a: tensor<2x4x8xf32>, %b: tensor<2x4x2xf32>, %ids: tensor<1x3xi64>, %ids32: tensor<5xi32>) -> tensor<2x8x4xf32> {
  %t = graph.transpose %a perm = [0, 2, 1] : tensor<2x4x8xf32> -> tensor<2x8x4xf32>
  %r = graph.reshape %a : tensor<2x4x8xf32> -> tensor<8x8xf32>
  %r0 = graph.reshape %r : tensor<8x8xf32> -> tensor<64xf32>
  %rs = graph.reduce sum %a axes = [1] : tensor<2x4x8xf32> -> tensor<2x8xf32>
  %rmax = graph.reduce max %a axes = [-1] keepdims : tensor<2x4x8xf32> -> tensor<2x4x1xf32>
  %rmin = graph.reduce min %a axes = [0, 2] : tensor<2x4x8xf32> -> tensor<4xf32>
  %rmean = graph.reduce mean %a axes = [0, 1, 2] keepdims : tensor<2x4x8xf32> -> tensor<1x1x1xf32>
  %rall = graph.reduce sum %a axes = [2, 0, 1] : tensor<2x4x8xf32> -> tensor<f32>
  %rsk = graph.reduce sum %a axes = [-2] keepdims : tensor<2x4x8xf32> -> tensor<2x1x8xf32>
  %rmx = graph.reduce max %a axes = [0] : tensor<2x4x8xf32> -> tensor<4x8xf32>
  %rmk = graph.reduce min %a axes = [1, 2] keepdims : tensor<2x4x8xf32> -> tensor<2x1x1xf32>
  %rmn = graph.reduce mean %a axes = [-1] : tensor<2x4x8xf32> -> tensor<2x4xf32>
  %sm = graph.softmax %a : tensor<2x4x8xf32>
  %sm1 = graph.softmax %a axis = 1 : tensor<2x4x8xf32>
  %smd = graph.softmax %a axis = -1 : tensor<2x4x8xf32>
  %cat = graph.concat %b, %a, %b axis = 2 : (tensor<2x4x2xf32>, tensor<2x4x8xf32>, tensor<2x4x2xf32>) -> tensor<2x4x12xf32>
  %cat1 = graph.concat %a axis = -3 : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %q, %k, %v = graph.split %a axis = 2 sizes = [2, 4, 2] : tensor<2x4x8xf32> -> (tensor<2x4x2xf32>, tensor<2x4x4xf32>, tensor<2x4x2xf32>)
  %h:2 = graph.split %a axis = -2 sizes = [1, 3] : tensor<2x4x8xf32> -> (tensor<2x1x8xf32>, tensor<2x3x8xf32>)
  %g = graph.gather %a, %ids : (tensor<2x4x8xf32>, tensor<1x3xi64>) -> tensor<1x3x4x8xf32>
  %g1 = graph.gather %a, %ids32 axis = 2 : (tensor<2x4x8xf32>, tensor<5xi32>) -> tensor<2x4x5xf32>
  func.return %t : tensor<2x8x4xf32>
}

// CHECK-LABEL: func.func @norms(%x: tensor<2x4x16xf32>, %g: tensor<16xf32>, %b: tensor<16xf32>, %g2: tensor<4x16xf32>, %g1: tensor<1x16xf32>) -> tensor<2x4x16xf32> {
// CHECK-NEXT:    %l0 = graph.layernorm %x, %g : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
// CHECK-NEXT:    %l1 = graph.layernorm %x, %g, %b : (tensor<2x4x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
// CHECK-NEXT:    %l2 = graph.layernorm %x, %g2, %b axis = 1 epsilon = 1.000000e-06 : (tensor<2x4x16xf32>, tensor<4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
// CHECK-NEXT:    %l3 = graph.layernorm %x, %g1 axis = -2 : (tensor<2x4x16xf32>, tensor<1x16xf32>) -> tensor<2x4x16xf32>
// CHECK-NEXT:    %l4 = graph.layernorm %x, %g epsilon = 1.000000e-03 : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
// CHECK-NEXT:    %n0 = graph.rmsnorm %x, %g : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
// CHECK-NEXT:    %n1 = graph.rmsnorm %x, %g epsilon = 1.000000e-06 : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
// CHECK-NEXT:    %n2 = graph.rmsnorm %x, %g2 axis = 1 : (tensor<2x4x16xf32>, tensor<4x16xf32>) -> tensor<2x4x16xf32>
// CHECK-NEXT:    %n3 = graph.rmsnorm %x, %g2 axis = -2 epsilon = 1.000000e-06 : (tensor<2x4x16xf32>, tensor<4x16xf32>) -> tensor<2x4x16xf32>
// CHECK-NEXT:    func.return %l1 : tensor<2x4x16xf32>
// CHECK-NEXT:  }

// CHECK-GENERIC-LABEL: "func.func"() <{sym_name = "norms", function_type = (tensor<2x4x16xf32>, tensor<16xf32>, tensor<16xf32>, tensor<4x16xf32>, tensor<1x16xf32>) -> tensor<2x4x16xf32>}> ({
// CHECK-GENERIC:      %l0 = "graph.layernorm"(%x, %g) <{axis = -1 : i64, epsilon = 1.000000e-05 : f64}> : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
// CHECK-GENERIC:      %l1 = "graph.layernorm"(%x, %g, %b) <{axis = -1 : i64, epsilon = 1.000000e-05 : f64}> : (tensor<2x4x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
// CHECK-GENERIC:      %l2 = "graph.layernorm"(%x, %g2, %b) <{axis = 1 : i64, epsilon = 1.000000e-06 : f64}> : (tensor<2x4x16xf32>, tensor<4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
// CHECK-GENERIC:      %n0 = "graph.rmsnorm"(%x, %g) <{axis = -1 : i64, epsilon = 1.000000e-05 : f64}> : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
// CHECK-GENERIC:      %n3 = "graph.rmsnorm"(%x, %g2) <{axis = -2 : i64, epsilon = 1.000000e-06 : f64}> : (tensor<2x4x16xf32>, tensor<4x16xf32>) -> tensor<2x4x16xf32>

func.func @norms(%x: tensor<2x4x16xf32>, %g: tensor<16xf32>, %b: tensor<16xf32>, %g2: tensor<4x16xf32>, %g1: tensor<1x16xf32>) -> tensor<2x4x16xf32> {
  %l0 = graph.layernorm %x, %g : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %l1 = graph.layernorm %x, %g, %b : (tensor<2x4x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %l2 = graph.layernorm %x, %g2, %b axis = 1 epsilon = 1.0e-06 : (tensor<2x4x16xf32>, tensor<4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %l3 = graph.layernorm %x, %g1 axis = -2 : (tensor<2x4x16xf32>, tensor<1x16xf32>) -> tensor<2x4x16xf32>
  %l4 = graph.layernorm %x, %g epsilon = 1.0e-03 : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %n0 = graph.rmsnorm %x, %g : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %n1 = graph.rmsnorm %x, %g epsilon = 1.0e-06 : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
  %n2 = graph.rmsnorm %x, %g2 axis = 1 : (tensor<2x4x16xf32>, tensor<4x16xf32>) -> tensor<2x4x16xf32>
  %n3 = graph.rmsnorm %x, %g2 axis = -2 epsilon = 1.0e-06 : (tensor<2x4x16xf32>, tensor<4x16xf32>) -> tensor<2x4x16xf32>
  func.return %l1 : tensor<2x4x16xf32>
}

// CHECK-LABEL: func.func @conv(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>, %b: tensor<6xf32>, %wg: tensor<6x2x3x3xf32>, %wd: tensor<4x1x1x1xf32>, %b4: tensor<4xf32>) -> tensor<1x6x6x6xf32> {
// CHECK-NEXT:    %c0 = graph.conv2d %x, %w : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x6x6xf32>
// CHECK-NEXT:    %c1 = graph.conv2d %x, %w, %b : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>, tensor<6xf32>) -> tensor<1x6x6x6xf32>
// CHECK-NEXT:    %c2 = graph.conv2d %x, %w, %b pads = [1, 1, 1, 1] : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>, tensor<6xf32>) -> tensor<1x6x8x8xf32>
// CHECK-NEXT:    %c3 = graph.conv2d %x, %w strides = [2, 2] pads = [1, 1, 1, 1] : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x4x4xf32>
// CHECK-NEXT:    %c4 = graph.conv2d %x, %w dilations = [2, 2] : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x4x4xf32>
// CHECK-NEXT:    %c5 = graph.conv2d %x, %wg groups = 2 : (tensor<1x4x8x8xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x6x6xf32>
// CHECK-NEXT:    %c6 = graph.conv2d %x, %wd, %b4 strides = [2, 1] pads = [0, 1, 2, 0] dilations = [1, 3] groups = 4 : (tensor<1x4x8x8xf32>, tensor<4x1x1x1xf32>, tensor<4xf32>) -> tensor<1x4x5x9xf32>
// CHECK-NEXT:    %c7 = graph.conv2d %x, %w : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x6x6xf32>
// CHECK-NEXT:    %p0 = graph.pool max %x kernel = [2, 2] strides = [2, 2] : tensor<1x4x8x8xf32> -> tensor<1x4x4x4xf32>
// CHECK-NEXT:    %p1 = graph.pool avg %x kernel = [3, 3] : tensor<1x4x8x8xf32> -> tensor<1x4x6x6xf32>
// CHECK-NEXT:    %p2 = graph.pool avg %x kernel = [3, 3] pads = [1, 1, 1, 1] count_include_pad : tensor<1x4x8x8xf32> -> tensor<1x4x8x8xf32>
// CHECK-NEXT:    %p3 = graph.pool max %x kernel = [3, 2] strides = [2, 3] pads = [1, 0, 2, 1] : tensor<1x4x8x8xf32> -> tensor<1x4x5x3xf32>
// CHECK-NEXT:    func.return %c0 : tensor<1x6x6x6xf32>
// CHECK-NEXT:  }

// CHECK-GENERIC-LABEL: "func.func"() <{sym_name = "conv", function_type = (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>, tensor<6xf32>, tensor<6x2x3x3xf32>, tensor<4x1x1x1xf32>, tensor<4xf32>) -> tensor<1x6x6x6xf32>}> ({
// CHECK-GENERIC:      %c0 = "graph.conv2d"(%x, %w) <{strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64}> : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x6x6xf32>
// CHECK-GENERIC:      %c1 = "graph.conv2d"(%x, %w, %b) <{strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64}> : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>, tensor<6xf32>) -> tensor<1x6x6x6xf32>
// CHECK-GENERIC:      %c6 = "graph.conv2d"(%x, %wd, %b4) <{strides = array<i64: 2, 1>, pads = array<i64: 0, 1, 2, 0>, dilations = array<i64: 1, 3>, groups = 4 : i64}> : (tensor<1x4x8x8xf32>, tensor<4x1x1x1xf32>, tensor<4xf32>) -> tensor<1x4x5x9xf32>
// CHECK-GENERIC:      %p0 = "graph.pool"(%x) <{kind = #graph<pool_kind max>, kernel = array<i64: 2, 2>, strides = array<i64: 2, 2>, pads = array<i64: 0, 0, 0, 0>}> : (tensor<1x4x8x8xf32>) -> tensor<1x4x4x4xf32>
// CHECK-GENERIC:      %p2 = "graph.pool"(%x) <{kind = #graph<pool_kind avg>, kernel = array<i64: 3, 3>, pads = array<i64: 1, 1, 1, 1>, count_include_pad, strides = array<i64: 1, 1>}> : (tensor<1x4x8x8xf32>) -> tensor<1x4x8x8xf32>
// CHECK-GENERIC:      %p3 = "graph.pool"(%x) <{kind = #graph<pool_kind max>, kernel = array<i64: 3, 2>, strides = array<i64: 2, 3>, pads = array<i64: 1, 0, 2, 1>}> : (tensor<1x4x8x8xf32>) -> tensor<1x4x5x3xf32>

func.func @conv(%x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>, %b: tensor<6xf32>, %wg: tensor<6x2x3x3xf32>, %wd: tensor<4x1x1x1xf32>, %b4: tensor<4xf32>) -> tensor<1x6x6x6xf32> {
  %c0 = graph.conv2d %x, %w : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x6x6xf32>
  %c1 = graph.conv2d %x, %w, %b : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>, tensor<6xf32>) -> tensor<1x6x6x6xf32>
  %c2 = graph.conv2d %x, %w, %b pads = [1, 1, 1, 1] : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>, tensor<6xf32>) -> tensor<1x6x8x8xf32>
  %c3 = graph.conv2d %x, %w strides = [2, 2] pads = [1, 1, 1, 1] : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x4x4xf32>
  %c4 = graph.conv2d %x, %w dilations = [2, 2] : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x4x4xf32>
  %c5 = graph.conv2d %x, %wg groups = 2 : (tensor<1x4x8x8xf32>, tensor<6x2x3x3xf32>) -> tensor<1x6x6x6xf32>
  %c6 = graph.conv2d %x, %wd, %b4 strides = [2, 1] pads = [0, 1, 2, 0] dilations = [1, 3] groups = 4 : (tensor<1x4x8x8xf32>, tensor<4x1x1x1xf32>, tensor<4xf32>) -> tensor<1x4x5x9xf32>
  %c7 = graph.conv2d %x, %w strides = [1, 1] pads = [0, 0, 0, 0] dilations = [1, 1] groups = 1 : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x6x6xf32>
  %p0 = graph.pool max %x kernel = [2, 2] strides = [2, 2] : tensor<1x4x8x8xf32> -> tensor<1x4x4x4xf32>
  %p1 = graph.pool avg %x kernel = [3, 3] : tensor<1x4x8x8xf32> -> tensor<1x4x6x6xf32>
  %p2 = graph.pool avg %x kernel = [3, 3] pads = [1, 1, 1, 1] count_include_pad : tensor<1x4x8x8xf32> -> tensor<1x4x8x8xf32>
  %p3 = graph.pool max %x kernel = [3, 2] strides = [2, 3] pads = [1, 0, 2, 1] : tensor<1x4x8x8xf32> -> tensor<1x4x5x3xf32>
  func.return %c0 : tensor<1x6x6x6xf32>
}

// CHECK-LABEL: func.func @constants() -> tensor<2x2xf32> {
// CHECK-NEXT:    %s = graph.constant dense<1.500000e+00> : tensor<4x8xf32>
// CHECK-NEXT:    %m = graph.constant dense<[[1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>
// CHECK-NEXT:    %i = graph.constant dense<[1, -2, 3]> : tensor<3xi64>
// CHECK-NEXT:    %j = graph.constant dense<7> : tensor<2x3xi32>
// CHECK-NEXT:    %z = graph.constant dense<5.000000e-01> : tensor<f32>
// CHECK-NEXT:    %a = graph.constant {note = "x"} dense<2.000000e+00> : tensor<2xf64>
// CHECK-NEXT:    func.return %m : tensor<2x2xf32>
// CHECK-NEXT:  }

// CHECK-GENERIC-LABEL: "func.func"() <{sym_name = "constants", function_type = () -> tensor<2x2xf32>}> ({
// CHECK-GENERIC:      %s = "graph.constant"() <{value = dense<1.500000e+00> : tensor<4x8xf32>}> : () -> tensor<4x8xf32>
// CHECK-GENERIC:      %m = "graph.constant"() <{value = dense<[[1.000000e+00, 2.000000e+00], [3.000000e+00, 4.000000e+00]]> : tensor<2x2xf32>}> : () -> tensor<2x2xf32>
// CHECK-GENERIC:      %i = "graph.constant"() <{value = dense<[1, -2, 3]> : tensor<3xi64>}> : () -> tensor<3xi64>
// CHECK-GENERIC:      %j = "graph.constant"() <{value = dense<7> : tensor<2x3xi32>}> : () -> tensor<2x3xi32>
// CHECK-GENERIC:      %z = "graph.constant"() <{value = dense<5.000000e-01> : tensor<f32>}> : () -> tensor<f32>
// CHECK-GENERIC:      %a = "graph.constant"() <{value = dense<2.000000e+00> : tensor<2xf64>}> {note = "x"} : () -> tensor<2xf64>

func.func @constants() -> tensor<2x2xf32> {
  %s = graph.constant dense<1.5> : tensor<4x8xf32>
  %m = graph.constant dense<[[1.0, 2.0], [3.0, 4.0]]> : tensor<2x2xf32>
  %i = graph.constant dense<[1, -2, 3]> : tensor<3xi64>
  %j = graph.constant dense<7> : tensor<2x3xi32>
  %z = graph.constant dense<0.5> : tensor<f32>
  %a = graph.constant {note = "x"} dense<2.0> : tensor<2xf64>
  func.return %m : tensor<2x2xf32>
}

// -----

// CHECK: builtin.module {
// CHECK-GENERIC: "builtin.module"() ({

// CHECK-LABEL: func.func @generic_defaults(%a: tensor<2x4x8xf32>, %x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>, %g: tensor<8xf32>, %ids: tensor<3xi64>) {
// CHECK-NEXT:    %sm = graph.softmax %a : tensor<2x4x8xf32>
// CHECK-NEXT:    %ln = graph.layernorm %a, %g : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT:    %rn = graph.rmsnorm %a, %g : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT:    %c = graph.conv2d %x, %w : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x6x6xf32>
// CHECK-NEXT:    %p = graph.pool avg %x kernel = [2, 2] : tensor<1x4x8x8xf32> -> tensor<1x4x7x7xf32>
// CHECK-NEXT:    %gt = graph.gather %a, %ids : (tensor<2x4x8xf32>, tensor<3xi64>) -> tensor<3x4x8xf32>
// CHECK-NEXT:    %pe = graph.pool max %x kernel = [2, 2] : tensor<1x4x8x8xf32> -> tensor<1x4x7x7xf32>
// CHECK-NEXT:    %le = graph.layernorm %a, %g : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
// CHECK-NEXT:    %ge = graph.gather %a, %ids : (tensor<2x4x8xf32>, tensor<3xi64>) -> tensor<3x4x8xf32>
// CHECK-NEXT:    func.return
// CHECK-NEXT:  }

// CHECK-GENERIC-LABEL: "func.func"() <{sym_name = "generic_defaults", function_type = (tensor<2x4x8xf32>, tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>, tensor<8xf32>, tensor<3xi64>) -> ()}> ({
// CHECK-GENERIC:      %sm = "graph.softmax"(%a) <{axis = -1 : i64}> : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
// CHECK-GENERIC:      %ln = "graph.layernorm"(%a, %g) <{axis = -1 : i64, epsilon = 1.000000e-05 : f64}> : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
// CHECK-GENERIC:      %rn = "graph.rmsnorm"(%a, %g) <{axis = -1 : i64, epsilon = 1.000000e-05 : f64}> : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
// CHECK-GENERIC:      %c = "graph.conv2d"(%x, %w) <{strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>, dilations = array<i64: 1, 1>, groups = 1 : i64}> : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x6x6xf32>
// CHECK-GENERIC:      %p = "graph.pool"(%x) <{kind = #graph<pool_kind avg>, kernel = array<i64: 2, 2>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>}> : (tensor<1x4x8x8xf32>) -> tensor<1x4x7x7xf32>
// CHECK-GENERIC:      %gt = "graph.gather"(%a, %ids) <{axis = 0 : i64}> : (tensor<2x4x8xf32>, tensor<3xi64>) -> tensor<3x4x8xf32>
// CHECK-GENERIC:      %pe = "graph.pool"(%x) <{kind = #graph<pool_kind max>, kernel = array<i64: 2, 2>, strides = array<i64: 1, 1>, pads = array<i64: 0, 0, 0, 0>}> : (tensor<1x4x8x8xf32>) -> tensor<1x4x7x7xf32>
// CHECK-GENERIC:      %le = "graph.layernorm"(%a, %g) <{axis = -1 : i64, epsilon = 1.000000e-05 : f64}> : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
// CHECK-GENERIC:      %ge = "graph.gather"(%a, %ids) <{axis = 0 : i64}> : (tensor<2x4x8xf32>, tensor<3xi64>) -> tensor<3x4x8xf32>

// Generic ops that omit default-valued properties get the defaults (printed in the generic
// form); defaults written out in the custom syntax are elided when printed back.
func.func @generic_defaults(%a: tensor<2x4x8xf32>, %x: tensor<1x4x8x8xf32>, %w: tensor<6x4x3x3xf32>, %g: tensor<8xf32>, %ids: tensor<3xi64>) {
  %sm = "graph.softmax"(%a) : (tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %ln = "graph.layernorm"(%a, %g) : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %rn = "graph.rmsnorm"(%a, %g) : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %c = "graph.conv2d"(%x, %w) : (tensor<1x4x8x8xf32>, tensor<6x4x3x3xf32>) -> tensor<1x6x6x6xf32>
  %p = "graph.pool"(%x) <{kind = #graph<pool_kind avg>, kernel = array<i64: 2, 2>}> : (tensor<1x4x8x8xf32>) -> tensor<1x4x7x7xf32>
  %gt = "graph.gather"(%a, %ids) : (tensor<2x4x8xf32>, tensor<3xi64>) -> tensor<3x4x8xf32>
  %pe = graph.pool max %x kernel = [2, 2] strides = [1, 1] pads = [0, 0, 0, 0] : tensor<1x4x8x8xf32> -> tensor<1x4x7x7xf32>
  %le = graph.layernorm %a, %g axis = -1 epsilon = 1.0e-05 : (tensor<2x4x8xf32>, tensor<8xf32>) -> tensor<2x4x8xf32>
  %ge = graph.gather %a, %ids axis = 0 : (tensor<2x4x8xf32>, tensor<3xi64>) -> tensor<3x4x8xf32>
  func.return
}

// -----

// The ops of ONNX models: selection, comparison, logic, casts, more elementwise
// arithmetic and data movement, on i1, integer, scalar and empty tensors.

// CHECK: builtin.module {
// CHECK-GENERIC: "builtin.module"() ({

// CHECK-LABEL: func.func @onnx_ops(%a: tensor<4x8xf32>, %b: tensor<8xf32>, %s: tensor<f32>, %m: tensor<4x1xi1>, %n: tensor<4x8xi1>, %i: tensor<4x8xi64>, %j: tensor<8xi32>, %ix: tensor<4x3xi64>, %e: tensor<0x4xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT:    %w = graph.where %m, %a, %s : (tensor<4x1xi1>, tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %eq = graph.cmp eq %a, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xi1>
// CHECK-NEXT:    %ne = graph.cmp ne %i, %i : (tensor<4x8xi64>, tensor<4x8xi64>) -> tensor<4x8xi1>
// CHECK-NEXT:    %lt = graph.cmp lt %s, %a : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xi1>
// CHECK-NEXT:    %le = graph.cmp le %a, %a : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xi1>
// CHECK-NEXT:    %gt = graph.cmp gt %j, %j : (tensor<8xi32>, tensor<8xi32>) -> tensor<8xi1>
// CHECK-NEXT:    %ge = graph.cmp ge %n, %m : (tensor<4x8xi1>, tensor<4x1xi1>) -> tensor<4x8xi1>
// CHECK-NEXT:    %not = graph.not %n : tensor<4x8xi1>
// CHECK-NEXT:    %and = graph.and %n, %m : (tensor<4x8xi1>, tensor<4x1xi1>) -> tensor<4x8xi1>
// CHECK-NEXT:    %or = graph.or %n, %n : (tensor<4x8xi1>, tensor<4x8xi1>) -> tensor<4x8xi1>
// CHECK-NEXT:    %xor = graph.xor %m, %n : (tensor<4x1xi1>, tensor<4x8xi1>) -> tensor<4x8xi1>
// CHECK-NEXT:    %fi = graph.cast %a : tensor<4x8xf32> -> tensor<4x8xi64>
// CHECK-NEXT:    %if = graph.cast %i : tensor<4x8xi64> -> tensor<4x8xf32>
// CHECK-NEXT:    %fb = graph.cast %a : tensor<4x8xf32> -> tensor<4x8xi1>
// CHECK-NEXT:    %bf = graph.cast %n : tensor<4x8xi1> -> tensor<4x8xf16>
// CHECK-NEXT:    %ii = graph.cast %j : tensor<8xi32> -> tensor<8xi64>
// CHECK-NEXT:    %abs = graph.abs %a : tensor<4x8xf32>
// CHECK-NEXT:    %iabs = graph.abs %i : tensor<4x8xi64>
// CHECK-NEXT:    %log = graph.log %a : tensor<4x8xf32>
// CHECK-NEXT:    %cos = graph.cos %a : tensor<4x8xf32>
// CHECK-NEXT:    %sin = graph.sin %a : tensor<4x8xf32>
// CHECK-NEXT:    %sinh = graph.sinh %a : tensor<4x8xf32>
// CHECK-NEXT:    %cosh = graph.cosh %a : tensor<4x8xf32>
// CHECK-NEXT:    %floor = graph.floor %a : tensor<4x8xf32>
// CHECK-NEXT:    %ceil = graph.ceil %a : tensor<4x8xf32>
// CHECK-NEXT:    %rcp = graph.reciprocal %a : tensor<4x8xf32>
// CHECK-NEXT:    %pow = graph.pow %a by 3.000000e+00 : tensor<4x8xf32>
// CHECK-NEXT:    %psq = graph.pow %s by 5.000000e-01 : tensor<f32>
// CHECK-NEXT:    %max = graph.maximum %a, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %min = graph.minimum %i, %i : (tensor<4x8xi64>, tensor<4x8xi64>) -> tensor<4x8xi64>
// CHECK-NEXT:    %sl = graph.slice %a starts = [1, 7] ends = [3, -1] steps = [1, -2] : tensor<4x8xf32> -> tensor<2x4xf32>
// CHECK-NEXT:    %se = graph.slice %e starts = [0, 0] ends = [0, 4] steps = [1, 3] : tensor<0x4xf32> -> tensor<0x2xf32>
// CHECK-NEXT:    %ex = graph.expand %m : tensor<4x1xi1> -> tensor<2x4x8xi1>
// CHECK-NEXT:    %ex2 = graph.expand %a : tensor<4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %pc = graph.pad %a pads = [0, 1, 2, 3] mode = constant value = 1.500000e+00 : tensor<4x8xf32> -> tensor<6x12xf32>
// CHECK-NEXT:    %pr = graph.pad %a pads = [3, 0, 0, 7] mode = reflect value = 0.000000e+00 : tensor<4x8xf32> -> tensor<7x15xf32>
// CHECK-NEXT:    %pe = graph.pad %i pads = [1, 1, 1, 1] mode = edge value = 0.000000e+00 : tensor<4x8xi64> -> tensor<6x10xi64>
// CHECK-NEXT:    %ge0 = graph.gather_elements %a, %ix axis = 1 : (tensor<4x8xf32>, tensor<4x3xi64>) -> tensor<4x3xf32>
// CHECK-NEXT:    %ge1 = graph.gather_elements %a, %ix axis = -2 : (tensor<4x8xf32>, tensor<4x3xi64>) -> tensor<4x3xf32>
// CHECK-NEXT:    func.return %w : tensor<4x8xf32>
// CHECK-NEXT:  }

// CHECK-GENERIC-LABEL: "func.func"() <{sym_name = "onnx_ops", function_type = (tensor<4x8xf32>, tensor<8xf32>, tensor<f32>, tensor<4x1xi1>, tensor<4x8xi1>, tensor<4x8xi64>, tensor<8xi32>, tensor<4x3xi64>, tensor<0x4xf32>) -> tensor<4x8xf32>}> ({
// CHECK-GENERIC:      %w = "graph.where"(%m, %a, %s) : (tensor<4x1xi1>, tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
// CHECK-GENERIC:      %lt = "graph.cmp"(%s, %a) <{predicate = #graph<cmp_predicate lt>}> : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xi1>
// CHECK-GENERIC:      %not = "graph.not"(%n) : (tensor<4x8xi1>) -> tensor<4x8xi1>
// CHECK-GENERIC:      %fi = "graph.cast"(%a) : (tensor<4x8xf32>) -> tensor<4x8xi64>
// CHECK-GENERIC:      %pow = "graph.pow"(%a) <{exponent = 3.000000e+00 : f64}> : (tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-GENERIC:      %sl = "graph.slice"(%a) <{starts = array<i64: 1, 7>, ends = array<i64: 3, -1>, steps = array<i64: 1, -2>}> : (tensor<4x8xf32>) -> tensor<2x4xf32>
// CHECK-GENERIC:      %ex = "graph.expand"(%m) : (tensor<4x1xi1>) -> tensor<2x4x8xi1>
// CHECK-GENERIC:      %pr = "graph.pad"(%a) <{pads = array<i64: 3, 0, 0, 7>, mode = #graph<pad_mode reflect>, value = 0.000000e+00 : f64}> : (tensor<4x8xf32>) -> tensor<7x15xf32>
// CHECK-GENERIC:      %ge0 = "graph.gather_elements"(%a, %ix) <{axis = 1 : i64}> : (tensor<4x8xf32>, tensor<4x3xi64>) -> tensor<4x3xf32>

func.func @onnx_ops(%a: tensor<4x8xf32>, %b: tensor<8xf32>, %s: tensor<f32>, %m: tensor<4x1xi1>, %n: tensor<4x8xi1>, %i: tensor<4x8xi64>, %j: tensor<8xi32>, %ix: tensor<4x3xi64>, %e: tensor<0x4xf32>) -> tensor<4x8xf32> {
  %w = graph.where %m, %a, %s : (tensor<4x1xi1>, tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %eq = graph.cmp eq %a, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xi1>
  %ne = graph.cmp ne %i, %i : (tensor<4x8xi64>, tensor<4x8xi64>) -> tensor<4x8xi1>
  %lt = graph.cmp lt %s, %a : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xi1>
  %le = graph.cmp le %a, %a : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xi1>
  %gt = graph.cmp gt %j, %j : (tensor<8xi32>, tensor<8xi32>) -> tensor<8xi1>
  %ge = graph.cmp ge %n, %m : (tensor<4x8xi1>, tensor<4x1xi1>) -> tensor<4x8xi1>
  %not = graph.not %n : tensor<4x8xi1>
  %and = graph.and %n, %m : (tensor<4x8xi1>, tensor<4x1xi1>) -> tensor<4x8xi1>
  %or = graph.or %n, %n : (tensor<4x8xi1>, tensor<4x8xi1>) -> tensor<4x8xi1>
  %xor = graph.xor %m, %n : (tensor<4x1xi1>, tensor<4x8xi1>) -> tensor<4x8xi1>
  %fi = graph.cast %a : tensor<4x8xf32> -> tensor<4x8xi64>
  %if = graph.cast %i : tensor<4x8xi64> -> tensor<4x8xf32>
  %fb = graph.cast %a : tensor<4x8xf32> -> tensor<4x8xi1>
  %bf = graph.cast %n : tensor<4x8xi1> -> tensor<4x8xf16>
  %ii = graph.cast %j : tensor<8xi32> -> tensor<8xi64>
  %abs = graph.abs %a : tensor<4x8xf32>
  %iabs = graph.abs %i : tensor<4x8xi64>
  %log = graph.log %a : tensor<4x8xf32>
  %cos = graph.cos %a : tensor<4x8xf32>
  %sin = graph.sin %a : tensor<4x8xf32>
  %sinh = graph.sinh %a : tensor<4x8xf32>
  %cosh = graph.cosh %a : tensor<4x8xf32>
  %floor = graph.floor %a : tensor<4x8xf32>
  %ceil = graph.ceil %a : tensor<4x8xf32>
  %rcp = graph.reciprocal %a : tensor<4x8xf32>
  %pow = graph.pow %a by 3.0 : tensor<4x8xf32>
  %psq = graph.pow %s by 0.5 : tensor<f32>
  %max = graph.maximum %a, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %min = graph.minimum %i, %i : (tensor<4x8xi64>, tensor<4x8xi64>) -> tensor<4x8xi64>
  %sl = graph.slice %a starts = [1, 7] ends = [3, -1] steps = [1, -2] : tensor<4x8xf32> -> tensor<2x4xf32>
  %se = graph.slice %e starts = [0, 0] ends = [0, 4] steps = [1, 3] : tensor<0x4xf32> -> tensor<0x2xf32>
  %ex = graph.expand %m : tensor<4x1xi1> -> tensor<2x4x8xi1>
  %ex2 = graph.expand %a : tensor<4x8xf32> -> tensor<4x8xf32>
  %pc = graph.pad %a pads = [0, 1, 2, 3] mode = constant value = 1.5 : tensor<4x8xf32> -> tensor<6x12xf32>
  %pr = graph.pad %a pads = [3, 0, 0, 7] mode = reflect value = 0.0 : tensor<4x8xf32> -> tensor<7x15xf32>
  %pe = graph.pad %i pads = [1, 1, 1, 1] mode = edge value = 0.0 : tensor<4x8xi64> -> tensor<6x10xi64>
  %ge0 = graph.gather_elements %a, %ix axis = 1 : (tensor<4x8xf32>, tensor<4x3xi64>) -> tensor<4x3xf32>
  %ge1 = graph.gather_elements %a, %ix axis = -2 : (tensor<4x8xf32>, tensor<4x3xi64>) -> tensor<4x3xf32>
  func.return %w : tensor<4x8xf32>
}
