// RUN: plmr-opt %s -p mesh-shape-trees | filecheck %s
// RUN: plmr-opt %s -p 'mesh-shape-trees{check-routes=false}' | filecheck %s
// RUN: plmr-opt %s -p 'mesh-shape-trees{phases=2,3}' | filecheck %s --check-prefix=PHASES

// The K = 3 trees along the 420 PEs of x (10 values each, a sum and a max) take one
// shape for the line: 25 first-phase groups (chains of 17), 1,112 cycles each against
// 1,147 with the default groups. A tree with groups of its own keeps them. Along the 7
// PEs of y, one value: the default K = 2 tree is the fastest (145 cycles against 147
// with 2 groups) and stays as it is.

// CHECK-LABEL: mesh.program @lines
// CHECK:         %r = mesh.allreduce sum %q axis x k = 3 groups = 25 : tensor<10xf32>
// CHECK-NEXT:    %m = mesh.allreduce max %q axis x k = 3 groups = 25 : tensor<10xf32>
// CHECK-NEXT:    %g = mesh.allreduce sum %q axis x k = 3 groups = 4 : tensor<10xf32>
// CHECK-NEXT:    %p = tile.reshape
// CHECK-NEXT:    %v = mesh.allreduce sum %p axis y : tensor<1xf32>

// A K = 2 tree on 255 PEs, 6 values: 15 groups (chains of 17), 785 cycles against 818.
// With `phases = 2,3` the line may take K = 3 too: 24 groups, 764 cycles (the default
// K = 3 tree: 892). The lines of @lines keep their shapes.
// CHECK-LABEL: mesh.program @deeper
// CHECK:         %r = mesh.allreduce sum %q axis x groups = 15 : tensor<6xf32>

// PHASES-LABEL: mesh.program @lines
// PHASES:         %r = mesh.allreduce sum %q axis x k = 3 groups = 25 : tensor<10xf32>
// PHASES-NEXT:    %m = mesh.allreduce max %q axis x k = 3 groups = 25 : tensor<10xf32>
// PHASES:         %v = mesh.allreduce sum %p axis y : tensor<1xf32>
// PHASES-LABEL: mesh.program @deeper
// PHASES:         %r = mesh.allreduce sum %q axis x k = 3 groups = 24 : tensor<6xf32>

mesh.program @lines(%a: tensor<10x420xf32>, %b: tensor<1x7xf32>) -> (tensor<10xf32>, tensor<10xf32>, tensor<1xf32>) device "wse2" grid [7, 420] {
  %da = mesh.scatter %a : tensor<10x420xf32> -> !mesh.dist<tensor<10x420xf32>, #mesh.layout<[-, x]>>
  %db = mesh.scatter %b : tensor<1x7xf32> -> !mesh.dist<tensor<1x7xf32>, #mesh.layout<[-, y]>>
  %s, %t, %u = mesh.spmd(%da, %db) : (!mesh.dist<tensor<10x420xf32>, #mesh.layout<[-, x]>>, !mesh.dist<tensor<1x7xf32>, #mesh.layout<[-, y]>>) -> (!mesh.dist<tensor<10xf32>, #mesh.layout<[-]>>, !mesh.dist<tensor<10xf32>, #mesh.layout<[-]>>, !mesh.dist<tensor<1xf32>, #mesh.layout<[-]>>) {
  ^bb0(%y: index, %x: index, %blk: tensor<10x1xf32>, %col: tensor<1x1xf32>):
    %q = tile.reshape %blk : tensor<10x1xf32> -> tensor<10xf32>
    %r = mesh.allreduce sum %q axis x k = 3 : tensor<10xf32>
    %m = mesh.allreduce max %q axis x k = 3 : tensor<10xf32>
    %g = mesh.allreduce sum %q axis x k = 3 groups = 4 : tensor<10xf32>
    %p = tile.reshape %col : tensor<1x1xf32> -> tensor<1xf32>
    %v = mesh.allreduce sum %p axis y : tensor<1xf32>
    %w = tile.map add %m, %g : (tensor<10xf32>, tensor<10xf32>) -> tensor<10xf32>
    mesh.yield %r, %w, %v : tensor<10xf32>, tensor<10xf32>, tensor<1xf32>
  }
  %rs = mesh.gather %s : !mesh.dist<tensor<10xf32>, #mesh.layout<[-]>> -> tensor<10xf32>
  %rt = mesh.gather %t : !mesh.dist<tensor<10xf32>, #mesh.layout<[-]>> -> tensor<10xf32>
  %ru = mesh.gather %u : !mesh.dist<tensor<1xf32>, #mesh.layout<[-]>> -> tensor<1xf32>
  mesh.return %rs, %rt, %ru : tensor<10xf32>, tensor<10xf32>, tensor<1xf32>
}

mesh.program @deeper(%a: tensor<6x255xf32>) -> tensor<6xf32> device "wse2" grid [1, 255] {
  %da = mesh.scatter %a : tensor<6x255xf32> -> !mesh.dist<tensor<6x255xf32>, #mesh.layout<[-, x]>>
  %s = mesh.spmd(%da) : (!mesh.dist<tensor<6x255xf32>, #mesh.layout<[-, x]>>) -> !mesh.dist<tensor<6xf32>, #mesh.layout<[-]>> {
  ^bb0(%y: index, %x: index, %blk: tensor<6x1xf32>):
    %q = tile.reshape %blk : tensor<6x1xf32> -> tensor<6xf32>
    %r = mesh.allreduce sum %q axis x : tensor<6xf32>
    mesh.yield %r : tensor<6xf32>
  }
  %rs = mesh.gather %s : !mesh.dist<tensor<6xf32>, #mesh.layout<[-]>> -> tensor<6xf32>
  mesh.return %rs : tensor<6xf32>
}
