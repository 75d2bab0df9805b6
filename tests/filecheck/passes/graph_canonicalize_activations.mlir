// RUN: plmr-opt %s -p graph-canonicalize --split-input-file | filecheck %s

// LLaMA's SiLU, `x · sigmoid(x)`.
// CHECK-LABEL: func.func @silu
// CHECK-NEXT:    %y = graph.silu %x : tensor<4x8xf32>
// CHECK-NEXT:    func.return %y : tensor<4x8xf32>
func.func @silu(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %s = graph.sigmoid %x : tensor<4x8xf32>
  %y = graph.mul %s, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}

// -----

// BERT's GELU, `0.5·x · (1 + erf(x / 1.41421))`.
// CHECK-LABEL: func.func @gelu_erf
// CHECK-NEXT:    %y = graph.gelu %x : tensor<4x8xf32>
// CHECK-NEXT:    func.return %y : tensor<4x8xf32>
func.func @gelu_erf(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %r2 = graph.constant dense<1.41421354> : tensor<f32>
  %d = graph.div %x, %r2 : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %e = graph.erf %d : tensor<4x8xf32>
  %one = graph.constant dense<1.0> : tensor<f32>
  %a = graph.add %e, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %half = graph.constant dense<0.5> : tensor<f32>
  %h = graph.mul %half, %x : (tensor<f32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %y = graph.mul %h, %a : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}

// -----

// BERT's export puts the 0.5 on the other factor: `x · (0.5·(1 + erf(0.7071·x)))`.
// CHECK-LABEL: func.func @gelu_erf_half_outside
// CHECK-NEXT:    %y = graph.gelu %x : tensor<4x8xf32>
// CHECK-NEXT:    func.return %y : tensor<4x8xf32>
func.func @gelu_erf_half_outside(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %d = graph.scale %x by 0.70710679328816484 : tensor<4x8xf32>
  %e = graph.erf %d : tensor<4x8xf32>
  %one = graph.constant dense<1.0> : tensor<f32>
  %a = graph.add %e, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %h = graph.scale %a by 5.000000e-01 : tensor<4x8xf32>
  %y = graph.mul %x, %h : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}

// -----

// GPT-2's tanh GELU, `0.5·x · (1 + tanh(0.797885·(x + 0.044715·x³)))`.
// CHECK-LABEL: func.func @gelu_tanh
// CHECK-NEXT:    %y = graph.gelu %x tanh : tensor<4x8xf32>
// CHECK-NEXT:    func.return %y : tensor<4x8xf32>
func.func @gelu_tanh(%x: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %h = graph.scale %x by 5.000000e-01 : tensor<4x8xf32>
  %p = graph.pow %x by 3.000000e+00 : tensor<4x8xf32>
  %c = graph.scale %p by 0.044714998453855515 : tensor<4x8xf32>
  %i = graph.add %x, %c : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %s = graph.scale %i by 0.79788458347320557 : tensor<4x8xf32>
  %t = graph.tanh %s : tensor<4x8xf32>
  %one = graph.constant dense<1.0> : tensor<f32>
  %a = graph.add %t, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %y = graph.mul %h, %a : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %y : tensor<4x8xf32>
}

// -----

// Not an activation: a sigmoid of another value, or a GELU-like expression with the
// wrong constant.
// CHECK-LABEL: func.func @not_activations
// CHECK-NOT:     graph.silu
// CHECK-NOT:     graph.gelu
// CHECK:         func.return
func.func @not_activations(%x: tensor<4x8xf32>, %z: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %s = graph.sigmoid %z : tensor<4x8xf32>
  %y = graph.mul %s, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %d = graph.scale %x by 0.70000000000000000 : tensor<4x8xf32>
  %e = graph.erf %d : tensor<4x8xf32>
  %one = graph.constant dense<1.0> : tensor<f32>
  %a = graph.add %e, %one : (tensor<4x8xf32>, tensor<f32>) -> tensor<4x8xf32>
  %h = graph.scale %x by 5.000000e-01 : tensor<4x8xf32>
  %g = graph.mul %h, %a : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  func.return %y, %g : tensor<4x8xf32>, tensor<4x8xf32>
}
