// RUN: plmr-opt %s -p convert-graph-to-loop,neptune-fuse 2>&1 | filecheck %s

// A variance reads the running mean: (x − μ)² mixes μ with the data, so no repair
// exists; the nests stay unfused and the variance nest says why (on stderr too).

// CHECK: neptune-fuse: remark: not fused into the reduction computing %y_sum: the term g = (x - 0.0625*y_sum)**2 cannot be separated
// CHECK-LABEL: func.func @layernorm
// CHECK:       %y_sum = loop.nest
// CHECK:       %y_var = loop.nest
// CHECK:       } {loop.remark = "not fused into the reduction computing %y_sum: the term g = (x - 0.0625*y_sum)**2 cannot be separated into f(x) + f(u) or f(x)*f(u): it mixes the unfinished y_sum with the data"}
// CHECK:       %y = loop.nest
func.func @layernorm(%x: tensor<4x16xf32>, %g: tensor<16xf32>, %b: tensor<16xf32>) -> tensor<4x16xf32> {
  %y = graph.layernorm %x, %g, %b : (tensor<4x16xf32>, tensor<16xf32>, tensor<16xf32>) -> tensor<4x16xf32>
  func.return %y : tensor<4x16xf32>
}
