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
// the tensor: both dimensions are blocks of one element, and the read a padded load of
// one element at `i + k - 1` (padding before and after the tensor).

// CHECK-LABEL: func.func @conv_like
// CHECK:       tile.for %i = 0 to 8 step 1 {{.*}} parallel {
// CHECK:       tile.for %k = 0 to 3 step 1 {{.*}} reduction {
// CHECK-NEXT:  %[[A:[0-9]+]] = arith.addi %i, %k : index
// CHECK:       %[[S:[0-9]+]] = arith.subi %[[A]], %{{[0-9]+}} : index
// CHECK-NEXT:  tile.load %a[%[[S]]] padding 0.000000e+00 : tensor<8xf32> -> tensor<1xf32>
// CHECK-NOT:   loop.remark
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

// -----

// A padded read at a strided, dilated window (a convolution with strides 2 and 3 and
// padding): the dimensions its indices scale are blocks of one element, so the load
// is a padded block load at a computed offset (`2·i2 + i5 - 1`) that may lie before the
// tensor. The dimension the read does not use (the output channel) stays blocked.

// CHECK-LABEL: func.func @strided(
// CHECK-NOT:   loop.remark
// CHECK:       tile.for %i1 = 0 to 3 step 3
// CHECK:       tile.for %i2 = 0 to 4 step 1
// CHECK:       tile.for %i3 = 0 to 3 step 1
// CHECK:       tile.for %i5 = 0 to 3 step 1 {{.*}} reduction
// CHECK:       %[[M:[0-9]+]] = arith.muli %i2, %{{[0-9]+}} : index
// CHECK-NEXT:  %[[A:[0-9]+]] = arith.addi %[[M]], %i5 : index
// CHECK:       %[[S:[0-9]+]] = arith.subi %[[A]], %{{[0-9]+}} : index
// CHECK:       tile.load %x[%{{[0-9]+}}, %i4, %[[S]], %{{[0-9]+}}] padding 0.000000e+00 : tensor<1x2x7x8xf32> -> tensor<1x1x1x1xf32>
// CHECK:       tile.load %w[%i1, %i4, %i5, %i6] : tensor<3x2x3x2xf32> -> tensor<3x1x1x1xf32>
// CHECK-NOT:   loop.nest
func.func @strided(%x: tensor<1x2x7x8xf32>, %w: tensor<3x2x3x2xf32>) -> tensor<1x3x4x3xf32> {
  %0 = arith.constant 0.000000e+00 : f32
  %y = loop.nest (%i0, %i1, %i2, %i3, %i4, %i5, %i6) to (1, 3, 4, 3, 2, 3, 2) [parallel, parallel, parallel, parallel, reduction, reduction, reduction] init(%acc = %0 : f32) -> tensor<1x3x4x3xf32> {
    %1 = arith.constant 2 : index
    %2 = arith.muli %i2, %1 : index
    %3 = arith.addi %2, %i5 : index
    %4 = arith.constant 1 : index
    %5 = arith.subi %3, %4 : index
    %6 = arith.constant 3 : index
    %7 = arith.muli %i3, %6 : index
    %8 = arith.constant 2 : index
    %9 = arith.muli %i6, %8 : index
    %10 = arith.addi %7, %9 : index
    %11 = loop.read %x[%i0, %i4, %5, %10] padding 0.000000e+00 : tensor<1x2x7x8xf32>
    %12 = loop.read %w[%i1, %i4, %i5, %i6] : tensor<3x2x3x2xf32>
    %13 = arith.mulf %11, %12 : f32
    %14 = arith.addf %acc, %13 : f32
    loop.yield %14 : f32
  }
  func.return %y : tensor<1x3x4x3xf32>
}
