// RUN: plmr-opt %s -p 'mesh-route{explicit=true}' -o %t.mlir
// RUN: filecheck %s < %t.mlir
// RUN: plmr run - < %t.mlir 2>&1 | filecheck %s --check-prefix=SIM

// A torus shift on 3 PEs becomes one stage of sends and receives: the regular hops
// (0 -> 1, 1 -> 2) and the wrap-around (2 -> 0) each need their own color, every PE
// sends on the color of its position and receives on its predecessor's.

// CHECK-LABEL: mesh.program @torus
// CHECK-NOT:     mesh.shift
// CHECK:         mesh.send %{{.*}} color 0 if %{{.*}} : tensor<2x2xf32>
// CHECK-NEXT:    %{{.*}} = mesh.recv color 0 if %{{.*}} : tensor<2x2xf32>
// CHECK:         mesh.send %{{.*}} color 1 if %{{.*}} : tensor<2x2xf32>
// CHECK-NEXT:    %{{.*}} = mesh.recv color 1 if %{{.*}} : tensor<2x2xf32>
// CHECK:         mesh.send %{{.*}} color 2 if %{{.*}} : tensor<2x2xf32>
// CHECK-NEXT:    %{{.*}} = mesh.recv color 2 if %{{.*}} : tensor<2x2xf32>
// CHECK:         tile.select
// CHECK:         mesh.route color 0
// CHECK-NOT:     generated
// CHECK:         mesh.return

// SIM-LABEL: @torus on random inputs (seed 0):
// SIM: routes      3 of 21 colors per router

mesh.program @torus(%a: tensor<2x6xf32>) -> tensor<2x6xf32> device "test-small" grid [1, 3] {
  %d = mesh.scatter %a : tensor<2x6xf32> -> !mesh.dist<tensor<2x6xf32>, #mesh.layout<[-, x]>>
  %e = mesh.spmd(%d) : (!mesh.dist<tensor<2x6xf32>, #mesh.layout<[-, x]>>) -> !mesh.dist<tensor<2x6xf32>, #mesh.layout<[-, x]>> {
  ^bb0(%y: index, %x: index, %b: tensor<2x2xf32>):
    %s = mesh.shift %b axis x ring torus : tensor<2x2xf32>
    mesh.yield %s : tensor<2x2xf32>
  }
  %r = mesh.gather %e : !mesh.dist<tensor<2x6xf32>, #mesh.layout<[-, x]>> -> tensor<2x6xf32>
  mesh.return %r : tensor<2x6xf32>
}
