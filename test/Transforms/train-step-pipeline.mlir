// The named pipeline and fsdp-opt's flags build the same training step.
// RUN: fsdp-opt %s --fsdp-train-step="loss=mse targets=t:2x3xf32 optimizer=adamw lr=0.01" > %t.pipeline.mlir
// RUN: fsdp-opt %s --loss mse --target t:2x3xf32 --optimizer adamw --lr 0.01 > %t.flags.mlir
// RUN: diff %t.pipeline.mlir %t.flags.mlir
// RUN: FileCheck %s < %t.flags.mlir
// RUN: fsdp-opt %s --loss mse --target t:2x3xf32 --optimizer adamw --lr 0.01 --emit plan | FileCheck %s --check-prefix=PLAN

// The optimizer's torch.optim settings, for checkpoints in its format.
// CHECK:       module attributes {fsdp.optimizer = {amsgrad = false, betas = array<f64: 9.000000e-01, 0.99899999999999999>, eps = 1.000000e-08 : f64, lr = 1.000000e-02 : f64, maximize = false, name = "adamw", weight_decay = 1.000000e-02 : f64}}
// CHECK:       fsdp.optim_state @"optim:step" : tensor<f64>
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME:      {fsdp.name = "x"}, %{{.+}}: tensor<2x3xf32> {fsdp.name = "t"}) -> tensor<f32>
// CHECK:         aten.call "aten::mse_loss"
// CHECK:         aten.call "aten::mse_loss_backward"
// CHECK:         fsdp.update @fc.weight
// CHECK-NOT:     fsdp.grad

// The plan holds the whole step; optimizer state starts at zero.
// PLAN:      "function": "train_step",
// PLAN:      "optimizer": {"amsgrad":false,"betas":[0.90000000000000002,0.999],"eps":1e-08,"lr":0.01,"maximize":false,"name":"adamw","weight_decay":0.01},
// PLAN:      {"aliases":[],"dtype":"f64","init":"zeros","kind":"optim","name":"optim:step","param":null,"shape":[]},
// PLAN-NEXT: {"aliases":[],"dtype":"f32","init":"zeros","kind":"optim","name":"fc.weight:exp_avg","param":"fc.weight","shape":[3,4]},
// PLAN:      "inputs": [
// PLAN-NEXT:   {"dtype":"f32","name":"x","shape":[2,4],"slot":0},
// PLAN-NEXT:   {"dtype":"f32","name":"t","shape":[2,3],"slot":1}
// PLAN:      "kind":"update","state":"fc.weight","value":
module {
  fsdp.param @fc.weight : tensor<3x4xf32> in "fc" : "torch.nn.modules.linear.Linear"
  func.func @forward(%x: tensor<2x4xf32> {fsdp.name = "x"}) -> tensor<2x3xf32> {
    %w = fsdp.get @fc.weight : tensor<3x4xf32>
    %y = aten.call "aten::linear"(%x, %w, none) : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<2x3xf32>
    return %y : tensor<2x3xf32>
  }
}
