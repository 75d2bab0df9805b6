// plmr compile --profile says when equality saturation stopped at its time limit
// (--saturation-time, CPU seconds): the stage started runs its iterations, then no
// other starts. Without the limit, the same search saturates and the note is absent.
// RUN: plmr compile %s --grid 4x4 --saturation-time 0 --profile -o %t.mlir 2>&1 | filecheck %s
// RUN: plmr compile %s --grid 4x4 --profile -o %t.mlir 2>&1 | filecheck %s --check-prefix=FREE
// RUN: not plmr compile %s --saturation-time -1 2>&1 | filecheck %s --check-prefix=BAD

// CHECK:      taso-substitute {{ +[0-9.]+ +[0-9.]+ +}}1
// CHECK:      nest mappings planned: {{[1-9][0-9]*}}
// CHECK-NEXT: taso-substitute: @main: saturation stopped at its time limit (0 s; the result may differ on a faster or slower machine)
// CHECK-NEXT: wrote {{.*}}

// FREE:     nest mappings planned: {{[1-9][0-9]*}}
// FREE-NOT: time limit
// FREE:     wrote {{.*}}

// BAD: Invalid value for '--saturation-time': -1.0 is not in the range x>=0.0.

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
