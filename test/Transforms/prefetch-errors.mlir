// RUN: not fsdp-opt %s --fsdp-prefetch=backward-prefetch=BACKWARD_LATER 2>&1 | FileCheck %s
// CHECK: error: unknown backward prefetch 'BACKWARD_LATER': expected BACKWARD_PRE, BACKWARD_POST or NO_PREFETCH

module {
  func.func @train_step(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}
