// RUN: fsdp-opt %s -split-input-file --fsdp-autodiff | FileCheck %s

// A call no gradient rule covers is differentiated by libtorch's autograd:
// the generator's state is copied right before the call (a replay draws the
// same random numbers), and the backward is one aten.autograd_backward that
// takes the call's own arguments (a Tensor[] flattened), the gradients of
// the results that have one, and returns one gradient per operand that
// needs one (here the weights and h0, not the input).
fsdp.param @w_ih : tensor<8x3xf32> in "rnn" : "torch.nn.modules.rnn.RNN"
fsdp.param @w_hh : tensor<8x8xf32> in "rnn" : "torch.nn.modules.rnn.RNN"
fsdp.param @h0 : tensor<1x2x8xf32> in "" : "M"
// CHECK-LABEL: func.func @train_step
func.func @train_step(%x: tensor<5x2x3xf32>) -> tensor<f32> {
  // CHECK:      %[[WIH:.+]] = fsdp.get @w_ih
  // CHECK:      %[[WHH:.+]] = fsdp.get @w_hh
  // CHECK:      %[[H0:.+]] = fsdp.get @h0
  // CHECK-NEXT: %[[RNG:.+]] = aten.rng_state : tensor<5056xui8>
  // CHECK-NEXT: aten.call "aten::rnn_tanh.input"(%arg0, %[[H0]], [%[[WIH]], %[[WHH]]], false, 1, 5.000000e-01, true, false, false)
  %wih = fsdp.get @w_ih : tensor<8x3xf32>
  %whh = fsdp.get @w_hh : tensor<8x8xf32>
  %h0 = fsdp.get @h0 : tensor<1x2x8xf32>
  %y:2 = aten.call "aten::rnn_tanh.input"(%x, %h0, [%wih, %whh], false, 1, 0.5, true, false, false) : (tensor<5x2x3xf32>, tensor<1x2x8xf32>, tensor<8x3xf32>, tensor<8x8xf32>) -> (tensor<5x2x8xf32>, tensor<1x2x8xf32>)
  %s = aten.call "aten::sum"(%y#0, none) : (tensor<5x2x8xf32>) -> tensor<f32>
  // Only the output's gradient (result 0); hy reaches no loss.
  // CHECK:      %[[G:.+]]:3 = aten.autograd_backward "aten::rnn_tanh.input"(%arg0, %[[H0]], %[[WIH]], %[[WHH]] : tensor<5x2x3xf32>, tensor<1x2x8xf32>, tensor<8x3xf32>, tensor<8x8xf32>) grads(%{{.+}} : tensor<5x2x8xf32>) rng(%[[RNG]] : tensor<5056xui8>)
  // CHECK-SAME: grad_results = array<i64: 0>, num_forward_results = 2 : i64, wrt = array<i64: 1, 2, 3>} -> tensor<1x2x8xf32>, tensor<8x3xf32>, tensor<8x8xf32>
  // CHECK-DAG:  fsdp.grad @w_ih, %[[G]]#1
  // CHECK-DAG:  fsdp.grad @w_hh, %[[G]]#2
  // CHECK-DAG:  fsdp.grad @h0, %[[G]]#0
  return %s : tensor<f32>
}

// -----

// A rule that does not cover a call leaves it to autograd: reflection
// padding (aten::pad has a rule for constant padding only), channel dropout
// in training (its mask is drawn inside the op). The constant case keeps
// its rule.
fsdp.param @w : tensor<2x3x4x4xf32> in "" : "M"
// CHECK-LABEL: func.func @train_step
func.func @train_step() -> tensor<f32> {
  %w = fsdp.get @w : tensor<2x3x4x4xf32>
  // CHECK:      aten.rng_state
  // CHECK-NEXT: aten.call "aten::pad"(%{{.+}}, [1, 1], "reflect", none)
  %p = aten.call "aten::pad"(%w, [1, 1], "reflect", none) : (tensor<2x3x4x4xf32>) -> tensor<2x3x4x6xf32>
  // CHECK:      aten.rng_state
  // CHECK-NEXT: aten.call "aten::feature_dropout"
  %d = aten.call "aten::feature_dropout"(%p, 0.5, true) : (tensor<2x3x4x6xf32>) -> tensor<2x3x4x6xf32>
  // CHECK-NOT:  aten.rng_state
  %c = aten.call "aten::pad"(%d, [1, 1], "constant", 0.0) : (tensor<2x3x4x6xf32>) -> tensor<2x3x4x8xf32>
  %s = aten.call "aten::sum"(%c, none) : (tensor<2x3x4x8xf32>) -> tensor<f32>
  // CHECK:      aten.call "aten::constant_pad_nd"(%{{.+}}, [-1, -1], 0)
  // CHECK:      aten.autograd_backward "aten::feature_dropout"
  // CHECK:      aten.autograd_backward "aten::pad"
  return %s : tensor<f32>
}
