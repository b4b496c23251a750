// The gradient scaler's settings are checked as GradScaler checks them; it
// needs the backward's seed to scale.
// RUN: not fsdp-opt %s --fsdp-optimizer="optimizer=sgd grad-scaler=true init-scale=0" 2>&1 | FileCheck %s --check-prefix=INIT
// RUN: not fsdp-opt %s --fsdp-optimizer="optimizer=sgd grad-scaler=true init-scale=1e39" 2>&1 | FileCheck %s --check-prefix=INIT
// RUN: not fsdp-opt %s --fsdp-optimizer="optimizer=sgd grad-scaler=true growth-factor=1" 2>&1 | FileCheck %s --check-prefix=GROWTH
// RUN: not fsdp-opt %s --fsdp-optimizer="optimizer=sgd grad-scaler=true backoff-factor=1.5" 2>&1 | FileCheck %s --check-prefix=BACKOFF
// RUN: not fsdp-opt %s --fsdp-optimizer="optimizer=sgd grad-scaler=true growth-interval=0" 2>&1 | FileCheck %s --check-prefix=INTERVAL
// RUN: fsdp-opt %s --fsdp-optimizer="optimizer=sgd grad-scaler=true" -verify-diagnostics -o /dev/null
// INIT: error: invalid init-scale: {{.*}} (the gradient scaler's first scale: positive and finite in f32)
// GROWTH: error: invalid growth-factor: 1.000000e+00 (the growth factor must be > 1.0)
// BACKOFF: error: invalid backoff-factor: 1.500000e+00 (the backoff factor must be in (0, 1))
// INTERVAL: error: invalid growth-interval: 0 (the good steps before the scale grows: at least 1)
module {
  fsdp.param @w : tensor<3xf32> in "" : "M"
  // expected-error @below {{'func.func' op has no backward seed (an op marked fsdp.backward_start) for the gradient scaler to scale: run fsdp-autodiff first}}
  func.func @train_step(%g: tensor<3xf32>) -> tensor<f32> {
    %w = fsdp.get @w : tensor<3xf32>
    %l = aten.call "aten::sum"(%w, none) : (tensor<3xf32>) -> tensor<f32>
    fsdp.grad @w, %g : tensor<3xf32>
    return %l : tensor<f32>
  }
}
