// The optimizer's option checks are torch.optim's; each is an error.
// RUN: not fsdp-opt %s --fsdp-optimizer=optimizer=lamb 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not fsdp-opt %s --fsdp-optimizer="optimizer=sgd lr=-1" 2>&1 | FileCheck %s --check-prefix=LR
// RUN: not fsdp-opt %s --fsdp-optimizer="optimizer=sgd momentum=-0.5" 2>&1 | FileCheck %s --check-prefix=MOMENTUM
// RUN: not fsdp-opt %s --fsdp-optimizer="optimizer=sgd nesterov=true" 2>&1 | FileCheck %s --check-prefix=NESTEROV
// RUN: not fsdp-opt %s --fsdp-optimizer="optimizer=adamw beta1=1.0" 2>&1 | FileCheck %s --check-prefix=BETA1
// RUN: not fsdp-opt %s --fsdp-optimizer="optimizer=adamw beta2=-0.1" 2>&1 | FileCheck %s --check-prefix=BETA2
// RUN: not fsdp-opt %s --fsdp-optimizer="optimizer=adamw eps=-1" 2>&1 | FileCheck %s --check-prefix=EPS
// RUN: not fsdp-opt %s --fsdp-optimizer="optimizer=sgd momentum=0.9 dampening=0.1 nesterov=true" 2>&1 | FileCheck %s --check-prefix=NESTEROV
// RUN: not fsdp-opt %s --fsdp-optimizer="optimizer=sgd amsgrad=true" 2>&1 | FileCheck %s --check-prefix=AMSGRAD
// RUN: not fsdp-opt %s --fsdp-optimizer="optimizer=adam momentum=0.9" 2>&1 | FileCheck %s --check-prefix=ADAMMOMENTUM
// RUN: not fsdp-opt %s --fsdp-optimizer=optimizer=sgd 2>&1 | FileCheck %s --check-prefix=NOGRAD
// UNKNOWN: error: unknown optimizer 'lamb': expected sgd, adam or adamw
// LR: error: invalid learning rate: -1
// MOMENTUM: error: invalid momentum value: -5.000000e-01
// NESTEROV: error: Nesterov momentum requires a momentum and zero dampening
// AMSGRAD: error: amsgrad applies to adam and adamw, not sgd
// ADAMMOMENTUM: error: momentum, nesterov and dampening apply to sgd, not adam
// BETA1: error: invalid beta1 (beta parameter at index 0): 1.000000e+00
// BETA2: error: invalid beta2 (beta parameter at index 1): -1.000000e-01
// EPS: error: invalid epsilon value: -1
// NOGRAD: error: 'func.func' op has no fsdp.grad: run fsdp-autodiff before fsdp-optimizer
module {
  fsdp.param @w : tensor<3xf32> in "" : "M"
  func.func @train_step() -> tensor<f32> {
    %w = fsdp.get @w : tensor<3xf32>
    %l = aten.call "aten::sum"(%w, none) : (tensor<3xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
