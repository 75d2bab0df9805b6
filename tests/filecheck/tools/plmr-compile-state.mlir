// RUN: plmr compile %s --grid 2x2 --no-substitute --tile-sizes 8,8 --fit-tiles 2>&1 | filecheck %s
// RUN: plmr compile %s --grid 2x2 --no-substitute --tile-sizes 8,8 --fit-tiles --profile -o /dev/null 2>&1 | filecheck %s --check-prefix=PROFILE
// RUN: plmr compile %s --grid 2x2 --no-substitute --tile-sizes 8,8 --fit-tiles --state past_key_values.0.key=present.0.key 2>&1 | filecheck %s
// RUN: plmr compile %s --grid 2x2 --no-substitute --tile-sizes 8,8 --fit-tiles --no-state 2>&1 | filecheck %s --check-prefix=EXPORTED
// RUN: not plmr compile %s --grid 2x2 --state past_key_values.0.key 2>&1 | filecheck %s --check-prefix=MALFORMED
// RUN: not plmr compile %s --grid 2x2 --state q=present.0.key 2>&1 | filecheck %s --check-prefix=NOTCACHE
// RUN: not plmr compile %s --grid 2x2 --state nosuch=present.0.key 2>&1 | filecheck %s --check-prefix=NONAME
// RUN: not plmr compile %s --grid 2x2 --state a=b --no-state 2>&1 | filecheck %s --check-prefix=BOTH

// (One blocking, --tile-sizes: the state is checked here, not the blocking search.)
// `plmr compile` keeps a decode step's KV cache on the wafer by default: the past
// (3 rows) in and the present (4 rows) out become one state buffer of 4 rows, the
// attention mask input goes (computed from the position), and the mesh program records
// which input and output are the state.
// CHECK:       graph-kv-state: @decode keeps 1 KV cache(s) on the wafer as state (present.0.key)
// CHECK:       mesh.program @decode(%position_ids: tensor<1x1xi64>, %past: tensor<1x2x4x8xf32>, %k: tensor<1x2x1x8xf32>, %q: tensor<1x2x1x8xf32>) -> (tensor<1x2x1x4xf32>, tensor<1x2x4x8xf32>)
// CHECK-NOT:   attention_mask
// The append: each PE selects the new row where its cache row is the position (the
// rows it holds compared with p) and keeps its other rows as they are, no product.
// CHECK:       %present = mesh.spmd(%kv_rows_1, %position_ids_1, %k_1, %past_1)
// CHECK-NOT:   mesh.spmd
// CHECK:         arith.cmpf oeq
// CHECK-NOT:     tile.map mul
// CHECK:         arith.select
// CHECK-NOT:     tile.map mul
// CHECK:         mesh.yield
// CHECK:       plmr.state_args = ["", "present.0.key", "", ""], plmr.state_results = ["", "present.0.key"]

// PROFILE:     step
// PROFILE:     KV caches kept on the wafer (graph-kv-state): 1
// PROFILE:     graph-kv-state: 1 KV cache(s) kept on the wafer as state; the step is compiled whole

// EXPORTED-NOT: graph-kv-state
// EXPORTED:    mesh.program @decode(%position_ids: tensor<1x1xi64>, %attention_mask: tensor<1x4xi64>, %past: tensor<1x2x3x8xf32>, %k: tensor<1x2x1x8xf32>, %q: tensor<1x2x1x8xf32>)
// EXPORTED-NOT: plmr.state_args

// MALFORMED:   error: graph-kv-state: state pair 'past_key_values.0.key' must be IN=OUT (an input name, '=', an output name), e.g. past_key_values.0.key=present.0.key
// MALFORMED-NOT: Traceback
// NOTCACHE:    error: graph-kv-state: @decode: 'present.0.key' is not Concat('q', new row): a cache state pair must return its input with one row appended (check the pair, or compile the step without state)
// NONAME:      error: graph-kv-state: @decode: state pair 'nosuch=present.0.key': 'nosuch' is not an input (inputs: position_ids, attention_mask, past_key_values.0.key, k, q)
// BOTH:        error: --state names caches to keep on the wafer, --no-state keeps none: give one

func.func @decode(%position_ids: tensor<1x1xi64> {plmr.name = "position_ids"}, %attention_mask: tensor<1x4xi64> {plmr.name = "attention_mask"}, %past: tensor<1x2x3x8xf32> {plmr.name = "past_key_values.0.key"}, %k: tensor<1x2x1x8xf32> {plmr.name = "k"}, %q: tensor<1x2x1x8xf32> {plmr.name = "q"}) -> (tensor<1x2x1x4xf32> {plmr.name = "scores"}, tensor<1x2x4x8xf32> {plmr.name = "present.0.key"}) {
  %present = graph.concat %past, %k axis = 2 : (tensor<1x2x3x8xf32>, tensor<1x2x1x8xf32>) -> tensor<1x2x4x8xf32>
  %kt = graph.transpose %present perm = [0, 1, 3, 2] : tensor<1x2x4x8xf32> -> tensor<1x2x8x4xf32>
  %s = graph.matmul %q, %kt : (tensor<1x2x1x8xf32>, tensor<1x2x8x4xf32>) -> tensor<1x2x1x4xf32>
  %m = graph.cast %attention_mask : tensor<1x4xi64> -> tensor<1x4xf32>
  %scores = graph.mul %s, %m : (tensor<1x2x1x4xf32>, tensor<1x4xf32>) -> tensor<1x2x1x4xf32>
  func.return %scores, %present : tensor<1x2x1x4xf32>, tensor<1x2x4x8xf32>
}
