// RUN: plmr-opt %s -p 'graph-merge-matmuls{min-rows=2 stack-rows=true}' | filecheck %s --check-prefix=STACK
// RUN: plmr-opt %s -p 'graph-merge-matmuls{min-rows=2}' | filecheck %s --check-prefix=CONCAT

// A prefill's gate and up (4 rows), combined by `silu(g) * u`: with `stack-rows` (plmr
// compile on grids of more than 64 PEs) they stack as two heads, `[1, 2, 4, 3]`, each
// column of both on the same PEs; without, their columns concatenate, `[1, 4, 6]`.

// STACK:      %0 = graph.reshape %x : tensor<1x4x2xf32> -> tensor<1x1x4x2xf32>
// STACK-NEXT: %1 = graph.constant {{.*}} : tensor<1x2x2x3xf32>
// STACK-NEXT: %heads_proj = graph.matmul %0, %1 : (tensor<1x1x4x2xf32>, tensor<1x2x2x3xf32>) -> tensor<1x2x4x3xf32>
// STACK-NEXT: %2, %3 = graph.split %heads_proj axis = 1 sizes = [1, 1] : tensor<1x2x4x3xf32> -> (tensor<1x1x4x3xf32>, tensor<1x1x4x3xf32>)
// STACK-NEXT: %g = graph.reshape %2 : tensor<1x1x4x3xf32> -> tensor<1x4x3xf32>
// STACK-NEXT: %u = graph.reshape %3 : tensor<1x1x4x3xf32> -> tensor<1x4x3xf32>
// STACK-NEXT: %s = graph.silu %g : tensor<1x4x3xf32>

// CONCAT:      %1 = graph.matmul %x, %0 : (tensor<1x4x2xf32>, tensor<2x6xf32>) -> tensor<1x4x6xf32>
// CONCAT-NEXT: %g, %u = graph.split %1 axis = 2 sizes = [3, 3] : tensor<1x4x6xf32> -> (tensor<1x4x3xf32>, tensor<1x4x3xf32>)

func.func @gate_up(%x: tensor<1x4x2xf32>) -> tensor<1x4x3xf32> {
  %wg = graph.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %wu = graph.constant dense<[[0.5, -1.0, 2.0], [1.5, 0.25, -3.0]]> : tensor<2x3xf32>
  %g = graph.matmul %x, %wg : (tensor<1x4x2xf32>, tensor<2x3xf32>) -> tensor<1x4x3xf32>
  %u = graph.matmul %x, %wu : (tensor<1x4x2xf32>, tensor<2x3xf32>) -> tensor<1x4x3xf32>
  %s = graph.silu %g : tensor<1x4x3xf32>
  %y = graph.mul %s, %u : (tensor<1x4x3xf32>, tensor<1x4x3xf32>) -> tensor<1x4x3xf32>
  func.return %y : tensor<1x4x3xf32>
}
