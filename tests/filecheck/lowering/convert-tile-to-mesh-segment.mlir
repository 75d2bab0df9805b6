// RUN: plmr-opt %s -p 'plmr-compile{grid=256,2 tile-sizes=256,1 substitute=false route=false}' | filecheck %s

// A reduction shorter than the axis it is split over: 64 blocks of one row over 256
// PEs, so rows 64 to 255 hold padding. The partial sums (256 values per PE) are
// allreduced within the segment of the 64 PEs that hold data, and the last of them
// multicasts the result along the whole axis (fewer cycles than one allreduce over
// the 256 PEs; for a few values the whole axis is kept: tests/lowering).

// CHECK-LABEL: mesh.program @gemv
// CHECK:       mesh.scatter %w : tensor<64x512xf32> -> !mesh.dist<tensor<64x512xf32>, #mesh.layout<[y, x]>>
// CHECK:       tile.for %{{.*}} = 0 to 1 step 1 {{.*}} reduction {
// CHECK:       %[[PART:.*]] = mesh.allreduce sum %{{.*}} axis y segment = 64 : tensor<256xf32>
// CHECK-NEXT:  %[[ROOT:.*]] = arith.constant 63 : index
// CHECK-NEXT:  %{{.*}} = mesh.broadcast %[[PART]] axis y root %[[ROOT]] : tensor<256xf32>
func.func @gemv(%x: tensor<1x64xf32>, %w: tensor<64x512xf32>) -> tensor<1x512xf32> {
  %y = graph.matmul %x, %w : (tensor<1x64xf32>, tensor<64x512xf32>) -> tensor<1x512xf32>
  func.return %y : tensor<1x512xf32>
}
