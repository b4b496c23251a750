// RUN: fsdp-opt %s --fsdp-optimizer="optimizer=sgd lr=0.1 momentum=0.9 nesterov=true weight-decay=0.01" | FileCheck %s --check-prefix=SGD
// RUN: fsdp-opt %s --fsdp-optimizer="optimizer=sgd lr=0.1" | FileCheck %s --check-prefix=PLAIN
// RUN: fsdp-opt %s --fsdp-optimizer="optimizer=adamw lr=0.01" | FileCheck %s --check-prefix=ADAMW
// RUN: fsdp-opt %s --fsdp-optimizer="optimizer=sgd lr=0.1 momentum=0.9 dampening=0.25 maximize=true" | FileCheck %s --check-prefix=DAMPENED
// RUN: fsdp-opt %s --fsdp-optimizer="optimizer=adam lr=0.01 weight-decay=0.5 amsgrad=true maximize=true" | FileCheck %s --check-prefix=ADAM

// torch.optim.SGD, op for op: d_p = grad + wd * p; buf.mul_(momentum)
// .add_(d_p) (zero before the first step: PyTorch's first-step copy);
// Nesterov d_p += momentum * buf; p += -lr * d_p. In-place ops are
// functional here (mutates); the runtime writes in place when it may. The momentum buffer is optimizer
// state named after its parameter. A parameter without fsdp.grad (the loss
// does not depend on it) gets no state and no update, as a parameter whose
// .grad is None.
// SGD:         fsdp.optim_state @"w:momentum_buffer" : tensor<3x4xf32> for @w
// SGD-NOT:     fsdp.optim_state
// SGD-LABEL:   func.func @train_step(
// SGD-SAME:        %[[G:[a-z0-9]+]]: tensor<3x4xf32>)
// SGD:           %[[P:.+]] = fsdp.get @w
// SGD:           %[[DP:.+]] = aten.call "aten::add.Tensor"(%[[G]], %[[P]], 1.000000e-02)
// SGD-NEXT:      %[[BUF:.+]] = fsdp.get @"w:momentum_buffer" {fsdp.optimizer_op} : tensor<3x4xf32>
// SGD-NEXT:      %[[SCALED:.+]]:2 = aten.call "aten::mul_.Scalar"(%[[BUF]], 9.000000e-01) {fsdp.optimizer_op, mutates = array<i64: 0>}
// SGD-NEXT:      %[[NEWBUF:.+]]:2 = aten.call "aten::add_.Tensor"(%[[SCALED]]#1, %[[DP]], 1) {fsdp.optimizer_op, mutates = array<i64: 0>}
// SGD-NEXT:      fsdp.update @"w:momentum_buffer", %[[NEWBUF]]#1
// SGD-NEXT:      %[[NES:.+]] = aten.call "aten::add.Tensor"(%[[DP]], %[[NEWBUF]]#1, 9.000000e-01)
// SGD-NEXT:      %[[NEWP:.+]] = aten.call "aten::add.Tensor"(%[[P]], %[[NES]], -1.000000e-01)
// SGD-NEXT:      fsdp.update @w, %[[NEWP]]
// SGD-NOT:       fsdp.grad
// SGD-NOT:       fsdp.update @frozen

// Without momentum SGD keeps no state.
// PLAIN-NOT:     fsdp.optim_state
// PLAIN-LABEL:   func.func @train_step(
// PLAIN-SAME:        %[[G:[a-z0-9]+]]: tensor<3x4xf32>)
// PLAIN:         %[[P:.+]] = fsdp.get @w
// PLAIN:         %[[NEWP:.+]] = aten.call "aten::add.Tensor"(%[[P]], %[[G]], -1.000000e-01)
// PLAIN-NEXT:    fsdp.update @w, %[[NEWP]]

// torch.optim.AdamW: the step count (f64, as Python's float) and the bias
// corrections once per step, then per parameter decoupled weight decay
// (1 - lr * 0.01, PyTorch's default), the moments, and addcdiv's
// param + (-step_size * exp_avg) / denom.
// ADAMW:         fsdp.optim_state @"optim:step" : tensor<f64>
// ADAMW-NEXT:    fsdp.optim_state @"w:exp_avg" : tensor<3x4xf32> for @w
// ADAMW-NEXT:    fsdp.optim_state @"w:exp_avg_sq" : tensor<3x4xf32> for @w
// ADAMW-LABEL:   func.func @train_step(
// ADAMW-SAME:        %[[G:[a-z0-9]+]]: tensor<3x4xf32>)
// ADAMW:         %[[P:.+]] = fsdp.get @w
// ADAMW:         %[[S0:.+]] = fsdp.get @"optim:step" {fsdp.optimizer_op} : tensor<f64>
// ADAMW-NEXT:    %[[S:.+]] = aten.call "aten::add.Scalar"(%[[S0]], 1.000000e+00, 1) {fsdp.optimizer_op} : (tensor<f64>) -> tensor<f64>
// ADAMW-NEXT:    fsdp.update @"optim:step", %[[S]]
// ADAMW-NEXT:    %[[B1P:.+]] = aten.call "aten::pow.Scalar"(9.000000e-01, %[[S]]) {fsdp.optimizer_op} : (tensor<f64>) -> tensor<f64>
// ADAMW-NEXT:    %[[B1:.+]] = aten.call "aten::rsub.Scalar"(%[[B1P]], 1.000000e+00, 1)
// ADAMW-NEXT:    %[[B2P:.+]] = aten.call "aten::pow.Scalar"(0.99899999999999999, %[[S]])
// ADAMW-NEXT:    %[[B2:.+]] = aten.call "aten::rsub.Scalar"(%[[B2P]], 1.000000e+00, 1)
// ADAMW-NEXT:    %[[NEGLR:.+]] = aten.constant dense<-1.000000e-02> : tensor<f64>
// ADAMW-NEXT:    %[[STEP:.+]] = aten.call "aten::div.Tensor"(%[[NEGLR]], %[[B1]]) {fsdp.optimizer_op} : (tensor<f64>, tensor<f64>) -> tensor<f64>
// ADAMW-NEXT:    %[[B2SQRT:.+]] = aten.call "aten::sqrt"(%[[B2]]) {fsdp.optimizer_op} : (tensor<f64>) -> tensor<f64>
// ADAMW-NEXT:    %[[DECAYED:.+]] = aten.call "aten::mul.Scalar"(%[[P]], 9.999000e-01)
// ADAMW-NEXT:    %[[M0:.+]] = fsdp.get @"w:exp_avg"
// ADAMW-NEXT:    %[[M:.+]]:2 = aten.call "aten::lerp_.Scalar"(%[[M0]], %[[G]], 0.099999999999999978) {fsdp.optimizer_op, mutates = array<i64: 0>}
// ADAMW-NEXT:    %[[V0:.+]] = fsdp.get @"w:exp_avg_sq"
// ADAMW-NEXT:    %[[V1:.+]]:2 = aten.call "aten::mul_.Scalar"(%[[V0]], 0.99899999999999999) {fsdp.optimizer_op, mutates = array<i64: 0>}
// ADAMW-NEXT:    %[[V:.+]]:2 = aten.call "aten::addcmul_"(%[[V1]]#1, %[[G]], %[[G]], 0.0010000000000000009) {fsdp.optimizer_op, mutates = array<i64: 0>}
// ADAMW-NEXT:    %[[SQ:.+]] = aten.call "aten::sqrt"(%[[V]]#1)
// ADAMW-NEXT:    %[[D0:.+]]:2 = aten.call "aten::div_.Tensor"(%[[SQ]], %[[B2SQRT]]) {fsdp.optimizer_op, mutates = array<i64: 0>} : (tensor<3x4xf32>, tensor<f64>) -> (tensor<3x4xf32>, tensor<3x4xf32>)
// ADAMW-NEXT:    %[[DENOM:.+]]:2 = aten.call "aten::add_.Scalar"(%[[D0]]#1, 1.000000e-08, 1) {fsdp.optimizer_op, mutates = array<i64: 0>}
// ADAMW-NEXT:    %[[NUM:.+]] = aten.call "aten::mul.Tensor"(%[[M]]#1, %[[STEP]]) {fsdp.optimizer_op} : (tensor<3x4xf32>, tensor<f64>) -> tensor<3x4xf32>
// ADAMW-NEXT:    %[[UPD:.+]]:2 = aten.call "aten::div_.Tensor"(%[[NUM]], %[[DENOM]]#1) {fsdp.optimizer_op, mutates = array<i64: 0>}
// ADAMW-NEXT:    %[[NEWP:.+]]:2 = aten.call "aten::add_.Tensor"(%[[DECAYED]], %[[UPD]]#1, 1) {fsdp.optimizer_op, mutates = array<i64: 0>}
// ADAMW-NEXT:    fsdp.update @w, %[[NEWP]]#1
// ADAMW-NEXT:    fsdp.update @"w:exp_avg", %[[M]]#1
// ADAMW-NEXT:    fsdp.update @"w:exp_avg_sq", %[[V]]#1
// ADAMW-NEXT:    return
module {
  fsdp.param @w : tensor<3x4xf32> in "fc" : "M"
  fsdp.param @frozen : tensor<2xf32> in "" : "M"
  func.func @train_step(%g: tensor<3x4xf32>) -> tensor<f32> {
    %w = fsdp.get @w : tensor<3x4xf32>
    %f = fsdp.get @frozen : tensor<2xf32>
    %l = aten.call "aten::sum"(%w, none) : (tensor<3x4xf32>) -> tensor<f32>
    fsdp.grad @w, %g : tensor<3x4xf32>
    return %l : tensor<f32>
  }
}

// SGD with dampening and maximize: d_p = -grad; buf.mul_(momentum)
// .add_(d_p, alpha=1 - dampening), except on the first step, where
// PyTorch's buffer is a copy of d_p: a step count selects it.
// DAMPENED:         fsdp.optim_state @"optim:step" : tensor<f64>
// DAMPENED-NEXT:    fsdp.optim_state @"w:momentum_buffer" : tensor<3x4xf32> for @w
// DAMPENED-LABEL:   func.func @train_step(
// DAMPENED-SAME:        %[[G:[a-z0-9]+]]: tensor<3x4xf32>)
// DAMPENED:         %[[P:.+]] = fsdp.get @w
// DAMPENED:         %[[S0:.+]] = fsdp.get @"optim:step" {fsdp.optimizer_op} : tensor<f64>
// DAMPENED-NEXT:    %[[S:.+]] = aten.call "aten::add.Scalar"(%[[S0]], 1.000000e+00, 1) {fsdp.optimizer_op} : (tensor<f64>) -> tensor<f64>
// DAMPENED-NEXT:    fsdp.update @"optim:step", %[[S]]
// DAMPENED-NEXT:    %[[FIRST:.+]] = aten.call "aten::eq.Scalar"(%[[S]], 1.000000e+00) {fsdp.optimizer_op} : (tensor<f64>) -> tensor<i1>
// DAMPENED-NEXT:    %[[DP:.+]] = aten.call "aten::neg"(%[[G]])
// DAMPENED-NEXT:    %[[BUF:.+]] = fsdp.get @"w:momentum_buffer"
// DAMPENED-NEXT:    %[[SCALED:.+]]:2 = aten.call "aten::mul_.Scalar"(%[[BUF]], 9.000000e-01) {fsdp.optimizer_op, mutates = array<i64: 0>}
// DAMPENED-NEXT:    %[[ADDED:.+]]:2 = aten.call "aten::add_.Tensor"(%[[SCALED]]#1, %[[DP]], 7.500000e-01) {fsdp.optimizer_op, mutates = array<i64: 0>}
// DAMPENED-NEXT:    %[[NEWBUF:.+]] = aten.call "aten::where.self"(%[[FIRST]], %[[DP]], %[[ADDED]]#1) {fsdp.optimizer_op} : (tensor<i1>, tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<3x4xf32>
// DAMPENED-NEXT:    fsdp.update @"w:momentum_buffer", %[[NEWBUF]]
// DAMPENED-NEXT:    %[[NEWP:.+]] = aten.call "aten::add.Tensor"(%[[P]], %[[NEWBUF]], -1.000000e-01)
// DAMPENED-NEXT:    fsdp.update @w, %[[NEWP]]

// torch.optim.Adam with maximize, L2 weight decay and AMSGrad: grad = -grad
// + wd * p; no decoupled decay; the running maximum of exp_avg_sq (state of
// its own) normalizes.
// ADAM:         fsdp.optim_state @"optim:step" : tensor<f64>
// ADAM-NEXT:    fsdp.optim_state @"w:exp_avg" : tensor<3x4xf32> for @w
// ADAM-NEXT:    fsdp.optim_state @"w:exp_avg_sq" : tensor<3x4xf32> for @w
// ADAM-NEXT:    fsdp.optim_state @"w:max_exp_avg_sq" : tensor<3x4xf32> for @w
// ADAM-LABEL:   func.func @train_step(
// ADAM-SAME:        %[[G:[a-z0-9]+]]: tensor<3x4xf32>)
// ADAM:         %[[P:.+]] = fsdp.get @w
// ADAM:         %[[B2SQRT:.+]] = aten.call "aten::sqrt"(%{{.+}}) {fsdp.optimizer_op} : (tensor<f64>) -> tensor<f64>
// ADAM-NEXT:    %[[NG:.+]] = aten.call "aten::neg"(%[[G]])
// ADAM-NEXT:    %[[GD:.+]] = aten.call "aten::add.Tensor"(%[[NG]], %[[P]], 5.000000e-01)
// ADAM-NEXT:    %[[M0:.+]] = fsdp.get @"w:exp_avg"
// ADAM-NEXT:    %[[M:.+]]:2 = aten.call "aten::lerp_.Scalar"(%[[M0]], %[[GD]], 0.099999999999999978) {fsdp.optimizer_op, mutates = array<i64: 0>}
// ADAM-NEXT:    %[[V0:.+]] = fsdp.get @"w:exp_avg_sq"
// ADAM-NEXT:    %[[V1:.+]]:2 = aten.call "aten::mul_.Scalar"(%[[V0]], 0.99899999999999999) {fsdp.optimizer_op, mutates = array<i64: 0>}
// ADAM-NEXT:    %[[V:.+]]:2 = aten.call "aten::addcmul_"(%[[V1]]#1, %[[GD]], %[[GD]], 0.0010000000000000009) {fsdp.optimizer_op, mutates = array<i64: 0>}
// ADAM-NEXT:    %[[MAX0:.+]] = fsdp.get @"w:max_exp_avg_sq"
// ADAM-NEXT:    %[[MAX:.+]] = aten.call "aten::maximum"(%[[MAX0]], %[[V]]#1)
// ADAM-NEXT:    fsdp.update @"w:max_exp_avg_sq", %[[MAX]]
// ADAM-NEXT:    %[[SQ:.+]] = aten.call "aten::sqrt"(%[[MAX]])
// ADAM-NEXT:    %[[D0:.+]]:2 = aten.call "aten::div_.Tensor"(%[[SQ]], %[[B2SQRT]]) {fsdp.optimizer_op, mutates = array<i64: 0>}
// ADAM-NEXT:    %[[DENOM:.+]]:2 = aten.call "aten::add_.Scalar"(%[[D0]]#1, 1.000000e-08, 1) {fsdp.optimizer_op, mutates = array<i64: 0>}
// ADAM-NEXT:    %[[NUM:.+]] = aten.call "aten::mul.Tensor"(%[[M]]#1, %{{.+}})
// ADAM-NEXT:    %[[UPD:.+]]:2 = aten.call "aten::div_.Tensor"(%[[NUM]], %[[DENOM]]#1) {fsdp.optimizer_op, mutates = array<i64: 0>}
// ADAM-NEXT:    %[[NEWP:.+]] = aten.call "aten::add.Tensor"(%[[P]], %[[UPD]]#1, 1)
// ADAM-NEXT:    fsdp.update @w, %[[NEWP]]
