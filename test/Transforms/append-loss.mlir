// RUN: fsdp-opt %s -split-input-file --fsdp-append-loss="loss=cross_entropy targets=y:4xi64" | FileCheck %s --check-prefix=CE
// RUN: fsdp-opt %s -split-input-file --fsdp-append-loss="loss=mse targets=t:4x10xf32" | FileCheck %s --check-prefix=MSE

// @forward becomes @train_step: the target is a new named argument, the loss
// its only result; the model's other outputs are dropped. Cross-entropy is
// ATen's own composition, log_softmax then nll_loss (mean, ignore_index -100).
// CE-LABEL: func.func @train_step(
// CE-SAME:      %[[X:.+]]: tensor<4x32xf32> {fsdp.name = "x"}, %[[Y:.+]]: tensor<4xi64> {fsdp.name = "y"}) -> tensor<f32>
// CE:         %[[OUT:.+]] = aten.call "aten::linear"
// CE-NEXT:    %[[LOGP:.+]] = aten.call "aten::log_softmax.int"(%[[OUT]], 1, none) : (tensor<4x10xf32>) -> tensor<4x10xf32>
// CE-NEXT:    %[[NLL:.+]]:2 = aten.call "aten::nll_loss_forward"(%[[LOGP]], %[[Y]], none, 1, -100) : (tensor<4x10xf32>, tensor<4xi64>) -> (tensor<f32>, tensor<f32>)
// CE-NEXT:    return %[[NLL]]#0 : tensor<f32>
// CE-NOT:   func.func @forward
// MSE-LABEL: func.func @train_step(
// MSE-SAME:      %{{.+}}: tensor<4x32xf32> {fsdp.name = "x"}, %[[T:.+]]: tensor<4x10xf32> {fsdp.name = "t"}) -> tensor<f32>
// MSE:         %[[OUT:.+]] = aten.call "aten::linear"
// MSE-NEXT:    %[[L:.+]] = aten.call "aten::mse_loss"(%[[OUT]], %[[T]], 1) : (tensor<4x10xf32>, tensor<4x10xf32>) -> tensor<f32>
// MSE-NEXT:    return %[[L]] : tensor<f32>
module {
  fsdp.param @fc.weight : tensor<10x32xf32> in "fc" : "torch.nn.modules.linear.Linear"
  func.func @forward(%x: tensor<4x32xf32> {fsdp.name = "x"}) -> (tensor<4x10xf32>, tensor<4x32xf32>) {
    %w = fsdp.get @fc.weight : tensor<10x32xf32>
    %y = aten.call "aten::linear"(%x, %w, none) : (tensor<4x32xf32>, tensor<10x32xf32>) -> tensor<4x10xf32>
    return %y, %x : tensor<4x10xf32>, tensor<4x32xf32>
  }
}
