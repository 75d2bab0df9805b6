// RUN: XDSL_ROUNDTRIP
// RUN: XDSL_GENERIC_ROUNDTRIP

// A chunked skew (Cannon on a non-square grid): K is cut into lcm(2, 3) = 6 chunks.

// CHECK:      mesh.scatter %a : tensor<4x12xf32> -> !mesh.dist<tensor<4x12xf32>, #mesh.layout<[y, x], skew x interleaved chunks 6>>
// CHECK-NEXT: mesh.scatter %b : tensor<12x6xf32> -> !mesh.dist<tensor<12x6xf32>, #mesh.layout<[y, x], skew y torus chunks 6>>
// CHECK-GENERIC: #mesh.layout<[y, x], skew x interleaved chunks 6>

mesh.program @chunks(%a: tensor<4x12xf32>, %b: tensor<12x6xf32>) -> tensor<4x12xf32> device "test-small" grid [2, 3] {
  %da = mesh.scatter %a : tensor<4x12xf32> -> !mesh.dist<tensor<4x12xf32>, #mesh.layout<[y, x], skew x interleaved chunks 6>>
  %db = mesh.scatter %b : tensor<12x6xf32> -> !mesh.dist<tensor<12x6xf32>, #mesh.layout<[y, x], skew y torus chunks 6>>
  %r = mesh.gather %da : !mesh.dist<tensor<4x12xf32>, #mesh.layout<[y, x], skew x interleaved chunks 6>> -> tensor<4x12xf32>
  mesh.return %r : tensor<4x12xf32>
}
