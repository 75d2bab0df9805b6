// plmr compile --profile: where the time went, per pass and per phase of the blocking
// search (wall and CPU seconds, runs), on standard error; the program is still written.
// RUN: plmr compile %s --grid 2x2 --profile -o %t.mlir 2>&1 | filecheck %s
// RUN: filecheck %s --check-prefix=PROGRAM < %t.mlir
// A refused program: the table of the passes run up to the refusal, then the error.
// RUN: not plmr compile %s --grid 1x1 --device wse2:sram_kib=1 --profile 2>&1 | filecheck %s --check-prefix=REFUSED

// CHECK:      step {{ +}}wall s    CPU s   runs
// CHECK-NEXT: graph-canonicalize {{ +[0-9]+\.[0-9]{3} +[0-9]+\.[0-9]{3} +}}1
// CHECK-NEXT: graph-fold-rotate-half {{ +[0-9.]+ +[0-9.]+ +}}1
// CHECK-NEXT: graph-fold-repeat-kv {{ +[0-9.]+ +[0-9.]+ +}}1
// CHECK-NEXT: transpose-elim {{ +[0-9.]+ +[0-9.]+ +}}1
// CHECK-NEXT: graph-defer-norm-scale {{ +[0-9.]+ +[0-9.]+ +}}1
// CHECK-NEXT: graph-fold-heads {{ +[0-9.]+ +[0-9.]+ +}}1
// CHECK-NEXT: taso-substitute {{ +[0-9.]+ +[0-9.]+ +}}1
// CHECK-NEXT:   rules {{ +[0-9.]+ +[0-9.]+ +}}1
// CHECK-NEXT:   search {{ +[0-9.]+ +[0-9.]+ +}}1
// CHECK-NEXT: graph-merge-matmuls {{ +[0-9.]+ +[0-9.]+ +}}1
// CHECK-NEXT: convert-graph-to-loop {{ +[0-9.]+ +[0-9.]+ +}}1
// CHECK-NEXT: neptune-fuse {{ +[0-9.]+ +[0-9.]+ +}}1
// CHECK-NEXT: loop-simplify-indices {{ +[0-9.]+ +[0-9.]+ +}}1
// CHECK-NEXT: loop-materialize-indices {{ +[0-9.]+ +[0-9.]+ +}}1
// CHECK-NEXT: blocking search {{ +[0-9.]+ +[0-9.]+ +}}1
// Each trial is blocked and priced; the cheapest is blocked and lowered again, in full,
// and alone packed and routed.
// CHECK-NEXT:   convert-loop-to-tile {{ +[0-9.]+ +[0-9.]+ +}}[[TRIALS:[0-9]+]]
// CHECK-NEXT:   convert-tile-to-mesh (priced) {{ +[0-9.]+ +[0-9.]+ +}}[[PRICED:[0-9]+]]
// CHECK-NEXT:   convert-tile-to-mesh {{ +[0-9.]+ +[0-9.]+ +}}1
// CHECK-NEXT:   mesh-fuse-softmax {{ +[0-9.]+ +[0-9.]+ +}}1
// CHECK-NEXT:   mesh-pack-allreduces {{ +[0-9.]+ +[0-9.]+ +}}1
// CHECK-NEXT:   mesh-fuse-softmax (nests) {{ +[0-9.]+ +[0-9.]+ +}}1
// CHECK-NEXT:   mesh-route {{ +[0-9.]+ +[0-9.]+ +}}1
// CHECK-NEXT:   mesh-check-limits {{ +[0-9.]+ +[0-9.]+ +}}1
// CHECK-NEXT: total {{ +[0-9.]+ +[0-9.]+ +}}1
// CHECK-NEXT: graph.matmul imported: 2
// CHECK-NEXT: graph.matmul after graph-canonicalize: 2
// CHECK-NEXT: graph-fold-rotate-half: rotations folded: 0
// CHECK-NEXT: graph.matmul after graph-fold-rotate-half: 2
// CHECK-NEXT: graph-fold-repeat-kv: matmuls regrouped: 0
// CHECK-NEXT: graph.matmul after graph-fold-repeat-kv: 2
// CHECK-NEXT: graph.matmul after transpose-elim: 2
// CHECK-NEXT: graph.matmul after graph-defer-norm-scale: 2
// CHECK-NEXT: graph-fold-heads: projections folded: 0
// CHECK-NEXT: graph.matmul after graph-fold-heads: 2
// CHECK-NEXT: graph.matmul after taso-substitute: 2
// CHECK-NEXT: graph-merge-matmuls: matmuls merged away: 0
// CHECK-NEXT: graph.matmul after graph-merge-matmuls: 2
// CHECK-NEXT: blocking trials stopped at the best's estimate: {{[1-9][0-9]*}}
// CHECK-NEXT: blocking trials blocked as an earlier one: {{[0-9]+}}
// CHECK-NEXT: nest tile programs found in the memo: {{[1-9][0-9]*}}
// CHECK-NEXT: nest tile programs blocked: {{[1-9][0-9]*}}
// CHECK-NEXT: nest mappings found in the memo: {{[0-9]+}}
// CHECK-NEXT: nest mappings planned: {{[1-9][0-9]*}}
// CHECK-NEXT: wrote {{.*}}

// PROGRAM: mesh.program @main

// REFUSED:      step {{ +}}wall s    CPU s   runs
// REFUSED:      neptune-fuse {{ +[0-9.]+ +[0-9.]+ +}}1
// REFUSED:      blocking search {{ +[0-9.]+ +[0-9.]+ +}}1
// REFUSED:      total {{ +[0-9.]+ +[0-9.]+ +}}1
// REFUSED:      error: convert-tile-to-mesh: the nest computing %{{.*}} does not fit a 1x1 grid of wse2
// REFUSED-NOT:  Traceback

builtin.module {
  func.func @main(%x: tensor<4x16xf32>, %w1: tensor<16x32xf32>, %w2: tensor<32x8xf32>) -> tensor<4x8xf32> {
    %h = graph.matmul %x, %w1 : (tensor<4x16xf32>, tensor<16x32xf32>) -> tensor<4x32xf32>
    %r = graph.relu %h : tensor<4x32xf32>
    %y = graph.matmul %r, %w2 : (tensor<4x32xf32>, tensor<32x8xf32>) -> tensor<4x8xf32>
    func.return %y : tensor<4x8xf32>
  }
}
