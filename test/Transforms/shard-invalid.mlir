// RUN: fsdp-opt %s --fsdp-shard=world-size=2 -split-input-file -verify-diagnostics

// A step without a backward has no gradients to reduce.
fsdp.param @w : tensor<3xf32> in "" : "M"
// expected-error@+1 {{'func.func' op has no backward: run fsdp-autodiff before fsdp-shard}}
func.func @train_step() -> tensor<f32> {
  %w = fsdp.get @w : tensor<3xf32>
  %l = aten.call "aten::sum"(%w, none) : (tensor<3xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

// A flat parameter holds one dtype, as FSDP's flattening requires.
fsdp.param @w : tensor<3xf32> in "" : "M"
// expected-error@+1 {{'fsdp.param' op has element type 'f64' but the FSDP unit '' it belongs to holds 'f32': a flat parameter needs one dtype (wrap it in a unit of its own)}}
fsdp.param @v : tensor<3xf64> in "" : "M"
func.func @train_step() -> tensor<f32> {
  %w = fsdp.get @w : tensor<3xf32>
  %v = fsdp.get @v : tensor<3xf64>
  %l = aten.call "aten::sum"(%w, none) : (tensor<3xf32>) -> tensor<f32>
  %one = aten.constant dense<1.000000e+00> : tensor<f32> {fsdp.backward_start}
  %g = aten.call "aten::expand"(%one, [3], false) : (tensor<f32>) -> tensor<3xf32>
  fsdp.grad @w, %g : tensor<3xf32>
  %gv = aten.call "aten::to.dtype"(%g, f64, false, false, none) : (tensor<3xf32>) -> tensor<3xf64>
  fsdp.grad @v, %gv : tensor<3xf64>
  return %l : tensor<f32>
}

// -----

// Mixed precision: a unit's all-gather moves one dtype, so its parameters
// are read in one type.
fsdp.param @w : tensor<3xf32> in "" : "M"
// expected-error@+1 {{'fsdp.param' op is read as 'f32' but the FSDP unit '' it belongs to is read as 'bf16': a unit's all-gather moves one dtype}}
fsdp.param @v : tensor<3xf32> in "" : "M"
func.func @train_step() -> tensor<bf16> {
  %w = fsdp.get @w : tensor<3xbf16>
  %v = fsdp.get @v : tensor<3xf32>
  %l = aten.call "aten::sum"(%w, none) : (tensor<3xbf16>) -> tensor<bf16>
  %one = aten.constant dense<1.000000e+00> : tensor<bf16> {fsdp.backward_start}
  %g = aten.call "aten::expand"(%one, [3], false) : (tensor<bf16>) -> tensor<3xbf16>
  fsdp.grad @w, %g : tensor<3xbf16>
  %gv = aten.call "aten::to.dtype"(%g, f32, false, false, none) : (tensor<3xbf16>) -> tensor<3xf32>
  fsdp.grad @v, %gv : tensor<3xf32>
  return %l : tensor<bf16>
}

// -----

// A parameter has one gradient.
fsdp.param @w : tensor<3xf32> in "" : "M"
func.func @train_step() -> tensor<f32> {
  %w = fsdp.get @w : tensor<3xf32>
  %l = aten.call "aten::sum"(%w, none) : (tensor<3xf32>) -> tensor<f32>
  %one = aten.constant dense<1.000000e+00> : tensor<f32> {fsdp.backward_start}
  %g = aten.call "aten::expand"(%one, [3], false) : (tensor<f32>) -> tensor<3xf32>
  fsdp.grad @w, %g : tensor<3xf32>
  // expected-error@+1 {{'fsdp.grad' op is the second gradient of @w}}
  fsdp.grad @w, %g : tensor<3xf32>
  return %l : tensor<f32>
}

// -----

// Sharding twice would shard the shards.
// expected-error@+1 {{is already sharded (it has flat parameters)}}
module {
  fsdp.param @x : tensor<4xf32> in "" : "M"
  fsdp.flat_param @_flat_param for "" params [@x] offsets [0] numel 4 padded 4 shards 2 : f32
  func.func @train_step() -> tensor<f32> {
    %s = fsdp.get @_flat_param : tensor<2xf32>
    %l = aten.call "aten::sum"(%s, none) : (tensor<2xf32>) -> tensor<f32>
    %one = aten.constant dense<1.000000e+00> : tensor<f32> {fsdp.backward_start}
    %g = aten.call "aten::expand"(%one, [2], false) : (tensor<f32>) -> tensor<2xf32>
    fsdp.grad @_flat_param, %g : tensor<2xf32>
    return %l : tensor<f32>
  }
}
