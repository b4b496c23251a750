// RUN: not fsdp-opt %s --emit plan -o %t 2>&1 | FileCheck %s
// RUN: not test -e %t

// CHECK: error: 'fsdp.all_reduce.start' op cannot be emitted into a plan yet
func.func @forward(%x: tensor<4xf32>) -> tensor<4xf32> {
  %f = fsdp.all_reduce.start %x group world reduce sum : tensor<4xf32> -> !fsdp.future<tensor<4xf32>>
  %y = fsdp.wait %f : !fsdp.future<tensor<4xf32>>
  return %y : tensor<4xf32>
}
