// RUN: plmr-opt %s -p graph-canonicalize --split-input-file | filecheck %s

// LlamaRMSNorm as exported: casts to f32 (no-ops on f32), Pow, ReduceMean, Add, Sqrt,
// Reciprocal, Mul, then the weight.
// CHECK-LABEL: func.func @rmsnorm_llama
// CHECK-NEXT:    %y = graph.rmsnorm %x, %w epsilon = 1.000000e-06 : (tensor<2x4x16xf32>, tensor<16xf32>) -> tensor<2x4x16xf32>
// CHECK-NEXT:    func.return %y : tensor<2x4x16xf32>
func.func @rmsnorm_llama(%x: tensor<2x4x16xf32>, %w: tensor<16xf32>) -> tensor<2x4x16xf32> {
  %xc = graph.cast %x : tensor<2x4x16xf32> -> tensor<2x4x16xf32>
  %sq = graph.pow %xc by 2.000000e+00 : tensor<2x4x16xf32>
  %ms = graph.reduce mean %sq axes = [-1] keepdims : tensor<2x4x16xf32> -> tensor<2x4x1xf32>
  %eps = graph.constant dense<1.0e-06> : tensor<f32>
  %v = graph.add %ms, %eps : (tensor<2x4x1xf32>, tensor<f32>) -> tensor<2x4x1xf32>
  %r = graph.sqrt %v : tensor<2x4x1xf32>
  %i = graph.reciprocal %r : tensor<2x4x1xf32>
  %n = graph.mul %xc, %i : (tensor<2x4x16xf32>, tensor<2x4x1xf32>) -> tensor<2x4x16xf32>
  %nc = graph.cast %n : tensor<2x4x16xf32> -> tensor<2x4x16xf32>
  %y = graph.mul %w, %nc : (tensor<16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  func.return %y : tensor<2x4x16xf32>
}

// -----

// `x / sqrt(mean(x·x) + eps)` without a weight: a unit weight (eps = 1e-5 is the default).
// CHECK-LABEL: func.func @rmsnorm_div
// CHECK-NEXT:    %[[W:.*]] = graph.constant dense<1.000000e+00> : tensor<16xf32>
// CHECK-NEXT:    %[[N:.*]] = graph.rmsnorm %x, %[[W]] : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
// CHECK-NEXT:    func.return %[[N]] : tensor<4x16xf32>
func.func @rmsnorm_div(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %sq = graph.mul %x, %x : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %ms = graph.reduce mean %sq axes = [1] keepdims : tensor<4x16xf32> -> tensor<4x1xf32>
  %eps = graph.constant dense<1.0e-05> : tensor<1xf32>
  %v = graph.add %eps, %ms : (tensor<1xf32>, tensor<4x1xf32>) -> tensor<4x1xf32>
  %r = graph.sqrt %v : tensor<4x1xf32>
  %n = graph.div %x, %r : (tensor<4x16xf32>, tensor<4x1xf32>) -> tensor<4x16xf32>
  func.return %n : tensor<4x16xf32>
}

// -----

// `x · (1 / sqrt(...))` and `x · pow(..., -0.5)` are the same norm, with a 2-D weight.
// CHECK-LABEL: func.func @rmsnorm_rsqrt
// CHECK:         %a = graph.rmsnorm %x, %w axis = -2 epsilon = 1.000000e-06 : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
// CHECK:         %{{.*}} = graph.rmsnorm %x, %{{.*}} axis = -2 epsilon = 1.000000e-06 : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
// CHECK-NOT:     graph.reduce
func.func @rmsnorm_rsqrt(%x: tensor<2x4x8xf32>, %w: tensor<4x8xf32>) -> (tensor<2x4x8xf32>, tensor<2x4x8xf32>) {
  %sq = graph.mul %x, %x : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %ms = graph.reduce mean %sq axes = [1, 2] keepdims : tensor<2x4x8xf32> -> tensor<2x1x1xf32>
  %eps = graph.constant dense<1.0e-06> : tensor<f32>
  %v = graph.add %ms, %eps : (tensor<2x1x1xf32>, tensor<f32>) -> tensor<2x1x1xf32>
  %r = graph.sqrt %v : tensor<2x1x1xf32>
  %one = graph.constant dense<1.0> : tensor<f32>
  %i = graph.div %one, %r : (tensor<f32>, tensor<2x1x1xf32>) -> tensor<2x1x1xf32>
  %n = graph.mul %i, %x : (tensor<2x1x1xf32>, tensor<2x4x8xf32>) -> tensor<2x4x8xf32>
  %a = graph.mul %n, %w : (tensor<2x4x8xf32>, tensor<4x8xf32>) -> tensor<2x4x8xf32>
  %p = graph.pow %v by -5.000000e-01 : tensor<2x1x1xf32>
  %b = graph.mul %x, %p : (tensor<2x4x8xf32>, tensor<2x1x1xf32>) -> tensor<2x4x8xf32>
  func.return %a, %b : tensor<2x4x8xf32>, tensor<2x4x8xf32>
}

// -----

// Not an RMSNorm: the mean is over a leading axis, the square is of another value, the
// shift is not a constant, or the mean drops its axis.
// CHECK-LABEL: func.func @rmsnorm_negative
// CHECK-NOT:     graph.rmsnorm
// CHECK:         func.return
func.func @rmsnorm_negative(%x: tensor<4x16xf32>, %y: tensor<4x16xf32>, %e: tensor<f32>) -> (tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>) {
  %sq = graph.mul %x, %x : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %eps = graph.constant dense<1.0e-05> : tensor<f32>
  %m0 = graph.reduce mean %sq axes = [0] keepdims : tensor<4x16xf32> -> tensor<1x16xf32>
  %v0 = graph.add %m0, %eps : (tensor<1x16xf32>, tensor<f32>) -> tensor<1x16xf32>
  %r0 = graph.sqrt %v0 : tensor<1x16xf32>
  %a = graph.div %x, %r0 : (tensor<4x16xf32>, tensor<1x16xf32>) -> tensor<4x16xf32>
  %m1 = graph.reduce mean %sq axes = [1] keepdims : tensor<4x16xf32> -> tensor<4x1xf32>
  %v1 = graph.add %m1, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %r1 = graph.sqrt %v1 : tensor<4x1xf32>
  %b = graph.div %y, %r1 : (tensor<4x16xf32>, tensor<4x1xf32>) -> tensor<4x16xf32>
  %v2 = graph.add %m1, %e : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %r2 = graph.sqrt %v2 : tensor<4x1xf32>
  %c = graph.div %x, %r2 : (tensor<4x16xf32>, tensor<4x1xf32>) -> tensor<4x16xf32>
  func.return %a, %b, %c : tensor<4x16xf32>, tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// A norm whose result has other users keeps its weight multiply separate.
// CHECK-LABEL: func.func @weight_not_folded
// CHECK:         %[[N:.*]] = graph.rmsnorm %x, %{{.*}} : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
// CHECK-NEXT:    %y = graph.mul %[[N]], %w
func.func @weight_not_folded(%x: tensor<4x16xf32>, %w: tensor<16xf32>) -> (tensor<4x16xf32>, tensor<4x16xf32>) {
  %sq = graph.mul %x, %x : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %ms = graph.reduce mean %sq axes = [1] keepdims : tensor<4x16xf32> -> tensor<4x1xf32>
  %eps = graph.constant dense<1.0e-05> : tensor<f32>
  %v = graph.add %ms, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %r = graph.sqrt %v : tensor<4x1xf32>
  %n = graph.div %x, %r : (tensor<4x16xf32>, tensor<4x1xf32>) -> tensor<4x16xf32>
  %y = graph.mul %n, %w : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  func.return %n, %y : tensor<4x16xf32>, tensor<4x16xf32>
}

// -----

// A decomposed LayerNorm (two separate centerings), with scale and bias.
// CHECK-LABEL: func.func @layernorm
// CHECK-NEXT:    %z = graph.layernorm %x, %g, %b : (tensor<4x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
// CHECK-NEXT:    func.return %z : tensor<4x16xf32>
func.func @layernorm(%x: tensor<4x16xf32>, %g: tensor<16xf32>, %b: tensor<16xf32>) -> tensor<4x16xf32> {
  %m = graph.reduce mean %x axes = [1] keepdims : tensor<4x16xf32> -> tensor<4x1xf32>
  %c = graph.sub %x, %m : (tensor<4x16xf32>, tensor<4x1xf32>) -> tensor<4x16xf32>
  %c2 = graph.sub %x, %m : (tensor<4x16xf32>, tensor<4x1xf32>) -> tensor<4x16xf32>
  %sq = graph.pow %c2 by 2.000000e+00 : tensor<4x16xf32>
  %var = graph.reduce mean %sq axes = [-1] keepdims : tensor<4x16xf32> -> tensor<4x1xf32>
  %eps = graph.constant dense<1.0e-05> : tensor<f32>
  %v = graph.add %eps, %var : (tensor<f32>, tensor<4x1xf32>) -> tensor<4x1xf32>
  %s = graph.sqrt %v : tensor<4x1xf32>
  %n = graph.div %c, %s : (tensor<4x16xf32>, tensor<4x1xf32>) -> tensor<4x16xf32>
  %y = graph.mul %n, %g : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  %z = graph.add %y, %b : (tensor<4x16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  func.return %z : tensor<4x16xf32>
}

// -----

// Not a LayerNorm: the variance is of a value centred on another tensor's mean.
// CHECK-LABEL: func.func @layernorm_negative
// CHECK-NOT:     graph.layernorm
// CHECK:         func.return
func.func @layernorm_negative(%x: tensor<4x16xf32>, %y: tensor<4x16xf32>) -> tensor<4x16xf32> {
  %m = graph.reduce mean %x axes = [1] keepdims : tensor<4x16xf32> -> tensor<4x1xf32>
  %my = graph.reduce mean %y axes = [1] keepdims : tensor<4x16xf32> -> tensor<4x1xf32>
  %c = graph.sub %x, %m : (tensor<4x16xf32>, tensor<4x1xf32>) -> tensor<4x16xf32>
  %cy = graph.sub %y, %my : (tensor<4x16xf32>, tensor<4x1xf32>) -> tensor<4x16xf32>
  %sq = graph.mul %cy, %cy : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %var = graph.reduce mean %sq axes = [1] keepdims : tensor<4x16xf32> -> tensor<4x1xf32>
  %eps = graph.constant dense<1.0e-05> : tensor<f32>
  %v = graph.add %var, %eps : (tensor<4x1xf32>, tensor<f32>) -> tensor<4x1xf32>
  %s = graph.sqrt %v : tensor<4x1xf32>
  %n = graph.div %c, %s : (tensor<4x16xf32>, tensor<4x1xf32>) -> tensor<4x16xf32>
  func.return %n : tensor<4x16xf32>
}
