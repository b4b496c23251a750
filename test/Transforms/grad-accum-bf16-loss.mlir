// RUN: fsdp-opt %s --fsdp-grad-accum="micro-batches=2" | FileCheck %s

// A step whose loss is bf16 (a model computing in bf16 that returns its own
// loss): the micro-batches' losses are summed, and their mean taken, in
// f32, and the step returns f32.
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME:      -> tensor<f32> {
// CHECK:         %[[L0:.+]] = aten.call "aten::sum"(%{{.+}}, none) : (tensor<2xbf16>) -> tensor<bf16>
// CHECK:         %[[W0:.+]] = aten.call "aten::to.dtype"(%[[L0]], f32, false, false, none) : (tensor<bf16>) -> tensor<f32>
// CHECK:         %[[L1:.+]] = aten.call "aten::sum"(%{{.+}}, none) : (tensor<2xbf16>) -> tensor<bf16>
// CHECK:         %[[W1:.+]] = aten.call "aten::to.dtype"(%[[L1]], f32, false, false, none) : (tensor<bf16>) -> tensor<f32>
// CHECK-NEXT:    %[[T:.+]] = aten.call "aten::add.Tensor"(%[[W0]], %[[W1]], 1) : (tensor<f32>, tensor<f32>) -> tensor<f32>
// CHECK:         %[[M:.+]] = aten.call "aten::div.Scalar"(%[[T]], 2.000000e+00) : (tensor<f32>) -> tensor<f32>
// CHECK-NEXT:    return %[[M]] : tensor<f32>
fsdp.param @w : tensor<2xf32> in "" : "M"
func.func @train_step(%x: tensor<2xbf16> {fsdp.name = "x"}) -> tensor<bf16> {
  %w = fsdp.get @w : tensor<2xbf16>
  %y = aten.call "aten::mul.Tensor"(%x, %w) : (tensor<2xbf16>, tensor<2xbf16>) -> tensor<2xbf16>
  %l = aten.call "aten::sum"(%y, none) : (tensor<2xbf16>) -> tensor<bf16>
  %s = aten.constant dense<5.000000e-01> : tensor<bf16> {fsdp.backward_start}
  %e = aten.call "aten::expand"(%s, [2], false) : (tensor<bf16>) -> tensor<2xbf16>
  %g = aten.call "aten::mul.Tensor"(%e, %x) : (tensor<2xbf16>, tensor<2xbf16>) -> tensor<2xbf16>
  fsdp.grad @w, %g : tensor<2xbf16>
  return %l : tensor<bf16>
}
