// RUN: fsdp-opt %s -split-input-file --fsdp-append-loss="loss=mse targets=y:4x3xf32" | FileCheck %s

// A forward that computes the same in evaluation mode (dropout with p = 0
// draws nothing) is copied into @eval_step, whose loss is the training
// step's; the parameters a matmul reads directly require grad, as in eager
// evaluation under torch.no_grad() (what they compute from them does not).
// CHECK-LABEL: module {
// CHECK:       func.func @train_step(%arg0: tensor<4x5xf32> {fsdp.name = "x"}, %arg1: tensor<4x3xf32> {fsdp.name = "y"}) -> tensor<f32>
// CHECK-NOT:     aten.requires_grad
// CHECK:       func.func @eval_step(%arg0: tensor<4x5xf32> {fsdp.name = "x"}, %arg1: tensor<4x3xf32> {fsdp.name = "y"}) -> tensor<f32>
// CHECK-NEXT:    %[[W:.+]] = fsdp.get @w
// CHECK-NEXT:    %[[D:.+]] = aten.call "aten::dropout"(%arg0, 0.000000e+00, true)
// CHECK-NEXT:    %[[H:.+]] = aten.call "aten::matmul"(%[[D]], %[[W]]) {aten.requires_grad = array<i64: 1>}
// CHECK-NEXT:    %[[T:.+]] = aten.call "aten::tanh"(%[[H]])
// CHECK-NEXT:    %[[E:.+]] = aten.call "aten::eye"
// CHECK-NEXT:    %[[O:.+]] = aten.call "aten::matmul"(%[[T]], %[[E]]) :
// CHECK-NEXT:    %[[L:.+]] = aten.call "aten::mse_loss"(%[[O]], %arg1, 1)
// CHECK-NEXT:    return %[[L]] : tensor<f32>
module {
  fsdp.param @w : tensor<5x3xf32> in "" : "M"
  func.func @forward(%x: tensor<4x5xf32> {fsdp.name = "x"}) -> tensor<4x3xf32> {
    %w = fsdp.get @w : tensor<5x3xf32>
    %d = aten.call "aten::dropout"(%x, 0.0, true) : (tensor<4x5xf32>) -> tensor<4x5xf32>
    %h = aten.call "aten::matmul"(%d, %w) : (tensor<4x5xf32>, tensor<5x3xf32>) -> tensor<4x3xf32>
    %t = aten.call "aten::tanh"(%h) : (tensor<4x3xf32>) -> tensor<4x3xf32>
    %s = aten.call "aten::eye"(3, none, none, none, none) : () -> tensor<3x3xf32>
    %o = aten.call "aten::matmul"(%t, %s) : (tensor<4x3xf32>, tensor<3x3xf32>) -> tensor<4x3xf32>
    return %o : tensor<4x3xf32>
  }
}

// -----

// Dropout that draws in training: no evaluation step, and the module says
// why (the plan's `no_eval`).
// CHECK-LABEL: module attributes {fsdp.no_eval_step = "the model's forward differs in evaluation mode: it draws random numbers (aten::dropout in 'drop'), as dropout does in training mode"}
// CHECK:         func.func @train_step
// CHECK-NOT:     func.func @eval_step
module {
  fsdp.param @w : tensor<5x3xf32> in "" : "M"
  func.func @forward(%x: tensor<4x5xf32> {fsdp.name = "x"}) -> tensor<4x3xf32> {
    %w = fsdp.get @w : tensor<5x3xf32>
    %d = aten.call "aten::dropout"(%x, 0.25, true) : (tensor<4x5xf32>) -> tensor<4x5xf32> loc("drop")
    %h = aten.call "aten::matmul"(%d, %w) : (tensor<4x5xf32>, tensor<5x3xf32>) -> tensor<4x3xf32>
    return %h : tensor<4x3xf32>
  }
}

// -----

// A buffer updated in training (BatchNorm's running statistics): none.
// CHECK-LABEL: module attributes {fsdp.no_eval_step = "the model's forward differs in evaluation mode: it updates buffer 'n' (BatchNorm's running statistics, in training mode)"}
// CHECK-NOT:     func.func @eval_step
module {
  fsdp.param @w : tensor<5x3xf32> in "" : "M"
  fsdp.buffer @n : tensor<4x3xf32> in "" : "M"
  func.func @forward(%x: tensor<4x5xf32> {fsdp.name = "x"}) -> tensor<4x3xf32> {
    %w = fsdp.get @w : tensor<5x3xf32>
    %h = aten.call "aten::matmul"(%x, %w) : (tensor<4x5xf32>, tensor<5x3xf32>) -> tensor<4x3xf32>
    fsdp.update @n, %h : tensor<4x3xf32>
    return %h : tensor<4x3xf32>
  }
}

// -----

// The model in evaluation mode (fsdp-opt --eval-model imports it as
// @eval_forward) becomes @eval_step, with the training step's loss; its
// other outputs are dropped as the forward's are.
// CHECK-LABEL: module {
// CHECK:         func.func @train_step
// CHECK:           aten::dropout
// CHECK:         func.func @eval_step(%arg0: tensor<4x5xf32> {fsdp.name = "x"}, %arg1: tensor<4x3xf32> {fsdp.name = "y"}) -> tensor<f32>
// CHECK-NOT:       aten::dropout
// CHECK:           aten.call "aten::mse_loss"
// CHECK-NEXT:      return
module {
  fsdp.param @w : tensor<5x3xf32> in "" : "M"
  func.func @forward(%x: tensor<4x5xf32> {fsdp.name = "x"}) -> tensor<4x3xf32> {
    %w = fsdp.get @w : tensor<5x3xf32>
    %d = aten.call "aten::dropout"(%x, 0.25, true) : (tensor<4x5xf32>) -> tensor<4x5xf32>
    %h = aten.call "aten::matmul"(%d, %w) : (tensor<4x5xf32>, tensor<5x3xf32>) -> tensor<4x3xf32>
    return %h : tensor<4x3xf32>
  }
  func.func @eval_forward(%x: tensor<4x5xf32> {fsdp.name = "x"}) -> (tensor<4x3xf32>, tensor<4x5xf32>) {
    %w = fsdp.get @w : tensor<5x3xf32>
    %h = aten.call "aten::matmul"(%x, %w) : (tensor<4x5xf32>, tensor<5x3xf32>) -> tensor<4x3xf32>
    return %h, %x : tensor<4x3xf32>, tensor<4x5xf32>
  }
}
