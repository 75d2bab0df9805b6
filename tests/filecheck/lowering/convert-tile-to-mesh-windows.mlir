// RUN: plmr-opt %s -p 'plmr-compile{grid=4,4 substitute=false route=false device="wse2:sram_kib=16"}' | filecheck %s

// One head's attention reads its query columns [0, 16) and its key and value columns
// [16, 48) of a wide projection computed on the wafer (128 columns, split over x in
// blocks of 32). Each view is a window of the columns it reads: a PE whose block meets
// the window puts it at its place in a buffer of the window and a block on each side,
// the others at the front (outside the window), and the sum along x gathers only the
// window (16 and 32 columns), not the whole rows (held whole they do not fit 16 KiB).

// CHECK:      %o = mesh.spmd(%qkv, %qkv) : (!mesh.dist<tensor<64x128xf32>, #mesh.layout<[y, x]>>, !mesh.dist<tensor<64x128xf32>, #mesh.layout<[y, x]>>)
// CHECK-NEXT: ^bb0(%py_1: index, %px_1: index, %[[Q:.*]]: tensor<16x32xf32>, %[[K:.*]]: tensor<16x32xf32>):
// CHECK-NEXT:   %[[QB:.*]] = tile.fill 0.000000e+00 : tensor<16x80xf32>
// CHECK:        %[[QS:.*]] = arith.muli %px_1, %{{.*}} : index
// CHECK:        %[[QE:.*]] = arith.addi %[[QS]], %{{.*}} : index
// CHECK:        %[[QM:.*]] = arith.cmpi ugt, %[[QE]], %{{.*}} : index
// CHECK:        %[[QL:.*]] = arith.cmpi ult, %[[QS]], %{{.*}} : index
// CHECK:        %[[QO:.*]] = arith.andi %[[QM]], %[[QL]] : i1
// CHECK:        %[[QAT:.*]] = arith.select %[[QO]], %[[QE]], %{{.*}} : index
// CHECK:        %[[QOFF:.*]] = arith.subi %[[QAT]], %{{.*}} : index
// CHECK:        %[[QP:.*]] = tile.store %[[Q]], %[[QB]][%{{.*}}, %[[QOFF]]] : tensor<16x32xf32> -> tensor<16x80xf32>
// CHECK-NEXT:   %[[QG:.*]] = mesh.allreduce sum %[[QP]] axis x : tensor<16x80xf32>
// CHECK:        tile.load %[[QG]][%{{.*}}, %{{.*}}] : tensor<16x80xf32> -> tensor<16x16xf32>
// CHECK:        %[[KB:.*]] = tile.fill 0.000000e+00 : tensor<16x96xf32>
// CHECK:        %[[KP:.*]] = tile.store %[[K]], %[[KB]][%{{.*}}, %{{.*}}] : tensor<16x32xf32> -> tensor<16x96xf32>
// CHECK-NEXT:   %[[KG:.*]] = mesh.allreduce sum %[[KP]] axis x : tensor<16x96xf32>
// CHECK:        tile.load %[[KG]][%{{.*}}, %{{.*}}] : tensor<16x96xf32> -> tensor<16x32xf32>
// CHECK-NOT:    mesh.allreduce sum %{{.*}} axis x : tensor<16x128xf32>
// CHECK:        mesh.yield

func.func @main(%x: tensor<64x8xf32>, %w: tensor<8x128xf32>) -> (tensor<64x16xf32>, tensor<64x128xf32>) {
  %qkv = graph.matmul %x, %w : (tensor<64x8xf32>, tensor<8x128xf32>) -> tensor<64x128xf32>
  %q = graph.slice %qkv starts = [0, 0] ends = [64, 16] steps = [1, 1] : tensor<64x128xf32> -> tensor<64x16xf32>
  %k = graph.slice %qkv starts = [0, 16] ends = [64, 32] steps = [1, 1] : tensor<64x128xf32> -> tensor<64x16xf32>
  %v = graph.slice %qkv starts = [0, 32] ends = [64, 48] steps = [1, 1] : tensor<64x128xf32> -> tensor<64x16xf32>
  %s = graph.matmul %q, %k transpose_b : (tensor<64x16xf32>, tensor<64x16xf32>) -> tensor<64x64xf32>
  %p = graph.softmax %s : tensor<64x64xf32>
  %o = graph.matmul %p, %v : (tensor<64x64xf32>, tensor<64x16xf32>) -> tensor<64x16xf32>
  func.return %o, %qkv : tensor<64x16xf32>, tensor<64x128xf32>
}
