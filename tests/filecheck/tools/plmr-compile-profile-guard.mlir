// plmr compile --profile when taso-substitute rewrites the program: its mesh guard
// prices the changed region (the original over every blocking, 12; the rewrite from the
// original's best blocking until its estimate decides, here 1), not the whole program.
// With the default limit of equality saturation the search saturates: no note of a work
// limit (FREE; plmr-compile-profile-limits.mlir stops it at one).
// RUN: plmr compile %s --grid 4x4 --profile -o %t.mlir > %t.log 2>&1
// RUN: filecheck %s < %t.log
// RUN: filecheck %s --check-prefix=FREE < %t.log
// RUN: filecheck %s --check-prefix=PROGRAM < %t.mlir

// CHECK:      taso-substitute {{ +[0-9.]+ +[0-9.]+ +}}1
// CHECK-NEXT:   rules {{ +[0-9.]+ +[0-9.]+ +}}1
// CHECK-NEXT:   search {{ +[0-9.]+ +[0-9.]+ +}}1
// CHECK-NEXT:   mesh guard {{ +[0-9.]+ +[0-9.]+ +}}1
// CHECK-NEXT:     region {{ +[0-9.]+ +[0-9.]+ +}}1
// CHECK-NEXT:       convert-loop-to-tile {{ +[0-9.]+ +[0-9.]+ +}}13
// CHECK-NEXT:       convert-tile-to-mesh {{ +[0-9.]+ +[0-9.]+ +}}13
// CHECK-NOT:    whole program
// CHECK:      convert-graph-to-loop

// FREE:     nest mappings planned: {{[1-9][0-9]*}}
// FREE-NOT: work limit
// FREE:     wrote {{.*}}

// The guard kept the rewrite: b + c is one matmul on the folded weight wb + wc.
// (Without the rewrite, the program has three tile.dot.)
// PROGRAM: mesh.program @main
// PROGRAM-COUNT-2: tile.dot
// PROGRAM-NOT: tile.dot

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
