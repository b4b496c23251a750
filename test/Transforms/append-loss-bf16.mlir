// RUN: fsdp-opt %s --fsdp-append-loss="loss=cross_entropy targets=y:4xi64" | FileCheck %s --check-prefix=CE
// RUN: fsdp-opt %s --fsdp-append-loss="loss=mse targets=t:4x10xf32" | FileCheck %s --check-prefix=MSE
// RUN: fsdp-opt %s --fsdp-append-loss="loss=cross_entropy targets=y:4xi64" --fsdp-autodiff | FileCheck %s --check-prefix=GRAD

// Mixed precision: a model computing in bf16 returns bf16 logits; the loss
// is taken of them in fp32 (Accelerate's convert_outputs_to_fp32), so the
// step's loss is fp32, and the backward casts the gradient back to bf16
// where it leaves the cast (as autograd casts a gradient to its input's
// dtype).
// CE-LABEL: func.func @train_step(
// CE-SAME:      -> tensor<f32>
// CE:         %[[OUT:.+]] = aten.call "aten::linear"{{.*}} -> tensor<4x10xbf16>
// CE-NEXT:    %[[F:.+]] = aten.call "aten::to.dtype"(%[[OUT]], f32, false, false, none) : (tensor<4x10xbf16>) -> tensor<4x10xf32>
// CE-NEXT:    aten.call "aten::log_softmax.int"(%[[F]], 1, none) : (tensor<4x10xf32>) -> tensor<4x10xf32>
// MSE:        %[[OUT:.+]] = aten.call "aten::linear"{{.*}} -> tensor<4x10xbf16>
// MSE-NEXT:   %[[F:.+]] = aten.call "aten::to.dtype"(%[[OUT]], f32, false, false, none) : (tensor<4x10xbf16>) -> tensor<4x10xf32>
// MSE-NEXT:   aten.call "aten::mse_loss"(%[[F]], %{{.+}}, 1) : (tensor<4x10xf32>, tensor<4x10xf32>) -> tensor<f32>
// GRAD:       %[[G:.+]] = aten.call "aten::_log_softmax_backward_data"{{.*}} -> tensor<4x10xf32>
// GRAD-NEXT:  %[[GB:.+]] = aten.call "aten::to.dtype"(%[[G]], bf16, false, false, none) : (tensor<4x10xf32>) -> tensor<4x10xbf16>
// GRAD:       aten.call "aten::mm"(%{{.+}}, %{{.+}}) : (tensor<10x4xbf16>, tensor<4x32xbf16>) -> tensor<10x32xbf16>
// GRAD:       fsdp.grad @w, %{{.+}} : tensor<10x32xbf16>
fsdp.param @w : tensor<10x32xf32> in "" : "M"
func.func @forward(%x: tensor<4x32xbf16> {fsdp.name = "x"}) -> tensor<4x10xbf16> {
  %w = fsdp.get @w : tensor<10x32xbf16>
  %y = aten.call "aten::linear"(%x, %w, none) : (tensor<4x32xbf16>, tensor<10x32xbf16>) -> tensor<4x10xbf16>
  return %y : tensor<4x10xbf16>
}
