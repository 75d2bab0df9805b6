// RUN: plmr-opt %s -p 'graph-outline-layers{min-ops=3}' --split-input-file | filecheck %s
// RUN: not plmr-opt %s -p 'graph-outline-layers{min-ops=3 layers=3}' --split-input-file 2>&1 | filecheck %s --check-prefix=FORCED
// RUN: not plmr-opt %s -p 'graph-outline-layers{layers=1}' --split-input-file 2>&1 | filecheck %s --check-prefix=ONE

// Two layers (norm, projection, residual) that differ only in their weights: one body,
// one call per layer passing that layer's weights; the embedding before and the head
// after stay in @main. The norm's scale is the same constant in both layers: the body
// holds it. The weight arguments are named after the layers' weights, the index `N`.

// CHECK-LABEL: func.func @main
// CHECK-SAME:    (%x: tensor<4x8xf32>) -> tensor<4x2xf32> {
// CHECK-NEXT:    %e = graph.relu %x : tensor<4x8xf32>
// CHECK-NEXT:    %w0 = graph.weight "layers.0.w" in "{{.*}}w.safetensors" : tensor<8x8xf32>
// CHECK-NEXT:    %r0 = func.call @main.layer(%e, %w0) {plmr.layer = 0 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %w1 = graph.weight "layers.1.w" in "{{.*}}w.safetensors" : tensor<8x8xf32>
// CHECK-NEXT:    %r1 = func.call @main.layer(%r0, %w1) {plmr.layer = 1 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %head = graph.weight "head" in "{{.*}}w.safetensors" : tensor<8x2xf32>
// CHECK-NEXT:    %y = graph.matmul %r1, %head : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x2xf32>
// CHECK-NEXT:    func.return %y : tensor<4x2xf32>
// CHECK-NEXT:  }
// CHECK-NEXT:  func.func private @main.layer(%e: tensor<4x8xf32>, %wN: tensor<8x8xf32>) -> tensor<4x8xf32> attributes {plmr.layer_body = 2 : i64} {
// CHECK-NEXT:    %gN = graph.constant dense<1.000000e+00> : tensor<8xf32>
// CHECK-NEXT:    %nN = graph.rmsnorm %e, %gN : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %pN = graph.matmul %nN, %wN : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %aN = graph.silu %pN : tensor<4x8xf32>
// CHECK-NEXT:    %rN = graph.add %e, %aN : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    func.return %rN : tensor<4x8xf32>
// CHECK-NEXT:  }

// FORCED: plmr-opt: error: graph-outline-layers: @main: layers=3 was asked, but the function holds no 3 consecutive copies of one subgraph of at least 3 ops that differ only in their weights; drop `layers` to outline what repeats, or check that every layer has the same structure
// ONE: plmr-opt: error: graph-outline-layers: layers must be 0 (any) or >= 2, got 1
// FORCED-NOT: Traceback

func.func @main(%x: tensor<4x8xf32>) -> tensor<4x2xf32> {
  %e = graph.relu %x : tensor<4x8xf32>
  %g0 = graph.constant dense<1.0> : tensor<8xf32>
  %n0 = graph.rmsnorm %e, %g0 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %w0 = graph.weight "layers.0.w" in "w.safetensors" : tensor<8x8xf32>
  %p0 = graph.matmul %n0, %w0 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %a0 = graph.silu %p0 : tensor<4x8xf32>
  %r0 = graph.add %e, %a0 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %g1 = graph.constant dense<1.0> : tensor<8xf32>
  %n1 = graph.rmsnorm %r0, %g1 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %w1 = graph.weight "layers.1.w" in "w.safetensors" : tensor<8x8xf32>
  %p1 = graph.matmul %n1, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %a1 = graph.silu %p1 : tensor<4x8xf32>
  %r1 = graph.add %r0, %a1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %head = graph.weight "head" in "w.safetensors" : tensor<8x2xf32>
  %y = graph.matmul %r1, %head : (tensor<4x8xf32>, tensor<8x2xf32>) -> tensor<4x2xf32>
  func.return %y : tensor<4x2xf32>
}

// -----

// The second layer applies gelu where the first applies silu: not the same subgraph,
// nothing is outlined.

// CHECK-LABEL: func.func @differ
// CHECK-NOT:     func.call
// CHECK:         graph.silu
// CHECK:         graph.gelu
// CHECK-NOT:     func.func private
func.func @differ(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %w0 = graph.weight "layers.0.w" in "w.safetensors" : tensor<8x8xf32>
  %p0 = graph.matmul %x, %w0 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %a0 = graph.silu %p0 : tensor<4x8xf32>
  %r0 = graph.add %x, %a0 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %w1 = graph.weight "layers.1.w" in "w.safetensors" : tensor<8x8xf32>
  %p1 = graph.matmul %r0, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %a1 = graph.gelu %p1 : tensor<4x8xf32>
  %r1 = graph.add %r0, %a1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %r1 : tensor<4x8xf32>
}

// -----

// As an exporter writes it: the table both layers scale by (%t, from the input %c) is
// computed inside the first layer and reused by the second. It moves before the layers
// (the weights first, then every op right after its latest operand) and becomes an
// argument of the body; each layer's %k (a cache, say) is a result of the body.

// CHECK-LABEL: func.func @shared
// CHECK-NEXT:    %w0 = graph.weight "layers.0.w"
// CHECK-NEXT:    %w1 = graph.weight "layers.1.w"
// CHECK-NEXT:    %e = graph.relu %x : tensor<4x8xf32>
// CHECK-NEXT:    %t = graph.neg %c : tensor<4x8xf32>
// CHECK-NEXT:    %k0, %r0 = func.call @shared.layer(%e, %w0, %t) {plmr.layer = 0 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
// CHECK-NEXT:    %k1, %r1 = func.call @shared.layer(%r0, %w1, %t) {plmr.layer = 1 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>, tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
// CHECK-NEXT:    func.return %r1, %k0, %k1 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
// CHECK-NEXT:  }
// CHECK-NEXT:  func.func private @shared.layer(%e: tensor<4x8xf32>, %wN: tensor<8x8xf32>, %t: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>)
// CHECK-NEXT:    %pN = graph.matmul %e, %wN
// CHECK-NEXT:    %kN = graph.mul %pN, %t
// CHECK-NEXT:    %aN = graph.silu %kN
// CHECK-NEXT:    %rN = graph.add %e, %aN
// CHECK-NEXT:    func.return %kN, %rN : tensor<4x8xf32>, tensor<4x8xf32>
func.func @shared(%x: tensor<4x8xf32>, %c: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>) {
  %e = graph.relu %x : tensor<4x8xf32>
  %w0 = graph.weight "layers.0.w" in "w.safetensors" : tensor<8x8xf32>
  %p0 = graph.matmul %e, %w0 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %t = graph.neg %c : tensor<4x8xf32>
  %k0 = graph.mul %p0, %t : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %a0 = graph.silu %k0 : tensor<4x8xf32>
  %r0 = graph.add %e, %a0 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %w1 = graph.weight "layers.1.w" in "w.safetensors" : tensor<8x8xf32>
  %p1 = graph.matmul %r0, %w1 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %k1 = graph.mul %p1, %t : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %a1 = graph.silu %k1 : tensor<4x8xf32>
  %r1 = graph.add %r0, %a1 : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %r1, %k0, %k1 : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
}
