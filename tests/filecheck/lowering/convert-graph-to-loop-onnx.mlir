// RUN: plmr-opt %s -p convert-graph-to-loop --split-input-file | filecheck %s

// The lowerings of the ops of ONNX models (selection, comparison, logic, casts, data
// movement) to loop nests.

// A comparison is a nest yielding i1 (`arith.cmpf` with an ordered predicate); a
// where selects with broadcasting reads.

// CHECK-LABEL: func.func @where_cmp(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
// CHECK-NEXT:  %m = loop.nest (%i0, %i1) to (4, 8) [parallel, parallel] -> tensor<4x8xi1> {
// CHECK-NEXT:  [[V0:%[0-9]+]] = loop.read %a[%i0, %i1] : tensor<4x8xf32>
// CHECK-NEXT:  [[V1:%[0-9]+]] = loop.read %b[%i1] : tensor<8xf32>
// CHECK-NEXT:  [[V2:%[0-9]+]] = arith.cmpf olt, [[V0]], [[V1]] : f32
// CHECK-NEXT:  loop.yield [[V2]] : i1
// CHECK-NEXT:  }
// CHECK-NEXT:  %w = loop.nest (%i0_{{[0-9]+}}, %i1_{{[0-9]+}}) to (4, 8) [parallel, parallel] -> tensor<4x8xf32> {
// CHECK-NEXT:  [[V3:%[0-9]+]] = loop.read %m[%i0_{{[0-9]+}}, %i1_{{[0-9]+}}] : tensor<4x8xi1>
// CHECK-NEXT:  [[V4:%[0-9]+]] = loop.read %a[%i0_{{[0-9]+}}, %i1_{{[0-9]+}}] : tensor<4x8xf32>
// CHECK-NEXT:  [[V5:%[0-9]+]] = loop.read %b[%i1_{{[0-9]+}}] : tensor<8xf32>
// CHECK-NEXT:  [[V6:%[0-9]+]] = arith.select [[V3]], [[V4]], [[V5]] : f32
// CHECK-NEXT:  loop.yield [[V6]] : f32
// CHECK-NEXT:  }
// CHECK-NEXT:  func.return %w : tensor<4x8xf32>
// CHECK-NEXT:  }
func.func @where_cmp(%a: tensor<4x8xf32>, %b: tensor<8xf32>) -> tensor<4x8xf32> {
  %m = graph.cmp lt %a, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xi1>
  %w = graph.where %m, %a, %b : (tensor<4x8xi1>, tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  func.return %w : tensor<4x8xf32>
}

// -----

// Casts: float to int truncates (`arith.fptosi`), to i1 is `x != 0` (unordered, so
// NaN is true), i1 to float is unsigned (`arith.uitofp`: true is 1, not -1).

// CHECK-LABEL: func.func @casts(%a: tensor<4xf32>, %b: tensor<4xi1>) -> (tensor<4xi64>, tensor<4xi1>, tensor<4xf32>) {
// CHECK-NEXT:  %i = loop.nest (%i0) to (4) [parallel] -> tensor<4xi64> {
// CHECK-NEXT:  [[V0:%[0-9]+]] = loop.read %a[%i0] : tensor<4xf32>
// CHECK-NEXT:  [[V1:%[0-9]+]] = arith.fptosi [[V0]] : f32 to i64
// CHECK-NEXT:  loop.yield [[V1]] : i64
// CHECK-NEXT:  }
// CHECK-NEXT:  %z = loop.nest (%i0_{{[0-9]+}}) to (4) [parallel] -> tensor<4xi1> {
// CHECK-NEXT:  [[V2:%[0-9]+]] = loop.read %a[%i0_{{[0-9]+}}] : tensor<4xf32>
// CHECK-NEXT:  [[V3:%[0-9]+]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT:  [[V4:%[0-9]+]] = arith.cmpf une, [[V2]], [[V3]] : f32
// CHECK-NEXT:  loop.yield [[V4]] : i1
// CHECK-NEXT:  }
// CHECK-NEXT:  %f = loop.nest (%i0_{{[0-9]+}}) to (4) [parallel] -> tensor<4xf32> {
// CHECK-NEXT:  [[V5:%[0-9]+]] = loop.read %b[%i0_{{[0-9]+}}] : tensor<4xi1>
// CHECK-NEXT:  [[V6:%[0-9]+]] = arith.uitofp [[V5]] : i1 to f32
// CHECK-NEXT:  loop.yield [[V6]] : f32
// CHECK-NEXT:  }
// CHECK-NEXT:  func.return %i, %z, %f : tensor<4xi64>, tensor<4xi1>, tensor<4xf32>
// CHECK-NEXT:  }
func.func @casts(%a: tensor<4xf32>, %b: tensor<4xi1>) -> (tensor<4xi64>, tensor<4xi1>, tensor<4xf32>) {
  %i = graph.cast %a : tensor<4xf32> -> tensor<4xi64>
  %z = graph.cast %a : tensor<4xf32> -> tensor<4xi1>
  %f = graph.cast %b : tensor<4xi1> -> tensor<4xf32>
  func.return %i, %z, %f : tensor<4xi64>, tensor<4xi1>, tensor<4xf32>
}

// -----

// Logic on i1: not is xor with true.

// CHECK-LABEL: func.func @logic(%a: tensor<4xi1>, %b: tensor<4xi1>) -> tensor<4xi1> {
// CHECK-NEXT:  %n = loop.nest (%i0) to (4) [parallel] -> tensor<4xi1> {
// CHECK-NEXT:  [[V0:%[0-9]+]] = loop.read %a[%i0] : tensor<4xi1>
// CHECK-NEXT:  [[V1:%[0-9]+]] = arith.constant true
// CHECK-NEXT:  [[V2:%[0-9]+]] = arith.xori [[V0]], [[V1]] : i1
// CHECK-NEXT:  loop.yield [[V2]] : i1
// CHECK-NEXT:  }
// CHECK-NEXT:  %r = loop.nest (%i0_{{[0-9]+}}) to (4) [parallel] -> tensor<4xi1> {
// CHECK-NEXT:  [[V3:%[0-9]+]] = loop.read %n[%i0_{{[0-9]+}}] : tensor<4xi1>
// CHECK-NEXT:  [[V4:%[0-9]+]] = loop.read %b[%i0_{{[0-9]+}}] : tensor<4xi1>
// CHECK-NEXT:  [[V5:%[0-9]+]] = arith.andi [[V3]], [[V4]] : i1
// CHECK-NEXT:  loop.yield [[V5]] : i1
// CHECK-NEXT:  }
// CHECK-NEXT:  func.return %r : tensor<4xi1>
// CHECK-NEXT:  }
func.func @logic(%a: tensor<4xi1>, %b: tensor<4xi1>) -> tensor<4xi1> {
  %n = graph.not %a : tensor<4xi1>
  %r = graph.and %n, %b : (tensor<4xi1>, tensor<4xi1>) -> tensor<4xi1>
  func.return %r : tensor<4xi1>
}

// -----

// A slice reads at `start + i * step` (here a negative step on the last dimension).

// CHECK-LABEL: func.func @slice(%a: tensor<8x6xf32>) -> tensor<3x2xf32> {
// CHECK-NEXT:  %s = loop.nest (%i0, %i1) to (3, 2) [parallel, parallel] -> tensor<3x2xf32> {
// CHECK-NEXT:  [[V0:%[0-9]+]] = arith.constant 2 : index
// CHECK-NEXT:  [[V1:%[0-9]+]] = arith.addi %i0, [[V0]] : index
// CHECK-NEXT:  [[V2:%[0-9]+]] = arith.constant -3 : index
// CHECK-NEXT:  [[V3:%[0-9]+]] = arith.muli %i1, [[V2]] : index
// CHECK-NEXT:  [[V4:%[0-9]+]] = arith.constant 5 : index
// CHECK-NEXT:  [[V5:%[0-9]+]] = arith.addi [[V3]], [[V4]] : index
// CHECK-NEXT:  [[V6:%[0-9]+]] = loop.read %a[[[V1]], [[V5]]] : tensor<8x6xf32>
// CHECK-NEXT:  loop.yield [[V6]] : f32
// CHECK-NEXT:  }
// CHECK-NEXT:  func.return %s : tensor<3x2xf32>
// CHECK-NEXT:  }
func.func @slice(%a: tensor<8x6xf32>) -> tensor<3x2xf32> {
  %s = graph.slice %a starts = [2, 5] ends = [5, -1] steps = [1, -3] : tensor<8x6xf32> -> tensor<3x2xf32>
  func.return %s : tensor<3x2xf32>
}

// -----

// An expand reads index 0 along the size-1 dimensions.

// CHECK-LABEL: func.func @expand(%a: tensor<4x1xf32>) -> tensor<2x4x8xf32> {
// CHECK-NEXT:  %e = loop.nest (%i0, %i1, %i2) to (2, 4, 8) [parallel, parallel, parallel] -> tensor<2x4x8xf32> {
// CHECK-NEXT:  [[V0:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:  [[V1:%[0-9]+]] = loop.read %a[%i1, [[V0]]] : tensor<4x1xf32>
// CHECK-NEXT:  loop.yield [[V1]] : f32
// CHECK-NEXT:  }
// CHECK-NEXT:  func.return %e : tensor<2x4x8xf32>
// CHECK-NEXT:  }
func.func @expand(%a: tensor<4x1xf32>) -> tensor<2x4x8xf32> {
  %e = graph.expand %a : tensor<4x1xf32> -> tensor<2x4x8xf32>
  func.return %e : tensor<2x4x8xf32>
}

// -----

// Pads: constant reads with the value as `padding`; reflect mirrors the index at both
// borders (`|j|`, then `2(n-1) - j`); edge clamps it.

// CHECK-LABEL: func.func @pads(%a: tensor<4x5xf32>) -> (tensor<5x7xf32>, tensor<5x7xf32>, tensor<5x7xf32>) {
// CHECK-NEXT:  %c = loop.nest (%i0, %i1) to (5, 7) [parallel, parallel] -> tensor<5x7xf32> {
// CHECK-NEXT:  [[V0:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:  [[V1:%[0-9]+]] = arith.subi %i0, [[V0]] : index
// CHECK-NEXT:  [[V2:%[0-9]+]] = loop.read %a[[[V1]], %i1] padding 1.500000e+00 : tensor<4x5xf32>
// CHECK-NEXT:  loop.yield [[V2]] : f32
// CHECK-NEXT:  }
// CHECK-NEXT:  %r = loop.nest (%i0_{{[0-9]+}}, %i1_{{[0-9]+}}) to (5, 7) [parallel, parallel] -> tensor<5x7xf32> {
// CHECK-NEXT:  [[V3:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:  [[V4:%[0-9]+]] = arith.subi %i0_{{[0-9]+}}, [[V3]] : index
// CHECK-NEXT:  [[V5:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:  [[V6:%[0-9]+]] = arith.subi [[V5]], [[V4]] : index
// CHECK-NEXT:  [[V7:%[0-9]+]] = arith.maxsi [[V4]], [[V6]] : index
// CHECK-NEXT:  [[V8:%[0-9]+]] = arith.constant 8 : index
// CHECK-NEXT:  [[V9:%[0-9]+]] = arith.subi [[V8]], %i1_{{[0-9]+}} : index
// CHECK-NEXT:  [[V10:%[0-9]+]] = arith.minsi %i1_{{[0-9]+}}, [[V9]] : index
// CHECK-NEXT:  [[V11:%[0-9]+]] = loop.read %a[[[V7]], [[V10]]] : tensor<4x5xf32>
// CHECK-NEXT:  loop.yield [[V11]] : f32
// CHECK-NEXT:  }
// CHECK-NEXT:  %e = loop.nest (%i0_{{[0-9]+}}, %i1_{{[0-9]+}}) to (5, 7) [parallel, parallel] -> tensor<5x7xf32> {
// CHECK-NEXT:  [[V12:%[0-9]+]] = arith.constant 1 : index
// CHECK-NEXT:  [[V13:%[0-9]+]] = arith.subi %i0_{{[0-9]+}}, [[V12]] : index
// CHECK-NEXT:  [[V14:%[0-9]+]] = arith.constant 0 : index
// CHECK-NEXT:  [[V15:%[0-9]+]] = arith.maxsi [[V13]], [[V14]] : index
// CHECK-NEXT:  [[V16:%[0-9]+]] = arith.constant 4 : index
// CHECK-NEXT:  [[V17:%[0-9]+]] = arith.minsi %i1_{{[0-9]+}}, [[V16]] : index
// CHECK-NEXT:  [[V18:%[0-9]+]] = loop.read %a[[[V15]], [[V17]]] : tensor<4x5xf32>
// CHECK-NEXT:  loop.yield [[V18]] : f32
// CHECK-NEXT:  }
// CHECK-NEXT:  func.return %c, %r, %e : tensor<5x7xf32>, tensor<5x7xf32>, tensor<5x7xf32>
// CHECK-NEXT:  }
func.func @pads(%a: tensor<4x5xf32>) -> (tensor<5x7xf32>, tensor<5x7xf32>, tensor<5x7xf32>) {
  %c = graph.pad %a pads = [1, 0, 0, 2] mode = constant value = 1.5 : tensor<4x5xf32> -> tensor<5x7xf32>
  %r = graph.pad %a pads = [1, 0, 0, 2] mode = reflect value = 0.0 : tensor<4x5xf32> -> tensor<5x7xf32>
  %e = graph.pad %a pads = [1, 0, 0, 2] mode = edge value = 0.0 : tensor<4x5xf32> -> tensor<5x7xf32>
  func.return %c, %r, %e : tensor<5x7xf32>, tensor<5x7xf32>, tensor<5x7xf32>
}

// -----

// gather_elements of integer data is the one-hot select-and-sum of float data
// (convert-graph-to-loop-gather.mlir), summed with arith.addi: the index along the axis
// (negative indices count from the end) is compared with the iota [0, 8).

// CHECK-LABEL: func.func @gather_elements(%d: tensor<4x8xi64>, %i: tensor<4x3xi64>) -> tensor<4x3xi64> {
// CHECK-NEXT:  %0 = arith.constant dense<[0, 1, 2, 3, 4, 5, 6, 7]> : tensor<8xi64>
// CHECK-NEXT:  %1 = arith.constant 0 : i64
// CHECK-NEXT:  %g = loop.nest (%i0, %i1, %i2) to (4, 3, 8) [parallel, parallel, reduction] init(%acc = %1 : i64) -> tensor<4x3xi64> {
// CHECK-NEXT:  [[V0:%[0-9]+]] = loop.read %i[%i0, %i1] : tensor<4x3xi64>
// CHECK:       [[N:%[0-9]+]] = arith.select {{.*}} : i64
// CHECK-NEXT:  [[IO:%[0-9]+]] = loop.read %0[%i2] : tensor<8xi64>
// CHECK-NEXT:  [[HIT:%[0-9]+]] = arith.cmpi eq, [[N]], [[IO]] : i64
// CHECK-NEXT:  [[D:%[0-9]+]] = loop.read %d[%i0, %i2] : tensor<4x8xi64>
// CHECK-NEXT:  [[Z:%[0-9]+]] = arith.constant 0 : i64
// CHECK-NEXT:  [[T:%[0-9]+]] = arith.select [[HIT]], [[D]], [[Z]] : i64
// CHECK-NEXT:  [[S:%[0-9]+]] = arith.addi %acc, [[T]] : i64
// CHECK-NEXT:  loop.yield [[S]] : i64
// CHECK-NEXT:  }
// CHECK-NEXT:  func.return %g : tensor<4x3xi64>
// CHECK-NEXT:  }
func.func @gather_elements(%d: tensor<4x8xi64>, %i: tensor<4x3xi64>) -> tensor<4x3xi64> {
  %g = graph.gather_elements %d, %i axis = 1 : (tensor<4x8xi64>, tensor<4x3xi64>) -> tensor<4x3xi64>
  func.return %g : tensor<4x3xi64>
}

// -----

// pow is `math.powf` by a constant; abs of integers is `math.absi`.

// CHECK-LABEL: func.func @pow_abs(%a: tensor<4xf32>, %i: tensor<4xi32>) -> (tensor<4xf32>, tensor<4xi32>) {
// CHECK-NEXT:  %p = loop.nest (%i0) to (4) [parallel] -> tensor<4xf32> {
// CHECK-NEXT:  [[V0:%[0-9]+]] = loop.read %a[%i0] : tensor<4xf32>
// CHECK-NEXT:  [[V1:%[0-9]+]] = arith.constant 3.000000e+00 : f32
// CHECK-NEXT:  [[V2:%[0-9]+]] = math.powf [[V0]], [[V1]] : f32
// CHECK-NEXT:  loop.yield [[V2]] : f32
// CHECK-NEXT:  }
// CHECK-NEXT:  %b = loop.nest (%i0_{{[0-9]+}}) to (4) [parallel] -> tensor<4xi32> {
// CHECK-NEXT:  [[V3:%[0-9]+]] = loop.read %i[%i0_{{[0-9]+}}] : tensor<4xi32>
// CHECK-NEXT:  [[V4:%[0-9]+]] = math.absi [[V3]] : i32
// CHECK-NEXT:  loop.yield [[V4]] : i32
// CHECK-NEXT:  }
// CHECK-NEXT:  func.return %p, %b : tensor<4xf32>, tensor<4xi32>
// CHECK-NEXT:  }
func.func @pow_abs(%a: tensor<4xf32>, %i: tensor<4xi32>) -> (tensor<4xf32>, tensor<4xi32>) {
  %p = graph.pow %a by 3.0 : tensor<4xf32>
  %b = graph.abs %i : tensor<4xi32>
  func.return %p, %b : tensor<4xf32>, tensor<4xi32>
}

// -----

// RoPE's tables of a run-time position: cos and sin are `math.cos` / `math.sin` of the
// position (an i64 cast to f32) times a frequency.

// CHECK-LABEL: func.func @rope(%p: tensor<4x1xi64>, %f: tensor<1x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
// CHECK:         %c = loop.nest (%[[I:.*]], %[[J:.*]]) to (4, 8) [parallel, parallel] -> tensor<4x8xf32> {
// CHECK-NEXT:    [[A:%[0-9]+]] = loop.read %t[%[[I]], %[[J]]] : tensor<4x8xf32>
// CHECK-NEXT:    [[C:%[0-9]+]] = math.cos [[A]] : f32
// CHECK-NEXT:    loop.yield [[C]] : f32
// CHECK:         %s = loop.nest (%[[K:.*]], %[[L:.*]]) to (4, 8) [parallel, parallel] -> tensor<4x8xf32> {
// CHECK-NEXT:    [[B:%[0-9]+]] = loop.read %t[%[[K]], %[[L]]] : tensor<4x8xf32>
// CHECK-NEXT:    [[S:%[0-9]+]] = math.sin [[B]] : f32
// CHECK-NEXT:    loop.yield [[S]] : f32
func.func @rope(%p: tensor<4x1xi64>, %f: tensor<1x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %x = graph.cast %p : tensor<4x1xi64> -> tensor<4x1xf32>
  %t = graph.mul %x, %f : (tensor<4x1xf32>, tensor<1x8xf32>) -> tensor<4x8xf32>
  %c = graph.cos %t : tensor<4x8xf32>
  %s = graph.sin %t : tensor<4x8xf32>
  func.return %c, %s : tensor<4x8xf32>, tensor<4x8xf32>
}

// -----

// sinh and cosh expand to `(e^x ∓ e^-x) / 2` in existing `arith` / `math` ops: the
// scalar body the op class carries.

// CHECK-LABEL: func.func @hyperbolic(%a: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
// CHECK-NEXT:    %s = loop.nest (%[[I:.*]], %[[J:.*]]) to (2, 3) [parallel, parallel] -> tensor<2x3xf32> {
// CHECK-NEXT:    [[X:%[0-9]+]] = loop.read %a[%[[I]], %[[J]]] : tensor<2x3xf32>
// CHECK-NEXT:    [[P:%[0-9]+]] = math.exp [[X]] : f32
// CHECK-NEXT:    [[NX:%[0-9]+]] = arith.negf [[X]] : f32
// CHECK-NEXT:    [[N:%[0-9]+]] = math.exp [[NX]] : f32
// CHECK-NEXT:    [[D:%[0-9]+]] = arith.subf [[P]], [[N]] : f32
// CHECK-NEXT:    [[H:%[0-9]+]] = arith.constant 5.000000e-01 : f32
// CHECK-NEXT:    [[S:%[0-9]+]] = arith.mulf [[D]], [[H]] : f32
// CHECK-NEXT:    loop.yield [[S]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    %c = loop.nest (%[[K:.*]], %[[L:.*]]) to (2, 3) [parallel, parallel] -> tensor<2x3xf32> {
// CHECK-NEXT:    [[Y:%[0-9]+]] = loop.read %a[%[[K]], %[[L]]] : tensor<2x3xf32>
// CHECK-NEXT:    [[Q:%[0-9]+]] = math.exp [[Y]] : f32
// CHECK-NEXT:    [[NY:%[0-9]+]] = arith.negf [[Y]] : f32
// CHECK-NEXT:    [[M:%[0-9]+]] = math.exp [[NY]] : f32
// CHECK-NEXT:    [[T:%[0-9]+]] = arith.addf [[Q]], [[M]] : f32
// CHECK-NEXT:    [[G:%[0-9]+]] = arith.constant 5.000000e-01 : f32
// CHECK-NEXT:    [[C:%[0-9]+]] = arith.mulf [[T]], [[G]] : f32
// CHECK-NEXT:    loop.yield [[C]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    func.return %s, %c : tensor<2x3xf32>, tensor<2x3xf32>
func.func @hyperbolic(%a: tensor<2x3xf32>) -> (tensor<2x3xf32>, tensor<2x3xf32>) {
  %s = graph.sinh %a : tensor<2x3xf32>
  %c = graph.cosh %a : tensor<2x3xf32>
  func.return %s, %c : tensor<2x3xf32>, tensor<2x3xf32>
}

// -----

// An empty result is an empty constant (a loop nest has positive extents).

// CHECK-LABEL: func.func @empty(%a: tensor<4x5xf32>) -> tensor<0x5xf32> {
// CHECK-NEXT:  %s = arith.constant dense<> : tensor<0x5xf32>
// CHECK-NEXT:  func.return %s : tensor<0x5xf32>
// CHECK-NEXT:  }
func.func @empty(%a: tensor<4x5xf32>) -> tensor<0x5xf32> {
  %s = graph.slice %a starts = [2, 0] ends = [2, 5] steps = [1, 1] : tensor<4x5xf32> -> tensor<0x5xf32>
  func.return %s : tensor<0x5xf32>
}
