// RUN: plmr-opt %s -p convert-graph-to-loop,neptune-fuse | filecheck %s
// RUN: plmr-opt %s -p 'convert-graph-to-loop,neptune-fuse{strategy=rolling}' | filecheck %s --check-prefix=ROLLING

// Decode (one query, 64 keys): `auto` picks split-K update (FlashDecoding). Each of the
// 4 chunks of 16 keys runs the rolling update in parallel (chunk index · 16 + key); the
// global max combines the chunk maxima, and the sums and outputs are combined with the
// repair weighted by exp(m_chunk − m).

// CHECK-LABEL: func.func @decode
// CHECK:       %p_max_chunk, %p_sum_chunk, %o_unscaled_chunk = loop.nest (%i0, %i1, %chunk, %i2) to (2, 1, 4, 16) [parallel, parallel, parallel, reduction]
// CHECK:         %[[C:.*]] = arith.muli %chunk, %{{.*}} : index
// CHECK-NEXT:    %[[J:.*]] = arith.addi %[[C]], %i2 : index
// CHECK:         loop.read %k[%i0, %[[J]], %{{.*}}] : tensor<2x64x8xf32>
// CHECK:         %[[DM:.*]] = arith.subf %p_max_chunk_acc, %{{.*}} : f32
// CHECK-NEXT:    %[[R:.*]] = math.exp %[[DM]] : f32
// CHECK-NEXT:    arith.mulf %p_sum_chunk_acc, %[[R]] : f32
// CHECK:       %p_max = loop.nest (%{{.*}}, %{{.*}}, %{{.*}}) to (2, 1, 4) [parallel, parallel, reduction]
// CHECK:         arith.maximumf
// CHECK:       %p_sum = loop.nest (%[[A:.*]], %[[B:.*]], %[[CC:.*]]) to (2, 1, 4) [parallel, parallel, reduction]
// CHECK-NEXT:    %[[LC:.*]] = loop.read %p_sum_chunk[%[[A]], %[[B]], %[[CC]]] : tensor<2x1x4xf32>
// CHECK-NEXT:    %[[MC:.*]] = loop.read %p_max_chunk[%[[A]], %[[B]], %[[CC]]] : tensor<2x1x4xf32>
// CHECK-NEXT:    %[[MG:.*]] = loop.read %p_max[%[[A]], %[[B]]] : tensor<2x1xf32>
// CHECK-NEXT:    %[[W:.*]] = arith.subf %[[MC]], %[[MG]] : f32
// CHECK-NEXT:    %[[E:.*]] = math.exp %[[W]] : f32
// CHECK-NEXT:    %[[T:.*]] = arith.mulf %[[LC]], %[[E]] : f32
// CHECK-NEXT:    arith.addf %{{.*}}, %[[T]] : f32
// CHECK:       %o_unscaled = loop.nest (%{{.*}}) to (2, 1, 8, 4) [parallel, parallel, parallel, reduction]
// CHECK:         loop.read %o_unscaled_chunk
// CHECK:         math.exp
// CHECK:       %o = loop.nest
// CHECK:         arith.divf

// ROLLING-LABEL: func.func @decode
// ROLLING:       %p_max, %p_sum, %o_unscaled = loop.nest (%i0, %i1, %i2) to (2, 1, 64) [parallel, parallel, reduction]
// ROLLING-NOT:   chunk
func.func @decode(%q: tensor<2x1x8xf32>, %k: tensor<2x64x8xf32>, %v: tensor<2x64x8xf32>) -> tensor<2x1x8xf32> {
  %s = graph.matmul %q, %k transpose_b : (tensor<2x1x8xf32>, tensor<2x64x8xf32>) -> tensor<2x1x64xf32>
  %p = graph.softmax %s : tensor<2x1x64xf32>
  %o = graph.matmul %p, %v : (tensor<2x1x64xf32>, tensor<2x64x8xf32>) -> tensor<2x1x8xf32>
  func.return %o : tensor<2x1x8xf32>
}
