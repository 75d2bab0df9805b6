// RUN: plmr-opt %s -p convert-graph-to-loop --split-input-file | filecheck %s

// A token embedding (a table argument gathered by run-time ids) is looked up on the
// host: one tile.lookup, no nest, no one-hot over the vocabulary.

// CHECK-LABEL: func.func @embedding(%w: tensor<16x8xf32>, %ids: tensor<2x3xi64>) -> tensor<2x3x8xf32> {
// CHECK-NEXT:  %e = tile.lookup %w[%ids] axis = 0 : (tensor<16x8xf32>, tensor<2x3xi64>) -> tensor<2x3x8xf32>
// CHECK-NEXT:  func.return %e : tensor<2x3x8xf32>
func.func @embedding(%w: tensor<16x8xf32>, %ids: tensor<2x3xi64>) -> tensor<2x3x8xf32> {
  %e = graph.gather %w, %ids : (tensor<16x8xf32>, tensor<2x3xi64>) -> tensor<2x3x8xf32>
  func.return %e : tensor<2x3x8xf32>
}

// -----

// A table computed on the wafer is not on the host: the gather by run-time indices is a
// one-hot select-and-sum over the gathered axis. The index, counted from the end when
// negative, is compared with the constant iota [0, V) and selects the table row; every
// other term is 0.

// CHECK-LABEL: func.func @computed(%x: tensor<16x8xf32>, %ids: tensor<2x3xi64>) -> tensor<2x3x8xf32> {
// CHECK:       [[IOTAT:%[0-9]+]] = arith.constant dense<[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]> : tensor<16xi64>
// CHECK-NEXT:  [[INIT:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:  %e = loop.nest (%i0_1, %i1_1, %i2, %i3) to (2, 3, 8, 16) [parallel, parallel, parallel, reduction] init(%acc = [[INIT]] : f32) -> tensor<2x3x8xf32> {
// CHECK-NEXT:  [[ID:%[0-9]+]] = loop.read %ids[%i0_1, %i1_1] : tensor<2x3xi64>
// CHECK-NEXT:  [[ZERO:%[0-9]+]] = arith.constant 0 : i64
// CHECK-NEXT:  [[NEG:%[0-9]+]] = arith.cmpi slt, [[ID]], [[ZERO]] : i64
// CHECK-NEXT:  [[V:%[0-9]+]] = arith.constant 16 : i64
// CHECK-NEXT:  [[UP:%[0-9]+]] = arith.addi [[ID]], [[V]] : i64
// CHECK-NEXT:  [[NORM:%[0-9]+]] = arith.select [[NEG]], [[UP]], [[ID]] : i64
// CHECK-NEXT:  [[IOTA:%[0-9]+]] = loop.read [[IOTAT]][%i3] : tensor<16xi64>
// CHECK-NEXT:  [[HIT:%[0-9]+]] = arith.cmpi eq, [[NORM]], [[IOTA]] : i64
// CHECK-NEXT:  [[ROW:%[0-9]+]] = loop.read %w[%i3, %i2] : tensor<16x8xf32>
// CHECK-NEXT:  [[FZERO:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:  [[TERM:%[0-9]+]] = arith.select [[HIT]], [[ROW]], [[FZERO]] : f32
// CHECK-NEXT:  [[SUM:%[0-9]+]] = arith.addf %acc, [[TERM]] : f32
// CHECK-NEXT:  loop.yield [[SUM]] : f32
// CHECK-NEXT:  }
// CHECK-NEXT:  func.return %e : tensor<2x3x8xf32>
func.func @computed(%x: tensor<16x8xf32>, %ids: tensor<2x3xi64>) -> tensor<2x3x8xf32> {
  %w = graph.exp %x : tensor<16x8xf32>
  %e = graph.gather %w, %ids : (tensor<16x8xf32>, tensor<2x3xi64>) -> tensor<2x3x8xf32>
  func.return %e : tensor<2x3x8xf32>
}

// -----

// Along an inner axis, with i32 indices, of a computed tensor: the iota has the
// indices' type, the data is read with the gathered index in place of the axis.

// CHECK-LABEL: func.func @inner_axis(%a: tensor<4x5x6xf32>, %i: tensor<3xi32>) -> tensor<4x3x6xf32> {
// CHECK:       [[IOTA5:%[0-9]+]] = arith.constant dense<[0, 1, 2, 3, 4]> : tensor<5xi32>
// CHECK:       %g = loop.nest (%i0_1, %i1_1, %i2_1, %i3) to (4, 3, 6, 5) [parallel, parallel, parallel, reduction] init(%acc = %{{[0-9]+}} : f32) -> tensor<4x3x6xf32> {
// CHECK-NEXT:  loop.read %i[%i1_1] : tensor<3xi32>
// CHECK:       arith.cmpi slt, {{.*}} : i32
// CHECK:       loop.read [[IOTA5]][%i3] : tensor<5xi32>
// CHECK-NEXT:  arith.cmpi eq, {{.*}} : i32
// CHECK-NEXT:  loop.read %x[%i0_1, %i3, %i2_1] : tensor<4x5x6xf32>
func.func @inner_axis(%a: tensor<4x5x6xf32>, %i: tensor<3xi32>) -> tensor<4x3x6xf32> {
  %x = graph.neg %a : tensor<4x5x6xf32>
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

// Integer data: the same contraction, summed with arith.addi (one value and zeros).
// A gather of a host tensor by constant indices is a host lookup too.

// CHECK-LABEL: func.func @ints(%d: tensor<4x8xi64>, %i: tensor<4x3xi64>, %x: tensor<6x4xf32>) -> (tensor<4x3xi64>, tensor<2x4xf32>) {
// CHECK:       %g = loop.nest (%i0, %i1, %i2) to (4, 3, 8) [parallel, parallel, reduction] init(%acc = %{{[0-9]+}} : i64) -> tensor<4x3xi64> {
// CHECK:       loop.read %d[%i0, %i2] : tensor<4x8xi64>
// CHECK-NEXT:  arith.constant 0 : i64
// CHECK-NEXT:  arith.select
// CHECK-NEXT:  arith.addi %acc
// CHECK:       %a = tile.lookup %x[%k] axis = 0 : (tensor<6x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
func.func @ints(%d: tensor<4x8xi64>, %i: tensor<4x3xi64>, %x: tensor<6x4xf32>) -> (tensor<4x3xi64>, tensor<2x4xf32>) {
  %g = graph.gather_elements %d, %i axis = 1 : (tensor<4x8xi64>, tensor<4x3xi64>) -> tensor<4x3xi64>
  %k = graph.constant dense<[3, -1]> : tensor<2xi64>
  %a = graph.gather %x, %k : (tensor<6x4xf32>, tensor<2xi64>) -> tensor<2x4xf32>
  func.return %g, %a : tensor<4x3xi64>, tensor<2x4xf32>
}
