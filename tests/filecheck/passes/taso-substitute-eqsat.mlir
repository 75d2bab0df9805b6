// RUN: plmr-opt %s -p 'taso-substitute{engine=eqsat}' | filecheck %s

// Equality saturation finds the classic wins of the backtracking search.

// Q/K/V projections of one input: one matmul on the concatenated (folded) weights,
// split into the three results. Only the ILP extraction sees that the merged matmul
// serves all three outputs (a tree cost counts it once per output).
// CHECK-LABEL: func.func @qkv
// CHECK-NEXT:    %[[W:.*]] = graph.constant dense<"0x{{[0-9A-F]+}}"> : tensor<16x48xf32>
// CHECK-NEXT:    %[[M:.*]] = graph.matmul %x, %[[W]] : (tensor<8x16xf32>, tensor<16x48xf32>) -> tensor<8x48xf32>
// CHECK-NEXT:    %{{.*}}, %{{.*}}, %{{.*}} = graph.split %[[M]] axis = 1 sizes = [16, 16, 16] : tensor<8x48xf32> -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>)
// CHECK-NEXT:    func.return
func.func @qkv(%x: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>) {
  %wq = graph.constant dense<0.5> : tensor<16x16xf32>
  %wk = graph.constant dense<0.25> : tensor<16x16xf32>
  %wv = graph.constant dense<2.0> : tensor<16x16xf32>
  %q = graph.matmul %x, %wq : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %k = graph.matmul %x, %wk : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %v = graph.matmul %x, %wv : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  func.return %q, %k, %v : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>
}

// An RNN cell's two matmuls (input and state) become one on the concatenated inputs
// and stacked weights.
// CHECK-LABEL: func.func @rnn
// CHECK-NEXT:    %[[C:.*]] = graph.concat %h, %x axis = 1 : (tensor<2x16xf32>, tensor<2x8xf32>) -> tensor<2x24xf32>
// CHECK-NEXT:    %[[W:.*]] = graph.constant dense<"0x{{[0-9A-F]+}}"> : tensor<24x16xf32>
// CHECK-NEXT:    %[[M:.*]] = graph.matmul %[[C]], %[[W]] : (tensor<2x24xf32>, tensor<24x16xf32>) -> tensor<2x16xf32>
// CHECK-NEXT:    %{{.*}} = graph.tanh %[[M]] : tensor<2x16xf32>
// CHECK-NEXT:    func.return
func.func @rnn(%x: tensor<2x8xf32>, %h: tensor<2x16xf32>) -> tensor<2x16xf32> {
  %wx = graph.constant dense<0.5> : tensor<8x16xf32>
  %wh = graph.constant dense<0.25> : tensor<16x16xf32>
  %a = graph.matmul %x, %wx : (tensor<2x8xf32>, tensor<8x16xf32>) -> tensor<2x16xf32>
  %b = graph.matmul %h, %wh : (tensor<2x16xf32>, tensor<16x16xf32>) -> tensor<2x16xf32>
  %s = graph.add %a, %b : (tensor<2x16xf32>, tensor<2x16xf32>) -> tensor<2x16xf32>
  %t = graph.tanh %s : tensor<2x16xf32>
  func.return %t : tensor<2x16xf32>
}

// A scale after a matmul moves onto the constant weights, where it is folded.
// CHECK-LABEL: func.func @scaled
// CHECK-NEXT:    %[[W:.*]] = graph.constant dense<6.250000e-02> : tensor<16x32xf32>
// CHECK-NEXT:    %{{.*}} = graph.matmul %x, %[[W]] : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
// CHECK-NEXT:    func.return
func.func @scaled(%x: tensor<8x16xf32>) -> tensor<8x32xf32> {
  %w = graph.constant dense<0.5> : tensor<16x32xf32>
  %m = graph.matmul %x, %w : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %s = graph.scale %m by 0.125 : tensor<8x32xf32>
  func.return %s : tensor<8x32xf32>
}

// Nothing to gain: the function is left as it is.
// CHECK-LABEL: func.func @nothing
// CHECK-NEXT:    %m = graph.matmul %x, %w
// CHECK-NEXT:    %r = graph.softmax %m
// CHECK-NEXT:    func.return %r
func.func @nothing(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %m = graph.matmul %x, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %r = graph.softmax %m : tensor<4x4xf32>
  func.return %r : tensor<4x4xf32>
}
