// RUN: fsdp-opt %s --split-input-file --verify-diagnostics --fsdp-grad-accum="micro-batches=2"
// RUN: not fsdp-opt %s --split-input-file --fsdp-grad-accum="micro-batches=0" 2>&1 | FileCheck %s --check-prefix=ZERO
// ZERO: error: invalid micro-batches: 0 (the micro-batches of one optimizer step, at least 1)

// expected-error @+1 {{no @train_step to accumulate (fsdp-append-loss and fsdp-autodiff build it)}}
module {
  func.func @forward() {
    return
  }
}

// -----

module {
  // expected-error @+1 {{returns 2 values: gradient accumulation runs before fsdp-optimizer, on a step that returns its loss alone}}
  func.func @train_step(%x: tensor<f32>) -> (tensor<f32>, tensor<f32>) {
    return %x, %x : tensor<f32>, tensor<f32>
  }
}

// -----

module {
  fsdp.param @w : tensor<2xf32> in "" : "M"
  // expected-error @+1 {{has no backward seed (a scalar constant marked fsdp.backward_start): run fsdp-autodiff first}}
  func.func @train_step(%x: tensor<2xf32>) -> tensor<f32> {
    %w = fsdp.get @w : tensor<2xf32>
    %l = aten.call "aten::sum"(%w, none) : (tensor<2xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}

// -----

module {
  // expected-error @+1 {{already accumulates micro-batches}}
  func.func @train_step(%x: tensor<f32> {fsdp.micro_batch = 0 : i64}) -> tensor<f32> {
    %s = aten.constant dense<1.0> : tensor<f32> {fsdp.backward_start}
    return %x : tensor<f32>
  }
}

// -----

module {
  fsdp.param @w : tensor<2xf32> in "" : "M"
  func.func @train_step(%x: tensor<2xf32>) -> tensor<f32> {
    %w = fsdp.get @w : tensor<2xf32>
    %l = aten.call "aten::sum"(%w, none) : (tensor<2xf32>) -> tensor<f32>
    %s = aten.constant dense<1.0> : tensor<f32> {fsdp.backward_start}
    %g = aten.call "aten::expand"(%s, [2], false) : (tensor<f32>) -> tensor<2xf32>
    fsdp.grad @w, %g : tensor<2xf32>
    // expected-error @+1 {{is the second gradient of @w}}
    fsdp.grad @w, %g : tensor<2xf32>
    return %l : tensor<f32>
  }
}

// -----

module {
  fsdp.param @w : tensor<2xf32> in "" : "M"
  fsdp.buffer @n : tensor<2xf32> in "" : "M"
  func.func @train_step(%x: tensor<2xf32>) -> tensor<f32> {
    %w = fsdp.get @w : tensor<2xf32>
    %l = aten.call "aten::sum"(%w, none) : (tensor<2xf32>) -> tensor<f32>
    %s = aten.constant dense<1.0> : tensor<f32> {fsdp.backward_start}
    fsdp.update @n, %x : tensor<2xf32>
    // expected-error @+1 {{reads @n after the step updates it: a micro-batch could not start from what the previous one left}}
    %n = fsdp.get @n : tensor<2xf32>
    return %l : tensor<f32>
  }
}
