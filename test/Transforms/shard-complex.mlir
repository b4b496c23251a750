// RUN: fsdp-opt %s --pass-pipeline='builtin.module(fsdp-append-loss{loss=none},fsdp-autodiff,fsdp-shard{world-size=2})' | FileCheck %s

// view_as_complex needs an even storage offset: a parameter the step views
// as complex (here through a reshape) comes first in its flat parameter,
// before @bias that precedes it in the module; the others keep their
// order. Being pairs, such parameters have even sizes, so every one of them
// starts at an even offset.
// CHECK: fsdp.flat_param @_flat_param for "" params [@weight, @bias, @scale] offsets [0, 12, 15] numel 18
module attributes {fsdp.modules = [["", "models.Net"]]} {
  fsdp.param @bias : tensor<3xf32> in "" : "models.Net"
  fsdp.param @weight : tensor<3x2x2xf32> in "" : "models.Net"
  fsdp.param @scale : tensor<3xf32> in "" : "models.Net"
  func.func @forward(%x: tensor<3x2xcomplex<f32>> {fsdp.name = "x"}) -> tensor<f32> {
    %b = fsdp.get @bias : tensor<3xf32>
    %w = fsdp.get @weight : tensor<3x2x2xf32>
    %s = fsdp.get @scale : tensor<3xf32>
    %r = aten.call "aten::reshape"(%w, [6, 2]) : (tensor<3x2x2xf32>) -> tensor<6x2xf32>
    %c = aten.call "aten::view_as_complex"(%r) : (tensor<6x2xf32>) -> tensor<6xcomplex<f32>>
    %v = aten.call "aten::view"(%c, [3, 2]) : (tensor<6xcomplex<f32>>) -> tensor<3x2xcomplex<f32>>
    %m = aten.call "aten::mul.Tensor"(%v, %x) : (tensor<3x2xcomplex<f32>>, tensor<3x2xcomplex<f32>>) -> tensor<3x2xcomplex<f32>>
    %a = aten.call "aten::abs"(%m) : (tensor<3x2xcomplex<f32>>) -> tensor<3x2xf32>
    %bs = aten.call "aten::mul.Tensor"(%b, %s) : (tensor<3xf32>, tensor<3xf32>) -> tensor<3xf32>
    %u = aten.call "aten::unsqueeze"(%bs, 1) : (tensor<3xf32>) -> tensor<3x1xf32>
    %y = aten.call "aten::add.Tensor"(%a, %u, 1) : (tensor<3x2xf32>, tensor<3x1xf32>) -> tensor<3x2xf32>
    %l = aten.call "aten::sum"(%y, none) : (tensor<3x2xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
