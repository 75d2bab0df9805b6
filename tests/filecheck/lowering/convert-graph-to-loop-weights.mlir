// RUN: plmr-opt %s -p convert-graph-to-loop | filecheck %s

// A weight stays a reference below the graph level: an arith.constant of a
// dense_resource whose plmr.weight attribute holds the reference, read by the nests like
// any host constant (tools/plmr-weights.mlir follows one down to the mesh). Nothing
// opens the weights files here.

func.func @mlp(%x: tensor<4x16xf32>) -> tensor<4x32xf32> {
  %w = graph.weight "fc.weight" in "mlp.safetensors" : tensor<16x32xf32>
  %b = graph.weight "fc.bias" in "mlp.onnx.data" at 2048 : tensor<32xf32>
  %y = graph.matmul %x, %w : (tensor<4x16xf32>, tensor<16x32xf32>) -> tensor<4x32xf32>
  %z = graph.add %y, %b : (tensor<4x32xf32>, tensor<32xf32>) -> tensor<4x32xf32>
  func.return %z : tensor<4x32xf32>
}

// CHECK-LABEL: func.func @mlp
// CHECK-NEXT:    %w = arith.constant {plmr.weight = {name = "fc.weight", file = "{{/.*}}/mlp.safetensors"}} dense_resource<fc.weight> : tensor<16x32xf32>
// CHECK-NEXT:    %b = arith.constant {plmr.weight = {name = "fc.bias", file = "{{/.*}}/mlp.onnx.data", offset = 2048 : i64}} dense_resource<fc.bias> : tensor<32xf32>
// CHECK:         loop.nest
// CHECK:         loop.read %w
// CHECK:         loop.read %b
// CHECK-NOT:     graph.
