// RUN: plmr-opt %s --split-input-file --verify-diagnostics --parsing-diagnostics | filecheck %s

// Banded layouts: the band's axis is x or y and carries one or two dims, the width is at
// least one PE and at most the axis (checked against the program's grid), and the layout
// is blocked and unskewed. Without a band, an axis carries one dim.

mesh.program @p(%a: tensor<2x3x5xf32>) -> () device "wse2" grid [4, 7] {
  %d = mesh.scatter %a : tensor<2x3x5xf32> -> !mesh.dist<tensor<2x3x5xf32>, #mesh.layout<[x, -, x]>>
  mesh.return
}
// CHECK:      layout uses mesh axis x twice (two dims share an axis only in bands: add 'band x <PEs per band>')

// -----

mesh.program @p(%a: tensor<2x3x5xf32>) -> () device "wse2" grid [4, 7] {
  %d = mesh.scatter %a : tensor<2x3x5xf32> -> !mesh.dist<tensor<2x3x5xf32>, #mesh.layout<[x, -, x], band z 3>>
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: band axis must be x or y, got 'z'

// -----

mesh.program @p(%a: tensor<2x3x5xf32>) -> () device "wse2" grid [4, 7] {
  %d = mesh.scatter %a : tensor<2x3x5xf32> -> !mesh.dist<tensor<2x3x5xf32>, #mesh.layout<[y, -, -], band x 3>>
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: band x needs one or two dims split over x, got 0

// -----

mesh.program @p(%a: tensor<2x3x5xf32>) -> () device "wse2" grid [4, 7] {
  %d = mesh.scatter %a : tensor<2x3x5xf32> -> !mesh.dist<tensor<2x3x5xf32>, #mesh.layout<[x, x, x], band x 3>>
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: band x needs one or two dims split over x, got 3

// -----

mesh.program @p(%a: tensor<2x3x5xf32>) -> () device "wse2" grid [4, 7] {
  %d = mesh.scatter %a : tensor<2x3x5xf32> -> !mesh.dist<tensor<2x3x5xf32>, #mesh.layout<[x, -, x], band x 0>>
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: band width must be at least 1 PE, got 0

// -----

mesh.program @p(%a: tensor<2x3x5xf32>) -> () device "wse2" grid [4, 7] {
  %d = mesh.scatter %a : tensor<2x3x5xf32> -> !mesh.dist<tensor<2x3x5xf32>, #mesh.layout<[x, -, x], interleaved, band x 2>>
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: banded layouts must be blocked and unskewed

// -----

mesh.program @p(%a: tensor<2x3x5xf32>) -> () device "wse2" grid [4, 7] {
  %d = mesh.scatter %a : tensor<2x3x5xf32> -> !mesh.dist<tensor<2x3x5xf32>, #mesh.layout<[x, y, x], skew y torus, band x 2>>
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: banded layouts must be blocked and unskewed

// -----

mesh.program @p(%a: tensor<2x3x5xf32>) -> () device "wse2" grid [4, 7] {
  %d = mesh.scatter %a : tensor<2x3x5xf32> -> !mesh.dist<tensor<2x3x5xf32>, #mesh.layout<[x, -, x], band x 9>>
  mesh.return
}
// CHECK:      {{^}}//{{ -----$}}
// CHECK-NEXT: bands of 9 PEs do not fit the 7 PEs along x (band count x band width must be at most the axis size)
