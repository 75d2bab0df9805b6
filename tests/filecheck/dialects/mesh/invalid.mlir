// RUN: plmr-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | filecheck %s

// This is XDSL_VERIFY_DIAG plus --parsing-diagnostics: attribute and type verifiers run
// while parsing, and the last chunks are parse errors, which plain --verify-diagnostics
// reports as a failure (exit status 1) instead of printing them. There is one chunk per
// `raise VerifyException` of the mesh dialect (dialects/mesh/) that IR can reach (several for the ones whose message
// varies); generic syntax is used where the custom syntax cannot express the bad IR. Each
// expected message must directly follow the separator of its chunk's output, so that a
// chunk which unexpectedly verifies cannot borrow the diagnostic of a later chunk.
//
// Two raises cannot be reached from IR and have no chunk: `_dist` ("... must be a
// !mesh.dist") — every operand and result it is called on is already constrained to
// `!mesh.dist` by its definition, which is checked first — and "mesh.spmd must be inside
// a mesh.program", which the HasParent(mesh.program) trait reports first (the last chunk
// before the parse errors shows that message).

// #mesh.layout: entries are x, y or -, each mesh axis used once.
func.func @f(%a: !mesh.dist<tensor<8x8xf32>, #mesh.layout<[y, z]>>) {
  func.return
}
// CHECK:      layout entries must be x, y or -, got 'z'

// -----

func.func @f(%a: !mesh.dist<tensor<8x8xf32>, #mesh.layout<[x, x]>>) {
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: layout uses mesh axis x twice

// -----

"test.op"() {l = #mesh.layout<[y, x], cyclic>} : () -> ()
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: layout mode must be blocked or interleaved, got 'cyclic'

// -----

// skew: along x or y, of a dim split over that axis, blocked, on a torus or interleaved ring.
"test.op"() {l = #mesh.layout<[y, x], skew z torus>} : () -> ()
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: skew must be x or y, got 'z'

// -----

"test.op"() {l = #mesh.layout<[y, -], skew x torus>} : () -> ()
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: skew x needs a dim split over x

// -----

"test.op"() {l = #mesh.layout<[y, x], interleaved, skew y interleaved>} : () -> ()
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: skewed layouts must be blocked

// -----

"test.op"() {l = #mesh.layout<[y, x], skew x linear>} : () -> ()
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: skew ring must be torus or interleaved, got 'linear'

// -----

// !mesh.dist: one layout entry per tensor dimension (and a static shape).
func.func @f(%a: !mesh.dist<tensor<64xf32>, #mesh.layout<[y, x]>>) {
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: layout ['y', 'x'] has 2 entries but the tensor has rank 1

// -----

func.func @f(%a: !mesh.dist<tensor<?x8xf32>, #mesh.layout<[y, x]>>) {
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: distributed tensor must have a static shape, got tensor<?x8xf32> (plmr needs static shapes)

// -----

// mesh.program: a positive 2-D grid, block arguments matching the inputs, and a
// mesh.return of the result types.
mesh.program @p() -> () device "wse2" grid [0, 4] {
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: grid must be [rows, cols] > 0, got [0, 4]

// -----

mesh.program @p() -> () device "wse2" grid [2, 2, 2] {
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: grid must be [rows, cols] > 0, got [2, 2, 2]

// -----

"mesh.program"() <{sym_name = "p", function_type = (tensor<4xf32>) -> (), device = #mesh.device<"wse2">, grid = array<i64: 2, 2>}> ({
^bb0(%a: tensor<8xf32>):
  "mesh.return"() : () -> ()
}) : () -> ()
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: block arguments must match the program's input types

// -----

"mesh.program"() <{sym_name = "p", function_type = () -> (), device = #mesh.device<"wse2">, grid = array<i64: 2, 2>}> ({
^bb0:
  "cf.br"() [^bb0] : () -> ()
}) : () -> ()
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: mesh.program must end with mesh.return

// -----

mesh.program @p(%a: tensor<4xf32>) -> tensor<4xf16> device "wse2" grid [2, 2] {
  mesh.return %a : tensor<4xf32>
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: mesh.return types ['tensor<4xf32>'] must match the program's result types ['tensor<4xf16>']

// -----

// mesh.scatter / mesh.gather: the distributed tensor is the host tensor.
mesh.program @p(%a: tensor<8x8xf32>) -> () device "wse2" grid [2, 2] {
  %d = mesh.scatter %a : tensor<8x8xf32> -> !mesh.dist<tensor<8x4xf32>, #mesh.layout<[y, x]>>
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: scatter result distributes tensor<8x4xf32>, but the input is tensor<8x8xf32>

// -----

mesh.program @p(%a: tensor<8x8xf32>) -> tensor<8x8xf16> device "wse2" grid [2, 2] {
  %d = mesh.scatter %a : tensor<8x8xf32> -> !mesh.dist<tensor<8x8xf32>, #mesh.layout<[y, x]>>
  %r = mesh.gather %d : !mesh.dist<tensor<8x8xf32>, #mesh.layout<[y, x]>> -> tensor<8x8xf16>
  mesh.return %r : tensor<8x8xf16>
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: gather of tensor<8x8xf32> cannot produce tensor<8x8xf16>

// -----

// mesh.spmd: arguments (y, x) then one block per input, of the layout's block shape on the
// program's grid; a mesh.yield of one block per result, of the result's block shape.
mesh.program @p(%a: tensor<8x8xf32>) -> () device "wse2" grid [2, 4] {
  %d = mesh.scatter %a : tensor<8x8xf32> -> !mesh.dist<tensor<8x8xf32>, #mesh.layout<[y, x]>>
  mesh.spmd(%d) : (!mesh.dist<tensor<8x8xf32>, #mesh.layout<[y, x]>>) -> () {
  ^bb0(%y: index, %x: index):
    mesh.yield
  }
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: the body takes the coordinates (y, x) and one block per input: expected 3 arguments, got 2

// -----

mesh.program @p() -> () device "wse2" grid [2, 4] {
  mesh.spmd() : () -> () {
  ^bb0(%y: index, %x: i64):
    mesh.yield
  }
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: the body's first two arguments (y, x) must be index

// -----

mesh.program @p(%a: tensor<8x8xf32>) -> () device "wse2" grid [2, 4] {
  %d = mesh.scatter %a : tensor<8x8xf32> -> !mesh.dist<tensor<8x8xf32>, #mesh.layout<[y, x]>>
  mesh.spmd(%d) : (!mesh.dist<tensor<8x8xf32>, #mesh.layout<[y, x]>>) -> () {
  ^bb0(%y: index, %x: index, %b: tensor<4x4xf32>):
    mesh.yield
  }
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: block argument 0 has type tensor<4x4xf32>, but input 0 (tensor<8x8xf32> under #mesh.layout<[y, x]> on a 2x4 grid) gives each PE a tensor<4x2xf32>

// -----

"mesh.program"() <{sym_name = "p", function_type = () -> (), device = #mesh.device<"wse2">, grid = array<i64: 2, 2>}> ({
  "mesh.spmd"() ({
  ^bb0(%y: index, %x: index):
    "cf.br"() [^bb0] : () -> ()
  }) : () -> ()
  "mesh.return"() : () -> ()
}) : () -> ()
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: mesh.spmd body must end with mesh.yield

// -----

mesh.program @p() -> () device "wse2" grid [2, 2] {
  %e = mesh.spmd() : () -> !mesh.dist<tensor<4xf32>, #mesh.layout<[x]>> {
  ^bb0(%y: index, %x: index):
    mesh.yield
  }
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: mesh.yield gives 0 blocks for 1 results

// -----

mesh.program @p(%a: tensor<8xf32>) -> () device "wse2" grid [2, 2] {
  %d = mesh.scatter %a : tensor<8xf32> -> !mesh.dist<tensor<8xf32>, #mesh.layout<[-]>>
  %e = mesh.spmd(%d) : (!mesh.dist<tensor<8xf32>, #mesh.layout<[-]>>) -> !mesh.dist<tensor<8xf32>, #mesh.layout<[y]>> {
  ^bb0(%y: index, %x: index, %b: tensor<8xf32>):
    mesh.yield %b : tensor<8xf32>
  }
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: yielded block 0 has type tensor<8xf32>, but result 0 (tensor<8xf32> under #mesh.layout<[y]>) needs tensor<4xf32> per PE

// -----

// mesh.shift: a non-zero distance; an interleaved ring of 1 or at least 3 PEs.
mesh.program @p(%a: tensor<8xf32>) -> () device "wse2" grid [2, 2] {
  %d = mesh.scatter %a : tensor<8xf32> -> !mesh.dist<tensor<8xf32>, #mesh.layout<[-]>>
  mesh.spmd(%d) : (!mesh.dist<tensor<8xf32>, #mesh.layout<[-]>>) -> () {
  ^bb0(%y: index, %x: index, %b: tensor<8xf32>):
    %s = mesh.shift %b axis x ring torus distance 0 : tensor<8xf32>
    mesh.yield
  }
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: shift distance must not be 0 (negative runs the ring backwards)

// -----

mesh.program @p(%a: tensor<8xf32>) -> () device "wse2" grid [2, 5] {
  %d = mesh.scatter %a : tensor<8xf32> -> !mesh.dist<tensor<8xf32>, #mesh.layout<[-]>>
  mesh.spmd(%d) : (!mesh.dist<tensor<8xf32>, #mesh.layout<[-]>>) -> () {
  ^bb0(%y: index, %x: index, %b: tensor<8xf32>):
    %s = mesh.shift %b axis y ring interleaved : tensor<8xf32>
    mesh.yield
  }
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: an interleaved ring needs at least 3 PEs along y, got 2 (use ring torus for 2)

// -----

// mesh.allreduce / mesh.reduce: k >= 1; groups between 1 and the PEs of the axis, for
// ktree only.
mesh.program @p(%a: tensor<8xf32>) -> () device "wse2" grid [2, 5] {
  %d = mesh.scatter %a : tensor<8xf32> -> !mesh.dist<tensor<8xf32>, #mesh.layout<[-]>>
  mesh.spmd(%d) : (!mesh.dist<tensor<8xf32>, #mesh.layout<[-]>>) -> () {
  ^bb0(%y: index, %x: index, %b: tensor<8xf32>):
    %s = mesh.allreduce sum %b axis x k = 0 : tensor<8xf32>
    mesh.yield
  }
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: k must be >= 1, got 0

// -----

mesh.program @p(%a: tensor<8xf32>) -> () device "wse2" grid [2, 5] {
  %d = mesh.scatter %a : tensor<8xf32> -> !mesh.dist<tensor<8xf32>, #mesh.layout<[-]>>
  mesh.spmd(%d) : (!mesh.dist<tensor<8xf32>, #mesh.layout<[-]>>) -> () {
  ^bb0(%y: index, %x: index, %b: tensor<8xf32>):
    %s = mesh.allreduce sum %b axis x groups = 6 : tensor<8xf32>
    mesh.yield
  }
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: groups must be between 1 and the 5 PEs along x, got 6

// -----

mesh.program @p(%a: tensor<8xf32>) -> () device "wse2" grid [2, 5] {
  %d = mesh.scatter %a : tensor<8xf32> -> !mesh.dist<tensor<8xf32>, #mesh.layout<[-]>>
  mesh.spmd(%d) : (!mesh.dist<tensor<8xf32>, #mesh.layout<[-]>>) -> () {
  ^bb0(%y: index, %x: index, %b: tensor<8xf32>):
    %s = mesh.reduce max %b axis y root %y groups = 0 : tensor<8xf32>
    mesh.yield
  }
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: groups must be between 1 and the 2 PEs along y, got 0

// -----

mesh.program @p(%a: tensor<8xf32>) -> () device "wse2" grid [2, 5] {
  %d = mesh.scatter %a : tensor<8xf32> -> !mesh.dist<tensor<8xf32>, #mesh.layout<[-]>>
  mesh.spmd(%d) : (!mesh.dist<tensor<8xf32>, #mesh.layout<[-]>>) -> () {
  ^bb0(%y: index, %x: index, %b: tensor<8xf32>):
    %s = mesh.allreduce min %b axis x algorithm ring groups = 2 : tensor<8xf32>
    mesh.yield
  }
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: groups only apply to the ktree algorithm

// -----

// mesh.allgather: the result is the input times the contributing PEs along `dim`
// (at most the axis), same element type; ktree or pipeline; k and groups as an
// allreduce's.
mesh.program @p(%a: tensor<8x10xf32>) -> () device "wse2" grid [2, 5] {
  %d = mesh.scatter %a : tensor<8x10xf32> -> !mesh.dist<tensor<8x10xf32>, #mesh.layout<[-, x]>>
  mesh.spmd(%d) : (!mesh.dist<tensor<8x10xf32>, #mesh.layout<[-, x]>>) -> () {
  ^bb0(%y: index, %x: index, %b: tensor<8x2xf32>):
    %s = mesh.allgather %b axis x dim 1 : tensor<8x2xf32> -> tensor<8x10xf16>
    mesh.yield
  }
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: the result's element type f16 must be the input's, f32

// -----

mesh.program @p(%a: tensor<8x10xf32>) -> () device "wse2" grid [2, 5] {
  %d = mesh.scatter %a : tensor<8x10xf32> -> !mesh.dist<tensor<8x10xf32>, #mesh.layout<[-, x]>>
  mesh.spmd(%d) : (!mesh.dist<tensor<8x10xf32>, #mesh.layout<[-, x]>>) -> () {
  ^bb0(%y: index, %x: index, %b: tensor<8x2xf32>):
    %s = mesh.allgather %b axis x dim 2 : tensor<8x2xf32> -> tensor<8x10xf32>
    mesh.yield
  }
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: dim 2 must be a dimension of the input (rank 2) and the result must have the same rank, got 2

// -----

mesh.program @p(%a: tensor<8x10xf32>) -> () device "wse2" grid [2, 5] {
  %d = mesh.scatter %a : tensor<8x10xf32> -> !mesh.dist<tensor<8x10xf32>, #mesh.layout<[-, x]>>
  mesh.spmd(%d) : (!mesh.dist<tensor<8x10xf32>, #mesh.layout<[-, x]>>) -> () {
  ^bb0(%y: index, %x: index, %b: tensor<8x2xf32>):
    %s = mesh.allgather %b axis x dim 1 : tensor<8x2xf32> -> tensor<4x10xf32>
    mesh.yield
  }
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: input [8, 2] and result [4, 10] may differ only along dim 1

// -----

mesh.program @p(%a: tensor<8x10xf32>) -> () device "wse2" grid [2, 5] {
  %d = mesh.scatter %a : tensor<8x10xf32> -> !mesh.dist<tensor<8x10xf32>, #mesh.layout<[-, x]>>
  mesh.spmd(%d) : (!mesh.dist<tensor<8x10xf32>, #mesh.layout<[-, x]>>) -> () {
  ^bb0(%y: index, %x: index, %b: tensor<8x2xf32>):
    %s = mesh.allgather %b axis x dim 1 : tensor<8x2xf32> -> tensor<8x12xf32>
    mesh.yield
  }
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: the result's dim 1 (12) must be the input's (2) times the PEs contributing, between 1 and the 5 PEs along x

// -----

mesh.program @p(%a: tensor<8x10xf32>) -> () device "wse2" grid [2, 5] {
  %d = mesh.scatter %a : tensor<8x10xf32> -> !mesh.dist<tensor<8x10xf32>, #mesh.layout<[-, x]>>
  mesh.spmd(%d) : (!mesh.dist<tensor<8x10xf32>, #mesh.layout<[-, x]>>) -> () {
  ^bb0(%y: index, %x: index, %b: tensor<8x2xf32>):
    %s = mesh.allgather %b axis x dim 1 algorithm ring : tensor<8x2xf32> -> tensor<8x10xf32>
    mesh.yield
  }
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: an allgather runs ktree or pipeline, not ring

// -----

mesh.program @p(%a: tensor<8x10xf32>) -> () device "wse2" grid [2, 5] {
  %d = mesh.scatter %a : tensor<8x10xf32> -> !mesh.dist<tensor<8x10xf32>, #mesh.layout<[-, x]>>
  mesh.spmd(%d) : (!mesh.dist<tensor<8x10xf32>, #mesh.layout<[-, x]>>) -> () {
  ^bb0(%y: index, %x: index, %b: tensor<8x2xf32>):
    %s = mesh.allgather %b axis x dim 1 k = 0 : tensor<8x2xf32> -> tensor<8x10xf32>
    mesh.yield
  }
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: k must be >= 1, got 0

// -----

mesh.program @p(%a: tensor<8x10xf32>) -> () device "wse2" grid [2, 5] {
  %d = mesh.scatter %a : tensor<8x10xf32> -> !mesh.dist<tensor<8x10xf32>, #mesh.layout<[-, x]>>
  mesh.spmd(%d) : (!mesh.dist<tensor<8x10xf32>, #mesh.layout<[-, x]>>) -> () {
  ^bb0(%y: index, %x: index, %b: tensor<8x2xf32>):
    %s = mesh.allgather %b axis x dim 1 groups = 6 : tensor<8x2xf32> -> tensor<8x10xf32>
    mesh.yield
  }
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: groups must be between 1 and the 5 PEs along x, got 6

// -----

mesh.program @p(%a: tensor<8x10xf32>) -> () device "wse2" grid [2, 5] {
  %d = mesh.scatter %a : tensor<8x10xf32> -> !mesh.dist<tensor<8x10xf32>, #mesh.layout<[-, x]>>
  mesh.spmd(%d) : (!mesh.dist<tensor<8x10xf32>, #mesh.layout<[-, x]>>) -> () {
  ^bb0(%y: index, %x: index, %b: tensor<8x2xf32>):
    %s = mesh.allgather %b axis x dim 1 algorithm pipeline groups = 2 : tensor<8x2xf32> -> tensor<8x10xf32>
    mesh.yield
  }
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: groups only apply to the ktree algorithm

// -----

mesh.program @p(%a: tensor<8x10xf32>) -> () device "wse2" grid [2, 5] {
  %d = mesh.scatter %a : tensor<8x10xf32> -> !mesh.dist<tensor<8x10xf32>, #mesh.layout<[-, x]>>
  mesh.spmd(%d) : (!mesh.dist<tensor<8x10xf32>, #mesh.layout<[-, x]>>) -> () {
  ^bb0(%y: index, %x: index, %b: tensor<8x2xf32>):
    %s = mesh.allgather %b axis x dim 1 k = 1 groups = 2 : tensor<8x2xf32> -> tensor<8x10xf32>
    mesh.yield
  }
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: groups = 2 needs k >= 2 (with k = 1 there is a single group)

// -----

// mesh.diagonal_broadcast: a square grid (each line's root is its coordinate on the
// other axis).
mesh.program @p(%a: tensor<8xf32>) -> () device "wse2" grid [2, 5] {
  %d = mesh.scatter %a : tensor<8xf32> -> !mesh.dist<tensor<8xf32>, #mesh.layout<[-]>>
  mesh.spmd(%d) : (!mesh.dist<tensor<8xf32>, #mesh.layout<[-]>>) -> () {
  ^bb0(%y: index, %x: index, %b: tensor<8xf32>):
    %s = mesh.diagonal_broadcast %b axis x : tensor<8xf32>
    mesh.yield
  }
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: a diagonal broadcast needs a square grid (each line's root is its coordinate on the other axis), got 2x5

// -----

// mesh.send / mesh.recv: colors are >= 0.
mesh.program @p(%a: tensor<8xf32>) -> () device "wse2" grid [2, 2] {
  %d = mesh.scatter %a : tensor<8xf32> -> !mesh.dist<tensor<8xf32>, #mesh.layout<[-]>>
  mesh.spmd(%d) : (!mesh.dist<tensor<8xf32>, #mesh.layout<[-]>>) -> () {
  ^bb0(%y: index, %x: index, %b: tensor<8xf32>):
    mesh.send %b color -1 : tensor<8xf32>
    mesh.yield
  }
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: color must be >= 0, got -1

// -----

mesh.program @p() -> () device "wse2" grid [2, 2] {
  mesh.spmd() : () -> () {
  ^bb0(%y: index, %x: index):
    %r = mesh.recv color -2 : tensor<8xf32>
    mesh.yield
  }
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: color must be >= 0, got -2

// -----

// mesh.route: [start, stop, step] spans inside the grid, known and distinct output ports,
// never back out of the input port (except ramp to ramp).
mesh.program @p() -> () device "wse2" grid [4, 4] {
  mesh.route color 0 rows [0, 4, 0] cols [0, 4, 1] from ramp to ["east"]
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: rows must be [start, stop, step] with 0 <= start <= stop and step > 0, got [0, 4, 0]

// -----

mesh.program @p() -> () device "wse2" grid [4, 4] {
  mesh.route color 0 rows [0, 4, 1] cols [3, 2, 1] from ramp to ["east"]
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: cols must be [start, stop, step] with 0 <= start <= stop and step > 0, got [3, 2, 1]

// -----

mesh.program @p() -> () device "wse2" grid [4, 4] {
  mesh.route color 0 rows [-1, 4, 1] cols [0, 4, 1] from ramp to ["east"]
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: rows must be [start, stop, step] with 0 <= start <= stop and step > 0, got [-1, 4, 1]

// -----

mesh.program @p() -> () device "wse2" grid [4, 4] {
  mesh.route color 0 rows [0, 4, 1] cols [0, 4, 1] from ramp to ["east", "up"]
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: unknown port 'up' (ports: ramp, north, south, east, west)

// -----

mesh.program @p() -> () device "wse2" grid [4, 4] {
  mesh.route color 0 rows [0, 4, 1] cols [0, 4, 1] from ramp to []
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: a route needs at least one output port

// -----

mesh.program @p() -> () device "wse2" grid [4, 4] {
  mesh.route color 0 rows [0, 4, 1] cols [0, 4, 1] from west to ["east", "ramp", "east"]
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: output ports ['east', 'ramp', 'east'] repeat a port

// -----

mesh.program @p() -> () device "wse2" grid [4, 4] {
  mesh.route color 0 rows [0, 4, 1] cols [0, 4, 1] from north to ["ramp", "north"]
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: a route cannot send north back where it came from

// -----

mesh.program @p() -> () device "wse2" grid [4, 4] {
  mesh.route color 0 rows [0, 4, 1] cols [2, 5, 1] from ramp to ["east"]
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: route covers rows [0, 4, 1] cols [2, 5, 1] outside the 4x4 grid

// -----

// Communication needs an enclosing mesh.program (for its grid), not just a mesh.spmd.
func.func @g(%t: tensor<4xf32>) {
  "mesh.spmd"() ({
  ^bb0(%y: index, %x: index):
    "mesh.send"(%t) <{color = 1 : i64}> : (tensor<4xf32>) -> ()
    "mesh.yield"() : () -> ()
  }) : () -> ()
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: 'mesh.send' must be inside a mesh.program

// -----

// ... which the HasParent trait of mesh.spmd reports before mesh.spmd's own verifier.
func.func @g() {
  "mesh.spmd"() ({
  ^bb0(%y: index, %x: index):
    "mesh.yield"() : () -> ()
  }) : () -> ()
  func.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: 'mesh.spmd' expects parent op 'mesh.program'

// -----

// Parse errors: unknown enum values.
mesh.program @p(%a: tensor<8xf32>) -> () device "wse2" grid [2, 2] {
  %d = mesh.scatter %a : tensor<8xf32> -> !mesh.dist<tensor<8xf32>, #mesh.layout<[-]>>
  mesh.spmd(%d) : (!mesh.dist<tensor<8xf32>, #mesh.layout<[-]>>) -> () {
  ^bb0(%y: index, %x: index, %b: tensor<8xf32>):
    %s = mesh.shift %b axis x ring mobius : tensor<8xf32>
    mesh.yield
  }
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: {{.*}}invalid.mlir:{{[0-9]+}}:{{[0-9]+}}
// CHECK-NEXT: ring mobius
// CHECK-NEXT: {{\^+$}}
// CHECK-NEXT: Expected `linear`, `torus`, or `interleaved`.

// -----

mesh.program @p(%a: tensor<8xf32>) -> () device "wse2" grid [2, 2] {
  %d = mesh.scatter %a : tensor<8xf32> -> !mesh.dist<tensor<8xf32>, #mesh.layout<[-]>>
  mesh.spmd(%d) : (!mesh.dist<tensor<8xf32>, #mesh.layout<[-]>>) -> () {
  ^bb0(%y: index, %x: index, %b: tensor<8xf32>):
    %s = mesh.broadcast %b axis z root %x : tensor<8xf32>
    mesh.yield
  }
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: {{.*}}invalid.mlir:{{[0-9]+}}:{{[0-9]+}}
// CHECK-NEXT: axis z root
// CHECK-NEXT: {{\^+$}}
// CHECK-NEXT: Expected `x`, or `y`.

// -----

mesh.program @p(%a: tensor<8xf32>) -> () device "wse2" grid [2, 2] {
  %d = mesh.scatter %a : tensor<8xf32> -> !mesh.dist<tensor<8xf32>, #mesh.layout<[-]>>
  mesh.spmd(%d) : (!mesh.dist<tensor<8xf32>, #mesh.layout<[-]>>) -> () {
  ^bb0(%y: index, %x: index, %b: tensor<8xf32>):
    %s = mesh.allreduce prod %b axis x : tensor<8xf32>
    mesh.yield
  }
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: {{.*}}invalid.mlir:{{[0-9]+}}:{{[0-9]+}}
// CHECK-NEXT: allreduce prod
// CHECK-NEXT: {{\^+$}}
// CHECK-NEXT: Expected `sum`, `max`, `min`, or `softmax`.

// -----

mesh.program @p(%a: tensor<8xf32>) -> () device "wse2" grid [2, 2] {
  %d = mesh.scatter %a : tensor<8xf32> -> !mesh.dist<tensor<8xf32>, #mesh.layout<[-]>>
  mesh.spmd(%d) : (!mesh.dist<tensor<8xf32>, #mesh.layout<[-]>>) -> () {
  ^bb0(%y: index, %x: index, %b: tensor<8xf32>):
    %s = mesh.allreduce sum %b axis x algorithm tree : tensor<8xf32>
    mesh.yield
  }
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: {{.*}}invalid.mlir:{{[0-9]+}}:{{[0-9]+}}
// CHECK-NEXT: algorithm tree
// CHECK-NEXT: {{\^+$}}
// CHECK-NEXT: Expected `ktree`, `pipeline`, or `ring`.

// -----

mesh.program @p() -> () device "wse2" grid [4, 4] {
  mesh.route color 0 rows [0, 4, 1] cols [0, 4, 1] from up to ["east"]
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: {{.*}}invalid.mlir:{{[0-9]+}}:{{[0-9]+}}
// CHECK-NEXT: from up to
// CHECK-NEXT: {{\^+$}}
// CHECK-NEXT: Expected `ramp`, `north`, `south`, `east`, or `west`.
