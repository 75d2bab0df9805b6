// RUN: plmr-opt %s -p convert-loop-to-scf --split-input-file | filecheck %s

// A reduction nest: a memref result, scf.for over the parallel dimension outside, the
// reduction inside carrying the accumulator; reads are memref.loads.

// CHECK-LABEL: func.func @rowmax(%x: memref<4x8xf32>) -> memref<4xf32> {
// CHECK:       %m = memref.alloc() : memref<4xf32>
// CHECK:       scf.for %i = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:         %[[R:.*]] = scf.for %j = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[ACC:.*]] = %lo) -> (f32) {
// CHECK-NEXT:      %a = memref.load %x[%i, %j] : memref<4x8xf32>
// CHECK-NEXT:      %b = arith.maximumf %[[ACC]], %a : f32
// CHECK-NEXT:      scf.yield %b : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    memref.store %[[R]], %m[%i] : memref<4xf32>
// CHECK:       func.return %m : memref<4xf32>
func.func @rowmax(%x: tensor<4x8xf32>) -> tensor<4xf32> {
  %lo = arith.constant -3.40282347e+38 : f32
  %m = loop.nest (%i, %j) to (4, 8) [parallel, reduction] init(%acc = %lo : f32) -> tensor<4xf32> {
    %a = loop.read %x[%i, %j] : tensor<4x8xf32>
    %b = arith.maximumf %acc, %a : f32
    loop.yield %b : f32
  }
  func.return %m : tensor<4xf32>
}

// -----

// A padded read clamps its index and selects the padding outside the tensor.

// CHECK-LABEL: func.func @shift
// CHECK:       %[[LO:.*]] = arith.cmpi sge, %{{.*}}, %{{.*}} : index
// CHECK:       %[[C:.*]] = arith.minsi %{{.*}}, %{{.*}} : index
// CHECK:       %[[V:.*]] = memref.load %x[%[[C]]] : memref<8xf32>
// CHECK:       arith.select %{{.*}}, %[[V]], %{{.*}} : f32
func.func @shift(%x: tensor<8xf32>) -> tensor<8xf32> {
  %y = loop.nest (%i) to (8) [parallel] -> tensor<8xf32> {
    %c1 = arith.constant 1 : index
    %j = arith.subi %i, %c1 : index
    %a = loop.read %x[%j] padding 0.000000e+00 : tensor<8xf32>
    loop.yield %a : f32
  }
  func.return %y : tensor<8xf32>
}
