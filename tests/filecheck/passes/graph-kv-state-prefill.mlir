// RUN: plmr-opt %s -p 'graph-kv-state{capacity=8}' | filecheck %s
// RUN: not plmr-opt %s -p graph-kv-state 2>&1 | filecheck %s --check-prefix=NOCAP
// RUN: not plmr-opt %s -p 'graph-kv-state{capacity=2}' 2>&1 | filecheck %s --check-prefix=SMALL

// A prefill returns the prompt's rows (here 2) with no past: with the capacity of the
// decode step's cache, the output becomes the state's first value, its rows 0..1 the
// prompt's (a product by the constant identity rows), the others zero.
// CHECK-LABEL: func.func @prefill(
// CHECK-SAME:    -> (tensor<1x2x8x8xf32> {plmr.name = "present.0.key", plmr.state = "present.0.key"})
// CHECK-NEXT:    %[[EYE:.*]] = graph.constant dense<{{.*}}> : tensor<1x1x8x2xf32>
// CHECK-NEXT:    %[[GROWN:.*]] = graph.matmul %[[EYE]], %k : (tensor<1x1x8x2xf32>, tensor<1x2x2x8xf32>) -> tensor<1x2x8x8xf32>
// CHECK-NEXT:    func.return %[[GROWN]] : tensor<1x2x8x8xf32>
func.func @prefill(%k: tensor<1x2x2x8xf32> {plmr.name = "k"}) -> (tensor<1x2x2x8xf32> {plmr.name = "present.0.key"}) {
  func.return %k : tensor<1x2x2x8xf32>
}

// NOCAP: error: graph-kv-state: @prefill: a prefill's state needs the capacity of the decode step's cache (capacity=S, the decode export's S)
// SMALL: error: graph-kv-state: @prefill: 'present.0.key' has 2 rows, the capacity 2 leaves no room to decode; use a larger capacity
