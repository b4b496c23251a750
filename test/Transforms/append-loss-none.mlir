// RUN: fsdp-opt %s --fsdp-append-loss=loss=none | FileCheck %s

// The model returns its own loss first: it is the step's result.
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME:      %{{.+}}: tensor<4x8xf32> {fsdp.name = "x"}, %{{.+}}: tensor<4x8xf32> {fsdp.name = "y"}) -> tensor<f32>
// CHECK:         %[[L:.+]] = aten.call "aten::mse_loss"
// CHECK-NEXT:    return %[[L]] : tensor<f32>
module {
  fsdp.param @w : tensor<8x8xf32> in "" : "M"
  func.func @forward(%x: tensor<4x8xf32> {fsdp.name = "x"}, %y: tensor<4x8xf32> {fsdp.name = "y"}) -> (tensor<f32>, tensor<4x8xf32>) {
    %w = fsdp.get @w : tensor<8x8xf32>
    %o = aten.call "aten::mm"(%x, %w) : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
    %l = aten.call "aten::mse_loss"(%o, %y, 1) : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
    return %l, %o : tensor<f32>, tensor<4x8xf32>
  }
}
