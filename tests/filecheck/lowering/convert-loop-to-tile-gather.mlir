// RUN: plmr-opt %s -p 'convert-graph-to-loop,convert-loop-to-tile{tile-sizes=4,8}' | filecheck %s

// A gather of a computed table by run-time ids (a table argument would be looked up on
// the host), lowered as a one-hot select-and-sum, blocks like a
// reduction: the ids are loaded as a block and normalised once per output block (block
// maps of cmpi/addi/select), the iota and the table are loaded per reduction block, the
// one-hot mask is an outer comparison of the two, the selection a block map and the
// sum a `tile.reduce` over the gathered axis. No nest stays at the loop level.

// CHECK-LABEL: func.func @embedding(%t: tensor<16x8xf32>, %ids: tensor<4xi64>) -> tensor<4x8xf32> {
// CHECK:       %[[IOTA:[0-9]+]] = arith.constant dense<[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]> : tensor<16xi64>
// CHECK-NOT:   loop.nest
// CHECK:       %e = tile.for %i0_1 = 0 to 4 step 4 {{.*}} parallel {
// CHECK:       %[[IDS:[0-9]+]] = tile.load %ids[%i0_1] : tensor<4xi64> -> tensor<4xi64>
// CHECK:       arith.cmpi slt
// CHECK:       arith.addi
// CHECK:       %[[NORM:[0-9]+]] = tile.map {{.*}} -> tensor<4xi64> {
// CHECK-NEXT:  ^{{.*}}(%{{.*}}: i1, %{{.*}}: i64, %{{.*}}: i64):
// CHECK-NEXT:  arith.select
// CHECK:       tile.for %i2 = 0 to 16 step 8 {{.*}} reduction {
// CHECK-NEXT:  %[[BLK:[0-9]+]] = tile.load %[[IOTA]][%i2] : tensor<16xi64> -> tensor<8xi64>
// CHECK:       tile.map {{.*}} : (tensor<4x1xi64>, tensor<1x8xi64>) -> tensor<4x8xi1> {
// CHECK:       arith.cmpi eq
// CHECK:       tile.load %w[%i2, %i1_1] : tensor<16x8xf32> -> tensor<8x1xf32>
// CHECK:       tile.map {{.*}} : (tensor<4x8xi1>, tensor<1x8xf32>, tensor<1x1xf32>) -> tensor<4x8xf32> {
// CHECK:       arith.select
// CHECK:       tile.reduce sum %{{[0-9]+}} axis = 1 : tensor<4x8xf32> -> tensor<4x1xf32>
// CHECK:       tile.map add
// CHECK:       tile.store
// CHECK-NOT:   loop.nest
// CHECK:       func.return %e : tensor<4x8xf32>
func.func @embedding(%t: tensor<16x8xf32>, %ids: tensor<4xi64>) -> tensor<4x8xf32> {
  %w = graph.neg %t : tensor<16x8xf32>
  %e = graph.gather %w, %ids : (tensor<16x8xf32>, tensor<4xi64>) -> tensor<4x8xf32>
  func.return %e : tensor<4x8xf32>
}
