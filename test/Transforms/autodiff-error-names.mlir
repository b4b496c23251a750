// RUN: not fsdp-opt %s --fsdp-autodiff 2>&1 | FileCheck %s

// An op without a gradient rule that libtorch's autograd cannot take either
// (not an ATen operator): the error is at the user's source line
// (the innermost file location of the op), and its line names the overload
// and the module the op runs in (the innermost name of its location), with
// the module's class.
// CHECK: models.py:12:3: error: 'aten.call' op mylib::entr in module 'rnn' (torch.nn.modules.rnn.LSTM) has no gradient rule, but it lies on the path from the parameters to the loss (libtorch's autograd differentiates only ATen operators, aten::)
module attributes {fsdp.modules = [["", "models.Net"], ["rnn", "torch.nn.modules.rnn.LSTM"]]} {
  fsdp.param @w : tensor<4xf32> in "rnn" : "torch.nn.modules.rnn.LSTM"
  func.func @train_step() -> tensor<f32> {
    %w = fsdp.get @w : tensor<4xf32>
    %y = aten.call "mylib::entr"(%w) : (tensor<4xf32>) -> tensor<4xf32> loc("rnn"("models.py":12:3))
    %s = aten.call "aten::sum"(%y, none) : (tensor<4xf32>) -> tensor<f32>
    return %s : tensor<f32>
  }
}
