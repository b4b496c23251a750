// An in-place write reuses its dying argument's storage only when nothing
// else holds it: not when the argument is a view (autograd's view metadata
// keeps the base alive), even through an op that returns its input itself
// (contiguous of a contiguous view); a detached tensor is no such view.
// RUN: fsdp-opt %s --split-input-file --fsdp-memory-report=json=true -o /dev/null | FileCheck %s

// neg: a 32-byte result beside the batch, whose storage dies with it (32);
// view and contiguous share it; relu_ of the view copies it (64 during).
// CHECK: "instruction_peak":[64,32,32,64]
// CHECK-SAME: "timeline":[32,32,32,32]
module {
  func.func @train_step(%x: tensor<2x4xf32>) -> tensor<8xf32> {
    %a = aten.call "aten::neg"(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %v = aten.call "aten::view"(%a, [8]) : (tensor<2x4xf32>) -> tensor<8xf32>
    %c = aten.call "aten::contiguous"(%v, 0) : (tensor<8xf32>) -> tensor<8xf32>
    %r:2 = aten.call "aten::relu_"(%c) {mutates = array<i64: 0>} : (tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>)
    return %r#1 : tensor<8xf32>
  }
}

// -----

// The same through detach: relu_ writes in place (32 throughout).
// CHECK: "instruction_peak":[64,32,32,32]
// CHECK-SAME: "timeline":[32,32,32,32]
module {
  func.func @train_step(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
    %a = aten.call "aten::neg"(%x) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %d = aten.call "aten::detach"(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %c = aten.call "aten::contiguous"(%d, 0) : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %r:2 = aten.call "aten::relu_"(%c) {mutates = array<i64: 0>} : (tensor<2x4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>)
    return %r#1 : tensor<2x4xf32>
  }
}

// -----

// A kernel result that is a view of the kernel's own tensor (the importer's
// aten.internal_views: einsum permutes its product) has a base that holds
// its storage: relu_ copies it (64 during). Without the attribute it
// would write in place.
// CHECK: "instruction_peak":[64,64]
// CHECK-SAME: "timeline":[32,32]
module {
  func.func @train_step(%x: tensor<2x4xf32>) -> tensor<4x2xf32> {
    %e = aten.call "aten::einsum"("ij->ji", [%x], none) {aten.internal_views = array<i64: 0>} : (tensor<2x4xf32>) -> tensor<4x2xf32>
    %r:2 = aten.call "aten::relu_"(%e) {mutates = array<i64: 0>} : (tensor<4x2xf32>) -> (tensor<4x2xf32>, tensor<4x2xf32>)
    return %r#1 : tensor<4x2xf32>
  }
}

// -----

// CHECK: "instruction_peak":[64,32]
// CHECK-SAME: "timeline":[32,32]
module {
  func.func @train_step(%x: tensor<2x4xf32>) -> tensor<4x2xf32> {
    %e = aten.call "aten::einsum"("ij->ji", [%x], none) : (tensor<2x4xf32>) -> tensor<4x2xf32>
    %r:2 = aten.call "aten::relu_"(%e) {mutates = array<i64: 0>} : (tensor<4x2xf32>) -> (tensor<4x2xf32>, tensor<4x2xf32>)
    return %r#1 : tensor<4x2xf32>
  }
}
