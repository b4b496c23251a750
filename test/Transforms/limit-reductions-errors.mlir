// RUN: not fsdp-opt %s --fsdp-limit-reductions=limit=-2 2>&1 | FileCheck %s
// CHECK: error: the reduction limit must not be negative, found -2

module {
  func.func @train_step(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}
