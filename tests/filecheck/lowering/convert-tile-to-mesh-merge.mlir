// RUN: plmr-opt %s -p 'plmr-compile{grid=3,3 tile-sizes=8,8 substitute=false route=false}' | filecheck %s
// RUN: plmr-opt %s -p 'plmr-compile{grid=2,4 tile-sizes=4,4 substitute=false route=false}' | filecheck %s --check-prefix=RECT
// RUN: plmr-opt %s -p 'plmr-compile{grid=3,3 tile-sizes=8,8 substitute=false route=false fuse-softmax=false},mesh-fuse-softmax{always=true}' | filecheck %s --check-prefix=FUSED

// Causal prefill attention, 48 queries and keys: the rolling update (FlashAttention,
// from neptune-fuse) runs with its queries split over x and its keys over y, so no PE
// repeats another's work. Each PE runs the rolling update over its own keys, then the
// PEs of a column merge their partial results (Neptune's split-K repair): the maxima
// by a max allreduce, then the sums and the unnormalised outputs, each rescaled by
// exp(m - M), by sum allreduces. Nothing circulates.

// CHECK:      mesh.program @main
// CHECK:        %q_1 = mesh.scatter %q : {{.*}} #mesh.layout<[-, -, x, -]>>
// CHECK-NEXT:   %k_1 = mesh.scatter %k : {{.*}} #mesh.layout<[-, -, y, -]>>
// CHECK-NEXT:   %mask_1 = mesh.scatter %mask : {{.*}} #mesh.layout<[x, y]>>
// CHECK-NEXT:   %v_1 = mesh.scatter %v : {{.*}} #mesh.layout<[-, -, y, -]>>
// CHECK-NEXT:   %o = mesh.spmd(%q_1, %k_1, %mask_1, %v_1)
// CHECK-NEXT:   ^bb0(%py: index, %px: index, %{{.*}}: tensor<1x1x16x16xf32>, %{{.*}}: tensor<1x1x16x16xf32>, %{{.*}}: tensor<16x16xf32>, %{{.*}}: tensor<1x1x16x16xf32>):
// CHECK:          tile.for %i2 = 0 to 16 step 8 {{.*}} parallel {
// CHECK:            %[[M:.*]], %[[S:.*]], %[[O:.*]] = tile.for %i3 = 0 to 16 step 8 {{.*}} reduction {
// CHECK-NOT:          mesh.
// CHECK:              tile.dot
// CHECK:              tile.map exp
// CHECK:              tile.dot
// CHECK:            }
// CHECK-NEXT:       %[[MAX:.*]] = mesh.allreduce max %[[M]] axis y : tensor<8xf32>
// CHECK-NEXT:       %[[D:.*]] = tile.map sub %[[M]], %[[MAX]]
// CHECK-NEXT:       %[[F:.*]] = tile.map exp %[[D]]
// CHECK-NEXT:       %[[SF:.*]] = tile.map mul %[[S]], %[[F]]
// CHECK-NEXT:       %[[SUM:.*]] = mesh.allreduce sum %[[SF]] axis y : tensor<8xf32>
// CHECK-NEXT:       %[[FB:.*]] = tile.reshape %[[F]] : tensor<8xf32> -> tensor<8x1xf32>
// CHECK-NEXT:       %[[OF:.*]] = tile.map mul %[[O]], %[[FB]]
// CHECK-NEXT:       %{{.*}} = mesh.allreduce sum %[[OF]] axis y : tensor<8x16xf32>
// CHECK-NOT:    mesh.shift
// CHECK-NOT:    mesh.broadcast
// CHECK:        mesh.gather %o : !mesh.dist<tensor<1x1x48x16xf32>, #mesh.layout<[-, -, x, -]>>

// On lines of 3 PEs mesh-fuse-softmax (in the pipeline) keeps the three allreduces: by
// the runtime's timing one softmax allreduce is not faster there. Forced
// (`always=true`), the three are one softmax allreduce of the rows [M, S, O]
// (1 + 1 + 16 values), the merged values loaded back from it.

// FUSED:      %o = mesh.spmd
// FUSED:        %[[M:.*]], %[[S:.*]], %[[O:.*]] = tile.for %i3 = 0 to 16 step 8 {{.*}} reduction {
// FUSED:        }
// FUSED:        %[[BUF:.*]] = tile.fill 0.000000e+00 : tensor<8x18xf32>
// FUSED:        tile.store %{{.*}}, %[[BUF]]
// FUSED:        %[[R:.*]] = mesh.allreduce softmax %{{.*}} axis y : tensor<8x18xf32>
// FUSED-NEXT:   tile.load %[[R]]{{.*}} -> tensor<8x1xf32>
// FUSED-NOT:    mesh.allreduce
// FUSED:        mesh.gather %o

// On 2x4 PEs (blocks of 4) the queries take the four columns, the keys the two rows.

// RECT:      %o = mesh.spmd
// RECT:        ^bb0(%py: index, %px: index, %{{.*}}: tensor<1x1x12x16xf32>, %{{.*}}: tensor<1x1x24x16xf32>, %{{.*}}: tensor<12x24xf32>, %{{.*}}: tensor<1x1x24x16xf32>):
// RECT:        mesh.allreduce max %{{.*}} axis y
// RECT:        mesh.allreduce sum %{{.*}} axis y
// RECT:        mesh.allreduce sum %{{.*}} axis y
// RECT-NOT:    mesh.shift

func.func @main(%q: tensor<1x1x48x16xf32>, %k: tensor<1x1x48x16xf32>, %v: tensor<1x1x48x16xf32>, %mask: tensor<48x48xf32>) -> tensor<1x1x48x16xf32> {
  %s = graph.matmul %q, %k transpose_b : (tensor<1x1x48x16xf32>, tensor<1x1x48x16xf32>) -> tensor<1x1x48x48xf32>
  %ss = graph.scale %s by 0.25 : tensor<1x1x48x48xf32>
  %sm = graph.add %ss, %mask : (tensor<1x1x48x48xf32>, tensor<48x48xf32>) -> tensor<1x1x48x48xf32>
  %p = graph.softmax %sm : tensor<1x1x48x48xf32>
  %o = graph.matmul %p, %v : (tensor<1x1x48x48xf32>, tensor<1x1x48x16xf32>) -> tensor<1x1x48x16xf32>
  func.return %o : tensor<1x1x48x16xf32>
}
