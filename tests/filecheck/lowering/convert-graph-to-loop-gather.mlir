// RUN: plmr-opt %s -p convert-graph-to-loop --split-input-file | filecheck %s

// A gather by run-time indices (a token embedding) is a one-hot select-and-sum over
// the gathered axis: the index, counted from the end when negative, is compared with
// the constant iota [0, V) and selects the table row; every other term is 0.

// CHECK-LABEL: func.func @embedding(%w: tensor<16x8xf32>, %ids: tensor<2x3xi64>) -> tensor<2x3x8xf32> {
// CHECK-NEXT:  %0 = arith.constant dense<[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]> : tensor<16xi64>
// CHECK-NEXT:  %1 = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:  %e = loop.nest (%i0, %i1, %i2, %i3) to (2, 3, 8, 16) [parallel, parallel, parallel, reduction] init(%acc = %1 : f32) -> tensor<2x3x8xf32> {
// CHECK-NEXT:  [[ID:%[0-9]+]] = loop.read %ids[%i0, %i1] : tensor<2x3xi64>
// CHECK-NEXT:  [[ZERO:%[0-9]+]] = arith.constant 0 : i64
// CHECK-NEXT:  [[NEG:%[0-9]+]] = arith.cmpi slt, [[ID]], [[ZERO]] : i64
// CHECK-NEXT:  [[V:%[0-9]+]] = arith.constant 16 : i64
// CHECK-NEXT:  [[UP:%[0-9]+]] = arith.addi [[ID]], [[V]] : i64
// CHECK-NEXT:  [[NORM:%[0-9]+]] = arith.select [[NEG]], [[UP]], [[ID]] : i64
// CHECK-NEXT:  [[IOTA:%[0-9]+]] = loop.read %0[%i3] : tensor<16xi64>
// CHECK-NEXT:  [[HIT:%[0-9]+]] = arith.cmpi eq, [[NORM]], [[IOTA]] : i64
// CHECK-NEXT:  [[ROW:%[0-9]+]] = loop.read %w[%i3, %i2] : tensor<16x8xf32>
// CHECK-NEXT:  [[FZERO:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:  [[TERM:%[0-9]+]] = arith.select [[HIT]], [[ROW]], [[FZERO]] : f32
// CHECK-NEXT:  [[SUM:%[0-9]+]] = arith.addf %acc, [[TERM]] : f32
// CHECK-NEXT:  loop.yield [[SUM]] : f32
// CHECK-NEXT:  }
// CHECK-NEXT:  func.return %e : tensor<2x3x8xf32>
func.func @embedding(%w: tensor<16x8xf32>, %ids: tensor<2x3xi64>) -> tensor<2x3x8xf32> {
  %e = graph.gather %w, %ids : (tensor<16x8xf32>, tensor<2x3xi64>) -> tensor<2x3x8xf32>
  func.return %e : tensor<2x3x8xf32>
}

// -----

// Along an inner axis, with i32 indices: the iota has the indices' type, the data is
// read with the gathered index in place of the axis.

// CHECK-LABEL: func.func @inner_axis(%x: tensor<4x5x6xf32>, %i: tensor<3xi32>) -> tensor<4x3x6xf32> {
// CHECK-NEXT:  %0 = arith.constant dense<[0, 1, 2, 3, 4]> : tensor<5xi32>
// CHECK:       %g = loop.nest (%i0, %i1, %i2, %i3) to (4, 3, 6, 5) [parallel, parallel, parallel, reduction] init(%acc = %1 : f32) -> tensor<4x3x6xf32> {
// CHECK-NEXT:  loop.read %i[%i1] : tensor<3xi32>
// CHECK:       arith.cmpi slt, {{.*}} : i32
// CHECK:       loop.read %0[%i3] : tensor<5xi32>
// CHECK-NEXT:  arith.cmpi eq, {{.*}} : i32
// CHECK-NEXT:  loop.read %x[%i0, %i3, %i2] : tensor<4x5x6xf32>
func.func @inner_axis(%x: tensor<4x5x6xf32>, %i: tensor<3xi32>) -> tensor<4x3x6xf32> {
  %g = graph.gather %x, %i axis = 1 : (tensor<4x5x6xf32>, tensor<3xi32>) -> tensor<4x3x6xf32>
  func.return %g : tensor<4x3x6xf32>
}

// -----

// gather_elements by run-time indices: the same contraction, the index read at the
// result's own position.

// CHECK-LABEL: func.func @gather_elements(%d: tensor<4x8xf32>, %i: tensor<4x3xi64>) -> tensor<4x3xf32> {
// CHECK-NEXT:  %0 = arith.constant dense<[0, 1, 2, 3, 4, 5, 6, 7]> : tensor<8xi64>
// CHECK-NEXT:  %1 = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:  %g = loop.nest (%i0, %i1, %i2) to (4, 3, 8) [parallel, parallel, reduction] init(%acc = %1 : f32) -> tensor<4x3xf32> {
// CHECK-NEXT:  loop.read %i[%i0, %i1] : tensor<4x3xi64>
// CHECK:       loop.read %0[%i2] : tensor<8xi64>
// CHECK-NEXT:  arith.cmpi eq
// CHECK-NEXT:  loop.read %d[%i0, %i2] : tensor<4x8xf32>
// CHECK-NEXT:  arith.constant 0.000000e+00 : f32
// CHECK-NEXT:  arith.select
// CHECK-NEXT:  arith.addf %acc
func.func @gather_elements(%d: tensor<4x8xf32>, %i: tensor<4x3xi64>) -> tensor<4x3xf32> {
  %g = graph.gather_elements %d, %i axis = 1 : (tensor<4x8xf32>, tensor<4x3xi64>) -> tensor<4x3xf32>
  func.return %g : tensor<4x3xf32>
}

// -----

// Constant indices, and data that is not floating point, keep the plain read: one
// parallel nest reading the data at the index read from the indices.

// CHECK-LABEL: func.func @plain(%x: tensor<6x4xf32>, %n: tensor<6x4xi64>, %i: tensor<2xi64>) -> (tensor<2x4xf32>, tensor<2x4xi64>) {
// CHECK-NEXT:  %k = arith.constant dense<[3, -1]> : tensor<2xi64>
// CHECK-NEXT:  %a = loop.nest (%i0, %i1) to (2, 4) [parallel, parallel] -> tensor<2x4xf32> {
// CHECK-NEXT:  [[K:%[0-9]+]] = loop.read %k[%i0] : tensor<2xi64>
// CHECK-NEXT:  [[KI:%[0-9]+]] = arith.index_cast [[K]] : i64 to index
// CHECK:       [[KN:%[0-9]+]] = arith.select {{.*}} : index
// CHECK-NEXT:  [[A:%[0-9]+]] = loop.read %x[[[KN]], %i1] : tensor<6x4xf32>
// CHECK-NEXT:  loop.yield [[A]] : f32
// CHECK-NEXT:  }
// CHECK-NEXT:  %b = loop.nest (%i0_{{[0-9]+}}, %i1_{{[0-9]+}}) to (2, 4) [parallel, parallel] -> tensor<2x4xi64> {
// CHECK-NEXT:  loop.read %i[%i0_{{[0-9]+}}] : tensor<2xi64>
// CHECK-NEXT:  arith.index_cast
// CHECK:       loop.read %n[{{%[0-9]+}}, %i1_{{[0-9]+}}] : tensor<6x4xi64>
func.func @plain(%x: tensor<6x4xf32>, %n: tensor<6x4xi64>, %i: tensor<2xi64>) -> (tensor<2x4xf32>, tensor<2x4xi64>) {
  %k = graph.constant dense<[3, -1]> : tensor<2xi64>
  %a = graph.gather %x, %k : (tensor<6x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
  %b = graph.gather %n, %i : (tensor<6x4xi64>, tensor<2xi64>) -> tensor<2x4xi64>
  func.return %a, %b : tensor<2x4xf32>, tensor<2x4xi64>
}
