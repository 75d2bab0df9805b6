// Weights by reference through plmr import, compile and run.
// RUN: rm -rf %t && mkdir -p %t/a %t/b
// RUN: plmr import %examples/onnx/transformer_block.onnx -o %t/a/tb.mlir
// RUN: filecheck %s --check-prefix=IMPORT < %t/a/tb.mlir
// RUN: plmr run %t/a/tb.mlir | filecheck %s --check-prefix=GRAPH
// RUN: plmr compile %t/a/tb.mlir --grid 2x2 --no-substitute --tile-sizes 8,8 -o %t/b/tb.mesh.mlir
// RUN: filecheck %s --check-prefix=MESH < %t/b/tb.mesh.mlir
// RUN: plmr run %t/b/tb.mesh.mlir | filecheck %s --check-prefix=WAFER
// RUN: mv %t/a/tb.safetensors %t/tb.safetensors
// RUN: not plmr run %t/b/tb.mesh.mlir 2>&1 | filecheck %s --check-prefix=MISSING
// RUN: not plmr compile %t/a/tb.mlir --grid 2x2 2>&1 | filecheck %s --check-prefix=MISSING
// RUN: plmr run %t/b/tb.mesh.mlir --weights %t/tb.safetensors | filecheck %s --check-prefix=WAFER
// RUN: plmr run %t/b/tb.mesh.mlir --weights %t | filecheck %s --check-prefix=WAFER
// RUN: plmr run %t/b/tb.mesh.mlir --mode timing | filecheck %s --check-prefix=TIMING
// RUN: plmr import %examples/hf/llama_external.onnx -o %t/b/llama.mlir
// RUN: filecheck %s --check-prefix=EXTERNAL < %t/b/llama.mlir
// RUN: not ls %t/b/llama.safetensors
// RUN: plmr import %examples/onnx/transformer_block.onnx --inline-limit 4096 | filecheck %s --check-prefix=INLINE

// Initializers above 1 KiB go to a safetensors file beside the IR, which names it
// relative to its own directory; smaller ones stay inline.
// IMPORT:     %ffn.up.weight = graph.weight "ffn.up.weight" in "tb.safetensors" : tensor<16x32xf32>
// IMPORT:     graph.constant
// IMPORT-NOT: dense<"0x

// The same values at the graph level and on the wafer (same random inputs).
// GRAPH:     y: 1x8x16 float32 [-0.290938, -1.20226, 0.214709, -1.90341, ...]

// The compiled program (one blocking, --tile-sizes: the references are checked here,
// not the blocking search) keeps the references, relative to the output's directory,
// and scatters the weights from the host; up and gate read the same input, so they are
// one weight (graph-merge-matmuls), a concatenation of the two references.
// MESH:      mesh.program @main
// MESH:      %[[UG:.*]] = arith.constant {plmr.weight = {name = "ffn.up.weight+ffn.gate.weight", parts = [{name = "ffn.up.weight", file = "../a/tb.safetensors", type = tensor<16x32xf32>}, {name = "ffn.gate.weight", file = "../a/tb.safetensors", type = tensor<16x32xf32>}], axis = 1 : i64}} dense_resource<{{.*}}> : tensor<16x64xf32>
// MESH:      %ffn.down.weight = arith.constant {plmr.weight = {name = "ffn.down.weight", file = "../a/tb.safetensors"}} dense_resource<ffn.down.weight> : tensor<32x16xf32>
// MESH:      mesh.scatter %[[UG]]

// WAFER:     y: 1x8x16 float32 [-0.290938, -1.20226, 0.214709, -1.90341, ...]
// WAFER:     program @main on wse2 2x2 (functional mode)

// MISSING:     error: weight '{{.*}}' ({{.*}} float32): weights file {{.*}}/a/tb.safetensors does not exist; re-run `plmr import` to write the program and its weights again, or pass --weights DIR_OR_FILE where the weights file is
// MISSING-NOT: Traceback

// A timing run never opens the weights.
// TIMING:    (timing mode: results are placeholders)
// TIMING:    program @main on wse2 2x2 (timing mode)

// A model with external data is referenced in place: file, offset, no copy.
// EXTERNAL:  %model.embed_tokens.weight = graph.weight "model.embed_tokens.weight" in "{{(\.\./)+}}{{.*}}examples/hf/llama_external.onnx.data" at 0 : tensor<128x64xf32>
// EXTERNAL:  graph.weight "val_88" in "{{(\.\./)+}}{{.*}}examples/hf/llama_external.onnx.data" at 32768 : tensor<64x64xf32>

// INLINE-NOT: graph.weight
