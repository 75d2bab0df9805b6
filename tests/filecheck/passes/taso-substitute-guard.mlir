// RUN: plmr-opt %s -p 'taso-substitute{grid=4x4 concats=constant budget=50}' | filecheck %s
// RUN: plmr-opt %s -p 'taso-substitute{grid=4x4 concats=constant budget=50 guard=none}' | filecheck %s --check-prefix=MODEL

// Two gates of one small input. The cost model prices the merged matmul cheaper (one
// launch, two 16-column blocks on two PEs), and without the guard the pass merges them.
// On the mesh the input's matmuls run in 4-column blocks over the grid's columns and the
// merged one in two 16-column blocks on one PE: the partitioner estimates 509 cycles
// against 987 (simulated: 476 against 869), so the guard keeps the input.
// CHECK-LABEL: func.func @gates
// CHECK-COUNT-2: graph.matmul %x
// CHECK-NOT:     graph.split
// MODEL-LABEL: func.func @gates
// MODEL:         graph.matmul %x, %{{.*}} : (tensor<2x8xf32>, tensor<8x32xf32>) -> tensor<2x32xf32>
// MODEL-NEXT:    graph.split
func.func @gates(%x: tensor<2x8xf32>, %h: tensor<2x16xf32>) -> tensor<2x16xf32> {
  %wa = graph.constant dense<0.5> : tensor<8x16xf32>
  %wb = graph.constant dense<0.25> : tensor<8x16xf32>
  %a = graph.matmul %x, %wa : (tensor<2x8xf32>, tensor<8x16xf32>) -> tensor<2x16xf32>
  %b = graph.matmul %x, %wb : (tensor<2x8xf32>, tensor<8x16xf32>) -> tensor<2x16xf32>
  %sa = graph.sigmoid %a : tensor<2x16xf32>
  %tb = graph.tanh %b : tensor<2x16xf32>
  %m = graph.mul %sa, %tb : (tensor<2x16xf32>, tensor<2x16xf32>) -> tensor<2x16xf32>
  %o = graph.add %m, %h : (tensor<2x16xf32>, tensor<2x16xf32>) -> tensor<2x16xf32>
  func.return %o : tensor<2x16xf32>
}
