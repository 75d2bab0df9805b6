// RUN: plmr-opt %s -p 'plmr-compile{grid=4,4 substitute=false route=false device="wse2:sram_kib=6"}' | filecheck %s

// FlashAttention reads the RoPE-like table %cos at the query rows and at the key rows.
// Each indexing reads a view of its own, placed on its own: the queries' view split as
// the queries are (over x), the keys' view as the keys are (over y). Held whole, the
// table (4 KiB) would not fit next to the other blocks in a PE of 6 KiB.

// CHECK:      %q_1 = mesh.scatter %q : tensor<64x16xf32> -> !mesh.dist<tensor<64x16xf32>, #mesh.layout<[x, -]>>
// CHECK-NEXT: %cos_1 = mesh.scatter %cos : tensor<64x16xf32> -> !mesh.dist<tensor<64x16xf32>, #mesh.layout<[x, -]>>
// CHECK-NEXT: %k_1 = mesh.scatter %k : tensor<64x16xf32> -> !mesh.dist<tensor<64x16xf32>, #mesh.layout<[y, -]>>
// CHECK-NEXT: %cos_2 = mesh.scatter %cos : tensor<64x16xf32> -> !mesh.dist<tensor<64x16xf32>, #mesh.layout<[y, -]>>
// CHECK-NEXT: %v_1 = mesh.scatter %v : tensor<64x16xf32> -> !mesh.dist<tensor<64x16xf32>, #mesh.layout<[y, -]>>
// CHECK-NEXT: %o = mesh.spmd(%q_1, %cos_1, %k_1, %cos_2, %v_1)
// CHECK-NEXT: ^bb0(%py: index, %px: index, %[[Q:.*]]: tensor<16x16xf32>, %[[CQ:.*]]: tensor<16x16xf32>, %[[K:.*]]: tensor<16x16xf32>, %[[CK:.*]]: tensor<16x16xf32>, %{{.*}}: tensor<16x16xf32>):
// CHECK:        tile.load %[[Q]][%i0, %{{.*}}] : tensor<16x16xf32> -> tensor<16x16xf32>
// CHECK:        tile.load %[[CQ]][%i0, %{{.*}}] : tensor<16x16xf32> -> tensor<16x16xf32>
// CHECK:        tile.for %i1 = 0 to 16 step 16
// CHECK:          tile.load %[[K]][%i1, %{{.*}}] : tensor<16x16xf32> -> tensor<16x16xf32>
// CHECK:          tile.load %[[CK]][%i1, %{{.*}}] : tensor<16x16xf32> -> tensor<16x16xf32>
// CHECK:        mesh.allreduce max %{{.*}} axis y
// CHECK-NOT:  mesh.scatter %cos

func.func @main(%q: tensor<64x16xf32>, %k: tensor<64x16xf32>, %v: tensor<64x16xf32>, %cos: tensor<64x16xf32>) -> tensor<64x16xf32> {
  %qc = graph.mul %q, %cos : (tensor<64x16xf32>, tensor<64x16xf32>) -> tensor<64x16xf32>
  %kc = graph.mul %k, %cos : (tensor<64x16xf32>, tensor<64x16xf32>) -> tensor<64x16xf32>
  %s = graph.matmul %qc, %kc transpose_b : (tensor<64x16xf32>, tensor<64x16xf32>) -> tensor<64x64xf32>
  %p = graph.softmax %s : tensor<64x64xf32>
  %o = graph.matmul %p, %v : (tensor<64x64xf32>, tensor<64x16xf32>) -> tensor<64x16xf32>
  func.return %o : tensor<64x16xf32>
}
