// RUN: plmr-opt %s -p 'graph-fold-rotate-half{max-rows=1}' | filecheck %s
// RUN: plmr-opt %s -p 'graph-fold-rotate-half{max-rows=3}' | filecheck %s --check-prefix=ALL
// RUN: not plmr-opt %s -p 'graph-fold-rotate-half{max-rows=-1}' 2>&1 | filecheck %s --check-prefix=BAD

// With max-rows, only the rotations of projections of at most that many rows fold (a
// decode step's one row); a prefill's three rows keep their rotation as a permutation.

// CHECK-LABEL: func.func @decode
// CHECK:         %r = graph.matmul %x, %{{.*}} : (tensor<1x2xf32>, tensor<2x4xf32>) -> tensor<1x4xf32>
// CHECK-NOT:     graph.neg
// CHECK-LABEL: func.func @prefill
// CHECK:         %n = graph.neg %hi : tensor<3x2xf32>
// CHECK-NEXT:    %r = graph.concat %n, %lo axis = 1 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x4xf32>

// ALL-NOT:       graph.neg
// ALL-LABEL:     func.func @prefill
// ALL:           %r = graph.matmul %x, %{{.*}} : (tensor<3x2xf32>, tensor<2x4xf32>) -> tensor<3x4xf32>
// ALL-NOT:       graph.neg

// BAD: graph-fold-rotate-half: max-rows must be 0 (every projection) or positive, got -1

func.func @decode(%x: tensor<1x2xf32>) -> tensor<1x4xf32> {
  %w = graph.constant dense<[[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]]> : tensor<2x4xf32>
  %q = graph.matmul %x, %w : (tensor<1x2xf32>, tensor<2x4xf32>) -> tensor<1x4xf32>
  %lo = graph.slice %q starts = [0, 0] ends = [1, 2] steps = [1, 1] : tensor<1x4xf32> -> tensor<1x2xf32>
  %hi = graph.slice %q starts = [0, 2] ends = [1, 4] steps = [1, 1] : tensor<1x4xf32> -> tensor<1x2xf32>
  %n = graph.neg %hi : tensor<1x2xf32>
  %r = graph.concat %n, %lo axis = 1 : (tensor<1x2xf32>, tensor<1x2xf32>) -> tensor<1x4xf32>
  %y = graph.add %q, %r : (tensor<1x4xf32>, tensor<1x4xf32>) -> tensor<1x4xf32>
  func.return %y : tensor<1x4xf32>
}

func.func @prefill(%x: tensor<3x2xf32>) -> tensor<3x4xf32> {
  %w = graph.constant dense<[[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]]> : tensor<2x4xf32>
  %q = graph.matmul %x, %w : (tensor<3x2xf32>, tensor<2x4xf32>) -> tensor<3x4xf32>
  %lo = graph.slice %q starts = [0, 0] ends = [3, 2] steps = [1, 1] : tensor<3x4xf32> -> tensor<3x2xf32>
  %hi = graph.slice %q starts = [0, 2] ends = [3, 4] steps = [1, 1] : tensor<3x4xf32> -> tensor<3x2xf32>
  %n = graph.neg %hi : tensor<3x2xf32>
  %r = graph.concat %n, %lo axis = 1 : (tensor<3x2xf32>, tensor<3x2xf32>) -> tensor<3x4xf32>
  %y = graph.add %q, %r : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
  func.return %y : tensor<3x4xf32>
}
