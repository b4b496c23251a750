// RUN: fsdp-opt %s --emit plan | FileCheck %s

// A step without one says why (fsdp-append-loss's reason).
// CHECK:      "function": "train_step",
// CHECK:      "instructions": [
// CHECK:      {{^  \],$}}
// CHECK-NEXT: "no_eval": "it draws"
// CHECK-NEXT: }
module attributes {fsdp.no_eval_step = "it draws"} {
  fsdp.param @w : tensor<3x2xf32> in "" : "M"
  func.func @train_step(%x: tensor<4x3xf32> {fsdp.name = "x"}) -> tensor<f32> {
    %w = fsdp.get @w : tensor<3x2xf32>
    %h = aten.call "aten::matmul"(%x, %w) : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
    %l = aten.call "aten::sum"(%h, none) : (tensor<4x2xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
