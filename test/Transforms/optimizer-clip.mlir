// RUN: fsdp-opt %s --fsdp-optimizer="optimizer=sgd lr=0.1 max-grad-norm=0.5" | FileCheck %s
// RUN: not fsdp-opt %s --fsdp-optimizer="optimizer=sgd max-grad-norm=-1" 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// NEGATIVE: error: invalid max-grad-norm: -1.000000e+00 (0 does not clip)

// clip_grad_norm_ on an unsharded step, op for op: each gradient's 2-norm
// where it is complete; after the last, the norm of the norms, the
// coefficient max_norm / (total + 1e-6) (Python's float / tensor:
// reciprocal * float) clamped to 1, and every update from its gradient
// times the coefficient. The step returns the total as `grad_norm`.
// CHECK-LABEL: func.func @train_step(
// CHECK-SAME:      %[[GA:[a-z0-9]+]]: tensor<3xf32>, %[[GB:[a-z0-9]+]]: tensor<2xf32>) -> (tensor<f32>, tensor<f32> {fsdp.metric = "grad_norm"})
// CHECK:         %[[NA:.+]] = aten.call "aten::linalg_vector_norm"(%[[GA]], 2.000000e+00, none, false, none) {fsdp.optimizer_op} : (tensor<3xf32>) -> tensor<f32>
// CHECK-NEXT:    %[[NB:.+]] = aten.call "aten::linalg_vector_norm"(%[[GB]], 2.000000e+00, none, false, none) {fsdp.optimizer_op} : (tensor<2xf32>) -> tensor<f32>
// CHECK-NEXT:    %[[ALL:.+]] = aten.call "aten::stack"({{\[}}%[[NA]], %[[NB]]], 0) {fsdp.optimizer_op} : (tensor<f32>, tensor<f32>) -> tensor<2xf32>
// CHECK-NEXT:    %[[TOTAL:.+]] = aten.call "aten::linalg_vector_norm"(%[[ALL]], 2.000000e+00, none, false, none) {fsdp.optimizer_op} : (tensor<2xf32>) -> tensor<f32>
// CHECK-NEXT:    %[[DENOM:.+]] = aten.call "aten::add.Scalar"(%[[TOTAL]], 9.9999999999999995E-7, 1)
// CHECK-NEXT:    %[[RECIP:.+]] = aten.call "aten::reciprocal"(%[[DENOM]])
// CHECK-NEXT:    %[[RAW:.+]] = aten.call "aten::mul.Scalar"(%[[RECIP]], 5.000000e-01)
// CHECK-NEXT:    %[[COEF:.+]] = aten.call "aten::clamp"(%[[RAW]], none, 1.000000e+00)
// CHECK-NEXT:    %[[CA:.+]] = aten.call "aten::mul.Tensor"(%[[GA]], %[[COEF]]) {fsdp.optimizer_op} : (tensor<3xf32>, tensor<f32>) -> tensor<3xf32>
// CHECK-NEXT:    %[[PA:.+]] = aten.call "aten::add.Tensor"(%{{.+}}, %[[CA]], -1.000000e-01)
// CHECK-NEXT:    fsdp.update @a, %[[PA]]
// CHECK-NEXT:    %[[CB:.+]] = aten.call "aten::mul.Tensor"(%[[GB]], %[[COEF]])
// CHECK-NEXT:    %[[PB:.+]] = aten.call "aten::add.Tensor"(%{{.+}}, %[[CB]], -1.000000e-01)
// CHECK-NEXT:    fsdp.update @b, %[[PB]]
// CHECK-NEXT:    return %{{.+}}, %[[TOTAL]] : tensor<f32>, tensor<f32>
module {
  fsdp.param @a : tensor<3xf32> in "" : "M"
  fsdp.param @b : tensor<2xf32> in "" : "M"
  func.func @train_step(%ga: tensor<3xf32>, %gb: tensor<2xf32>) -> tensor<f32> {
    %a = fsdp.get @a : tensor<3xf32>
    %b = fsdp.get @b : tensor<2xf32>
    %l = aten.call "aten::sum"(%a, none) : (tensor<3xf32>) -> tensor<f32>
    fsdp.grad @a, %ga : tensor<3xf32>
    fsdp.grad @b, %gb : tensor<2xf32>
    return %l : tensor<f32>
  }
}
