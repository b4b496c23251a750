// RUN: fsdp-opt %s -verify-diagnostics --fsdp-autodiff '--fsdp-activation-checkpointing=classes=Missing'
// RUN: not fsdp-opt %s --fsdp-autodiff '--fsdp-activation-checkpointing=modules=nowhere' 2>&1 | FileCheck %s --check-prefix=MODULE
// RUN: not fsdp-opt %s --fsdp-autodiff '--fsdp-activation-checkpointing=all-units=true' 2>&1 | FileCheck %s --check-prefix=UNITS
// RUN: not fsdp-opt %s '--fsdp-activation-checkpointing=modules=block' 2>&1 | FileCheck %s --check-prefix=BACKWARD
// RUN: echo 'module {}' | not fsdp-opt '--fsdp-activation-checkpointing=modules=block' 2>&1 | FileCheck %s --check-prefix=STEP
// RUN: not fsdp-opt %s --fsdp-autodiff --fsdp-auto-wrap '--fsdp-activation-checkpointing=all-units=true' 2>&1 | FileCheck %s --check-prefix=ROOT

// MODULE: error: --ac-module nowhere: the model has no module at this path
// UNITS: error: activation checkpointing of every FSDP unit needs the units: run fsdp-auto-wrap first (or name the regions with --ac-class or --ac-module)
// BACKWARD: error: 'func.func' op has no backward (no op marked fsdp.backward_start): run fsdp-autodiff first
// STEP: error: no @train_step to checkpoint (fsdp-append-loss and fsdp-autodiff build it)
// ROOT: error: activation checkpointing checkpoints every FSDP unit but the root, and the root is the only unit: wrap units with --auto-wrap (or name the regions with --ac-class or --ac-module)

// expected-error@+1 {{--ac-class Missing: no module of the model has this class}}
module attributes {fsdp.modules = [["", "models.Net"], ["block", "models.Block"]]} {
  fsdp.param @w : tensor<4xf32> in "block" : "models.Block"
  func.func @train_step() -> tensor<f32> {
    %w = fsdp.get @w : tensor<4xf32>
    %t = aten.call "aten::tanh"(%w) : (tensor<4xf32>) -> tensor<4xf32> loc("block"("m.py":3:1))
    %s = aten.call "aten::sum"(%t, none) : (tensor<4xf32>) -> tensor<f32>
    return %s : tensor<f32>
  }
}
