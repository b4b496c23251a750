// RUN: fsdp-opt %s -split-input-file --fsdp-autodiff '--fsdp-activation-checkpointing=modules=block' | FileCheck %s
// RUN: fsdp-opt %s -split-input-file --fsdp-autodiff '--fsdp-activation-checkpointing=classes=Block' | FileCheck %s
// A unit inside a checkpointed module is recomputed with it (outermost
// regions only).
// RUN: fsdp-opt %s -split-input-file --fsdp-autodiff '--fsdp-activation-checkpointing=modules=block,block.inner' | FileCheck %s
// Without a region, nothing changes.
// RUN: fsdp-opt %s -split-input-file --fsdp-autodiff --fsdp-activation-checkpointing | FileCheck %s --check-prefix=NONE
// NONE-NOT: rng_state
// NONE-NOT: fsdp.recompute

// The region `block` keeps only what leaves it (%b, which the head reads);
// the backward computes again, right before the first backward op that
// reads one of its other values (tanh's result, which mul's and tanh's
// gradients read), only what the backward reads: mm and tanh, not mul, whose
// result the forward kept (PyTorch's checkpoint stops early the same way).
// Nothing in it draws random numbers: no generator state is kept.
// CHECK-LABEL: func.func @train_step
// CHECK:      %[[W:.+]] = fsdp.get @w
// CHECK:      %[[H:.+]] = fsdp.get @h
// CHECK-NOT:  rng_state
// CHECK-NEXT: %[[A:.+]] = aten.call "aten::mm"(%arg0, %[[W]])
// CHECK-NEXT: %[[T:.+]] = aten.call "aten::tanh"(%[[A]])
// CHECK-NEXT: %[[B:.+]] = aten.call "aten::mul.Tensor"(%[[T]], %[[T]])
// CHECK:      fsdp.backward_start
// CHECK:      aten.call "aten::transpose.int"(%[[B]], 0, 1)
// CHECK:      fsdp.grad @h
// CHECK-NEXT: %[[A2:.+]] = aten.call "aten::mm"(%arg0, %[[W]]) {fsdp.recompute = "block"}
// CHECK-NEXT: %[[T2:.+]] = aten.call "aten::tanh"(%[[A2]]) {fsdp.recompute = "block"}
// CHECK-NOT:  fsdp.recompute
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

// -----

// Random draws in the region: the recomputation starts from the generator's
// state of the forward and runs every draw up to the last one it needs
// (%m, the mask mul's gradient reads), so each draws what it drew in the
// forward: the first draw too, though the backward reads the forward's %p;
// the last draw (%n) is not run again, and the state is set back after.
// CHECK-LABEL: func.func @train_step
// CHECK:      %[[SAVED:.+]] = aten.rng_state {fsdp.checkpoint = "block"} : tensor<5056xui8>
// CHECK-NEXT: aten.call "aten::bernoulli"
// CHECK-NEXT: aten.call "aten::bernoulli"
// CHECK:      fsdp.grad @h
// CHECK-NEXT: %[[NOW:.+]] = aten.rng_state : tensor<5056xui8>
// CHECK-NEXT: aten.set_rng_state %[[SAVED]] : tensor<5056xui8>
// CHECK-NEXT: aten.call "aten::bernoulli"(%arg0, none) {fsdp.recompute = "block"}
// CHECK-NEXT: %[[M2:.+]] = aten.call "aten::bernoulli"(%arg0, none) {fsdp.recompute = "block"}
// CHECK-NEXT: aten.set_rng_state %[[NOW]] : tensor<5056xui8>
// CHECK-NEXT: aten.call "aten::mul.Tensor"(%{{.+}}, %[[M2]])
// CHECK-NOT:  fsdp.recompute
// CHECK:      fsdp.grad @w
module attributes {fsdp.modules = [["", "models.Net"], ["block", "models.Block"], ["block.inner", "models.Inner"], ["head", "torch.nn.modules.linear.Linear"]]} {
  fsdp.param @w : tensor<4x4xf32> in "block" : "models.Block"
  fsdp.param @h : tensor<4x3xf32> in "head" : "torch.nn.modules.linear.Linear"
  func.func @train_step(%x: tensor<2x4xf32>) -> tensor<f32> {
    %w = fsdp.get @w : tensor<4x4xf32>
    %h = fsdp.get @h : tensor<4x3xf32>
    %p = aten.call "aten::bernoulli"(%x, none) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("block"("m.py":3:1))
    %m = aten.call "aten::bernoulli"(%x, none) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("block"("m.py":4:1))
    %a = aten.call "aten::mm"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("block"("m.py":5:1))
    %y = aten.call "aten::mul.Tensor"(%a, %m) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc("block"("m.py":6:1))
    %n = aten.call "aten::bernoulli"(%x, none) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("block"("m.py":7:1))
    %z = aten.call "aten::add.Tensor"(%y, %n, 1) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc("block"("m.py":8:1))
    %u = aten.call "aten::add.Tensor"(%z, %p, 1) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc("head"("m.py":9:1))
    %c = aten.call "aten::mm"(%u, %h) : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32> loc("head"("m.py":10:1))
    %s = aten.call "aten::sum"(%c, none) : (tensor<2x3xf32>) -> tensor<f32>
    return %s : tensor<f32>
  }
}

// -----

// A value written in place (dropout's noise, drawn into an empty tensor by
// bernoulli_) is made again with its writer, though the backward reads the
// tensor itself.
// CHECK-LABEL: func.func @train_step
// CHECK:      fsdp.backward_start
// CHECK:      aten.set_rng_state
// CHECK-NEXT: %[[E:.+]] = aten.call "aten::empty_like"(%arg0, none, none, none, none, none) {fsdp.recompute = "block"}
// CHECK-NEXT: aten.call "aten::bernoulli_.float"(%[[E]], 5.000000e-01, none) {fsdp.recompute = "block"}
// CHECK-NEXT: aten.set_rng_state
// CHECK-NEXT: aten.call "aten::mul.Tensor"(%{{.+}}, %[[E]])
module attributes {fsdp.modules = [["", "models.Net"], ["block", "models.Block"], ["block.inner", "models.Inner"], ["head", "torch.nn.modules.linear.Linear"]]} {
  fsdp.param @w : tensor<4x4xf32> in "block" : "models.Block"
  fsdp.param @h : tensor<4x3xf32> in "head" : "torch.nn.modules.linear.Linear"
  func.func @train_step(%x: tensor<2x4xf32>) -> tensor<f32> {
    %w = fsdp.get @w : tensor<4x4xf32>
    %h = fsdp.get @h : tensor<4x3xf32>
    %a = aten.call "aten::mm"(%x, %w) : (tensor<2x4xf32>, tensor<4x4xf32>) -> tensor<2x4xf32> loc("block"("m.py":2:1))
    %n = aten.call "aten::empty_like"(%x, none, none, none, none, none) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("block"("m.py":3:1))
    %r = aten.call "aten::bernoulli_.float"(%n, 5.000000e-01, none) : (tensor<2x4xf32>) -> tensor<2x4xf32> loc("block"("m.py":4:1))
    %y = aten.call "aten::mul.Tensor"(%a, %n) : (tensor<2x4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> loc("block"("m.py":5:1))
    %c = aten.call "aten::mm"(%y, %h) : (tensor<2x4xf32>, tensor<4x3xf32>) -> tensor<2x3xf32> loc("head"("m.py":6:1))
    %s = aten.call "aten::sum"(%c, none) : (tensor<2x3xf32>) -> tensor<f32>
    return %s : tensor<f32>
  }
}
