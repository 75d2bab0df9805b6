// RUN: plmr compile %s --grid 2x2 --no-substitute | filecheck %s

// A table of the position (RoPE's angles: the position times constant frequencies) is
// computed on the host: its nest stays at the top of the mesh.program, outside any
// mesh.spmd, reading the position and the constant there, and its result is scattered
// onto the wafer like an input, in the layout its reader wants. The position itself
// never reaches the wafer. The nest that reads the activation %x stays on the wafer.

// CHECK:       mesh.program @main(%pos: tensor<1x1xi64>, %x: tensor<1x8xf32>)
// CHECK-NOT:     mesh.scatter %pos
// CHECK:         %f = tile.for
// CHECK:           tile.load %pos
// CHECK:         %f_1 = mesh.scatter %f : tensor<1x4xf32> -> !mesh.dist<tensor<1x4xf32>, #mesh.layout<[-, -]>>
// CHECK:         %y = mesh.spmd(%x_1, %{{.*}}, %f_1)
// CHECK:         mesh.return
// CHECK-NOT:     mesh.scatter %pos

func.func @main(%pos: tensor<1x1xi64>, %x: tensor<1x8xf32>) -> tensor<1x8xf32> {
  %p = graph.cast %pos : tensor<1x1xi64> -> tensor<1x1xf32>
  %inv = graph.constant dense<[[1.0, 0.5, 0.25, 0.125]]> : tensor<1x4xf32>
  %f = graph.matmul %p, %inv : (tensor<1x1xf32>, tensor<1x4xf32>) -> tensor<1x4xf32>
  %a = graph.concat %f, %f axis = 1 : (tensor<1x4xf32>, tensor<1x4xf32>) -> tensor<1x8xf32>
  %c = graph.cos %a : tensor<1x8xf32>
  %y = graph.mul %x, %c : (tensor<1x8xf32>, tensor<1x8xf32>) -> tensor<1x8xf32>
  func.return %y : tensor<1x8xf32>
}
