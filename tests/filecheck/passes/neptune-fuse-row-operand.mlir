// RUN: plmr-opt %s -p convert-graph-to-loop,neptune-fuse | filecheck %s

// Decode's scores against a cache of many rows: the rotated query `q·cos + r·sin` does
// not depend on the cached row, so it is stored once by a map nest of its own that the
// scores read; against a short cache (32 rows) it stays inlined into the scores. Only a
// map that does more work per element than the reading nest per iteration is stored:
// a softmax's normalisation `o / l` read by the output projection, and a rotation read
// by scores that build each key row from the cache and the new row, stay inlined.

// CHECK-LABEL: func.func @decode
// CHECK:         %roped = loop.nest (%{{.*}}, %{{.*}}, %{{.*}}) to (2, 4, 16) [parallel, parallel, parallel]
// CHECK:           loop.read %cos[
// CHECK:           loop.read %sin[
// CHECK:         %s = loop.nest ({{.*}}) to (2, 4, 128, 16) [parallel, parallel, parallel, reduction]
// CHECK-NEXT:      loop.read %roped[
// CHECK-NOT:       loop.read %cos[
// CHECK:           loop.read %kt[
// CHECK:         func.return %s

// CHECK-LABEL: func.func @short
// CHECK-NOT:     %roped = loop.nest
// CHECK:         %s = loop.nest ({{.*}}) to (2, 4, 32, 16) [parallel, parallel, parallel, reduction]
// CHECK:           loop.read %cos[
// CHECK:           loop.read %sin[
// CHECK:           loop.read %kt[
// CHECK:         func.return %s

// CHECK-LABEL: func.func @normalised
// CHECK-NOT:     %n = loop.nest
// CHECK:         %y = loop.nest ({{.*}}) to (2, 1, 512, 64) [parallel, parallel, parallel, reduction]
// CHECK:           loop.read %o[
// CHECK:           loop.read %l[
// CHECK:           arith.divf
// CHECK:           loop.read %wo[
// CHECK:         func.return %y

// CHECK-LABEL: func.func @slot
// CHECK-NOT:     %roped = loop.nest
// CHECK:         %s = loop.nest ({{.*}}) to (2, 4, 128, 16) [parallel, parallel, parallel, reduction]
// CHECK:           loop.read %cos[
// CHECK:           loop.read %sin[
// CHECK:           loop.read %kt[
// CHECK:           loop.read %knew[
// CHECK:         func.return %s

func.func @decode(%q: tensor<2x4x16xf32>, %r: tensor<2x4x16xf32>, %cos: tensor<1x16xf32>, %sin: tensor<1x16xf32>, %kt: tensor<2x16x128xf32>) -> tensor<2x4x128xf32> {
  %a = graph.mul %q, %cos : (tensor<2x4x16xf32>, tensor<1x16xf32>) -> tensor<2x4x16xf32>
  %b = graph.mul %r, %sin : (tensor<2x4x16xf32>, tensor<1x16xf32>) -> tensor<2x4x16xf32>
  %roped = graph.add %a, %b : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %s = graph.matmul %roped, %kt : (tensor<2x4x16xf32>, tensor<2x16x128xf32>) -> tensor<2x4x128xf32>
  func.return %s : tensor<2x4x128xf32>
}

func.func @short(%q: tensor<2x4x16xf32>, %r: tensor<2x4x16xf32>, %cos: tensor<1x16xf32>, %sin: tensor<1x16xf32>, %kt: tensor<2x16x32xf32>) -> tensor<2x4x32xf32> {
  %a = graph.mul %q, %cos : (tensor<2x4x16xf32>, tensor<1x16xf32>) -> tensor<2x4x16xf32>
  %b = graph.mul %r, %sin : (tensor<2x4x16xf32>, tensor<1x16xf32>) -> tensor<2x4x16xf32>
  %roped = graph.add %a, %b : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %s = graph.matmul %roped, %kt : (tensor<2x4x16xf32>, tensor<2x16x32xf32>) -> tensor<2x4x32xf32>
  func.return %s : tensor<2x4x32xf32>
}

func.func @normalised(%o: tensor<2x1x64xf32>, %l: tensor<2x1x1xf32>, %wo: tensor<2x64x512xf32>) -> tensor<2x1x512xf32> {
  %n = graph.div %o, %l : (tensor<2x1x64xf32>, tensor<2x1x1xf32>) -> tensor<2x1x64xf32>
  %y = graph.matmul %n, %wo : (tensor<2x1x64xf32>, tensor<2x64x512xf32>) -> tensor<2x1x512xf32>
  func.return %y : tensor<2x1x512xf32>
}

func.func @slot(%q: tensor<2x4x16xf32>, %r: tensor<2x4x16xf32>, %cos: tensor<1x16xf32>, %sin: tensor<1x16xf32>, %kt: tensor<2x16x128xf32>, %keep: tensor<1x1x128xf32>, %knew: tensor<2x16x1xf32>, %slot: tensor<1x1x128xf32>) -> tensor<2x4x128xf32> {
  %a = graph.mul %q, %cos : (tensor<2x4x16xf32>, tensor<1x16xf32>) -> tensor<2x4x16xf32>
  %b = graph.mul %r, %sin : (tensor<2x4x16xf32>, tensor<1x16xf32>) -> tensor<2x4x16xf32>
  %roped = graph.add %a, %b : (tensor<2x4x16xf32>, tensor<2x4x16xf32>) -> tensor<2x4x16xf32>
  %old = graph.mul %kt, %keep : (tensor<2x16x128xf32>, tensor<1x1x128xf32>) -> tensor<2x16x128xf32>
  %new = graph.mul %knew, %slot : (tensor<2x16x1xf32>, tensor<1x1x128xf32>) -> tensor<2x16x128xf32>
  %rows = graph.add %old, %new : (tensor<2x16x128xf32>, tensor<2x16x128xf32>) -> tensor<2x16x128xf32>
  %s = graph.matmul %roped, %rows : (tensor<2x4x16xf32>, tensor<2x16x128xf32>) -> tensor<2x4x128xf32>
  func.return %s : tensor<2x4x128xf32>
}
