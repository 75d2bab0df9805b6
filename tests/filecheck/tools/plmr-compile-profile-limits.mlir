// plmr compile --profile says when equality saturation stopped at its work limit
// (--saturation-nodes, e-nodes per stage, at least 20 per op of the program): the stage
// extracts what it grew. With the default limit the same search (of the same program)
// saturates and the note is absent: FREE in plmr-compile-profile-guard.mlir, which
// compiles it so. No limit of the search is a time: the result does not depend on the
// machine.
// RUN: plmr compile %s --grid 4x4 --saturation-nodes 1 --profile -o %t.mlir 2>&1 | filecheck %s
// RUN: not plmr compile %s --saturation-nodes 0 2>&1 | filecheck %s --check-prefix=BAD
// RUN: not plmr compile %s --extraction-nodes -1 2>&1 | filecheck %s --check-prefix=BADX

// CHECK:      taso-substitute {{ +[0-9.]+ +[0-9.]+ +}}1
// CHECK:      nest mappings planned: {{[1-9][0-9]*}}
// CHECK-NEXT: taso-substitute: @main: saturation stopped at its work limit (140 e-nodes)
// CHECK-NEXT: wrote {{.*}}

// BAD: Invalid value for '--saturation-nodes': 0 is not in the range x>=1.
// BADX: Invalid value for '--extraction-nodes': -1 is not in the range x>=0.

builtin.module {
  func.func @main(%x: tensor<8x16xf32>, %w: tensor<16x16xf32>) -> tensor<8x16xf32> {
    %wb = graph.constant dense<0.25> : tensor<16x16xf32>
    %wc = graph.constant dense<0.5> : tensor<16x16xf32>
    %h = graph.relu %x : tensor<8x16xf32>
    %b = graph.matmul %h, %wb : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
    %c = graph.matmul %h, %wc : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
    %bc = graph.add %b, %c : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
    %s = graph.sigmoid %bc : tensor<8x16xf32>
    %y = graph.matmul %s, %w : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
    %z = graph.tanh %y : tensor<8x16xf32>
    func.return %z : tensor<8x16xf32>
  }
}
