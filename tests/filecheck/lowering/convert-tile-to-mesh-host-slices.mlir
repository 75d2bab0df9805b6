// RUN: plmr-opt %s -p 'convert-tile-to-mesh{grid=2,2}' | filecheck %s

// One head's weights at a time (after loop-split-heads): each nest loads the weights
// over heads at a constant head index, so it is given that head's slice, placed on its
// own (mesh.scatter ... offsets) — its PEs hold one head's blocks, not both heads'.

// CHECK:      %wq_1 = mesh.scatter %wq offsets [0, 0, 0] : tensor<2x16x4xf32> -> !mesh.dist<tensor<1x16x4xf32>, #mesh.layout<[-, y, -]>>
// CHECK-NEXT: %q_h0 = mesh.spmd(%a_1, %wq_1)
// CHECK:        %[[Z0:.*]] = arith.constant 0 : index
// CHECK-NEXT:   tile.load %{{.*}}[%[[Z0]], %{{.*}}, %{{.*}}] : tensor<1x8x4xf32> -> tensor<1x4x4xf32>
// CHECK:      %wq_2 = mesh.scatter %wq offsets [1, 0, 0] : tensor<2x16x4xf32> -> !mesh.dist<tensor<1x16x4xf32>, #mesh.layout<[-, y, -]>>
// CHECK-NEXT: %r = mesh.spmd(%a_1, %wq_2, %q_h0)
// CHECK:        %[[Z1:.*]] = arith.constant 0 : index
// CHECK-NEXT:   tile.load %{{.*}}[%[[Z1]], %{{.*}}, %{{.*}}] : tensor<1x8x4xf32> -> tensor<1x4x4xf32>
// CHECK-NOT:  mesh.scatter %wq :

builtin.module {
  func.func @head(%a: tensor<8x16xf32>, %wq: tensor<2x16x4xf32>) -> tensor<8x4xf32> {
    %0 = tensor.empty() : tensor<8x4xf32>
    %q_h0 = tile.for %i1 = 0 to 8 step 4 iter_args(%1 = %0) -> (tensor<8x4xf32>) parallel {
      %2 = tile.for %i2 = 0 to 4 step 4 iter_args(%3 = %1) -> (tensor<8x4xf32>) parallel {
        %4 = tile.fill 0.000000e+00 : tensor<4x4xf32>
        %5 = tile.for %i3 = 0 to 16 step 4 iter_args(%6 = %4) -> (tensor<4x4xf32>) reduction {
          %7 = tile.load %a[%i1, %i3] : tensor<8x16xf32> -> tensor<4x4xf32>
          %8 = arith.constant 0 : index
          %9 = tile.load %wq[%8, %i3, %i2] : tensor<2x16x4xf32> -> tensor<1x4x4xf32>
          %10 = tile.reshape %9 : tensor<1x4x4xf32> -> tensor<4x4xf32>
          %11 = tile.dot %7, %10 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
          %12 = tile.map add %6, %11 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
          tile.yield %12 : tensor<4x4xf32>
        }
        %13 = tile.store %5, %3[%i1, %i2] : tensor<4x4xf32> -> tensor<8x4xf32>
        tile.yield %13 : tensor<8x4xf32>
      }
      tile.yield %2 : tensor<8x4xf32>
    }
    %14 = tensor.empty() : tensor<8x4xf32>
    %r = tile.for %i1_1 = 0 to 8 step 4 iter_args(%15 = %14) -> (tensor<8x4xf32>) parallel {
      %16 = tile.for %i2_1 = 0 to 4 step 4 iter_args(%17 = %15) -> (tensor<8x4xf32>) parallel {
        %18 = tile.fill 0.000000e+00 : tensor<4x4xf32>
        %19 = tile.for %i3_1 = 0 to 16 step 4 iter_args(%20 = %18) -> (tensor<4x4xf32>) reduction {
          %21 = tile.load %a[%i1_1, %i3_1] : tensor<8x16xf32> -> tensor<4x4xf32>
          %22 = arith.constant 1 : index
          %23 = tile.load %wq[%22, %i3_1, %i2_1] : tensor<2x16x4xf32> -> tensor<1x4x4xf32>
          %24 = tile.reshape %23 : tensor<1x4x4xf32> -> tensor<4x4xf32>
          %25 = tile.dot %21, %24 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
          %26 = tile.map add %20, %25 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
          tile.yield %26 : tensor<4x4xf32>
        }
        %27 = tile.fill 0.000000e+00 : tensor<f32>
        %28 = tile.load %q_h0[%i1_1, %i2_1] : tensor<8x4xf32> -> tensor<4x4xf32>
        %29 = tile.reshape %27 : tensor<f32> -> tensor<1x1xf32>
        %30 = tile.map add %29, %28 : (tensor<1x1xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
        %31 = tile.map add %30, %19 : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
        %32 = tile.store %31, %17[%i1_1, %i2_1] : tensor<4x4xf32> -> tensor<8x4xf32>
        tile.yield %32 : tensor<8x4xf32>
      }
      tile.yield %16 : tensor<8x4xf32>
    }
    func.return %r : tensor<8x4xf32>
  }
}

