// RUN: fsdp-opt %s -split-input-file -verify-diagnostics --fsdp-autodiff

fsdp.param @w : tensor<4xf32> in "" : "M"
func.func @train_step() -> tensor<f32> {
  %w = fsdp.get @w : tensor<4xf32>
  // expected-error@+1 {{'aten.call' op mylib::entr has no gradient rule, but it lies on the path from the parameters to the loss (libtorch's autograd differentiates only ATen operators, aten::)}}
  %y = aten.call "mylib::entr"(%w) : (tensor<4xf32>) -> tensor<4xf32>
  %s = aten.call "aten::sum"(%y, none) : (tensor<4xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// An op without a rule off the path to the loss is no error.
fsdp.param @w : tensor<4xf32> in "" : "M"
func.func @train_step() -> tensor<f32> {
  %w = fsdp.get @w : tensor<4xf32>
  %y = aten.call "mylib::entr"(%w) : (tensor<4xf32>) -> tensor<4xf32>
  %s = aten.call "aten::sum"(%w, none) : (tensor<4xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

fsdp.param @w : tensor<4xf32> in "" : "M"
// expected-error@+1 {{'func.func' op must return a scalar floating-point loss first to be differentiated}}
func.func @train_step() -> tensor<4xf32> {
  %w = fsdp.get @w : tensor<4xf32>
  return %w : tensor<4xf32>
}

// -----

fsdp.param @w : tensor<4xf32> in "" : "M"
// expected-error@+1 {{'func.func' op returns a loss that depends on no parameter: there is nothing to train}}
func.func @train_step(%x: tensor<4xf32>) -> tensor<f32> {
  %w = fsdp.get @w : tensor<4xf32>
  %s = aten.call "aten::sum"(%x, none) : (tensor<4xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// Gradients do not flow through comparisons: a loss reached only through
// one depends on no parameter.
fsdp.param @w : tensor<4xf32> in "" : "M"
// expected-error@+1 {{'func.func' op returns a loss that depends on no parameter: there is nothing to train}}
func.func @train_step() -> tensor<f32> {
  %w = fsdp.get @w : tensor<4xf32>
  %c = aten.call "aten::gt.Scalar"(%w, 0) : (tensor<4xf32>) -> tensor<4xi1>
  %f = aten.call "aten::zeros_like"(%w, none, none, none, none, none) : (tensor<4xf32>) -> tensor<4xf32>
  %s = aten.call "aten::sum"(%f, none) : (tensor<4xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// Through libtorch's autograd, only the results' gradients flow back: not
// one that reaches an argument the op writes in place (other than self).
fsdp.param @w : tensor<4xf32> in "" : "M"
func.func @train_step() -> tensor<f32> {
  %w = fsdp.get @w : tensor<4xf32>
  %v = aten.call "aten::mul.Scalar"(%w, 2.0) : (tensor<4xf32>) -> tensor<4xf32>
  // expected-error@+1 {{'aten.call' op aten::special_thing cannot be differentiated: a gradient reaches argument #1, which it writes in place, and only its results' gradients can be back-propagated through libtorch's autograd}}
  %y:2 = aten.call "aten::special_thing"(%w, %v) {mutates = array<i64: 1>} : (tensor<4xf32>, tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>)
  %s = aten.call "aten::sum"(%y#1, none) : (tensor<4xf32>) -> tensor<f32>
  return %s : tensor<f32>
}

// -----

// expected-error@+1 {{no @train_step to differentiate (fsdp-append-loss builds it)}}
module {
  func.func @forward() {
    return
  }
}
