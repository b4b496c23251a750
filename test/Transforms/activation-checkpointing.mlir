// RUN: fsdp-opt %s --fsdp-autodiff '--fsdp-activation-checkpointing=modules=block' | FileCheck %s
// RUN: fsdp-opt %s --fsdp-autodiff '--fsdp-activation-checkpointing=classes=Block' | FileCheck %s
// A unit inside a checkpointed module is recomputed with it (outermost
// regions only).
// RUN: fsdp-opt %s --fsdp-autodiff '--fsdp-activation-checkpointing=modules=block,block.inner' | FileCheck %s
// Without a region, nothing changes.
// RUN: fsdp-opt %s --fsdp-autodiff --fsdp-activation-checkpointing | FileCheck %s --check-prefix=NONE
// NONE-NOT: rng_state
// NONE-NOT: fsdp.recompute

// The region `block` keeps only what leaves it (%b, which the head reads);
// the backward computes the whole region again, with the generator's state
// of its forward, right before the first backward op that reads one of its
// other values (tanh's result, which mul's and tanh's gradients read), and
// reads the recomputed values. The head's gradient reads %b itself.
// CHECK-LABEL: func.func @train_step
// CHECK:      %[[W:.+]] = fsdp.get @w
// CHECK:      %[[H:.+]] = fsdp.get @h
// CHECK-NEXT: %[[SAVED:.+]] = aten.rng_state {fsdp.checkpoint = "block"} : tensor<5056xui8>
// CHECK-NEXT: %[[A:.+]] = aten.call "aten::mm"(%arg0, %[[W]])
// CHECK-NEXT: %[[T:.+]] = aten.call "aten::tanh"(%[[A]])
// CHECK-NEXT: %[[B:.+]] = aten.call "aten::mul.Tensor"(%[[T]], %[[T]])
// CHECK:      fsdp.backward_start
// CHECK:      aten.call "aten::transpose.int"(%[[B]], 0, 1)
// CHECK:      fsdp.grad @h
// CHECK-NEXT: %[[NOW:.+]] = aten.rng_state : tensor<5056xui8>
// CHECK-NEXT: aten.set_rng_state %[[SAVED]] : tensor<5056xui8>
// CHECK-NEXT: %[[A2:.+]] = aten.call "aten::mm"(%arg0, %[[W]]) {fsdp.recompute = "block"}
// CHECK-NEXT: %[[T2:.+]] = aten.call "aten::tanh"(%[[A2]]) {fsdp.recompute = "block"}
// CHECK-NEXT: aten.call "aten::mul.Tensor"(%[[T2]], %[[T2]]) {fsdp.recompute = "block"}
// CHECK-NEXT: aten.set_rng_state %[[NOW]] : tensor<5056xui8>
// CHECK-NOT:  %[[T]]
// CHECK:      aten.call "aten::tanh_backward"(%{{.+}}, %[[T2]])
// CHECK:      fsdp.grad @w
module attributes {fsdp.modules = [["", "models.Net"], ["block", "models.Block"], ["block.inner", "models.Inner"], ["head", "torch.nn.modules.linear.Linear"]]} {
  fsdp.param @w : tensor<4x4xf32> in "block" : "models.Block"
  fsdp.param @h : tensor<4x3xf32> in "head" : "torch.nn.modules.linear.Linear"
  func.func @train_step(%x: tensor<2x4xf32>) -> tensor<f32> {
    %w = fsdp.get @w : tensor<4x4xf32>
    %h = fsdp.get @h : tensor<4x3xf32>
    %a = aten.call "aten::mm"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("block"("m.py":3:1))
    %t = aten.call "aten::tanh"(%a) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("block.inner"("m.py":4:1))
    %b = aten.call "aten::mul.Tensor"(%t, %t) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc("block"("m.py":5:1))
    %c = aten.call "aten::mm"(%b, %h) : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32> loc("head"("m.py":6:1))
    %s = aten.call "aten::sum"(%c, none) : (tensor<2x3xf32>) -> tensor<f32>
    return %s : tensor<f32>
  }
}
