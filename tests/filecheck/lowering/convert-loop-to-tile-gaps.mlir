// RUN: plmr-opt %s -p 'convert-loop-to-tile{tile-sizes=4,4}' --split-input-file | filecheck %s

// A padded read whose indices are a shift of a nested dimension (`n - 8`: the second
// part of a concatenation, the features partial rotary embeddings pass through) and a
// computed index of a top-level one (`i / 2`: a KV head of grouped-query attention):
// only the computed index is a block of one element; the shifted one is a padded window
// of the whole nested dimension, loaded from before the tensor's start.

// CHECK-LABEL: func.func @shifted_nested(
// CHECK-NOT:   loop.remark
// CHECK:       tile.for %i = 0 to 4 step 1 {{.*}} parallel {
// CHECK:         %[[H:.*]] = arith.divui %i, %{{.*}} : index
// CHECK:         %[[M:.*]] = arith.subi %{{.*}}, %{{.*}} : index
// CHECK-NEXT:    %{{.*}} = tile.load %x[%[[H]], %[[M]]] padding 0.000000e+00 : tensor<2x8xf32> -> tensor<1x16xf32>
// CHECK:         %{{.*}} = tile.load %y[%i, %{{.*}}] : tensor<4x16xf32> -> tensor<1x16xf32>
// CHECK:         %{{.*}} = tile.dot %{{.*}}, %{{.*}} : (tensor<1x16xf32>, tensor<16x1xf32>) -> tensor<1x1xf32>
// CHECK-NOT:   loop.nest
func.func @shifted_nested(%x: tensor<2x8xf32>, %y: tensor<4x16xf32>) -> tensor<4xf32> {
  %z = arith.constant 0.000000e+00 : f32
  %r = loop.nest (%i) to (4) [parallel] -> tensor<4xf32> {
    %s = loop.nest (%n) to (16) [reduction] init(%acc = %z : f32) -> f32 {
      %c2 = arith.constant 2 : index
      %c8 = arith.constant 8 : index
      %h = arith.divui %i, %c2 : index
      %m = arith.subi %n, %c8 : index
      %a = loop.read %x[%h, %m] padding 0.000000e+00 : tensor<2x8xf32>
      %b = loop.read %y[%i, %n] : tensor<4x16xf32>
      %p = arith.mulf %a, %b : f32
      %t = arith.addf %acc, %p : f32
      loop.yield %t : f32
    }
    loop.yield %s : f32
  }
  func.return %r : tensor<4xf32>
}
