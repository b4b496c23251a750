// RUN: not fsdp-opt %s --fsdp-limit-all-gathers=limit=-1 2>&1 | FileCheck %s
// CHECK: error: the all-gather limit must not be negative, found -1

module {
  func.func @train_step(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}
