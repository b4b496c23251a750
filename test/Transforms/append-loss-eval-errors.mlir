// RUN: fsdp-opt %s -split-input-file -verify-diagnostics --fsdp-append-loss="loss=mse targets=y:4x3xf32"

// The model in evaluation mode must take the training model's inputs.
module {
  func.func @forward(%x: tensor<4x5xf32> {fsdp.name = "x"}) -> tensor<4x3xf32> {
    %h = aten.call "aten::slice.Tensor"(%x, 1, 0, 3, 1) : (tensor<4x5xf32>) -> tensor<4x3xf32>
    return %h : tensor<4x3xf32>
  }
  // expected-error@+1 {{takes 'tensor<2x5xf32>' but @forward takes 'tensor<4x5xf32>': the model in evaluation mode must take the training model's inputs}}
  func.func @eval_forward(%x: tensor<2x5xf32> {fsdp.name = "x"}) -> tensor<2x3xf32> {
    %h = aten.call "aten::slice.Tensor"(%x, 1, 0, 3, 1) : (tensor<2x5xf32>) -> tensor<2x3xf32>
    return %h : tensor<2x3xf32>
  }
}

// -----

module {
  func.func @forward(%x: tensor<4x5xf32> {fsdp.name = "x"}) -> tensor<4x3xf32> {
    %h = aten.call "aten::slice.Tensor"(%x, 1, 0, 3, 1) : (tensor<4x5xf32>) -> tensor<4x3xf32>
    return %h : tensor<4x3xf32>
  }
  // expected-error@+1 {{names its input #0 "input" but @forward names it "x"}}
  func.func @eval_forward(%x: tensor<4x5xf32> {fsdp.name = "input"}) -> tensor<4x3xf32> {
    %h = aten.call "aten::slice.Tensor"(%x, 1, 0, 3, 1) : (tensor<4x5xf32>) -> tensor<4x3xf32>
    return %h : tensor<4x3xf32>
  }
}

// -----

// An evaluation step changes no state.
module {
  fsdp.buffer @n : tensor<4x3xf32> in "" : "M"
  func.func @forward(%x: tensor<4x5xf32> {fsdp.name = "x"}) -> tensor<4x3xf32> {
    %h = aten.call "aten::slice.Tensor"(%x, 1, 0, 3, 1) : (tensor<4x5xf32>) -> tensor<4x3xf32>
    return %h : tensor<4x3xf32>
  }
  func.func @eval_forward(%x: tensor<4x5xf32> {fsdp.name = "x"}) -> tensor<4x3xf32> {
    %h = aten.call "aten::slice.Tensor"(%x, 1, 0, 3, 1) : (tensor<4x5xf32>) -> tensor<4x3xf32>
    // expected-error@+1 {{updates state in the model in evaluation mode: export it after model.eval()}}
    fsdp.update @n, %h : tensor<4x3xf32>
    return %h : tensor<4x3xf32>
  }
}

// -----

// expected-error@+1 {{the module already has a @eval_step}}
module {
  func.func @forward(%x: tensor<4x5xf32> {fsdp.name = "x"}) -> tensor<4x5xf32> {
    return %x : tensor<4x5xf32>
  }
  func.func @eval_step(%x: tensor<4x5xf32>) -> tensor<4x5xf32> {
    return %x : tensor<4x5xf32>
  }
}
