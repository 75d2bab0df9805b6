// A 3-layer LLaMA export compiled with its layers outlined: the hidden state each
// program leaves is the next one's input on the wafer (state `main.handoff0`), and each
// layer's weights are placed when the model is loaded (`plmr.weight_args`).
// RUN: rm -rf %t && mkdir -p %t
// RUN: python -c "import sys, pathlib; from plmr.models.llama_onnx import LlamaOnnxConfig as C, write_llama_onnx as w; w(pathlib.Path(sys.argv[1]), C(hidden=32, heads=4, kv_heads=2, ffn=64, vocab=64, seq=8, layers=3))" %t/m.onnx
// RUN: plmr compile %t/m.onnx --grid 2x2 --no-substitute --tile-sizes 8,8 --fit-tiles -o %t/m.mesh.mlir
// RUN: filecheck %s < %t/m.mesh.mlir
// RUN: plmr run %t/m.mesh.mlir --mode timing | filecheck %s --check-prefix=TIMING

// The sequence: the embedding, three runs of the one layer program (each with its own
// weights by reference), the head.
// CHECK-LABEL: func.func @main
// CHECK:         %[[E:.*]] = mesh.run @main.pre(%input_ids)
// CHECK:         %[[H0:.*]] = mesh.run @main.layer(%[[E]], {{.*}}) {plmr.layer = 0 : i64}
// CHECK:         %[[H1:.*]] = mesh.run @main.layer(%[[H0]], {{.*}}) {plmr.layer = 1 : i64}
// CHECK:         %[[H2:.*]] = mesh.run @main.layer(%[[H1]], {{.*}}) {plmr.layer = 2 : i64}
// CHECK:         %logits = mesh.run @main.post(%[[H2]])
// CHECK-NEXT:    func.return %logits

// The layer reads its hidden input in two layouts and leaves its output split over x:
// the next layer's reads over x take it in place, those over y re-lay it out on the wafer.
// CHECK:       mesh.program @main.layer(%embed: tensor<1x8x32xf32>
// CHECK:         mesh.scatter %embed : tensor<1x8x32xf32> -> !mesh.dist<tensor<1x8x32xf32>, #mesh.layout<[-, -, y]>>
// CHECK:         mesh.scatter %embed : tensor<1x8x32xf32> -> !mesh.dist<tensor<1x8x32xf32>, #mesh.layout<[-, -, x]>>
// CHECK:         mesh.gather %{{.*}} : !mesh.dist<tensor<1x8x32xf32>, #mesh.layout<[-, -, x]>> -> tensor<1x8x32xf32>
// CHECK:       } {{{.*}}plmr.state_args = ["main.handoff0", "", "", "", ""], plmr.state_results = ["main.handoff0"], plmr.weight_args = [1 : i64, 2 : i64, 3 : i64, 4 : i64]}
// CHECK:       mesh.program @main.pre(%input_ids: tensor<1x8xi64>)
// CHECK:       } {{{.*}}plmr.state_results = ["main.handoff0"]}
// CHECK:       mesh.program @main.post(
// CHECK:       } {{{.*}}plmr.state_args = ["main.handoff0"]}

// Only the token ids' rows come in and the logits go out, whatever the depth; the
// hidden state (8x32 f32, 1,024 B) is re-laid out on the wafer once per layer.
// TIMING:      host link   0 B in, 2,048 B out  (state on the wafer: 1,024 B, 3,072 B re-placed)
// TIMING:      host lookup 1,024 B of rows streamed in
// TIMING:      mesh.scatter x{{[0-9]+}} {{ +}}{{[1-9][0-9,]*}} cycles
// TIMING:      layers      the layer window simulated 2 time(s), extrapolated 1 time(s)
