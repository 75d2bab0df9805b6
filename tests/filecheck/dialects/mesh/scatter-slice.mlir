// RUN: XDSL_ROUNDTRIP
// RUN: XDSL_GENERIC_ROUNDTRIP

// A slice of a host tensor placed on the grid: one head's weights of a weight over heads.

// CHECK:      %h = mesh.scatter %w offsets [2, 0, 0] : tensor<4x8x4xf32> -> !mesh.dist<tensor<1x8x4xf32>, #mesh.layout<[-, y, x]>>
// CHECK-GENERIC: offsets = array<i64: 2, 0, 0>

mesh.program @slice(%w: tensor<4x8x4xf32>) -> tensor<1x8x4xf32> device "test-small" grid [2, 2] {
  %h = mesh.scatter %w offsets [2, 0, 0] : tensor<4x8x4xf32> -> !mesh.dist<tensor<1x8x4xf32>, #mesh.layout<[-, y, x]>>
  %g = mesh.gather %h : !mesh.dist<tensor<1x8x4xf32>, #mesh.layout<[-, y, x]>> -> tensor<1x8x4xf32>
  mesh.return %g : tensor<1x8x4xf32>
}
