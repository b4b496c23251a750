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

// -----

// A complex value's real view (view_as_real) counts strides in real
// elements: the parts of a contiguous complex tensor lie contiguous, and a
// reshape of them is a view; transposed first, the reshape copies (96 more
// bytes during it).
// CHECK: "instruction_peak":[96,192,96,96]
// CHECK-SAME: "timeline":[96,96,96,96]
module {
  func.func @train_step(%a: tensor<4x3x2xf32>) -> tensor<24xf32> {
    %c = aten.call "aten::view_as_complex"(%a) : (tensor<4x3x2xf32>) -> tensor<4x3xcomplex<f32>>
    %m = aten.call "aten::mul.Tensor"(%c, %c) : (tensor<4x3xcomplex<f32>>, tensor<4x3xcomplex<f32>>) -> tensor<4x3xcomplex<f32>>
    %r = aten.call "aten::view_as_real"(%m) : (tensor<4x3xcomplex<f32>>) -> tensor<4x3x2xf32>
    %f = aten.call "aten::reshape"(%r, [24]) : (tensor<4x3x2xf32>) -> tensor<24xf32>
    return %f : tensor<24xf32>
  }
}

// -----

// CHECK: "instruction_peak":[96,192,96,96,192]
// CHECK-SAME: "timeline":[96,96,96,96,96]
module {
  func.func @train_step(%a: tensor<4x3x2xf32>) -> tensor<24xf32> {
    %c = aten.call "aten::view_as_complex"(%a) : (tensor<4x3x2xf32>) -> tensor<4x3xcomplex<f32>>
    %m = aten.call "aten::mul.Tensor"(%c, %c) : (tensor<4x3xcomplex<f32>>, tensor<4x3xcomplex<f32>>) -> tensor<4x3xcomplex<f32>>
    %t = aten.call "aten::transpose.int"(%m, 0, 1) : (tensor<4x3xcomplex<f32>>) -> tensor<3x4xcomplex<f32>>
    %r = aten.call "aten::view_as_real"(%t) : (tensor<3x4xcomplex<f32>>) -> tensor<3x4x2xf32>
    %f = aten.call "aten::reshape"(%r, [24]) : (tensor<3x4x2xf32>) -> tensor<24xf32>
    return %f : tensor<24xf32>
  }
}

// -----

// scaled_dot_product_attention on CPU: the flash kernel lays its result out
// as its query (here [batch, seq, heads, dim] transposed), so the heads'
// transpose back and reshape are a view; a mask that requires grad in eager
// training (aten.requires_grad holds operand 3) takes the math kernel,
// whose result is contiguous, and the reshape copies (256 bytes more).
// CHECK: "instruction_peak":[384,640,256,256]
// CHECK-SAME: "timeline":[384,256,256,256]
// CHECK: "instruction_peak":[384,640,256,512]
// CHECK-SAME: "timeline":[384,256,256,256]
module {
  func.func @train_step(%x: tensor<1x4x2x8xf32>, %m: tensor<1x2x4x4xf32>) -> tensor<1x4x16xf32> {
    %q = aten.call "aten::transpose.int"(%x, 1, 2) : (tensor<1x4x2x8xf32>) -> tensor<1x2x4x8xf32>
    %a = aten.call "aten::scaled_dot_product_attention"(%q, %q, %q, %m, 0.000000e+00, false, none, false) : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x8xf32>
    %t = aten.call "aten::transpose.int"(%a, 1, 2) : (tensor<1x2x4x8xf32>) -> tensor<1x4x2x8xf32>
    %r = aten.call "aten::reshape"(%t, [1, 4, 16]) : (tensor<1x4x2x8xf32>) -> tensor<1x4x16xf32>
    return %r : tensor<1x4x16xf32>
  }
}

// -----

module {
  func.func @train_step(%x: tensor<1x4x2x8xf32>, %m: tensor<1x2x4x4xf32>) -> tensor<1x4x16xf32> {
    %q = aten.call "aten::transpose.int"(%x, 1, 2) : (tensor<1x4x2x8xf32>) -> tensor<1x2x4x8xf32>
    %a = aten.call "aten::scaled_dot_product_attention"(%q, %q, %q, %m, 0.000000e+00, false, none, false) {aten.requires_grad = array<i64: 3>} : (tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x8xf32>, tensor<1x2x4x4xf32>) -> tensor<1x2x4x8xf32>
    %t = aten.call "aten::transpose.int"(%a, 1, 2) : (tensor<1x2x4x8xf32>) -> tensor<1x4x2x8xf32>
    %r = aten.call "aten::reshape"(%t, [1, 4, 16]) : (tensor<1x4x2x8xf32>) -> tensor<1x4x16xf32>
    return %r : tensor<1x4x16xf32>
  }
}
