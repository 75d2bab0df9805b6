// RUN: plmr-opt %s -p 'taso-substitute{budget=30}' | filecheck %s
// RUN: plmr-opt %s -p 'taso-substitute{budget=0}' | filecheck %s --check-prefix=NOOP

// Q/K/V projections of one input become one wider matmul on concatenated (folded)
// weights, split into the three results.
// CHECK-LABEL: func.func @qkv
// CHECK-NEXT:    %[[W:.*]] = graph.constant dense<"0x{{[0-9A-F]+}}"> : tensor<16x48xf32>
// CHECK-NEXT:    %[[M:.*]] = graph.matmul %x, %[[W]] : (tensor<8x16xf32>, tensor<16x48xf32>) -> tensor<8x48xf32>
// CHECK-NEXT:    %{{.*}}, %{{.*}}, %{{.*}} = graph.split %[[M]] axis = 1 sizes = [16, 16, 16] : tensor<8x48xf32> -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>)
// CHECK-NEXT:    func.return
// NOOP-LABEL:  func.func @qkv
// NOOP-COUNT-3:  graph.matmul
func.func @qkv(%x: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>) {
  %wq = graph.constant dense<0.5> : tensor<16x16xf32>
  %wk = graph.constant dense<0.25> : tensor<16x16xf32>
  %wv = graph.constant dense<2.0> : tensor<16x16xf32>
  %q = graph.matmul %x, %wq : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %k = graph.matmul %x, %wk : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %v = graph.matmul %x, %wv : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  func.return %q, %k, %v : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>
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

// Two conv+relu branches of one input whose results are concatenated become one conv
// with a relu right after it (fused into the conv's epilogue).
// CHECK-LABEL: func.func @branches
// CHECK-NEXT:    %[[K:.*]] = graph.constant dense<{{.*}}> : tensor<8x8x1x1xf32>
// CHECK-NEXT:    %[[C:.*]] = graph.conv2d %x, %[[K]] : (tensor<1x8x6x6xf32>, tensor<8x8x1x1xf32>) -> tensor<1x8x6x6xf32>
// CHECK-NEXT:    %[[R:.*]] = graph.relu %[[C]] : tensor<1x8x6x6xf32>
// CHECK-NEXT:    func.return %[[R]]
func.func @branches(%x: tensor<1x8x6x6xf32>) -> tensor<1x8x6x6xf32> {
  %w1 = graph.constant dense<0.5> : tensor<4x8x1x1xf32>
  %w2 = graph.constant dense<0.25> : tensor<4x8x1x1xf32>
  %a = graph.conv2d %x, %w1 : (tensor<1x8x6x6xf32>, tensor<4x8x1x1xf32>) -> tensor<1x4x6x6xf32>
  %ra = graph.relu %a : tensor<1x4x6x6xf32>
  %b = graph.conv2d %x, %w2 : (tensor<1x8x6x6xf32>, tensor<4x8x1x1xf32>) -> tensor<1x4x6x6xf32>
  %rb = graph.relu %b : tensor<1x4x6x6xf32>
  %c = graph.concat %ra, %rb axis = 1 : (tensor<1x4x6x6xf32>, tensor<1x4x6x6xf32>) -> tensor<1x8x6x6xf32>
  func.return %c : tensor<1x8x6x6xf32>
}

// An RNN update x·Wx + h·Wh becomes one matmul of [x h] with stacked weights.
// CHECK-LABEL: func.func @rnn
// CHECK-NEXT:    %[[W:.*]] = graph.constant dense<"0x{{[0-9A-F]+}}"> : tensor<24x16xf32>
// CHECK-NEXT:    %[[XH:.*]] = graph.concat %x, %h axis = 1 : (tensor<2x8xf32>, tensor<2x16xf32>) -> tensor<2x24xf32>
// CHECK-NEXT:    %[[M:.*]] = graph.matmul %[[XH]], %[[W]] : (tensor<2x24xf32>, tensor<24x16xf32>) -> tensor<2x16xf32>
// CHECK-NEXT:    %{{.*}} = graph.tanh %[[M]] : tensor<2x16xf32>
// NOOP-LABEL:  func.func @rnn
// NOOP-COUNT-2:  graph.matmul
func.func @rnn(%x: tensor<2x8xf32>, %h: tensor<2x16xf32>) -> tensor<2x16xf32> {
  %wx = graph.constant dense<0.5> : tensor<8x16xf32>
  %wh = graph.constant dense<0.25> : tensor<16x16xf32>
  %a = graph.matmul %x, %wx : (tensor<2x8xf32>, tensor<8x16xf32>) -> tensor<2x16xf32>
  %b = graph.matmul %h, %wh : (tensor<2x16xf32>, tensor<16x16xf32>) -> tensor<2x16xf32>
  %s = graph.add %a, %b : (tensor<2x16xf32>, tensor<2x16xf32>) -> tensor<2x16xf32>
  %t = graph.tanh %s : tensor<2x16xf32>
  func.return %t : tensor<2x16xf32>
}

// Nothing pays here: the function is left as it was.
// CHECK-LABEL: func.func @nothing
// CHECK-NEXT:    %m = graph.matmul %x, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT:    %r = graph.softmax %m : tensor<4x4xf32>
// CHECK-NEXT:    func.return %r : tensor<4x4xf32>
func.func @nothing(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %m = graph.matmul %x, %w : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %r = graph.softmax %m : tensor<4x4xf32>
  func.return %r : tensor<4x4xf32>
}
