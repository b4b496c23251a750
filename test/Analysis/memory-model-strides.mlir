// A kernel result the importer's meta call found dense but not contiguous
// (`aten.result_strides`: an einsum's permuted product) is laid out so: a
// reshape that cannot view it copies. Without the strides it would be a
// view.
// RUN: fsdp-opt %s --split-input-file --fsdp-memory-report=json=true -o /dev/null | FileCheck %s

// The einsum's 96-byte result beside the two 96-byte inputs (the first
// dies there); the reshape copies it: 96 more during it.
// CHECK: "instruction_peak":[288,288]
// CHECK-SAME: "timeline":[192,192]
module {
  func.func @train_step(%a: tensor<2x3x4xf32>, %b: tensor<2x3x4xf32>) -> tensor<24xf32> {
    %e = aten.call "aten::einsum"("bij->jbi", [%a], none) {aten.result_strides = [array<i64: 4, 12, 1>]} : (tensor<2x3x4xf32>) -> tensor<3x2x4xf32>
    %r = aten.call "aten::reshape"(%e, [24]) : (tensor<3x2x4xf32>) -> tensor<24xf32>
    return %r : tensor<24xf32>
  }
}

// -----

// Contiguous (no strides recorded): the reshape is a view.
// CHECK: "instruction_peak":[288,192]
// CHECK-SAME: "timeline":[192,192]
module {
  func.func @train_step(%a: tensor<2x3x4xf32>, %b: tensor<2x3x4xf32>) -> tensor<24xf32> {
    %e = aten.call "aten::einsum"("bij->jbi", [%a], none) : (tensor<2x3x4xf32>) -> tensor<3x2x4xf32>
    %r = aten.call "aten::reshape"(%e, [24]) : (tensor<3x2x4xf32>) -> tensor<24xf32>
    return %r : tensor<24xf32>
  }
}
