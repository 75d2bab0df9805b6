// RUN: plmr-opt %s -p 'convert-loop-to-tile{tile-sizes=4,4}' --split-input-file | filecheck %s

// A padded read of a shifted window (a graph.pad) is a padded block load: the block
// may start before the tensor, and the elements outside it are the padding.

// CHECK-LABEL: func.func @pad(%a: tensor<6x8xf32>) -> tensor<8x8xf32> {
// CHECK:         %c = tile.for %i0 = 0 to 8 step 4 iter_args(%{{.*}} = %{{.*}}) -> (tensor<8x8xf32>) parallel {
// CHECK-NEXT:      %{{.*}} = tile.for %i1 = 0 to 8 step 4 iter_args(%[[OUT:.*]] = %{{.*}}) -> (tensor<8x8xf32>) parallel {
// CHECK-NEXT:        %[[ONE:.*]] = arith.constant 1 : index
// CHECK-NEXT:        %[[ROW:.*]] = arith.subi %i0, %[[ONE]] : index
// CHECK-NEXT:        %[[BLK:.*]] = tile.load %a[%[[ROW]], %i1] padding 1.500000e+00 : tensor<6x8xf32> -> tensor<4x4xf32>
// CHECK-NEXT:        %{{.*}} = tile.store %[[BLK]], %[[OUT]][%i0, %i1] : tensor<4x4xf32> -> tensor<8x8xf32>
func.func @pad(%a: tensor<6x8xf32>) -> tensor<8x8xf32> {
  %c = loop.nest (%i0, %i1) to (8, 8) [parallel, parallel] -> tensor<8x8xf32> {
    %0 = arith.constant 1 : index
    %1 = arith.subi %i0, %0 : index
    %2 = loop.read %a[%1, %i1] padding 1.500000e+00 : tensor<6x8xf32>
    loop.yield %2 : f32
  }
  func.return %c : tensor<8x8xf32>
}

// -----

// A padded window that slides with a reduction index (a convolution) is not a block of
// the tensor: the nest stays at the loop level.

// CHECK-LABEL: func.func @conv_like
// CHECK:       loop.read %a[%{{.*}}] padding 0.000000e+00 : tensor<8xf32>
// CHECK:       } {loop.remark = "convert-loop-to-tile: left at the loop level: it reads tensor<8xf32> at indices it cannot block"}
func.func @conv_like(%a: tensor<8xf32>) -> tensor<8xf32> {
  %z = arith.constant 0.000000e+00 : f32
  %c = loop.nest (%i, %k) to (8, 3) [parallel, reduction] init(%acc = %z : f32) -> tensor<8xf32> {
    %0 = arith.addi %i, %k : index
    %1 = arith.constant 1 : index
    %2 = arith.subi %0, %1 : index
    %3 = loop.read %a[%2] padding 0.000000e+00 : tensor<8xf32>
    %4 = arith.addf %acc, %3 : f32
    loop.yield %4 : f32
  }
  func.return %c : tensor<8xf32>
}
