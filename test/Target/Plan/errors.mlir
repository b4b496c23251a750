// RUN: not fsdp-opt %s --emit plan -o %t 2>&1 | FileCheck %s
// RUN: not test -e %t

// A call of another function has no plan instruction.
// CHECK: error: 'func.call' op cannot be emitted into a plan yet
func.func @helper(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}
func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = func.call @helper(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
