// A step compiled for a GPU (fsdp-autodiff{device=cuda}, fsdp-opt --device
// cuda, and by default with --backend nccl) computes as eager PyTorch does
// there, and the module says so (fsdp.device, the plan's `device`):
// - dropout is CUDA's fused native_dropout (ATen's dropout runs it on a
//   GPU; its mask is drawn its own way), differentiated by
//   native_dropout_backward;
// - Adam's update is param + -step_size * (exp_avg / denom), the order of
//   CUDA's addcdiv and foreach kernels, except for a unit whose optimizer
//   state is offloaded: its update runs on the host, in the CPU kernel's
//   order (-step_size * exp_avg) / denom, as eager's does there.
// RUN: fsdp-opt %s --pass-pipeline='builtin.module(fsdp-append-loss{loss=none},fsdp-autodiff{device=cuda},fsdp-auto-wrap{policy=modules wrap-module=a},fsdp-shard{world-size=2 offload-optim-units=a},fsdp-optimizer{optimizer=adamw lr=0.1},fsdp-verify-plan)' | FileCheck %s
// CHECK:      module attributes {
// CHECK-SAME: fsdp.device = "cuda"
// CHECK:      %[[DROP:.*]]:2 = aten.call "aten::native_dropout"(%{{.*}}, 2.500000e-01, true) : (tensor<5x4xf32>) -> (tensor<5x4xf32>, tensor<5x4xi1>)
// CHECK:      aten.call "aten::native_dropout_backward"(%{{.*}}, %[[DROP]]#1, 1.3333333333333333)
// The root unit, whose state is on the device, first: CUDA's order.
// CHECK:      %[[RATIO:.*]] = aten.call "aten::div.Tensor"(%{{.*}}, %{{.*}}) {fsdp.optimizer_op} : (tensor<5xf32>, tensor<5xf32>) -> tensor<5xf32>
// CHECK-NEXT: %[[UPD:.*]]:2 = aten.call "aten::mul_.Tensor"(%[[RATIO]], %{{.*}}) {fsdp.optimizer_op, mutates = array<i64: 0>} : (tensor<5xf32>, tensor<f64>)
// CHECK-NEXT: aten.call "aten::add_.Tensor"(%{{.*}}, %[[UPD]]#1, 1)
// Unit a (its optimizer state offloaded): the CPU's order, on the host.
// CHECK:      %[[NUM:.*]] = aten.call "aten::mul.Tensor"(%{{.*}}, %{{.*}}) {fsdp.optimizer_op} : (tensor<6xf32>, tensor<f64>) -> tensor<6xf32>
// CHECK-NEXT: %[[UPD2:.*]]:2 = aten.call "aten::div_.Tensor"(%[[NUM]], %{{.*}})
// CHECK-NEXT: %[[NEW:.*]]:2 = aten.call "aten::add_.Tensor"(%{{.*}}, %[[UPD2]]#1, 1)
// CHECK-NEXT: fsdp.to_device %[[NEW]]#1

// The CPU (the default): dropout is bernoulli_ noise, Adam's order the
// CPU kernel's everywhere, and the module names no device.
// RUN: fsdp-opt %s --pass-pipeline='builtin.module(fsdp-append-loss{loss=none},fsdp-autodiff,fsdp-auto-wrap{policy=modules wrap-module=a},fsdp-shard{world-size=2},fsdp-optimizer{optimizer=adamw lr=0.1})' | FileCheck %s --check-prefix=CPU
// CPU-NOT:    fsdp.device
// CPU-NOT:    native_dropout
// CPU:        aten::bernoulli_.float
// CPU-NOT:    aten::mul_.Tensor

// fsdp-opt's flags: --backend nccl means a GPU, --device says so alone, and
// the plan carries it.
// RUN: fsdp-opt %s --loss none --optimizer adamw --world-size 2 --backend nccl --emit plan | FileCheck %s --check-prefix=PLAN
// RUN: fsdp-opt %s --loss none --optimizer adamw --device cuda --emit plan | FileCheck %s --check-prefix=PLAN
// RUN: fsdp-opt %s --loss none --optimizer adamw --world-size 2 --backend nccl --device cpu --emit plan | FileCheck %s --check-prefix=PLANCPU
// PLAN:       "device": "cuda",
// PLAN:       "aten::native_dropout"
// PLANCPU-NOT: "device"
// RUN: not fsdp-opt %s --loss none --optimizer adamw --device tpu 2>&1 | FileCheck %s --check-prefix=BAD
// BAD: error: unknown device 'tpu': expected cpu or cuda

module attributes {fsdp.modules = [["", "models.Net"], ["a", "torch.nn.modules.linear.Linear"], ["head", "torch.nn.modules.linear.Linear"]]} {
  fsdp.param @a.weight : tensor<4x3xf32> in "a" : "torch.nn.modules.linear.Linear"
  fsdp.param @head.weight : tensor<2x4xf32> in "head" : "torch.nn.modules.linear.Linear"
  fsdp.param @head.bias : tensor<2xf32> in "head" : "torch.nn.modules.linear.Linear"
  func.func @forward(%x: tensor<5x3xf32> {fsdp.name = "x"}) -> tensor<f32> {
    %wa = fsdp.get @a.weight : tensor<4x3xf32>
    %wh = fsdp.get @head.weight : tensor<2x4xf32>
    %bh = fsdp.get @head.bias : tensor<2xf32>
    %h = aten.call "aten::linear"(%x, %wa, none) : (tensor<5x3xf32>, tensor<4x3xf32>) -> tensor<5x4xf32>
    %d = aten.call "aten::dropout"(%h, 2.500000e-01, true) : (tensor<5x4xf32>) -> tensor<5x4xf32>
    %y = aten.call "aten::linear"(%d, %wh, %bh) : (tensor<5x4xf32>, tensor<2x4xf32>, tensor<2xf32>) -> tensor<5x2xf32>
    %l = aten.call "aten::sum"(%y, none) : (tensor<5x2xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
