// RUN: plmr-opt %s -p graph-canonicalize --split-input-file | filecheck %s

// No-op casts, reshapes, expands, slices, pads and scales disappear.
// CHECK-LABEL: func.func @noops
// CHECK-NEXT:    %r = graph.relu %x : tensor<4x8xf32>
// CHECK-NEXT:    func.return %r : tensor<4x8xf32>
func.func @noops(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %a = graph.cast %x : tensor<4x8xf32> -> tensor<4x8xf32>
  %b = graph.reshape %a : tensor<4x8xf32> -> tensor<4x8xf32>
  %c = graph.expand %b : tensor<4x8xf32> -> tensor<4x8xf32>
  %d = graph.slice %c starts = [0, 0] ends = [4, 8] steps = [1, 1] : tensor<4x8xf32> -> tensor<4x8xf32>
  %e = graph.pad %d pads = [0, 0, 0, 0] mode = constant value = 0.000000e+00 : tensor<4x8xf32> -> tensor<4x8xf32>
  %f = graph.scale %e by 1.000000e+00 : tensor<4x8xf32>
  %r = graph.relu %f : tensor<4x8xf32>
  func.return %r : tensor<4x8xf32>
}

// -----

// Casts that convert, expands that broadcast and slices that cut stay.
// CHECK-LABEL: func.func @not_noops
// CHECK-NEXT:    %a = graph.cast %x : tensor<4x8xf32> -> tensor<4x8xf16>
// CHECK-NEXT:    %c = graph.expand %y : tensor<4x1xf32> -> tensor<4x8xf32>
// CHECK-NEXT:    %d = graph.slice %x starts = [0, 1] ends = [4, 8] steps = [1, 1] : tensor<4x8xf32> -> tensor<4x7xf32>
func.func @not_noops(%x: tensor<4x8xf32>, %y: tensor<4x1xf32>) -> (tensor<4x8xf16>, tensor<4x8xf32>, tensor<4x7xf32>) {
  %a = graph.cast %x : tensor<4x8xf32> -> tensor<4x8xf16>
  %c = graph.expand %y : tensor<4x1xf32> -> tensor<4x8xf32>
  %d = graph.slice %x starts = [0, 1] ends = [4, 8] steps = [1, 1] : tensor<4x8xf32> -> tensor<4x7xf32>
  func.return %a, %c, %d : tensor<4x8xf16>, tensor<4x8xf32>, tensor<4x7xf32>
}

// -----

// A `where` whose constant condition is all true is its lhs, all false its rhs.
// CHECK-LABEL: func.func @where_constant
// CHECK-NEXT:    func.return %a, %b : tensor<4x8xf32>, tensor<4x8xf32>
func.func @where_constant(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %t = graph.constant dense<true> : tensor<4x1xi1>
  %f = graph.constant dense<false> : tensor<8xi1>
  %x = graph.where %t, %a, %b : (tensor<4x1xi1>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = graph.where %f, %a, %b : (tensor<8xi1>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %x, %y : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// A mixed constant condition, or a branch that the condition would broadcast, stays.
// CHECK-LABEL: func.func @where_kept
// CHECK:         %x = graph.where %c, %a, %b
// CHECK-NEXT:    %y = graph.where %t, %v, %b
func.func @where_kept(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>, %v: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %c = graph.constant dense<[[true], [false], [true], [true]]> : tensor<4x1xi1>
  %t = graph.constant dense<true> : tensor<4x1xi1>
  %x = graph.where %c, %a, %b : (tensor<4x1xi1>, tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = graph.where %t, %v, %b : (tensor<4x1xi1>, tensor<8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %x, %y : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// Splitting heads for one position: the reshapes compose, and the transpose that only
// moves the unit sequence dimension is a reshape too, so one reshape remains.
// CHECK-LABEL: func.func @heads_decode
// CHECK-NEXT:    %t = graph.reshape %x : tensor<2x1x32xf32> -> tensor<2x4x1x8xf32>
// CHECK-NEXT:    func.return %t : tensor<2x4x1x8xf32>
func.func @heads_decode(%x: tensor<2x1x32xf32>) -> tensor<2x4x1x8xf32> {
  %r = graph.reshape %x : tensor<2x1x32xf32> -> tensor<2x1x4x8xf32>
  %t = graph.transpose %r perm = [0, 2, 1, 3] : tensor<2x1x4x8xf32> -> tensor<2x4x1x8xf32>
  func.return %t : tensor<2x4x1x8xf32>
}

// -----

// With several positions the transpose moves data and stays; splitting then merging
// heads cancels (transposes compose, reshapes compose).
// CHECK-LABEL: func.func @heads_prefill
// CHECK-NEXT:    %r = graph.reshape %x : tensor<2x3x32xf32> -> tensor<2x3x4x8xf32>
// CHECK-NEXT:    %t = graph.transpose %r perm = [0, 2, 1, 3] : tensor<2x3x4x8xf32> -> tensor<2x4x3x8xf32>
// CHECK-NEXT:    func.return %x, %t : tensor<2x3x32xf32>, tensor<2x4x3x8xf32>
func.func @heads_prefill(%x: tensor<2x3x32xf32>) -> (tensor<2x3x32xf32>, tensor<2x4x3x8xf32>) {
  %r = graph.reshape %x : tensor<2x3x32xf32> -> tensor<2x3x4x8xf32>
  %t = graph.transpose %r perm = [0, 2, 1, 3] : tensor<2x3x4x8xf32> -> tensor<2x4x3x8xf32>
  %u = graph.transpose %t perm = [0, 2, 1, 3] : tensor<2x4x3x8xf32> -> tensor<2x3x4x8xf32>
  %m = graph.reshape %u : tensor<2x3x4x8xf32> -> tensor<2x3x32xf32>
  func.return %m, %t : tensor<2x3x32xf32>, tensor<2x4x3x8xf32>
}

// -----

// Ops on small constants fold (here a causal mask built from an iota), into one constant.
// CHECK-LABEL: func.func @fold
// CHECK-NEXT:    %m = graph.constant dense<[[0.000000e+00, -1.000000e+09], [0.000000e+00, 0.000000e+00]]> : tensor<2x2xf32>
// CHECK-NEXT:    func.return %m : tensor<2x2xf32>
func.func @fold() -> tensor<2x2xf32> {
  %i = graph.constant dense<[[0, 1], [0, 0]]> : tensor<2x2xi64>
  %zero = graph.constant dense<0> : tensor<i64>
  %c = graph.cmp gt %i, %zero : (tensor<2x2xi64>, tensor<i64>) -> tensor<2x2xi1>
  %neg = graph.constant dense<-1.0e+09> : tensor<f32>
  %z = graph.constant dense<0.0> : tensor<f32>
  %m = graph.where %c, %neg, %z : (tensor<2x2xi1>, tensor<f32>, tensor<f32>) -> tensor<2x2xf32>
  func.return %m : tensor<2x2xf32>
}

// -----

// Folding never inflates a small constant into a large one.
// CHECK-LABEL: func.func @no_inflate
// CHECK-NEXT:    %c = graph.constant dense<1.000000e+00> : tensor<f32>
// CHECK-NEXT:    %e = graph.expand %c : tensor<f32> -> tensor<64x64xf32>
func.func @no_inflate() -> tensor<64x64xf32> {
  %c = graph.constant dense<1.0> : tensor<f32>
  %e = graph.expand %c : tensor<f32> -> tensor<64x64xf32>
  func.return %e : tensor<64x64xf32>
}

// -----

// Kᵀ as exporters write it — flattened to 3-D, transposed, unflattened, scaled — moves
// into the matmul's `transpose_b` flag (the scale runs on K itself).
// CHECK-LABEL: func.func @kt_flattened
// CHECK-NEXT:    %[[K:.*]] = graph.scale %k by 5.000000e-01 : tensor<1x4x8x16xf32>
// CHECK-NEXT:    %s = graph.matmul %q, %[[K]] transpose_b : (tensor<1x4x8x16xf32>, tensor<1x4x8x16xf32>) -> tensor<1x4x8x8xf32>
// CHECK-NEXT:    func.return %s : tensor<1x4x8x8xf32>
func.func @kt_flattened(%q: tensor<1x4x8x16xf32>, %k: tensor<1x4x8x16xf32>) -> tensor<1x4x8x8xf32> {
  %k3 = graph.reshape %k : tensor<1x4x8x16xf32> -> tensor<4x8x16xf32>
  %kt = graph.transpose %k3 perm = [0, 2, 1] : tensor<4x8x16xf32> -> tensor<4x16x8xf32>
  %k4 = graph.reshape %kt : tensor<4x16x8xf32> -> tensor<1x4x16x8xf32>
  %ks = graph.scale %k4 by 5.000000e-01 : tensor<1x4x16x8xf32>
  %s = graph.matmul %q, %ks : (tensor<1x4x8x16xf32>, tensor<1x4x16x8xf32>) -> tensor<1x4x8x8xf32>
  func.return %s : tensor<1x4x8x8xf32>
}

// -----

// A transpose stays below a reshape that splits a dimension it moves (the heads split),
// and below a reshape or an expand with another user.
// CHECK-LABEL: func.func @transpose_stays
// CHECK-NEXT:    %r = graph.reshape %x : tensor<2x3x32xf32> -> tensor<2x3x4x8xf32>
// CHECK-NEXT:    %t = graph.transpose %r perm = [0, 2, 1, 3]
// CHECK-NEXT:    %e = graph.expand %y : tensor<2x1x8xf32> -> tensor<2x4x8xf32>
// CHECK-NEXT:    %u = graph.transpose %e perm = [0, 2, 1]
func.func @transpose_stays(%x: tensor<2x3x32xf32>, %y: tensor<2x1x8xf32>) -> (tensor<2x4x3x8xf32>, tensor<2x8x4xf32>, tensor<2x4x8xf32>) {
  %r = graph.reshape %x : tensor<2x3x32xf32> -> tensor<2x3x4x8xf32>
  %t = graph.transpose %r perm = [0, 2, 1, 3] : tensor<2x3x4x8xf32> -> tensor<2x4x3x8xf32>
  %e = graph.expand %y : tensor<2x1x8xf32> -> tensor<2x4x8xf32>
  %u = graph.transpose %e perm = [0, 2, 1] : tensor<2x4x8xf32> -> tensor<2x8x4xf32>
  func.return %t, %u, %e : tensor<2x4x3x8xf32>, tensor<2x8x4xf32>, tensor<2x4x8xf32>
}

// -----

// A transpose of an expand with no other user transposes the smaller tensor instead
// (which, moving a unit dimension only, is a reshape).
// CHECK-LABEL: func.func @transpose_above_expand
// CHECK-NEXT:    %[[T:.*]] = graph.reshape %y : tensor<2x1x8xf32> -> tensor<2x8x1xf32>
// CHECK-NEXT:    %{{.*}} = graph.expand %[[T]] : tensor<2x8x1xf32> -> tensor<2x8x4xf32>
func.func @transpose_above_expand(%y: tensor<2x1x8xf32>) -> tensor<2x8x4xf32> {
  %e = graph.expand %y : tensor<2x1x8xf32> -> tensor<2x4x8xf32>
  %u = graph.transpose %e perm = [0, 2, 1] : tensor<2x4x8xf32> -> tensor<2x8x4xf32>
  func.return %u : tensor<2x8x4xf32>
}

// -----

// A product of large constants is left to the wafer.
// CHECK-LABEL: func.func @no_large_product
// CHECK:         graph.matmul %a, %b
func.func @no_large_product() -> tensor<2x2xf32> {
  %a = graph.constant dense<1.0> : tensor<2x2048xf32>
  %b = graph.constant dense<1.0> : tensor<2048x2xf32>
  %c = graph.matmul %a, %b : (tensor<2x2048xf32>, tensor<2048x2xf32>) -> tensor<2x2xf32>
  func.return %c : tensor<2x2xf32>
}
