// RUN: not fsdp-opt %s --emit plan -o %t 2>&1 | FileCheck %s
// RUN: not test -e %t

// fsdp-run calls only the operators of PlanOperators.def: fsdp-opt emits no
// other, and names the call (a view at any stride, a kernel that trusts
// its indices, an operator outside ATen). (--emit plan reports through the
// plan writer, not the verifier: FileCheck, not -verify-diagnostics.)
// CHECK: unlisted-op.mlir:[[@LINE+2]]:8: error: 'aten.call' op aten::_reshape_alias is not an operator fsdp-run runs from a plan (its kernel trusts its arguments, or it is not an ATen operator): rewrite the model without it
func.func @forward(%x: tensor<4xf32> {fsdp.name = "x"}) -> tensor<4xf32> {
  %y = aten.call "aten::_reshape_alias"(%x, [4], [1]) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
