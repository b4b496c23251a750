// CPU offload (fsdp-shard{offload-params}, PyTorch FSDP's
// CPUOffload(offload_params=True)): flat parameters and their optimizer
// state live in host memory (`fsdp.host`); a shard read on the host is
// copied to the device before its all-gather, and the reduced gradient
// shard copied back to the host, where the optimizer updates the shard.
// With forward prefetch the copy moves with its read and gather.
// RUN: fsdp-opt %s --pass-pipeline='builtin.module(fsdp-append-loss{loss=none},fsdp-autodiff,fsdp-auto-wrap{policy=modules wrap-module=a},fsdp-shard{world-size=2 offload-params=true},fsdp-optimizer{optimizer=adamw lr=0.1},fsdp-prefetch{backward-prefetch=BACKWARD_PRE forward-prefetch=true},fsdp-limit-all-gathers,fsdp-limit-reductions{limit=2},fsdp-apply-schedule,fsdp-verify-plan)' | FileCheck %s
// RUN: not fsdp-opt %s --pass-pipeline='builtin.module(fsdp-append-loss{loss=none},fsdp-autodiff,fsdp-shard{world-size=2 sharding-strategy=OSS offload-params=true})' 2>&1 | FileCheck %s --check-prefix=OSS
// OSS: error: CPU offload applies to FSDP's strategies, not OSS (its parameters are whole on every rank)
// Clipping: each host gradient shard's norm is copied to the device, where
// the total is reduced, and the coefficient copied back to the host, where
// it scales the gradient shards.
// RUN: fsdp-opt %s --pass-pipeline='builtin.module(fsdp-append-loss{loss=none},fsdp-autodiff,fsdp-shard{world-size=2 offload-params=true},fsdp-optimizer{optimizer=sgd lr=0.1 max-grad-norm=1.0},fsdp-verify-plan)' | FileCheck %s --check-prefix=CLIP
// CLIP:      %[[G:.*]] = fsdp.to_host %{{.*}} : tensor<{{[0-9]+}}xf32>
// CLIP-NEXT: %[[N:.*]] = aten.call "aten::linalg_vector_norm"(%[[G]]
// CLIP-NEXT: %[[D:.*]] = fsdp.to_device %[[N]] {fsdp.optimizer_op} : tensor<f32>
// CLIP-NEXT: aten.call "aten::stack"({{\[}}%[[D]]], 0)
// CLIP:      %[[SQ:.*]] = aten.call "aten::pow.Tensor_Scalar"
// CLIP-NEXT: %[[F:.*]] = fsdp.all_reduce.start %[[SQ]] group shard reduce sum
// CLIP-NEXT: %[[T:.*]] = fsdp.wait %[[F]]
// CLIP-NEXT: %[[NORM:.*]] = aten.call "aten::pow.Tensor_Scalar"(%[[T]]
// CLIP:      %[[COEF:.*]] = aten.call "aten::clamp"
// CLIP-NEXT: %[[H:.*]] = fsdp.to_host %[[COEF]] {fsdp.optimizer_op} : tensor<f32>
// CLIP:      aten.call "aten::mul.Tensor"(%[[G]], %[[H]])

// The optimizer state of unit `a` alone on the host (offload-optim-units,
// what --offload auto chooses first): the shard stays on the device and is
// gathered as without offload; the reduced gradient shard and a copy of the
// shard go to the host, where the update runs with the state; the result
// is copied back to the device's shard. The step count stays on the
// device (another unit updates there); its scalars are copied to the host.
// RUN: fsdp-opt %s --pass-pipeline='builtin.module(fsdp-append-loss{loss=none},fsdp-autodiff,fsdp-auto-wrap{policy=modules wrap-module=a},fsdp-shard{world-size=2 offload-optim-units=a},fsdp-optimizer{optimizer=adamw lr=0.1},fsdp-verify-plan)' | FileCheck %s --check-prefix=OPTIM
// OPTIM:      fsdp.flat_param @a._flat_param for "a" {{.*}} : f32 {fsdp.host_optim}
// OPTIM-NEXT: fsdp.flat_param @_flat_param for "" {{.*}} : f32{{$}}
// OPTIM-NEXT: fsdp.optim_state @"optim:step" : tensor<f64>{{$}}
// OPTIM:      fsdp.optim_state @"a._flat_param:exp_avg" : tensor<6xf32> for @a._flat_param {fsdp.host}
// OPTIM:      %[[SHARD:.*]] = fsdp.get @a._flat_param : tensor<6xf32>
// OPTIM-NEXT: fsdp.all_gather.start %[[SHARD]] for @a._flat_param
// OPTIM:      %[[STEP:.*]] = aten.call "aten::div.Tensor"
// OPTIM-NEXT: %[[HSTEP:.*]] = fsdp.to_host %[[STEP]] {fsdp.optimizer_op} : tensor<f64>
// OPTIM:      %[[W:.*]] = fsdp.wait %{{.*}} : <tensor<6xf32>>
// OPTIM-NEXT: %[[G:.*]] = fsdp.to_host %[[W]] : tensor<6xf32>
// OPTIM-NEXT: %[[P:.*]] = fsdp.to_host %[[SHARD]] {fsdp.optimizer_op} : tensor<6xf32>
// OPTIM:      aten.call "aten::mul.Tensor"(%{{.*}}, %[[HSTEP]])
// OPTIM:      %[[NEW:.*]]:2 = aten.call "aten::add_.Tensor"
// OPTIM-NEXT: %[[D:.*]] = fsdp.to_device %[[NEW]]#1 {fsdp.optimizer_op} : tensor<6xf32>
// OPTIM-NEXT: fsdp.update @a._flat_param, %[[D]] {fsdp.optimizer_op} : tensor<6xf32>
// RUN: not fsdp-opt %s --pass-pipeline='builtin.module(fsdp-append-loss{loss=none},fsdp-autodiff,fsdp-shard{world-size=2 offload-units=zz})' 2>&1 | FileCheck %s --check-prefix=NOUNIT
// NOUNIT: error: CPU offload of unit 'zz': no unit has that module path

module attributes {fsdp.modules = [["", "models.Net"], ["a", "torch.nn.modules.linear.Linear"], ["head", "torch.nn.modules.linear.Linear"]]} {
  fsdp.param @a.weight : tensor<4x3xf32> in "a" : "torch.nn.modules.linear.Linear"
  fsdp.param @head.weight : tensor<2x4xf32> in "head" : "torch.nn.modules.linear.Linear"
  fsdp.param @head.bias : tensor<2xf32> in "head" : "torch.nn.modules.linear.Linear"
  func.func @forward(%x: tensor<5x3xf32> {fsdp.name = "x"}) -> tensor<f32> {
    %wa = fsdp.get @a.weight : tensor<4x3xf32>
    %wh = fsdp.get @head.weight : tensor<2x4xf32>
    %bh = fsdp.get @head.bias : tensor<2xf32>
    %h = aten.call "aten::linear"(%x, %wa, none) : (tensor<5x3xf32>, tensor<4x3xf32>) -> tensor<5x4xf32>
    %y = aten.call "aten::linear"(%h, %wh, %bh) : (tensor<5x4xf32>, tensor<2x4xf32>, tensor<2xf32>) -> tensor<5x2xf32>
    %l = aten.call "aten::sum"(%y, none) : (tensor<5x2xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// CHECK:      fsdp.flat_param @a._flat_param for "a" {{.*}} : f32 {fsdp.host}
// CHECK-NEXT: fsdp.flat_param @_flat_param for "" {{.*}} : f32 {fsdp.host}
// CHECK-NEXT: fsdp.optim_state @"optim:step" : tensor<f64> {fsdp.host}
// CHECK-NEXT: fsdp.optim_state @"_flat_param:exp_avg" : tensor<5xf32> for @_flat_param {fsdp.host}
// CHECK-LABEL: func.func @train_step
// CHECK-NEXT:    %[[A:.+]] = fsdp.get @a._flat_param : tensor<6xf32>
// CHECK-NEXT:    %[[AD:.+]] = fsdp.to_device %[[A]] : tensor<6xf32>
// CHECK-NEXT:    %[[AF:.+]] = fsdp.all_gather.start %[[AD]] for @a._flat_param
// CHECK-NEXT:    fsdp.wait %[[AF]]
// The root's gather, prefetched with its read and copy.
// CHECK-NEXT:    %[[R:.+]] = fsdp.get @_flat_param : tensor<5xf32>
// CHECK-NEXT:    %[[RD:.+]] = fsdp.to_device %[[R]] : tensor<5xf32>
// CHECK-NEXT:    fsdp.all_gather.start %[[RD]] for @_flat_param
// CHECK:         %[[W:.+]] = fsdp.wait %{{.+}} : <tensor<5xf32>>
// CHECK-NEXT:    %[[G:.+]] = fsdp.to_host %[[W]] : tensor<5xf32>
// The optimizer on the host: the shard read on the host, its gradient the
// host copy.
// CHECK:         %[[AVG:.+]] = fsdp.get @"_flat_param:exp_avg" {fsdp.optimizer_op} : tensor<5xf32>
// CHECK-NEXT:    aten.call "aten::lerp_.Scalar"(%[[AVG]], %[[G]], 0.099999999999999978)
// CHECK:         fsdp.update @_flat_param, %{{.+}} : tensor<5xf32>
