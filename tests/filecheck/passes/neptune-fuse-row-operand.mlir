// RUN: plmr-opt %s -p convert-graph-to-loop,neptune-fuse | filecheck %s

// Decode's scores against a cache of many rows: the rotated query `q·cos + r·sin` does
// not depend on the cached row, so it is stored once by a map nest of its own that the
// scores read; against a short cache (32 rows) it stays inlined into the scores.

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
