// RUN: plmr-opt %s -p 'convert-tile-to-mesh{grid=1,2}' | filecheck %s

// Two loads of %x at the same constant offsets but over different dimensions (one
// element; one column) take two slices: the column is not read out of the element.

// CHECK:      mesh.scatter %x offsets [0, 0] : tensor<3x2xf32> -> !mesh.dist<tensor<1x1xf32>
// CHECK:      tile.load %{{.*}}[%[[Z:.*]], %[[Z]]] : tensor<1x1xf32> -> tensor<1x1xf32>
// CHECK:      mesh.scatter %x offsets [0, 0] : tensor<3x2xf32> -> !mesh.dist<tensor<3x1xf32>
// CHECK:      tile.load %{{.*}}[%j, %{{.*}}] : tensor<2x1xf32> -> tensor<1x1xf32>

builtin.module {
  func.func @main(%x: tensor<3x2xf32>) -> (tensor<4xf32>, tensor<3xf32>) {
    %0 = tensor.empty() : tensor<4xf32>
    %a = tile.for %i = 0 to 4 step 1 iter_args(%1 = %0) -> (tensor<4xf32>) parallel {
      %c0 = arith.constant 0 : index
      %2 = tile.load %x[%c0, %c0] : tensor<3x2xf32> -> tensor<1x1xf32>
      %3 = tile.reshape %2 : tensor<1x1xf32> -> tensor<1xf32>
      %4 = tile.store %3, %1[%i] : tensor<1xf32> -> tensor<4xf32>
      tile.yield %4 : tensor<4xf32>
    }
    %5 = tensor.empty() : tensor<3xf32>
    %b = tile.for %j = 0 to 3 step 1 iter_args(%6 = %5) -> (tensor<3xf32>) parallel {
      %c0_1 = arith.constant 0 : index
      %7 = tile.load %x[%j, %c0_1] : tensor<3x2xf32> -> tensor<1x1xf32>
      %8 = tile.reshape %7 : tensor<1x1xf32> -> tensor<1xf32>
      %9 = tile.store %8, %6[%j] : tensor<1xf32> -> tensor<3xf32>
      tile.yield %9 : tensor<3xf32>
    }
    func.return %a, %b : tensor<4xf32>, tensor<3xf32>
  }
}
