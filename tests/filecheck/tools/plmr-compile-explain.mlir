// plmr compile --explain: per nest, the loops and the mesh axes they went to, the
// collectives, the cost model's estimate and the simulated cycles; then the totals.
// A GEMV on 2x2: its columns over one axis, its reduction over the other (K-tree
// allreduce). A softmax on 3x3: its 8 rows split unevenly over an axis (3 rows per PE,
// the last PE's padding ignored).
// RUN: plmr compile %s --grid 2x2 --no-substitute --tile-sizes 4,4 --explain | filecheck %s
// RUN: plmr compile %S/inputs/softmax-rows.mlir --grid 3x3 --no-substitute --tile-sizes 1,4 --explain | filecheck %s --check-prefix=ODD

// CHECK:      | # | nest | mapping (loop(blocks) -> axis) | collectives | estimate | simulated |
// CHECK:      | 0 | %y | {{.*}}({{[0-9]+}}) -> {{[xy]}}, {{.*}}({{[0-9]+}}) -> {{[xy]}} [allreduce] | allreduce {{[xy]}} | {{[0-9,]+}} | {{[0-9,]+}} |
// CHECK:      1 nests (mesh.spmd), 1 allreduces; estimate {{[0-9,]+}} cycles, simulated {{[0-9,]+}} cycles

// ODD:        | 0 | %s_max | i0(8) -> {{[xy]}}, i1(4) [local] | - | {{[0-9,]+}} | {{[0-9,]+}} |
// ODD:        | 1 | %s | i0(8) -> {{[xy]}}, i1(16) -> {{[xy]}} [local] | - | {{[0-9,]+}} | {{[0-9,]+}} |
// ODD:        2 nests (mesh.spmd), 0 allreduces

func.func @gemv(%x: tensor<1x64xf32>, %w: tensor<64x32xf32>) -> tensor<1x32xf32> {
  %y = graph.matmul %x, %w : (tensor<1x64xf32>, tensor<64x32xf32>) -> tensor<1x32xf32>
  func.return %y : tensor<1x32xf32>
}
