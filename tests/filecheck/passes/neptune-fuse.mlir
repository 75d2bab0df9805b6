// RUN: plmr-opt %s -p convert-graph-to-loop,neptune-fuse --split-input-file | filecheck %s

// Softmax: the sum is fused into the max by rolling update (the online softmax); the
// repair of the running sum is l·exp(m − m').

// CHECK-LABEL: func.func @softmax
// CHECK:       %p_max, %p_sum = loop.nest (%i0, %i1) to (4, 8) [parallel, reduction] init(%p_max_acc = %{{.*}} : f32, %p_sum_acc = %{{.*}} : f32) -> (tensor<4xf32>, tensor<4xf32>) {
// CHECK-NEXT:    %[[X:.*]] = loop.read %s[%i0, %i1] : tensor<4x8xf32>
// CHECK-NEXT:    %[[M:.*]] = arith.maximumf %p_max_acc, %[[X]] : f32
// CHECK-NEXT:    %[[D:.*]] = arith.subf %[[X]], %[[M]] : f32
// CHECK-NEXT:    %[[P:.*]] = math.exp %[[D]] : f32
// CHECK-NEXT:    %[[DM:.*]] = arith.subf %p_max_acc, %[[M]] : f32
// CHECK-NEXT:    %[[R:.*]] = math.exp %[[DM]] : f32
// CHECK-NEXT:    %[[L:.*]] = arith.mulf %p_sum_acc, %[[R]] : f32
// CHECK-NEXT:    %[[L2:.*]] = arith.addf %[[L]], %[[P]] : f32
// CHECK-NEXT:    loop.yield %[[M]], %[[L2]] : f32, f32
// CHECK-NEXT:  }
// CHECK-NEXT:  %p = loop.nest
// CHECK-NOT:   loop.nest
// CHECK:       func.return %p
func.func @softmax(%s: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %p = graph.softmax %s : tensor<4x8xf32>
  func.return %p : tensor<4x8xf32>
}

// -----

// Attention (prefill): max → exp-sum → P·V fuse into one nest, FlashAttention's
// recurrence: l = l·exp(m − m') + exp(s − m'), acc = acc·exp(m − m') + p·V (a nested nest
// over the head dimension), the scores Q·Kᵀ recomputed inside, the division after.

// CHECK-LABEL: func.func @attention
// CHECK:       %p_max, %p_sum, %o_unscaled = loop.nest (%i0, %i1) to (16, 64) [parallel, reduction] init(%p_max_acc = %{{.*}} : f32, %p_sum_acc = %{{.*}} : f32, %o_unscaled_acc = %{{.*}} : tensor<32xf32>) -> (tensor<16xf32>, tensor<16xf32>, tensor<16x32xf32>) {
// CHECK-NEXT:    %s = loop.nest (%{{.*}}) to (32) [reduction]
// CHECK:         %[[SS:.*]] = arith.mulf %s, %{{.*}} : f32
// CHECK-NEXT:    %[[M:.*]] = arith.maximumf %p_max_acc, %[[SS]] : f32
// CHECK-NEXT:    %[[D:.*]] = arith.subf %[[SS]], %[[M]] : f32
// CHECK-NEXT:    %[[P:.*]] = math.exp %[[D]] : f32
// CHECK-NEXT:    %[[DM:.*]] = arith.subf %p_max_acc, %[[M]] : f32
// CHECK-NEXT:    %[[R:.*]] = math.exp %[[DM]] : f32
// CHECK-NEXT:    %[[L:.*]] = arith.mulf %p_sum_acc, %[[R]] : f32
// CHECK-NEXT:    %[[L2:.*]] = arith.addf %[[L]], %[[P]] : f32
// CHECK-NEXT:    %[[ACC:.*]] = loop.nest (%[[E:.*]]) to (32) [parallel] -> tensor<32xf32> {
// CHECK-NEXT:      %[[V:.*]] = loop.read %v[%i1, %[[E]]] : tensor<64x32xf32>
// CHECK-NEXT:      %[[PV:.*]] = arith.mulf %[[V]], %[[P]] : f32
// CHECK-NEXT:      %[[A:.*]] = loop.read %o_unscaled_acc[%[[E]]] : tensor<32xf32>
// CHECK-NEXT:      %[[AR:.*]] = arith.mulf %[[A]], %[[R]] : f32
// CHECK-NEXT:      %[[A2:.*]] = arith.addf %[[AR]], %[[PV]] : f32
// CHECK-NEXT:      loop.yield %[[A2]] : f32
// CHECK-NEXT:    }
// CHECK-NEXT:    loop.yield %[[M]], %[[L2]], %[[ACC]] : f32, f32, tensor<32xf32>
// CHECK-NEXT:  }
// CHECK-NEXT:  %o = loop.nest (%{{.*}}, %{{.*}}) to (16, 32) [parallel, parallel] -> tensor<16x32xf32> {
// CHECK:         arith.divf
// CHECK-NOT:   loop.nest
// CHECK:       func.return %o
func.func @attention(%q: tensor<16x32xf32>, %k: tensor<64x32xf32>, %v: tensor<64x32xf32>) -> tensor<16x32xf32> {
  %s = graph.matmul %q, %k transpose_b : (tensor<16x32xf32>, tensor<64x32xf32>) -> tensor<16x64xf32>
  %ss = graph.scale %s by 0.17677669529663687 : tensor<16x64xf32>
  %p = graph.softmax %ss axis = 1 : tensor<16x64xf32>
  %o = graph.matmul %p, %v : (tensor<16x64xf32>, tensor<64x32xf32>) -> tensor<16x32xf32>
  func.return %o : tensor<16x32xf32>
}

// -----

// A map whose result is also a function result (the rotated keys a prefill returns for
// its KV cache) is stored anyway: the attention reads it instead of recomputing it for
// every query, so K stays one operand that can move across the mesh on its own.

// CHECK-LABEL: func.func @stored_keys
// CHECK:       %kr = loop.nest (%{{.*}}, %{{.*}}) to (64, 32) [parallel, parallel] -> tensor<64x32xf32> {
// CHECK-NEXT:    %{{.*}} = loop.read %k[
// CHECK-NEXT:    %{{.*}} = loop.read %cos[
// CHECK-NEXT:    arith.mulf
// CHECK:       loop.nest (%{{.*}}, %[[J:.*]]) to (16, 64) [parallel, reduction]
// CHECK-NOT:     loop.read %cos
// CHECK:         loop.read %kr[%[[J]],
// CHECK-NOT:     loop.read %cos
// CHECK:       func.return %{{.*}}, %kr
func.func @stored_keys(%q: tensor<16x32xf32>, %k: tensor<64x32xf32>, %cos: tensor<64x32xf32>, %v: tensor<64x32xf32>) -> (tensor<16x32xf32>, tensor<64x32xf32>) {
  %kr = graph.mul %k, %cos : (tensor<64x32xf32>, tensor<64x32xf32>) -> tensor<64x32xf32>
  %s = graph.matmul %q, %kr transpose_b : (tensor<16x32xf32>, tensor<64x32xf32>) -> tensor<16x64xf32>
  %p = graph.softmax %s axis = 1 : tensor<16x64xf32>
  %o = graph.matmul %p, %v : (tensor<16x64xf32>, tensor<64x32xf32>) -> tensor<16x32xf32>
  func.return %o, %kr : tensor<16x32xf32>, tensor<64x32xf32>
}

// -----

// A map read by more than three nests (a residual read by every projection of the next
// layer) is stored once: inlined, it would be recomputed in each reader, and in a GEMV
// once for every output column.

// CHECK-LABEL: func.func @shared_residual
// CHECK:       %h = loop.nest (%{{.*}}, %{{.*}}) to (1, 16) [parallel, parallel] -> tensor<1x16xf32> {
// CHECK-COUNT-4: loop.read %h[
// CHECK:       func.return
func.func @shared_residual(%x: tensor<1x16xf32>, %y: tensor<1x16xf32>, %a: tensor<16x8xf32>, %b: tensor<16x8xf32>, %c: tensor<16x8xf32>, %d: tensor<16x8xf32>) -> (tensor<1x8xf32>, tensor<1x8xf32>, tensor<1x8xf32>, tensor<1x8xf32>) {
  %h = graph.add %x, %y : (tensor<1x16xf32>, tensor<1x16xf32>) -> tensor<1x16xf32>
  %p = graph.matmul %h, %a : (tensor<1x16xf32>, tensor<16x8xf32>) -> tensor<1x8xf32>
  %q = graph.matmul %h, %b : (tensor<1x16xf32>, tensor<16x8xf32>) -> tensor<1x8xf32>
  %r = graph.matmul %h, %c : (tensor<1x16xf32>, tensor<16x8xf32>) -> tensor<1x8xf32>
  %s = graph.matmul %h, %d : (tensor<1x16xf32>, tensor<16x8xf32>) -> tensor<1x8xf32>
  func.return %p, %q, %r, %s : tensor<1x8xf32>, tensor<1x8xf32>, tensor<1x8xf32>, tensor<1x8xf32>
}
