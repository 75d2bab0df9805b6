// RUN: plmr-opt %s -p 'plmr-compile{grid=256,2 tile-sizes=256,1 substitute=false route=false gemv=auto}' | filecheck %s
// RUN: plmr-opt %s -p 'plmr-compile{grid=4,2 tile-sizes=4,1 substitute=false route=false gemv=auto}' | filecheck %s --check-prefix=SMALL

// `gemv = auto`: each allreduce is a K-tree whose K (2 or 3) its line times fastest.
// Within the 64 PEs holding data of a 256-PE axis, 256 values: K = 3 (1,391 cycles
// against 1,538 with K = 2). On 4 PEs the default K = 2 wins and is not printed.

// CHECK:       mesh.allreduce sum %{{.*}} axis y k = 3 segment = 64 : tensor<256xf32>
// CHECK-NEXT:  arith.constant 63 : index
// CHECK-NEXT:  mesh.broadcast

// SMALL:       mesh.allreduce sum %{{.*}} axis x : tensor<1x128xf32>
func.func @gemv(%x: tensor<1x64xf32>, %w: tensor<64x512xf32>) -> tensor<1x512xf32> {
  %y = graph.matmul %x, %w : (tensor<1x64xf32>, tensor<64x512xf32>) -> tensor<1x512xf32>
  func.return %y : tensor<1x512xf32>
}
