// RUN: plmr-opt %s -p 'convert-tile-to-mesh{grid=1,2}' | filecheck %s

// A padded load at a constant index outside the tensor (the other part of a
// concatenation) reads only padding: no slice of the host tensor is taken for it (a
// slice at offset -2 would reach past the tensor); the load in range is sliced.

// CHECK:      mesh.scatter %x offsets [1, 0] : tensor<4x6xf32> -> !mesh.dist<tensor<1x6xf32>
// CHECK-NOT:  offsets [-2
// CHECK:      mesh.scatter %x : tensor<4x6xf32>
// CHECK:        %[[OUT:.*]] = arith.constant -2 : index
// CHECK-NEXT:   tile.load %{{.*}}[%[[OUT]], %{{.*}}] padding 0.000000e+00 : tensor<{{.*}}xf32> -> tensor<1x2xf32>

builtin.module {
  func.func @main(%x: tensor<4x6xf32>) -> tensor<6xf32> {
    %0 = tensor.empty() : tensor<6xf32>
    %r = tile.for %i = 0 to 6 step 2 iter_args(%1 = %0) -> (tensor<6xf32>) parallel {
      %c1 = arith.constant 1 : index
      %2 = tile.load %x[%c1, %i] : tensor<4x6xf32> -> tensor<1x2xf32>
      %cm2 = arith.constant -2 : index
      %3 = tile.load %x[%cm2, %i] padding 0.000000e+00 : tensor<4x6xf32> -> tensor<1x2xf32>
      %4 = tile.map add %2, %3 : (tensor<1x2xf32>, tensor<1x2xf32>) -> tensor<1x2xf32>
      %5 = tile.reshape %4 : tensor<1x2xf32> -> tensor<2xf32>
      %6 = tile.store %5, %1[%i] : tensor<2xf32> -> tensor<6xf32>
      tile.yield %6 : tensor<6xf32>
    }
    func.return %r : tensor<6xf32>
  }
}
