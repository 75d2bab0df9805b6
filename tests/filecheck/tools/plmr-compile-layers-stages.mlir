// A 4-layer LLaMA export on a 2x2 grid of a device whose PEs hold 20 KiB: one layer's
// weights take 5376 B per PE beside the layer body's working set of 5632 B (its peak,
// less the weight blocks it reads in place), so a region holds 2 layers and the program
// runs in 2 pipeline stages, the hidden state hopping between them. At 10 KiB not even one layer fits: one error, and nothing written.
// RUN: rm -rf %t && mkdir -p %t
// RUN: python -c "import sys, pathlib; from plmr.models.llama_onnx import LlamaOnnxConfig as C, write_llama_onnx as w; w(pathlib.Path(sys.argv[1]), C(hidden=32, heads=4, kv_heads=2, ffn=64, vocab=64, seq=8, layers=4))" %t/m.onnx
// RUN: plmr compile %t/m.onnx --grid 2x2 --device wse2:width=4,height=4,sram_kib=20 --no-substitute --tile-sizes 8,8 --fit-tiles -o %t/m.mesh.mlir
// RUN: filecheck %s < %t/m.mesh.mlir
// RUN: plmr run %t/m.mesh.mlir --mode timing | filecheck %s --check-prefix=TIMING
// RUN: not plmr compile %t/m.onnx --grid 2x2 --device wse2:width=4,height=4,sram_kib=10 --no-substitute --tile-sizes 8,8 --fit-tiles -o %t/bad.mlir 2>&1 | filecheck %s --check-prefix=BAD
// RUN: not test -e %t/bad.mlir

// CHECK-LABEL: func.func @main
// CHECK-SAME:    attributes {plmr.stages = [2 : i64, 2 : i64], plmr.stage_bytes = [5376 : i64, 5632 : i64]}
// CHECK:         mesh.run @main.layer({{.*}}) {plmr.layer = 0 : i64}
// CHECK:         mesh.run @main.layer({{.*}}) {plmr.layer = 3 : i64}

// TIMING:      program @main on wse2 2x2 (timing mode)
// TIMING:      stages      2 regions of the wafer, layers 2+2, hops between them 159 cycles
// TIMING-NEXT:             a layer's weights 5,376 B per PE beside 5,632 B of working set

// BAD:         error: plmr compile: the layer body @main.layer (4 layers): one layer's weights need 5376 B per PE beside 5632 B of working set, 11008 B, but the device has 10240 B per PE; use a larger grid or a device with more SRAM
// BAD-NOT:     Traceback
