// plmr compile --explain: decode attention of 4 heads (head dimension 96) on 100x40
// PEs, blocked for bands (`convert-loop-to-tile{bands}`): every nest keeps a head's
// band of 25 rows (`y/25`), the head dimension within it (`y%25`); the scores reduce
// it within each band (an allreduce in segments of 25, no multicast).
// RUN: plmr-opt %s -p 'convert-graph-to-loop,convert-loop-to-tile{tile-sizes=8,8 fit=true fit-grid=100,40 bands=true}' -o %t.mlir
// RUN: plmr compile %t.mlir --grid 100x40 --explain | filecheck %s

// CHECK:      | 0 | %s | i0(4) -> y/25, i2(40) -> x, i3(96) -> y%25 [allreduce] | allreduce y segment 25 | {{[0-9,]+}} | {{[0-9,]+}} |
// CHECK-NEXT: | 1 | %p_max | i0(4) -> y/25, i2(40) -> x [allreduce] | allreduce x | {{[0-9,]+}} | {{[0-9,]+}} |
// CHECK-NEXT: | 2 | %p_exp | i0(4) -> y/25, i2(40) -> x [local] | - | {{[0-9,]+}} | {{[0-9,]+}} |
// CHECK-NEXT: | 3 | %p_sum | i0(4) -> y/25, i2(40) -> x [allreduce] | allreduce x | {{[0-9,]+}} | {{[0-9,]+}} |
// CHECK-NEXT: | 4 | %p | i0(4) -> y/25, i2(40) -> x [local] | - | {{[0-9,]+}} | {{[0-9,]+}} |
// CHECK-NEXT: | 5 | %o | i0(4) -> y/25, i2(96) -> y%25, i3(40) -> x [allreduce] | allreduce x | {{[0-9,]+}} | {{[0-9,]+}} |
// CHECK:      6 nests (mesh.spmd), 4 allreduces; estimate {{[0-9,]+}} cycles, simulated {{[0-9,]+}} cycles

func.func @attn(%q: tensor<4x1x96xf32>, %k: tensor<4x40x96xf32>, %v: tensor<4x40x96xf32>) -> tensor<4x1x96xf32> {
  %s = graph.matmul %q, %k transpose_b : (tensor<4x1x96xf32>, tensor<4x40x96xf32>) -> tensor<4x1x40xf32>
  %p = graph.softmax %s : tensor<4x1x40xf32>
  %o = graph.matmul %p, %v : (tensor<4x1x40xf32>, tensor<4x40x96xf32>) -> tensor<4x1x96xf32>
  func.return %o : tensor<4x1x96xf32>
}
