// RUN: plmr-opt %s | filecheck %s
// RUN: plmr-opt %s --print-op-generic | xdsl-opt | filecheck %s
// RUN: xdsl-opt %s | xdsl-opt --print-op-generic | plmr-opt | filecheck %s

// Every float attribute reads back as the same bits, through plmr-opt and through
// xdsl-opt (with plmr's universe), in the custom and the generic form: infinities and
// NaN (a payload and a sign included) as bit patterns, -0.0, subnormals, the f32
// extremes, and finite values whose short form is not exact. Hexadecimal literals of a
// float type are bit patterns, in dense lists and splats too.

// CHECK-LABEL: func.func @graph
// CHECK-NEXT:    %s = graph.scale %a by 0x7ff0000000000000 : tensor<4x8xf32>
// CHECK-NEXT:    %p = graph.pow %a by -0.000000e+00 : tensor<4x8xf32>
// CHECK-NEXT:    %l = graph.layernorm %a, %g axis = 1 epsilon = 4.940660e-324 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT:    %d = graph.pad %a pads = [0, 1, 2, 3] mode = constant value = 0xfff0000000000000 : tensor<4x8xf32> -> tensor<6x12xf32>
// CHECK-NEXT:    %c = graph.constant dense<0xff800000> : tensor<4x8xf32>
// CHECK-NEXT:    %e = graph.constant dense<[0xfff0000000000000, 0x7ff8000000000123, -0.000000e+00, 4.940660e-324]> : tensor<4xf64>
// CHECK-NEXT:    %m = graph.constant dense<[0xff800000, -3.4028235e+38, 1.401300e-45, 0xffc00001, 1.2345679e+08, 0.000000e+00]> : tensor<6xf32>
// CHECK-NEXT:    %z = graph.constant dense<[0.000000e+00, -0.000000e+00]> : tensor<2xf32>
// CHECK-NEXT:    %h = arith.constant 0xfc00 : f16
func.func @graph(%a: tensor<4x8xf32>, %g: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<6x12xf32>, tensor<4x8xf32>, tensor<4xf64>, tensor<6xf32>, tensor<2xf32>, f16) {
  %s = graph.scale %a by 0x7FF0000000000000 : tensor<4x8xf32>
  %p = graph.pow %a by -0.0 : tensor<4x8xf32>
  %l = graph.layernorm %a, %g axis = 1 epsilon = 4.9406564584124654e-324 : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %d = graph.pad %a pads = [0, 1, 2, 3] mode = constant value = 0xfff0000000000000 : tensor<4x8xf32> -> tensor<6x12xf32>
  %c = graph.constant dense<0xFF800000> : tensor<4x8xf32>
  %e = graph.constant dense<[0xFFF0000000000000, 0x7FF8000000000123, -0.0, 5.0e-324]> : tensor<4xf64>
  %m = graph.constant dense<[0xFF800000, -3.40282347e+38, 1.0e-45, 0xFFC00001, 123456792.0, 0.0]> : tensor<6xf32>
  %z = graph.constant dense<[0.0, -0.0]> : tensor<2xf32>
  %h = arith.constant 0xFC00 : f16
  func.return %s, %p, %l, %d, %c, %e, %m, %z, %h : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>, tensor<6x12xf32>, tensor<4x8xf32>, tensor<4xf64>, tensor<6xf32>, tensor<2xf32>, f16
}

// CHECK-LABEL: func.func @levels
// CHECK:         %r = loop.read %a[%y, %x] padding 0xfff0000000000000 : tensor<4x8xf32>
// CHECK:         %f = tile.fill 0x7ff8000000000000 : tensor<4x4xf32>
// CHECK-NEXT:    %t = tile.load %a[%i, %i] padding -3.4028234663852886e+38 : tensor<4x8xf32> -> tensor<4x4xf32>
func.func @levels(%a: tensor<4x8xf32>, %i: index) -> (tensor<4x8xf32>, tensor<4x4xf32>, tensor<4x4xf32>) {
  %n = loop.nest (%y, %x) to (4, 8) [parallel, parallel] -> tensor<4x8xf32> {
    %r = loop.read %a[%y, %x] padding 0xFFF0000000000000 : tensor<4x8xf32>
    loop.yield %r : f32
  }
  %f = tile.fill 0x7FF8000000000000 : tensor<4x4xf32>
  %t = tile.load %a[%i, %i] padding -3.4028234663852886e+38 : tensor<4x8xf32> -> tensor<4x4xf32>
  func.return %n, %f, %t : tensor<4x8xf32>, tensor<4x4xf32>, tensor<4x4xf32>
}

// The mesh level: host constants are arith.constant, block padding a scatter's pad.
// CHECK-LABEL: mesh.program @mesh
// CHECK-NEXT:    %mask = arith.constant dense<[[0xff800000, 0.000000e+00], [-0.000000e+00, 0x7fc00000]]> : tensor<2x2xf32>
// CHECK-NEXT:    %d = mesh.scatter %a pad 0xfff0000000000000 : tensor<4x8xf32> -> !mesh.dist<tensor<4x8xf32>, #mesh.layout<[y, x]>>
mesh.program @mesh(%a: tensor<4x8xf32>) -> () device "wse2" grid [2, 2] {
  %mask = arith.constant dense<[[0xFF800000, 0.0], [-0.0, 0x7FC00000]]> : tensor<2x2xf32>
  %d = mesh.scatter %a pad 0xFFF0000000000000 : tensor<4x8xf32> -> !mesh.dist<tensor<4x8xf32>, #mesh.layout<[y, x]>>
  mesh.return
}
