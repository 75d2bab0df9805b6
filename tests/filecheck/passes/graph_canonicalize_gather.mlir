// RUN: plmr-opt %s -p graph-canonicalize --split-input-file | filecheck %s

// Identity indices (BERT's attention mask, from a GatherND): a reshape only.
// CHECK-LABEL: func.func @identity(%m: tensor<8xi1>) -> tensor<1x1x1x8xi1> {
// CHECK-NEXT:    %g = graph.reshape %m : tensor<8xi1> -> tensor<1x1x1x8xi1>
// CHECK-NEXT:    func.return %g : tensor<1x1x1x8xi1>
func.func @identity(%m: tensor<8xi1>) -> tensor<1x1x1x8xi1> {
  %idx = graph.constant dense<[[[[0, 1, 2, 3, 4, 5, 6, 7]]]]> : tensor<1x1x1x8xi64>
  %g = graph.gather %m, %idx : (tensor<8xi1>, tensor<1x1x1x8xi64>) -> tensor<1x1x1x8xi1>
  func.return %g : tensor<1x1x1x8xi1>
}

// -----

// A scalar index (BERT's pooler takes the first token): a slice of one, reshaped to drop
// the axis.
// CHECK-LABEL: func.func @scalar(%h: tensor<1x8x64xf32>) -> tensor<1x64xf32> {
// CHECK-NEXT:    %g = graph.slice %h starts = [0, 0, 0] ends = [1, 1, 64] steps = [1, 1, 1] : tensor<1x8x64xf32> -> tensor<1x1x64xf32>
// CHECK-NEXT:    %g_1 = graph.reshape %g : tensor<1x1x64xf32> -> tensor<1x64xf32>
// CHECK-NEXT:    func.return %g_1 : tensor<1x64xf32>
func.func @scalar(%h: tensor<1x8x64xf32>) -> tensor<1x64xf32> {
  %i = graph.constant dense<0> : tensor<i64>
  %g = graph.gather %h, %i axis = 1 : (tensor<1x8x64xf32>, tensor<i64>) -> tensor<1x64xf32>
  func.return %g : tensor<1x64xf32>
}

// -----

// A negative scalar index counts from the end (the last token).
// CHECK-LABEL: func.func @last(%h: tensor<2x8x4xf32>) -> tensor<2x4xf32> {
// CHECK-NEXT:    %g = graph.slice %h starts = [0, 7, 0] ends = [2, 8, 4] steps = [1, 1, 1] : tensor<2x8x4xf32> -> tensor<2x1x4xf32>
// CHECK-NEXT:    %g_1 = graph.reshape %g : tensor<2x1x4xf32> -> tensor<2x4xf32>
func.func @last(%h: tensor<2x8x4xf32>) -> tensor<2x4xf32> {
  %i = graph.constant dense<-1> : tensor<i64>
  %g = graph.gather %h, %i axis = 1 : (tensor<2x8x4xf32>, tensor<i64>) -> tensor<2x4xf32>
  func.return %g : tensor<2x4xf32>
}

// -----

// A strided range, and a reversed one ending at index 0 (end -1), along axis 0; the
// indices' shape replaces the gathered axis.
// A stride that would step past the end is clamped to the axis (the same elements).
// CHECK-LABEL: func.func @ranges(%x: tensor<10x3xf32>) -> (tensor<2x2x3xf32>, tensor<5x3xf32>, tensor<3x3xf32>) {
// CHECK-NEXT:    %a = graph.slice %x starts = [1, 0] ends = [9, 3] steps = [2, 1] : tensor<10x3xf32> -> tensor<4x3xf32>
// CHECK-NEXT:    %a_1 = graph.reshape %a : tensor<4x3xf32> -> tensor<2x2x3xf32>
// CHECK-NEXT:    %b = graph.slice %x starts = [4, 0] ends = [-1, 3] steps = [-1, 1] : tensor<10x3xf32> -> tensor<5x3xf32>
// CHECK-NEXT:    %c = graph.slice %x starts = [2, 0] ends = [10, 3] steps = [3, 1] : tensor<10x3xf32> -> tensor<3x3xf32>
// CHECK-NEXT:    func.return %a_1, %b, %c : tensor<2x2x3xf32>, tensor<5x3xf32>, tensor<3x3xf32>
func.func @ranges(%x: tensor<10x3xf32>) -> (tensor<2x2x3xf32>, tensor<5x3xf32>, tensor<3x3xf32>) {
  %i = graph.constant dense<[[1, 3], [5, 7]]> : tensor<2x2xi64>
  %a = graph.gather %x, %i : (tensor<10x3xf32>, tensor<2x2xi64>) -> tensor<2x2x3xf32>
  %j = graph.constant dense<[4, 3, 2, 1, 0]> : tensor<5xi64>
  %b = graph.gather %x, %j : (tensor<10x3xf32>, tensor<5xi64>) -> tensor<5x3xf32>
  %k = graph.constant dense<[2, 5, -2]> : tensor<3xi64>
  %c = graph.gather %x, %k : (tensor<10x3xf32>, tensor<3xi64>) -> tensor<3x3xf32>
  func.return %a, %b, %c : tensor<2x2x3xf32>, tensor<5x3xf32>, tensor<3x3xf32>
}

// -----

// Indices that are not a progression, and run-time indices, stay a gather.
// CHECK-LABEL: func.func @kept(%x: tensor<10x3xf32>, %r: tensor<2xi64>) -> (tensor<3x3xf32>, tensor<2x3xf32>) {
// CHECK-NEXT:    %i = graph.constant dense<[0, 2, 3]> : tensor<3xi64>
// CHECK-NEXT:    %a = graph.gather %x, %i
// CHECK-NEXT:    %b = graph.gather %x, %r
func.func @kept(%x: tensor<10x3xf32>, %r: tensor<2xi64>) -> (tensor<3x3xf32>, tensor<2x3xf32>) {
  %i = graph.constant dense<[0, 2, 3]> : tensor<3xi64>
  %a = graph.gather %x, %i : (tensor<10x3xf32>, tensor<3xi64>) -> tensor<3x3xf32>
  %b = graph.gather %x, %r : (tensor<10x3xf32>, tensor<2xi64>) -> tensor<2x3xf32>
  func.return %a, %b : tensor<3x3xf32>, tensor<2x3xf32>
}
