// RUN: not plmr-opt %s -p 'convert-graph-to-loop,neptune-fuse{strategy=fastest}' 2>&1 | filecheck %s --check-prefix=STRATEGY
// RUN: not plmr-opt %s -p 'convert-graph-to-loop,neptune-fuse{strategy=split-k chunks=5}' 2>&1 | filecheck %s --check-prefix=CHUNKS
// RUN: not plmr-opt %s -p 'convert-graph-to-loop,neptune-fuse{chunks=0}' 2>&1 | filecheck %s --check-prefix=ZERO

// STRATEGY: plmr-opt: error: neptune-fuse: unknown strategy 'fastest' (expected one of auto, rolling, split-k)
// CHUNKS: plmr-opt: error: neptune-fuse: split-k needs one reduction dimension whose extent the chunk count divides; %p_max has reduction extents [8] and chunks=5
// ZERO: plmr-opt: error: neptune-fuse: chunks must be positive, got 0
// STRATEGY-NOT: Traceback
func.func @softmax(%s: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %p = graph.softmax %s : tensor<4x8xf32>
  func.return %p : tensor<4x8xf32>
}
