// plmr compile --explain: a reduction over 64 rows split over an axis of 256 PEs
// allreduces within the segment of the 64 PEs that hold data, then multicasts along
// the axis; the collectives column shows both.
// RUN: plmr compile %s --grid 256x2 --no-substitute --tile-sizes 256,1 --explain | filecheck %s

// CHECK:      | 0 | %y | i1(2) -> x, i2(64) -> y [allreduce] | allreduce y segment 64, broadcast y | {{[0-9,]+}} | {{[0-9,]+}} |
// CHECK:      1 nests (mesh.spmd), 1 allreduces; estimate {{[0-9,]+}} cycles, simulated {{[0-9,]+}} cycles

func.func @gemv(%x: tensor<1x64xf32>, %w: tensor<64x512xf32>) -> tensor<1x512xf32> {
  %y = graph.matmul %x, %w : (tensor<1x64xf32>, tensor<64x512xf32>) -> tensor<1x512xf32>
  func.return %y : tensor<1x512xf32>
}
