// A correct pipeline: one line per pass, the program comes out on stdout.
// RUN: plmr-opt %s -p 'convert-graph-to-loop,neptune-fuse' --check-each 2>&1 >/dev/null | filecheck %s --check-prefix=OK
// An injected bug (a test pass that swaps the operands of every sub) is caught and named.
// RUN: rm -rf %t && not python %S/inputs/swap_sub_opt.py %s -p 'convert-graph-to-loop,test-swap-sub,neptune-fuse' --check-each --check-dir %t 2>&1 | filecheck %s --check-prefix=BUG
// RUN: filecheck %s --input-file %t/02-test-swap-sub-after.mlir --check-prefix=AFTER
// At the graph level too, with another seed.
// RUN: not python %S/inputs/swap_sub_opt.py %s -p 'test-swap-sub' --check-each --check-seed 3 2>&1 | filecheck %s --check-prefix=GRAPH

// OK:      check-each: @main on random inputs (seed 0), tolerance 1e-04
// OK-NEXT:   input {{ +}}graph  ok
// OK-NEXT:   convert-graph-to-loop {{ +}}loop   max rel err {{[0-9.]+e[-+][0-9]+}} {{ +}}{{[0-9]+}} ms
// OK-NEXT:   neptune-fuse {{ +}}loop   max rel err {{[0-9.]+e[-+][0-9]+}} {{ +}}{{[0-9]+}} ms
// OK-NOT:  error

// BUG:      check-each: @main on random inputs (seed 0), tolerance 1e-04
// BUG-NEXT:   input {{ +}}graph  ok
// BUG-NEXT:   convert-graph-to-loop {{ +}}loop   max rel err
// BUG-NEXT:   test-swap-sub {{ +}}loop   max rel err
// BUG-NEXT: plmr-opt: error: check-each: pass test-swap-sub changed the results: result 0 (out0) at [{{[0-9]+}}, {{[0-9]+}}]: {{.*}} instead of {{.*}} (max relative error {{.*}} > tolerance 1e-04, random inputs seed 0)
// BUG-NEXT:   IR before: {{.*}}02-test-swap-sub-before.mlir
// BUG-NEXT:   IR after:  {{.*}}02-test-swap-sub-after.mlir
// BUG-NEXT:   reproduce: plmr-opt {{.*}}02-test-swap-sub-before.mlir -p 'test-swap-sub' --check-each
// BUG-NOT:  neptune-fuse

// AFTER: loop.nest
// AFTER: arith.subf %{{.*}}, %{{.*}} : f32

// GRAPH:      check-each: @main on random inputs (seed 3), tolerance 1e-04
// GRAPH:      error: check-each: pass test-swap-sub changed the results: result 0 (out0)

func.func @main(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = graph.exp %b : tensor<4x8xf32>
  %d = graph.sub %a, %e : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %d : tensor<4x8xf32>
}
