// plmr import: opset conversion, folding of shape sub-graphs, rewrites and refusals.
// The .onnx inputs are written by inputs/build_onnx_inputs.py.
// RUN: plmr import %S/inputs/old_cnn.onnx 2>&1 | filecheck %s --check-prefix=OLD
// RUN: plmr import %S/inputs/shape_subgraph.onnx | filecheck %s --check-prefix=FOLD
// RUN: not plmr import %S/inputs/unsupported.onnx 2>&1 | filecheck %s --check-prefix=REFUSE
// RUN: plmr import %examples/hf/llama.onnx | filecheck %s --check-prefix=LLAMA
// RUN: plmr import %examples/hf/bert.onnx | filecheck %s --check-prefix=BERT

// An opset-9 model is converted first; the 1-D convolution is a reshaped conv2d, batch
// norm one mul and one add by constants, dropout nothing.
// OLD: note: converted the model from ONNX opset 9 to 13 with onnx.version_converter
// OLD: func.func @main(%x: tensor<1x2x6xf32> {plmr.name = "x"}) -> (tensor<1x18xf32> {plmr.name = "y"})
// OLD-NEXT: %0 = graph.reshape %x : tensor<1x2x6xf32> -> tensor<1x2x1x6xf32>
// OLD-NEXT: %w_r = graph.constant
// OLD-SAME: tensor<3x2x1x3xf32>
// OLD-NEXT: %1 = graph.conv2d %0, %w_r pads = [0, 1, 0, 1] : (tensor<1x2x1x6xf32>, tensor<3x2x1x3xf32>) -> tensor<1x3x1x6xf32>
// OLD-NEXT: %c = graph.reshape %1 : tensor<1x3x1x6xf32> -> tensor<1x3x6xf32>
// OLD-NEXT: %n_scale = graph.constant dense<9.999950e-01> : tensor<3x1xf32>
// OLD-NEXT: %n_shift = graph.constant dense<0.000000e+00> : tensor<3x1xf32>
// OLD-NEXT: %2 = graph.mul %c, %n_scale
// OLD-NEXT: %n = graph.add %2, %n_shift
// OLD-NEXT: %f = graph.reshape %n : tensor<1x3x6xf32> -> tensor<1x18xf32>
// OLD-NEXT: %y = graph.softmax %f : tensor<1x18xf32>
// OLD-NEXT: func.return %y

// Shape -> Gather -> Unsqueeze -> Concat -> Reshape and a Range/Greater/Where mask fold
// away: one reshape, one constant, one add.
// FOLD: func.func @main(%x: tensor<2x2x2xf32> {plmr.name = "x"}) -> (tensor<2x4xf32> {plmr.name = "y"})
// FOLD-NEXT: %flat = graph.reshape %x : tensor<2x2x2xf32> -> tensor<2x4xf32>
// FOLD-NEXT: %mask_row = graph.constant dense<{{\[\[}}0.000000e+00, -1.000000e+00, -2.000000e+00, -3.000000e+00]]> : tensor<1x4xf32>
// FOLD-NEXT: %y = graph.add %flat, %mask_row
// FOLD-NEXT: func.return %y

// REFUSE: error: node 'pick' (Hardmax): ONNX op 'Hardmax' is not supported; supported ops: Abs, Add,
// REFUSE-SAME: Einsum
// REFUSE-SAME: (and any op whose inputs are all constant, which is evaluated at import)
// REFUSE-NOT: Traceback

// A torch.onnx.export(dynamo=True) LLaMA: int64 input_ids, rotary Slice / Concat, RMSNorm's
// Reciprocal, SDPA's IsNaN guard as cmp ne + where; no shape ops are left.
// LLAMA: func.func @main(%input_ids: tensor<1x8xi64> {plmr.name = "input_ids"}) -> (tensor<1x8x128xf32> {plmr.name = "logits"})
// LLAMA: graph.gather %{{.*}}, %input_ids
// LLAMA: graph.reciprocal
// LLAMA: graph.slice
// LLAMA: graph.cmp ne
// LLAMA: graph.where
// LLAMA-NOT: Shape
// LLAMA: func.return

// BERT's attention mask: Cast to bool, GatherND with constant indices as a gather.
// BERT: graph.cast %attention_mask : tensor<1x8xi64> -> tensor<1x8xi1>
// BERT: graph.gather %{{.*}}, %{{.*}} : (tensor<8xi1>, tensor<1x1x1x8xi64>) -> tensor<1x1x1x8xi1>
// BERT: graph.and
