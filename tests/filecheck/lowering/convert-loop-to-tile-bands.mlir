// RUN: plmr-opt %s -p 'convert-graph-to-loop,convert-loop-to-tile{tile-sizes=8,8 fit=true fit-grid=100,40}' | filecheck %s --check-prefix=WHOLE
// RUN: plmr-opt %s -p 'convert-graph-to-loop,convert-loop-to-tile{tile-sizes=8,8 fit=true fit-grid=100,40 bands=true}' | filecheck %s --check-prefix=BANDS

// Fit blocking for a 100x40 grid: 4 heads occupy fewer than an eighth of every axis and
// stay one block (WHOLE); with `bands` the heads are cut in blocks of 1 — a loop the
// mesh partitioner puts over bands of 25 rows — and the rest is blocked as before (the
// head dimension of 96 in blocks of 1, spread within the band).

// WHOLE:      %s = tile.for %i0 = 0 to 4 step 4
// WHOLE:        tile.for %i2 = 0 to 40 step 1
// WHOLE:          tile.for %i3 = 0 to 96 step 1 {{.*}} -> (tensor<4xf32>) reduction {
// WHOLE:      %p_max = tile.for %i0_1 = 0 to 4 step 4
// WHOLE:      %o = tile.for %i0_5 = 0 to 4 step 4

// BANDS:      %s = tile.for %i0 = 0 to 4 step 1
// BANDS:        tile.for %i2 = 0 to 40 step 1
// BANDS:          tile.for %i3 = 0 to 96 step 1 {{.*}} -> (tensor<f32>) reduction {
// BANDS:      %p_max = tile.for %i0_1 = 0 to 4 step 1
// BANDS:      %p_exp = tile.for %i0_2 = 0 to 4 step 1
// BANDS:      %p_sum = tile.for %i0_3 = 0 to 4 step 1
// BANDS:      %o = tile.for %i0_5 = 0 to 4 step 1

func.func @attn(%q: tensor<4x1x96xf32>, %k: tensor<4x40x96xf32>, %v: tensor<4x40x96xf32>) -> tensor<4x1x96xf32> {
  %s = graph.matmul %q, %k transpose_b : (tensor<4x1x96xf32>, tensor<4x40x96xf32>) -> tensor<4x1x40xf32>
  %p = graph.softmax %s : tensor<4x1x40xf32>
  %o = graph.matmul %p, %v : (tensor<4x1x40xf32>, tensor<4x40x96xf32>) -> tensor<4x1x96xf32>
  func.return %o : tensor<4x1x96xf32>
}
