// RUN: fsdp-opt %s --emit plan | FileCheck %s

// Beside the training step, the evaluation step: a program of its own
// (`eval`: slots, inputs, outputs, instructions) over the same state.
// CHECK:      "function": "train_step",
// CHECK:      "state": [
// CHECK-NEXT:   {"aliases":[],"class":"M","dtype":"f32","kind":"param","module":"","name":"w","shape":[3,2]}
// CHECK-NEXT: ],
// CHECK:      "instructions": [
// CHECK:        "kind":"update"
// CHECK:      {{^  \],$}}
// CHECK-NEXT: "eval": {
// CHECK-NEXT: "function": "eval_step",
// CHECK-NEXT: "num_slots": 5,
// CHECK-NEXT: "inputs": [
// CHECK-NEXT:   {"dtype":"f32","name":"x","shape":[4,3],"slot":0},
// CHECK-NEXT:   {"dtype":"f32","name":"y","shape":[4,2],"slot":1}
// CHECK-NEXT: ],
// CHECK-NEXT: "outputs": [4],
// CHECK-NEXT: "instructions": [
// CHECK-NEXT:   {"free":[],"kind":"get","result":2,"state":"w"},
// CHECK-NEXT:   {"args":[{"t":0},{"t":2}],"free":[0,2],"kind":"call","list_result":false,"loc":"{{.+}}","mutates":[],"num_schema_results":1,"op":"aten::matmul","requires_grad":[1],"results":[3]},
// CHECK-NEXT:   {"args":[{"t":3},{"t":1},{"i":1}],"free":[3,1],"kind":"call","list_result":false,"loc":"{{.+}}","mutates":[],"num_schema_results":1,"op":"aten::mse_loss","results":[4]}
// CHECK-NEXT: ]
// CHECK-NEXT: }
// CHECK-NEXT: }
module {
  fsdp.param @w : tensor<3x2xf32> in "" : "M"
  func.func @train_step(%x: tensor<4x3xf32> {fsdp.name = "x"}, %y: tensor<4x2xf32> {fsdp.name = "y"}) -> tensor<f32> {
    %w = fsdp.get @w : tensor<3x2xf32>
    %h = aten.call "aten::matmul"(%x, %w) : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
    %l = aten.call "aten::mse_loss"(%h, %y, 1) : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<f32>
    %w2 = aten.call "aten::mul.Scalar"(%w, 0.5) : (tensor<3x2xf32>) -> tensor<3x2xf32>
    fsdp.update @w, %w2 : tensor<3x2xf32>
    return %l : tensor<f32>
  }
  func.func @eval_step(%x: tensor<4x3xf32> {fsdp.name = "x"}, %y: tensor<4x2xf32> {fsdp.name = "y"}) -> tensor<f32> {
    %w = fsdp.get @w : tensor<3x2xf32>
    %h = aten.call "aten::matmul"(%x, %w) {aten.requires_grad = array<i64: 1>} : (tensor<4x3xf32>, tensor<3x2xf32>) -> tensor<4x2xf32>
    %l = aten.call "aten::mse_loss"(%h, %y, 1) : (tensor<4x2xf32>, tensor<4x2xf32>) -> tensor<f32>
    return %l : tensor<f32>
  }
}
