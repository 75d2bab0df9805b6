// RUN: plmr-opt %s -p graph-defer-norm-scale,convert-graph-to-loop,neptune-fuse | filecheck %s

// Decode's norms once their scale follows the matmul, fused at the loop level:
// - `x · g` is a vector the GEMV contracts and reads again for every output column: it
//   is stored once (a map nest the GEMV reads), not recomputed;
// - the inverse RMS is stored once per row (the epsilon a scalar constant, not a load):
//   the maps after the GEMVs multiply by it instead of recomputing `1 / sqrt(...)` for
//   every element.

// CHECK-LABEL: func.func @decode
// CHECK:         {{%n_xg(, %f_xg)?}} = loop.nest (%{{.*}}, %{{.*}}) to (1, 128) [parallel, parallel]
// CHECK:         %n_ms_sum = loop.nest ({{.*}}) to (1, 1, 128) [parallel, parallel, reduction]
// CHECK:         %n_rstd = loop.nest ({{.*}}) to (1, 1) [parallel, parallel]
// CHECK:           arith.divf
// CHECK-NEXT:      %[[EPS:.*]] = arith.constant 1.000000e-05 : f32
// CHECK-NEXT:      arith.addf %{{.*}}, %[[EPS]] : f32
// CHECK-NEXT:      %[[RMS:.*]] = math.sqrt
// CHECK-NEXT:      %[[ONE:.*]] = arith.constant 1.000000e+00 : f32
// CHECK-NEXT:      arith.divf %[[ONE]], %[[RMS]] : f32
// CHECK:         %qkv = loop.nest ({{.*}}) to (2, 3, 1, 64, 128) [parallel, parallel, parallel, parallel, reduction]
// CHECK:           loop.read %n_xg[
// CHECK:         %f_rstd = loop.nest
// CHECK:         %both = loop.nest ({{.*}}) to (2, 1, 96, 128) [parallel, parallel, parallel, reduction]
// CHECK:           loop.read %f_xg[
// CHECK:         %y = loop.nest ({{.*}}) to (1, 96) [parallel, parallel]
// CHECK-NOT:       math.sqrt
// CHECK:           loop.read %f_rstd[
// CHECK-NOT:       math.sqrt
// CHECK:           loop.read %f_rstd[
// CHECK-NOT:       math.sqrt
// CHECK:         %rot = loop.nest ({{.*}}) to (2, 3, 1, 64) [parallel, parallel, parallel, parallel]
// CHECK:           %[[Q:.*]] = loop.read %qkv[
// CHECK:           %[[R:.*]] = loop.read %n_rstd[
// CHECK-NEXT:      arith.mulf %[[Q]], %[[R]] : f32
// CHECK:         func.return %rot, %y

func.func @decode(%x: tensor<1x128xf32>, %g: tensor<128xf32>, %w: tensor<2x3x128x64xf32>, %g2: tensor<128xf32>, %w13: tensor<2x128x96xf32>, %cos: tensor<1x64xf32>) -> (tensor<2x3x1x64xf32>, tensor<1x96xf32>) {
  %n = graph.rmsnorm %x, %g epsilon = 1.000000e-05 : (tensor<1x128xf32>, tensor<128xf32>) -> tensor<1x128xf32>
  %r = graph.reshape %n : tensor<1x128xf32> -> tensor<1x1x1x128xf32>
  %qkv = graph.matmul %r, %w : (tensor<1x1x1x128xf32>, tensor<2x3x128x64xf32>) -> tensor<2x3x1x64xf32>
  %f = graph.rmsnorm %x, %g2 epsilon = 1.000000e-05 : (tensor<1x128xf32>, tensor<128xf32>) -> tensor<1x128xf32>
  %f3 = graph.reshape %f : tensor<1x128xf32> -> tensor<1x1x128xf32>
  %both = graph.matmul %f3, %w13 : (tensor<1x1x128xf32>, tensor<2x128x96xf32>) -> tensor<2x1x96xf32>
  %up = graph.slice %both starts = [0, 0, 0] ends = [1, 1, 96] steps = [1, 1, 1] : tensor<2x1x96xf32> -> tensor<1x1x96xf32>
  %gate = graph.slice %both starts = [1, 0, 0] ends = [2, 1, 96] steps = [1, 1, 1] : tensor<2x1x96xf32> -> tensor<1x1x96xf32>
  %u = graph.reshape %up : tensor<1x1x96xf32> -> tensor<1x96xf32>
  %v = graph.reshape %gate : tensor<1x1x96xf32> -> tensor<1x96xf32>
  %s = graph.silu %u : tensor<1x96xf32>
  %y = graph.mul %s, %v : (tensor<1x96xf32>, tensor<1x96xf32>) -> tensor<1x96xf32>
  %rot = graph.mul %qkv, %cos : (tensor<2x3x1x64xf32>, tensor<1x64xf32>) -> tensor<2x3x1x64xf32>
  func.return %rot, %y : tensor<2x3x1x64xf32>, tensor<1x96xf32>
}
