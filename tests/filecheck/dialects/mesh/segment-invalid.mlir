// RUN: plmr-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | filecheck %s

// A segment holds between 1 and the axis' PEs; `groups` counts a segment's groups.

mesh.program @p(%a: tensor<8xf32>) -> () device "wse2" grid [2, 5] {
  %d = mesh.scatter %a : tensor<8xf32> -> !mesh.dist<tensor<8xf32>, #mesh.layout<[-]>>
  mesh.spmd(%d) : (!mesh.dist<tensor<8xf32>, #mesh.layout<[-]>>) -> () {
  ^bb0(%y: index, %x: index, %b: tensor<8xf32>):
    %s = mesh.allreduce sum %b axis x segment = 6 : tensor<8xf32>
    mesh.yield
  }
  mesh.return
}
// CHECK:      segment must be between 1 and the 5 PEs along x, got 6

// -----

mesh.program @p(%a: tensor<8xf32>) -> () device "wse2" grid [2, 5] {
  %d = mesh.scatter %a : tensor<8xf32> -> !mesh.dist<tensor<8xf32>, #mesh.layout<[-]>>
  mesh.spmd(%d) : (!mesh.dist<tensor<8xf32>, #mesh.layout<[-]>>) -> () {
  ^bb0(%y: index, %x: index, %b: tensor<8xf32>):
    %s = mesh.broadcast %b axis y root %y segment = 0 : tensor<8xf32>
    mesh.yield
  }
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: segment must be between 1 and the 2 PEs along y, got 0

// -----

mesh.program @p(%a: tensor<8xf32>) -> () device "wse2" grid [2, 5] {
  %d = mesh.scatter %a : tensor<8xf32> -> !mesh.dist<tensor<8xf32>, #mesh.layout<[-]>>
  mesh.spmd(%d) : (!mesh.dist<tensor<8xf32>, #mesh.layout<[-]>>) -> () {
  ^bb0(%y: index, %x: index, %b: tensor<8xf32>):
    %s = mesh.reduce max %b axis x root %x groups = 3 segment = 2 : tensor<8xf32>
    mesh.yield
  }
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: groups must be between 1 and the 2 PEs of a segment along x, got 3
