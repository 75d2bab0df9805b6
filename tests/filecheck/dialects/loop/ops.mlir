// RUN: XDSL_ROUNDTRIP
// RUN: XDSL_GENERIC_ROUNDTRIP

// A map, a reduction with an index expression and a padded read, and a fused nest that
// carries a tensor accumulator computed by a nested nest.

func.func @nests(%x: tensor<4x8xf32>, %v: tensor<8x2xf32>) -> (tensor<4x8xf32>, tensor<4xf32>, tensor<4x2xf32>) {
  %lo = arith.constant -3.40282347e+38 : f32
  %zero = arith.constant 0.000000e+00 : f32
  %zeros = arith.constant dense<0.000000e+00> : tensor<2xf32>
  %e = loop.nest (%i, %j) to (4, 8) [parallel, parallel] -> tensor<4x8xf32> {
    %a = loop.read %x[%i, %j] : tensor<4x8xf32>
    %b = math.exp %a : f32
    loop.yield %b : f32
  }
  %s = loop.nest (%i, %k) to (4, 3) [parallel, reduction] init(%acc = %zero : f32) -> tensor<4xf32> {
    %c2 = arith.constant 2 : index
    %j2 = arith.muli %k, %c2 : index
    %a = loop.read %x[%i, %j2] padding 0.000000e+00 : tensor<4x8xf32>
    %t = arith.addf %acc, %a : f32
    loop.yield %t : f32
  }
  %m, %o = loop.nest (%i, %j) to (4, 8) [parallel, reduction] init(%mo = %lo : f32, %ao = %zeros : tensor<2xf32>) -> (tensor<4xf32>, tensor<4x2xf32>) {
    %a = loop.read %x[%i, %j] : tensor<4x8xf32>
    %mn = arith.maximumf %mo, %a : f32
    %r = loop.nest (%d) to (2) [parallel] -> tensor<2xf32> {
      %old = loop.read %ao[%d] : tensor<2xf32>
      %w = loop.read %v[%j, %d] : tensor<8x2xf32>
      %n = arith.addf %old, %w : f32
      loop.yield %n : f32
    }
    loop.yield %mn, %r : f32, tensor<2xf32>
  } {loop.remark = "hand-written"}
  func.return %e, %s, %o : tensor<4x8xf32>, tensor<4xf32>, tensor<4x2xf32>
}

// CHECK:       %e = loop.nest (%i, %j) to (4, 8) [parallel, parallel] -> tensor<4x8xf32> {
// CHECK-NEXT:    %a = loop.read %x[%i, %j] : tensor<4x8xf32>
// CHECK-NEXT:    %b = math.exp %a : f32
// CHECK-NEXT:    loop.yield %b : f32
// CHECK-NEXT:  }
// CHECK-NEXT:  %s = loop.nest (%i_1, %k) to (4, 3) [parallel, reduction] init(%acc = %zero : f32) -> tensor<4xf32> {
// CHECK:         %a_1 = loop.read %x[%i_1, %j2] padding 0.000000e+00 : tensor<4x8xf32>
// CHECK:       %m, %o = loop.nest (%i_2, %j_1) to (4, 8) [parallel, reduction] init(%mo = %lo : f32, %ao = %zeros : tensor<2xf32>) -> (tensor<4xf32>, tensor<4x2xf32>) {
// CHECK:         %r = loop.nest (%d) to (2) [parallel] -> tensor<2xf32> {
// CHECK-NEXT:      %old = loop.read %ao[%d] : tensor<2xf32>
// CHECK:         loop.yield %mn, %r : f32, tensor<2xf32>
// CHECK-NEXT:  } {loop.remark = "hand-written"}

// CHECK-GENERIC:      %e = "loop.nest"() <{bounds = array<i64: 4, 8>, iterators = [#loop<iterator parallel>, #loop<iterator parallel>]}> ({
// CHECK-GENERIC-NEXT: ^bb0(%i: index, %j: index):
// CHECK-GENERIC-NEXT:   %a = "loop.read"(%x, %i, %j) : (tensor<4x8xf32>, index, index) -> f32
// CHECK-GENERIC:      %s = "loop.nest"(%zero) <{bounds = array<i64: 4, 3>, iterators = [#loop<iterator parallel>, #loop<iterator reduction>]}> ({
// CHECK-GENERIC-NEXT: ^bb0(%i_1: index, %k: index, %acc: f32):
// CHECK-GENERIC:      "loop.read"(%x, %i_1, %j2) <{padding = 0.000000e+00 : f64}> : (tensor<4x8xf32>, index, index) -> f32
// CHECK-GENERIC:      "loop.yield"(%mn, %r) : (f32, tensor<2xf32>) -> ()
