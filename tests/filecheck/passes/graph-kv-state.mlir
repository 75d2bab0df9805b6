// RUN: plmr-opt %s -p graph-kv-state | filecheck %s
// RUN: not plmr-opt %s -p 'graph-kv-state{state="past_key_values.0.key=present.0.value"}' 2>&1 | filecheck %s --check-prefix=NOTCACHE
// RUN: not plmr-opt %s -p 'graph-kv-state{state="past.k=present.0.key"}' 2>&1 | filecheck %s --check-prefix=NONAME
// RUN: not plmr-opt %s -p 'graph-kv-state{state="past_key_values.0.key"}' 2>&1 | filecheck %s --check-prefix=MALFORMED
// RUN: not plmr-opt %s -p 'graph-kv-state{capacity=16}' 2>&1 | filecheck %s --check-prefix=CAPACITY

// A decode step as torch.onnx / Optimum export it: the past (3 rows) in, the present
// (4 rows) out. The past becomes the buffer of 4 rows (marked as the state
// "present.0.key"), the Concat a selection of the new row at row p = position_ids (no
// product over the cache), and the attention mask input `j <= p`, computed from the
// position; the mask's cast to f32 goes.
// CHECK-LABEL: func.func @decode(
// CHECK-SAME:    %position_ids: tensor<1x1xi64> {plmr.name = "position_ids"},
// CHECK-SAME:    %past: tensor<1x2x4x8xf32> {plmr.name = "past_key_values.0.key", plmr.state = "present.0.key"},
// CHECK-SAME:    %k: tensor<1x2x1x8xf32> {plmr.name = "k"},
// CHECK-SAME:    %scores: tensor<1x2x1x4xf32> {plmr.name = "scores"})
// CHECK-SAME:    -> (tensor<1x2x4x8xf32> {plmr.name = "present.0.key", plmr.state = "present.0.key"}, tensor<1x2x1x4xf32> {plmr.name = "masked"}, tensor<1x2x4x8xf32> {plmr.name = "present.0.value"})
// CHECK-NOT:     attention_mask
// CHECK-NEXT:    %[[P:.*]] = graph.cast %position_ids : tensor<1x1xi64> -> tensor<1x1xf32>
// CHECK-NEXT:    %kv_rows = graph.constant dense<{{\[\[}}0.000000e+00, 1.000000e+00, 2.000000e+00, 3.000000e+00]]> : tensor<1x4xf32>
// CHECK-NEXT:    %kv_offset = graph.sub %kv_rows, %[[P]] : (tensor<1x4xf32>, tensor<1x1xf32>) -> tensor<1x4xf32>
// CHECK-NEXT:    %kv_slot = graph.cmp eq %kv_rows, %[[P]] : (tensor<1x4xf32>, tensor<1x1xf32>) -> tensor<1x4xi1>
// CHECK-NEXT:    %[[SLOT:.*]] = graph.reshape %kv_slot : tensor<1x4xi1> -> tensor<1x1x4x1xi1>
// CHECK-NEXT:    %[[ONE2:.*]] = graph.constant dense<1.000000e+00> : tensor<1x1xf32>
// CHECK-NEXT:    %[[UP0:.*]] = graph.sub %[[ONE2]], %kv_offset : (tensor<1x1xf32>, tensor<1x4xf32>) -> tensor<1x4xf32>
// CHECK-NEXT:    %[[UP:.*]] = graph.relu %[[UP0]] : tensor<1x4xf32>
// CHECK-NEXT:    %[[DOWN0:.*]] = graph.neg %kv_offset : tensor<1x4xf32>
// CHECK-NEXT:    %[[DOWN:.*]] = graph.relu %[[DOWN0]] : tensor<1x4xf32>
// CHECK-NEXT:    %kv_valid = graph.sub %[[UP]], %[[DOWN]] : (tensor<1x4xf32>, tensor<1x4xf32>) -> tensor<1x4xf32>
// CHECK-NEXT:    %present = graph.where %[[SLOT]], %k, %past : (tensor<1x1x4x1xi1>, tensor<1x2x1x8xf32>, tensor<1x2x4x8xf32>) -> tensor<1x2x4x8xf32>
// CHECK-NEXT:    %masked = graph.mul %scores, %kv_valid : (tensor<1x2x1x4xf32>, tensor<1x4xf32>) -> tensor<1x2x1x4xf32>
// CHECK-NEXT:    %other = graph.concat %k, %k, %k, %k axis = 2
// CHECK-NEXT:    func.return %present, %masked, %other

// NOTCACHE: error: graph-kv-state: @decode: 'present.0.value' is not Concat('past_key_values.0.key', new row)
// NOTCACHE-NOT: Traceback
// NONAME: error: graph-kv-state: @decode: state pair 'past.k=present.0.key': 'past.k' is not an input (inputs: position_ids, attention_mask, past_key_values.0.key, k, scores)
// MALFORMED: error: graph-kv-state: state pair 'past_key_values.0.key' must be IN=OUT
// CAPACITY: error: graph-kv-state: @decode: capacity 16 differs from the export's 4 cache rows; export the decode step with a cache of the capacity wanted
func.func @decode(%position_ids: tensor<1x1xi64> {plmr.name = "position_ids"}, %attention_mask: tensor<1x4xi64> {plmr.name = "attention_mask"}, %past: tensor<1x2x3x8xf32> {plmr.name = "past_key_values.0.key"}, %k: tensor<1x2x1x8xf32> {plmr.name = "k"}, %scores: tensor<1x2x1x4xf32> {plmr.name = "scores"}) -> (tensor<1x2x4x8xf32> {plmr.name = "present.0.key"}, tensor<1x2x1x4xf32> {plmr.name = "masked"}, tensor<1x2x4x8xf32> {plmr.name = "present.0.value"}) {
  %present = graph.concat %past, %k axis = 2 : (tensor<1x2x3x8xf32>, tensor<1x2x1x8xf32>) -> tensor<1x2x4x8xf32>
  %m = graph.cast %attention_mask : tensor<1x4xi64> -> tensor<1x4xf32>
  %masked = graph.mul %scores, %m : (tensor<1x2x1x4xf32>, tensor<1x4xf32>) -> tensor<1x2x1x4xf32>
  %other = graph.concat %k, %k, %k, %k axis = 2 : (tensor<1x2x1x8xf32>, tensor<1x2x1x8xf32>, tensor<1x2x1x8xf32>, tensor<1x2x1x8xf32>) -> tensor<1x2x4x8xf32>
  func.return %present, %masked, %other : tensor<1x2x4x8xf32>, tensor<1x2x1x4xf32>, tensor<1x2x4x8xf32>
}

