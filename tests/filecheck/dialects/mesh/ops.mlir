// RUN: XDSL_ROUNDTRIP
// RUN: XDSL_GENERIC_ROUNDTRIP

// Every `mesh` op, attribute and type in every syntactic variant: programs with one,
// several and no results (and an attribute dictionary), scatter with and without `pad`,
// spmd with several, one and no operands, shifts on each ring with default, positive and
// negative distances, broadcast, allreduce and reduce with every combine kind and
// algorithm and with `k` / `groups` present and absent, send and recv with and without a
// mask, routes from every port to one and several ports, and layouts of every mode, skew
// and rank. CHECK lines hold the custom form after a generic round trip (defaults such as
// `distance 1`, `algorithm ktree`, `k = 2` and the `blocked` mode are not printed);
// CHECK-GENERIC lines the generic form, in which properties print in `<{...}>`.

// CHECK: builtin.module {
// CHECK-GENERIC: "builtin.module"() ({

// CHECK-LABEL: mesh.program @all(%a: tensor<8x8xf32>, %v: tensor<8xf16>) -> (tensor<8x8xf32>, tensor<8xf16>) device "wse3:colors=16" grid [2, 4] {
// CHECK-NEXT:    %d = mesh.scatter %a : tensor<8x8xf32> -> !mesh.dist<tensor<8x8xf32>, #mesh.layout<[y, x]>>
// CHECK-NEXT:    %p = mesh.scatter %a pad 1.500000e+00 : tensor<8x8xf32> -> !mesh.dist<tensor<8x8xf32>, #mesh.layout<[x, y], interleaved>>
// CHECK-NEXT:    %s = mesh.scatter %v {note = "v"} : tensor<8xf16> -> !mesh.dist<tensor<8xf16>, #mesh.layout<[x]>>
// CHECK-NEXT:    %e, %f = mesh.spmd(%d, %s) : (!mesh.dist<tensor<8x8xf32>, #mesh.layout<[y, x]>>, !mesh.dist<tensor<8xf16>, #mesh.layout<[x]>>) -> (!mesh.dist<tensor<8x8xf32>, #mesh.layout<[y, x]>>, !mesh.dist<tensor<8xf16>, #mesh.layout<[x]>>) {
// CHECK-NEXT:    ^bb0(%y: index, %x: index, %blk: tensor<4x2xf32>, %w: tensor<2xf16>):
// CHECK-NEXT:      %r0 = mesh.shift %blk axis x ring linear : tensor<4x2xf32>
// CHECK-NEXT:      %r1 = mesh.shift %r0 axis y ring torus distance -1 : tensor<4x2xf32>
// CHECK-NEXT:      %r2 = mesh.shift %r1 axis x ring interleaved : tensor<4x2xf32>
// CHECK-NEXT:      %r3 = mesh.shift %r2 axis x ring interleaved distance 3 : tensor<4x2xf32>
// CHECK-NEXT:      %b = mesh.broadcast %r3 axis y root %y : tensor<4x2xf32>
// CHECK-NEXT:      %t = mesh.allreduce sum %b axis x : tensor<4x2xf32>
// CHECK-NEXT:      %u = mesh.allreduce max %t axis y k = 3 groups = 2 {tag} : tensor<4x2xf32>
// CHECK-NEXT:      %u2 = mesh.allreduce min %u axis x algorithm pipeline : tensor<4x2xf32>
// CHECK-NEXT:      %u3 = mesh.allreduce sum %u2 axis x algorithm ring : tensor<4x2xf32>
// CHECK-NEXT:      %u4 = mesh.allreduce sum %u3 axis x groups = 4 : tensor<4x2xf32>
// CHECK-NEXT:      %q = mesh.reduce min %u4 axis x root %x algorithm ring : tensor<4x2xf32>
// CHECK-NEXT:      %q2 = mesh.reduce sum %q axis y root %y : tensor<4x2xf32>
// CHECK-NEXT:      %q3 = mesh.reduce max %q2 axis y root %x algorithm pipeline k = 1 : tensor<4x2xf32>
// CHECK-NEXT:      %q4 = mesh.reduce sum %q3 axis x root %y k = 3 groups = 1 : tensor<4x2xf32>
// CHECK-NEXT:      %m = arith.cmpi eq, %x, %y : index
// CHECK-NEXT:      mesh.send %w color 3 : tensor<2xf16>
// CHECK-NEXT:      mesh.send %w color 4 if %m {note} : tensor<2xf16>
// CHECK-NEXT:      %g = mesh.recv color 3 : tensor<2xf16>
// CHECK-NEXT:      %h = mesh.recv color 4 if %m : tensor<2xf16>
// CHECK-NEXT:      mesh.yield %q4, %h : tensor<4x2xf32>, tensor<2xf16>
// CHECK-NEXT:    }
// CHECK-NEXT:    %o = mesh.gather %e : !mesh.dist<tensor<8x8xf32>, #mesh.layout<[y, x]>> -> tensor<8x8xf32>
// CHECK-NEXT:    %o2 = mesh.gather %f {note} : !mesh.dist<tensor<8xf16>, #mesh.layout<[x]>> -> tensor<8xf16>
// CHECK-NEXT:    mesh.route color 3 rows [0, 2, 1] cols [0, 4, 1] from ramp to ["east", "ramp"]
// CHECK-NEXT:    mesh.route color 4 rows [0, 2, 1] cols [1, 4, 2] from west to ["north", "south", "east", "ramp"]
// CHECK-NEXT:    mesh.route color 4 rows [1, 2, 1] cols [0, 1, 1] from north to ["south"]
// CHECK-NEXT:    mesh.route color 4 rows [0, 1, 1] cols [0, 4, 3] from south to ["west"] {note}
// CHECK-NEXT:    mesh.route color 0 rows [0, 0, 1] cols [3, 4, 1] from east to ["ramp"]
// CHECK-NEXT:    mesh.return %o, %o2 : tensor<8x8xf32>, tensor<8xf16>
// CHECK-NEXT:  } {note = 1 : i64}

// CHECK-GENERIC-LABEL: "mesh.program"() <{sym_name = "all", function_type = (tensor<8x8xf32>, tensor<8xf16>) -> (tensor<8x8xf32>, tensor<8xf16>), device = #mesh.device<"wse3:colors=16">, grid = array<i64: 2, 4>}> ({
// CHECK-GENERIC-NEXT:  ^bb0(%a: tensor<8x8xf32>, %v: tensor<8xf16>):
// CHECK-GENERIC-NEXT:    %d = "mesh.scatter"(%a) : (tensor<8x8xf32>) -> !mesh.dist<tensor<8x8xf32>, #mesh.layout<[y, x]>>
// CHECK-GENERIC-NEXT:    %p = "mesh.scatter"(%a) <{pad = 1.500000e+00 : f64}> : (tensor<8x8xf32>) -> !mesh.dist<tensor<8x8xf32>, #mesh.layout<[x, y], interleaved>>
// CHECK-GENERIC-NEXT:    %s = "mesh.scatter"(%v) {note = "v"} : (tensor<8xf16>) -> !mesh.dist<tensor<8xf16>, #mesh.layout<[x]>>
// CHECK-GENERIC-NEXT:    %e, %f = "mesh.spmd"(%d, %s) ({
// CHECK-GENERIC-NEXT:    ^bb0(%y: index, %x: index, %blk: tensor<4x2xf32>, %w: tensor<2xf16>):
// CHECK-GENERIC-NEXT:      %r0 = "mesh.shift"(%blk) <{axis = #mesh<axis x>, ring = #mesh<ring linear>, distance = 1 : i64}> : (tensor<4x2xf32>) -> tensor<4x2xf32>
// CHECK-GENERIC-NEXT:      %r1 = "mesh.shift"(%r0) <{axis = #mesh<axis y>, ring = #mesh<ring torus>, distance = -1 : i64}> : (tensor<4x2xf32>) -> tensor<4x2xf32>
// CHECK-GENERIC-NEXT:      %r2 = "mesh.shift"(%r1) <{axis = #mesh<axis x>, ring = #mesh<ring interleaved>, distance = 1 : i64}> : (tensor<4x2xf32>) -> tensor<4x2xf32>
// CHECK-GENERIC-NEXT:      %r3 = "mesh.shift"(%r2) <{axis = #mesh<axis x>, ring = #mesh<ring interleaved>, distance = 3 : i64}> : (tensor<4x2xf32>) -> tensor<4x2xf32>
// CHECK-GENERIC-NEXT:      %b = "mesh.broadcast"(%r3, %y) <{axis = #mesh<axis y>}> : (tensor<4x2xf32>, index) -> tensor<4x2xf32>
// CHECK-GENERIC-NEXT:      %t = "mesh.allreduce"(%b) <{kind = #mesh<combine sum>, axis = #mesh<axis x>, algorithm = #mesh<algorithm ktree>, k = 2 : i64}> : (tensor<4x2xf32>) -> tensor<4x2xf32>
// CHECK-GENERIC-NEXT:      %u = "mesh.allreduce"(%t) <{kind = #mesh<combine max>, axis = #mesh<axis y>, algorithm = #mesh<algorithm ktree>, k = 3 : i64, groups = 2 : i64}> {tag} : (tensor<4x2xf32>) -> tensor<4x2xf32>
// CHECK-GENERIC-NEXT:      %u2 = "mesh.allreduce"(%u) <{kind = #mesh<combine min>, axis = #mesh<axis x>, algorithm = #mesh<algorithm pipeline>, k = 2 : i64}> : (tensor<4x2xf32>) -> tensor<4x2xf32>
// CHECK-GENERIC-NEXT:      %u3 = "mesh.allreduce"(%u2) <{kind = #mesh<combine sum>, axis = #mesh<axis x>, algorithm = #mesh<algorithm ring>, k = 2 : i64}> : (tensor<4x2xf32>) -> tensor<4x2xf32>
// CHECK-GENERIC-NEXT:      %u4 = "mesh.allreduce"(%u3) <{kind = #mesh<combine sum>, axis = #mesh<axis x>, groups = 4 : i64, algorithm = #mesh<algorithm ktree>, k = 2 : i64}> : (tensor<4x2xf32>) -> tensor<4x2xf32>
// CHECK-GENERIC-NEXT:      %q = "mesh.reduce"(%x, %u4) <{kind = #mesh<combine min>, axis = #mesh<axis x>, algorithm = #mesh<algorithm ring>, k = 2 : i64}> : (index, tensor<4x2xf32>) -> tensor<4x2xf32>
// CHECK-GENERIC-NEXT:      %q2 = "mesh.reduce"(%y, %q) <{kind = #mesh<combine sum>, axis = #mesh<axis y>, algorithm = #mesh<algorithm ktree>, k = 2 : i64}> : (index, tensor<4x2xf32>) -> tensor<4x2xf32>
// CHECK-GENERIC-NEXT:      %q3 = "mesh.reduce"(%x, %q2) <{kind = #mesh<combine max>, axis = #mesh<axis y>, algorithm = #mesh<algorithm pipeline>, k = 1 : i64}> : (index, tensor<4x2xf32>) -> tensor<4x2xf32>
// CHECK-GENERIC-NEXT:      %q4 = "mesh.reduce"(%y, %q3) <{kind = #mesh<combine sum>, axis = #mesh<axis x>, k = 3 : i64, groups = 1 : i64, algorithm = #mesh<algorithm ktree>}> : (index, tensor<4x2xf32>) -> tensor<4x2xf32>
// CHECK-GENERIC-NEXT:      %m = "arith.cmpi"(%x, %y) <{predicate = 0 : i64}> : (index, index) -> i1
// CHECK-GENERIC-NEXT:      "mesh.send"(%w) <{color = 3 : i64}> : (tensor<2xf16>) -> ()
// CHECK-GENERIC-NEXT:      "mesh.send"(%w, %m) <{color = 4 : i64}> {note} : (tensor<2xf16>, i1) -> ()
// CHECK-GENERIC-NEXT:      %g = "mesh.recv"() <{color = 3 : i64}> : () -> tensor<2xf16>
// CHECK-GENERIC-NEXT:      %h = "mesh.recv"(%m) <{color = 4 : i64}> : (i1) -> tensor<2xf16>
// CHECK-GENERIC-NEXT:      "mesh.yield"(%q4, %h) : (tensor<4x2xf32>, tensor<2xf16>) -> ()
// CHECK-GENERIC-NEXT:    }) : (!mesh.dist<tensor<8x8xf32>, #mesh.layout<[y, x]>>, !mesh.dist<tensor<8xf16>, #mesh.layout<[x]>>) -> (!mesh.dist<tensor<8x8xf32>, #mesh.layout<[y, x]>>, !mesh.dist<tensor<8xf16>, #mesh.layout<[x]>>)
// CHECK-GENERIC-NEXT:    %o = "mesh.gather"(%e) : (!mesh.dist<tensor<8x8xf32>, #mesh.layout<[y, x]>>) -> tensor<8x8xf32>
// CHECK-GENERIC-NEXT:    %o2 = "mesh.gather"(%f) {note} : (!mesh.dist<tensor<8xf16>, #mesh.layout<[x]>>) -> tensor<8xf16>
// CHECK-GENERIC-NEXT:    "mesh.route"() <{color = 3 : i64, rows = array<i64: 0, 2, 1>, cols = array<i64: 0, 4, 1>, from = #mesh<port ramp>, to = ["east", "ramp"]}> : () -> ()
// CHECK-GENERIC-NEXT:    "mesh.route"() <{color = 4 : i64, rows = array<i64: 0, 2, 1>, cols = array<i64: 1, 4, 2>, from = #mesh<port west>, to = ["north", "south", "east", "ramp"]}> : () -> ()
// CHECK-GENERIC-NEXT:    "mesh.route"() <{color = 4 : i64, rows = array<i64: 1, 2, 1>, cols = array<i64: 0, 1, 1>, from = #mesh<port north>, to = ["south"]}> : () -> ()
// CHECK-GENERIC-NEXT:    "mesh.route"() <{color = 4 : i64, rows = array<i64: 0, 1, 1>, cols = array<i64: 0, 4, 3>, from = #mesh<port south>, to = ["west"]}> {note} : () -> ()
// CHECK-GENERIC-NEXT:    "mesh.route"() <{color = 0 : i64, rows = array<i64: 0, 0, 1>, cols = array<i64: 3, 4, 1>, from = #mesh<port east>, to = ["ramp"]}> : () -> ()
// CHECK-GENERIC-NEXT:    "mesh.return"(%o, %o2) : (tensor<8x8xf32>, tensor<8xf16>) -> ()
// CHECK-GENERIC-NEXT:  }) {note = 1 : i64} : () -> ()

mesh.program @all(%a: tensor<8x8xf32>, %v: tensor<8xf16>) -> (tensor<8x8xf32>, tensor<8xf16>) device "wse3:colors=16" grid [2, 4] {
  %d = mesh.scatter %a : tensor<8x8xf32> -> !mesh.dist<tensor<8x8xf32>, #mesh.layout<[y, x]>>
  %p = mesh.scatter %a pad 1.5 : tensor<8x8xf32> -> !mesh.dist<tensor<8x8xf32>, #mesh.layout<[x, y], interleaved>>
  %s = mesh.scatter %v {note = "v"} : tensor<8xf16> -> !mesh.dist<tensor<8xf16>, #mesh.layout<[x]>>
  %e, %f = mesh.spmd(%d, %s) : (!mesh.dist<tensor<8x8xf32>, #mesh.layout<[y, x]>>, !mesh.dist<tensor<8xf16>, #mesh.layout<[x]>>) -> (!mesh.dist<tensor<8x8xf32>, #mesh.layout<[y, x]>>, !mesh.dist<tensor<8xf16>, #mesh.layout<[x]>>) {
  ^bb0(%y: index, %x: index, %blk: tensor<4x2xf32>, %w: tensor<2xf16>):
    %r0 = mesh.shift %blk axis x ring linear : tensor<4x2xf32>
    %r1 = mesh.shift %r0 axis y ring torus distance -1 : tensor<4x2xf32>
    %r2 = mesh.shift %r1 axis x ring interleaved distance 1 : tensor<4x2xf32>
    %r3 = mesh.shift %r2 axis x ring interleaved distance 3 : tensor<4x2xf32>
    %b = mesh.broadcast %r3 axis y root %y : tensor<4x2xf32>
    %t = mesh.allreduce sum %b axis x : tensor<4x2xf32>
    %u = mesh.allreduce max %t axis y algorithm ktree k = 3 groups = 2 {tag} : tensor<4x2xf32>
    %u2 = mesh.allreduce min %u axis x algorithm pipeline k = 2 : tensor<4x2xf32>
    %u3 = mesh.allreduce sum %u2 axis x algorithm ring : tensor<4x2xf32>
    %u4 = mesh.allreduce sum %u3 axis x groups = 4 : tensor<4x2xf32>
    %q = mesh.reduce min %u4 axis x root %x algorithm ring : tensor<4x2xf32>
    %q2 = mesh.reduce sum %q axis y root %y algorithm ktree : tensor<4x2xf32>
    %q3 = mesh.reduce max %q2 axis y root %x algorithm pipeline k = 1 : tensor<4x2xf32>
    %q4 = mesh.reduce sum %q3 axis x root %y k = 3 groups = 1 : tensor<4x2xf32>
    %m = arith.cmpi eq, %x, %y : index
    mesh.send %w color 3 : tensor<2xf16>
    mesh.send %w color 4 if %m {note} : tensor<2xf16>
    %g = mesh.recv color 3 : tensor<2xf16>
    %h = mesh.recv color 4 if %m : tensor<2xf16>
    mesh.yield %q4, %h : tensor<4x2xf32>, tensor<2xf16>
  }
  %o = mesh.gather %e : !mesh.dist<tensor<8x8xf32>, #mesh.layout<[y, x]>> -> tensor<8x8xf32>
  %o2 = mesh.gather %f {note} : !mesh.dist<tensor<8xf16>, #mesh.layout<[x]>> -> tensor<8xf16>
  mesh.route color 3 rows [0, 2, 1] cols [0, 4, 1] from ramp to ["east", "ramp"]
  mesh.route color 4 rows [0, 2, 1] cols [1, 4, 2] from west to ["north", "south", "east", "ramp"]
  mesh.route color 4 rows [1, 2, 1] cols [0, 1, 1] from north to ["south"]
  mesh.route color 4 rows [0, 1, 1] cols [0, 4, 3] from south to ["west"] {note}
  mesh.route color 0 rows [0, 0, 1] cols [3, 4, 1] from east to ["ramp"]
  mesh.return %o, %o2 : tensor<8x8xf32>, tensor<8xf16>
} {note = 1}

// -----

// A program with no inputs and no results, and an spmd with no operands and no results.

// CHECK:       mesh.program @empty() -> () device "test-tiny" grid [1, 1] {
// CHECK-NEXT:    mesh.spmd() : () -> () {
// CHECK-NEXT:    ^bb0(%y: index, %x: index):
// CHECK-NEXT:      mesh.yield
// CHECK-NEXT:    }
// CHECK-NEXT:    mesh.return
// CHECK-NEXT:  }

// CHECK-GENERIC:       "mesh.program"() <{sym_name = "empty", function_type = () -> (), device = #mesh.device<"test-tiny">, grid = array<i64: 1, 1>}> ({
// CHECK-GENERIC-NEXT:    "mesh.spmd"() ({
// CHECK-GENERIC-NEXT:    ^bb0(%y: index, %x: index):
// CHECK-GENERIC-NEXT:      "mesh.yield"() : () -> ()
// CHECK-GENERIC-NEXT:    }) : () -> ()
// CHECK-GENERIC-NEXT:    "mesh.return"() : () -> ()
// CHECK-GENERIC-NEXT:  }) : () -> ()

mesh.program @empty() -> () device "test-tiny" grid [1, 1] {
  mesh.spmd() : () -> () {
  ^bb0(%y: index, %x: index):
    mesh.yield
  }
  mesh.return
}

// -----

// One result (printed without parentheses), a device with several overrides, an spmd
// with one operand and one result, a replicated layout, and a 1-PE interleaved ring (a
// no-op, allowed).

// CHECK:       mesh.program @one(%a: tensor<1x6xf32>) -> tensor<1x6xf32> device "wse2:colors=6,reserved_colors=2" grid [3, 1] {
// CHECK-NEXT:    %d = mesh.scatter %a : tensor<1x6xf32> -> !mesh.dist<tensor<1x6xf32>, #mesh.layout<[-, y]>>
// CHECK-NEXT:    %e = mesh.spmd(%d) : (!mesh.dist<tensor<1x6xf32>, #mesh.layout<[-, y]>>) -> !mesh.dist<tensor<1x6xf32>, #mesh.layout<[-, y]>> {
// CHECK-NEXT:    ^bb0(%y: index, %x: index, %b: tensor<1x2xf32>):
// CHECK-NEXT:      %s = mesh.shift %b axis x ring interleaved : tensor<1x2xf32>
// CHECK-NEXT:      mesh.yield %s : tensor<1x2xf32>
// CHECK-NEXT:    }
// CHECK-NEXT:    %r = mesh.gather %e : !mesh.dist<tensor<1x6xf32>, #mesh.layout<[-, y]>> -> tensor<1x6xf32>
// CHECK-NEXT:    mesh.return %r : tensor<1x6xf32>
// CHECK-NEXT:  }

// CHECK-GENERIC:       "mesh.program"() <{sym_name = "one", function_type = (tensor<1x6xf32>) -> tensor<1x6xf32>, device = #mesh.device<"wse2:colors=6,reserved_colors=2">, grid = array<i64: 3, 1>}> ({
// CHECK-GENERIC:         %e = "mesh.spmd"(%d) ({
// CHECK-GENERIC:         }) : (!mesh.dist<tensor<1x6xf32>, #mesh.layout<[-, y]>>) -> !mesh.dist<tensor<1x6xf32>, #mesh.layout<[-, y]>>

mesh.program @one(%a: tensor<1x6xf32>) -> tensor<1x6xf32> device "wse2:colors=6,reserved_colors=2" grid [3, 1] {
  %d = mesh.scatter %a : tensor<1x6xf32> -> !mesh.dist<tensor<1x6xf32>, #mesh.layout<[-, y]>>
  %e = mesh.spmd(%d) : (!mesh.dist<tensor<1x6xf32>, #mesh.layout<[-, y]>>) -> !mesh.dist<tensor<1x6xf32>, #mesh.layout<[-, y]>> {
  ^bb0(%y: index, %x: index, %b: tensor<1x2xf32>):
    %s = mesh.shift %b axis x ring interleaved : tensor<1x2xf32>
    mesh.yield %s : tensor<1x2xf32>
  }
  %r = mesh.gather %e : !mesh.dist<tensor<1x6xf32>, #mesh.layout<[-, y]>> -> tensor<1x6xf32>
  mesh.return %r : tensor<1x6xf32>
}

// -----

// Layouts of every kind as types: replicated, skewed along x and y on both rings, the
// interleaved mode on rank 3, rank 0, and the explicit `blocked` mode (the default, not
// printed); spacing is normalised.

// CHECK:       func.func @layouts(%a: !mesh.dist<tensor<8x8xf32>, #mesh.layout<[-, -]>>, %b: !mesh.dist<tensor<8x8xf32>, #mesh.layout<[y, x], skew x torus>>, %c: !mesh.dist<tensor<8x8xf32>, #mesh.layout<[y, x], skew y interleaved>>, %d: !mesh.dist<tensor<2x8x8xbf16>, #mesh.layout<[y, -, x], interleaved>>, %e: !mesh.dist<tensor<f32>, #mesh.layout<[]>>, %f: !mesh.dist<tensor<8x8xi32>, #mesh.layout<[x, -]>>, %g: !mesh.dist<tensor<8x8xf32>, #mesh.layout<[x, y], skew y torus>>, %h: !mesh.dist<tensor<8x8xf32>, #mesh.layout<[-, x], skew x interleaved>>) {
// CHECK-GENERIC:       "func.func"() <{sym_name = "layouts", function_type = (!mesh.dist<tensor<8x8xf32>, #mesh.layout<[-, -]>>, !mesh.dist<tensor<8x8xf32>, #mesh.layout<[y, x], skew x torus>>, !mesh.dist<tensor<8x8xf32>, #mesh.layout<[y, x], skew y interleaved>>, !mesh.dist<tensor<2x8x8xbf16>, #mesh.layout<[y, -, x], interleaved>>, !mesh.dist<tensor<f32>, #mesh.layout<[]>>, !mesh.dist<tensor<8x8xi32>, #mesh.layout<[x, -]>>, !mesh.dist<tensor<8x8xf32>, #mesh.layout<[x, y], skew y torus>>, !mesh.dist<tensor<8x8xf32>, #mesh.layout<[-, x], skew x interleaved>>) -> ()}> ({

func.func @layouts(%a: !mesh.dist<tensor<8x8xf32>, #mesh.layout<[-, -]>>, %b: !mesh.dist<tensor<8x8xf32>, #mesh.layout<[y, x], skew x torus>>, %c: !mesh.dist<tensor<8x8xf32>, #mesh.layout<[y,x],skew y interleaved>>, %d: !mesh.dist<tensor<2x8x8xbf16>, #mesh.layout<[y, -, x], interleaved>>, %e: !mesh.dist<tensor<f32>, #mesh.layout<[]>>, %f: !mesh.dist<tensor<8x8xi32>, #mesh.layout<[x, -], blocked>>, %g: !mesh.dist<tensor<8x8xf32>, #mesh.layout<[x, y], blocked, skew y torus>>, %h: !mesh.dist<tensor<8x8xf32>, #mesh.layout<[-, x], skew x interleaved>>) {
  func.return
}
