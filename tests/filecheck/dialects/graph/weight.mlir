// RUN: XDSL_ROUNDTRIP
// RUN: XDSL_GENERIC_ROUNDTRIP
// RUN: xdsl-opt %s | filecheck %s --check-prefix=XDSL
// RUN: plmr-opt %s -o %t.mlir && filecheck %s --check-prefix=WRITTEN < %t.mlir
// RUN: plmr-opt %s --weights %S/.. | filecheck %s --check-prefix=MOVED
// RUN: not plmr-opt %s --weights %s 2>&1 | filecheck %s --check-prefix=ONE-FILE

// graph.weight names a tensor of a weights file: a safetensors file (by name) or raw
// data such as an ONNX model's external data (by byte offset). A relative file is relative
// to the directory of the IR file: plmr-opt reads it as an absolute path, prints it so on
// standard output, relative to the output's directory with -o, and looks the files up in
// the directory --weights names.

func.func @mlp(%x: tensor<2x16xf32>) -> tensor<2x32xf32> {
  %w = graph.weight "fc.weight" in "mlp.safetensors" : tensor<16x32xf32>
  %b = graph.weight "onnx::fc.bias/1" in "data/mlp.onnx.data" at 2048 : tensor<32xf32>
  %y = graph.matmul %x, %w : (tensor<2x16xf32>, tensor<16x32xf32>) -> tensor<2x32xf32>
  %z = graph.add %y, %b : (tensor<2x32xf32>, tensor<32xf32>) -> tensor<2x32xf32>
  func.return %z : tensor<2x32xf32>
}

// CHECK-LABEL: func.func @mlp
// CHECK-NEXT:    %w = graph.weight "fc.weight" in "{{/.*}}/filecheck/dialects/graph/mlp.safetensors" : tensor<16x32xf32>
// CHECK-NEXT:    %b = graph.weight "onnx::fc.bias/1" in "{{/.*}}/filecheck/dialects/graph/data/mlp.onnx.data" at 2048 : tensor<32xf32>
// CHECK-NEXT:    %y = graph.matmul %x, %w

// CHECK-GENERIC: "graph.weight"() <{name = "fc.weight", file = "{{/.*}}/mlp.safetensors"}> : () -> tensor<16x32xf32>
// CHECK-GENERIC: "graph.weight"() <{name = "onnx::fc.bias/1", file = "{{/.*}}/data/mlp.onnx.data", offset = 2048 : i64}> : () -> tensor<32xf32>

// xdsl-opt knows the op (the plmr universe) and leaves the files as written.
// XDSL:          %w = graph.weight "fc.weight" in "mlp.safetensors" : tensor<16x32xf32>
// XDSL-NEXT:     %b = graph.weight "onnx::fc.bias/1" in "data/mlp.onnx.data" at 2048 : tensor<32xf32>

// WRITTEN:       %w = graph.weight "fc.weight" in "../mlp.safetensors" : tensor<16x32xf32>
// WRITTEN-NEXT:  %b = graph.weight "onnx::fc.bias/1" in "../data/mlp.onnx.data" at 2048 : tensor<32xf32>

// MOVED:         %w = graph.weight "fc.weight" in "{{/.*}}/filecheck/dialects/mlp.safetensors" : tensor<16x32xf32>
// MOVED-NEXT:    %b = graph.weight "onnx::fc.bias/1" in "{{/.*}}/filecheck/dialects/mlp.onnx.data" at 2048 : tensor<32xf32>

// One file for --weights only fits a program whose weights are all in one file.
// ONE-FILE: plmr-opt: error: --weights {{.*}}weight.mlir: the program names 3 weights files (mlp.safetensors, data/mlp.onnx.data, m.onnx.data); pass the directory that holds them instead

// Derived weights name their parts' files and are anchored and moved like them: `rotate`
// (rotate-half in blocks of the last axis) and `concat` (merged projections).
func.func @derived(%x: tensor<2x16xf32>) -> tensor<2x48xf32> {
  %r = graph.weight "q" in "m.onnx.data" at 0 rotate 8 : tensor<16x32xf32>
  %qk = graph.weight concat 1 ("q" in "m.onnx.data" at 0 rotate 8 : tensor<16x32xf32>, "k" in "m.onnx.data" at 2048 : tensor<16x16xf32>) : tensor<16x48xf32>
  %y = graph.matmul %x, %qk : (tensor<2x16xf32>, tensor<16x48xf32>) -> tensor<2x48xf32>
  func.return %y : tensor<2x48xf32>
}

// CHECK-LABEL: func.func @derived
// CHECK-NEXT:    %r = graph.weight "q" in "{{/.*}}/filecheck/dialects/graph/m.onnx.data" at 0 rotate 8 : tensor<16x32xf32>
// CHECK-NEXT:    %qk = graph.weight concat 1 ("q" in "{{/.*}}/filecheck/dialects/graph/m.onnx.data" at 0 rotate 8 : tensor<16x32xf32>, "k" in "{{/.*}}/filecheck/dialects/graph/m.onnx.data" at 2048 : tensor<16x16xf32>) : tensor<16x48xf32>

// CHECK-GENERIC: "graph.weight"() <{name = "q", file = "{{/.*}}/m.onnx.data", offset = 0 : i64, rotate = 8 : i64}> : () -> tensor<16x32xf32>
// CHECK-GENERIC: "graph.weight"() <{name = "q+k", file = "", parts = [{name = "q", file = "{{/.*}}/m.onnx.data", offset = 0 : i64, rotate = 8 : i64, type = tensor<16x32xf32>}, {name = "k", file = "{{/.*}}/m.onnx.data", offset = 2048 : i64, type = tensor<16x16xf32>}], axis = 1 : i64}> : () -> tensor<16x48xf32>

// Views of a projection's weight by heads (`graph-fold-heads`): `heads` (one K x D
// weight per head, after `rotate`) and `rows` (an N x M weight's rows by head).
func.func @views() -> (tensor<2x2x16x8xf32>, tensor<2x8x16xf32>) {
  %h = graph.weight "q" in "m.onnx.data" at 0 rotate 8 heads [2, 2] : tensor<2x2x16x8xf32>
  %o = graph.weight "o" in "m.onnx.data" at 0 rows [2, 8] : tensor<2x8x16xf32>
  func.return %h, %o : tensor<2x2x16x8xf32>, tensor<2x8x16xf32>
}

// CHECK-LABEL: func.func @views
// CHECK-NEXT:    %h = graph.weight "q" in "{{/.*}}/m.onnx.data" at 0 rotate 8 heads [2, 2] : tensor<2x2x16x8xf32>
// CHECK-NEXT:    %o = graph.weight "o" in "{{/.*}}/m.onnx.data" at 0 rows [2, 8] : tensor<2x8x16xf32>
// CHECK-GENERIC: "graph.weight"() <{name = "q", file = "{{/.*}}/m.onnx.data", offset = 0 : i64, rotate = 8 : i64, heads = [2 : i64, 2 : i64]}> : () -> tensor<2x2x16x8xf32>
// CHECK-GENERIC: "graph.weight"() <{name = "o", file = "{{/.*}}/m.onnx.data", offset = 0 : i64, rows = [2 : i64, 8 : i64]}> : () -> tensor<2x8x16xf32>

// WRITTEN:       %qk = graph.weight concat 1 ("q" in "../m.onnx.data" at 0 rotate 8 : tensor<16x32xf32>, "k" in "../m.onnx.data" at 2048 : tensor<16x16xf32>) : tensor<16x48xf32>
// MOVED:         %qk = graph.weight concat 1 ("q" in "{{/.*}}/filecheck/dialects/m.onnx.data" at 0 rotate 8 : tensor<16x32xf32>, "k" in "{{/.*}}/filecheck/dialects/m.onnx.data" at 2048 : tensor<16x16xf32>) : tensor<16x48xf32>
