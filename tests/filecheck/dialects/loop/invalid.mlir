// RUN: XDSL_VERIFY_DIAG

%t = "test.op"() : () -> tensor<4x8xf32>
%r = loop.nest (%i, %j) to (4, 8) [parallel, reduction] -> tensor<4xf32> {
  %x = loop.read %t[%i, %j] : tensor<4x8xf32>
  loop.yield %x : f32
}
// CHECK: a reduction nest needs one initial value per result: 1 results, 0 initial values

// -----

%t = "test.op"() : () -> tensor<4x8xf32>
%r = loop.nest (%i, %j) to (4, 8) [parallel, parallel] -> tensor<4xf32> {
  %x = loop.read %t[%i, %j] : tensor<4x8xf32>
  loop.yield %x : f32
}
// CHECK: result 0 has type tensor<4xf32>, expected tensor<4x8xf32> (the parallel extents 4x8 followed by the shape of the yielded f32)

// -----

%t = "test.op"() : () -> tensor<4x8xf32>
%c = "test.op"() : () -> f32
%r = loop.nest (%i, %j) to (4, 8) [parallel, reduction] init(%a = %c : f32) -> tensor<4xf32> {
  %x = loop.read %t[%i, %j] : tensor<4x8xf32>
  %y = arith.index_cast %i : index to i64
  loop.yield %y : i64
}
// CHECK: loop.yield types ['i64'] must be the accumulator types ['f32']

// -----

%t = "test.op"() : () -> tensor<4x8xf32>
%r = loop.nest (%i) to (0) [parallel] -> tensor<0xf32> {
  %x = loop.read %t[%i, %i] : tensor<4x8xf32>
  loop.yield %x : f32
}
// CHECK: extent 0 of dimension 0 must be positive

// -----

%t = "test.op"() : () -> tensor<4x8xf32>
%r = loop.nest (%i) to (4) [parallel] -> tensor<4xf32> {
  %x = loop.read %t[%i] : tensor<4x8xf32>
  loop.yield %x : f32
}
// CHECK: loop.read of a rank-2 tensor needs 2 indices, got 1

// -----

%t = "test.op"() : () -> tensor<4xf32>
"loop.yield"(%t) : (tensor<4xf32>) -> ()
// CHECK: 'loop.yield' expects parent op 'loop.nest'

// -----

%r = "loop.nest"() <{bounds = array<i64: 4>, iterators = [#loop<iterator parallel>, #loop<iterator parallel>]}> ({
^bb0(%i: index):
  %c = arith.constant 1.0 : f32
  "loop.yield"(%c) : (f32) -> ()
}) : () -> tensor<4xf32>
// CHECK: loop.nest has 1 extents but 2 iterator kinds
