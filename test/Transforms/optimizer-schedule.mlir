// RUN: fsdp-opt %s --fsdp-optimizer="optimizer=sgd lr=0.1 lr-schedule=cosine warmup-steps=2 total-steps=10" | FileCheck %s --check-prefix=COSINE
// RUN: fsdp-opt %s --fsdp-optimizer="optimizer=adamw lr=0.01 lr-schedule=linear total-steps=10" | FileCheck %s --check-prefix=LINEAR
// RUN: not fsdp-opt %s --fsdp-optimizer="optimizer=sgd lr-schedule=step" 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// RUN: not fsdp-opt %s --fsdp-optimizer="optimizer=sgd lr-schedule=cosine" 2>&1 | FileCheck %s --check-prefix=NOTOTAL
// RUN: not fsdp-opt %s --fsdp-optimizer="optimizer=sgd lr-schedule=constant total-steps=5" 2>&1 | FileCheck %s --check-prefix=CONSTTOTAL
// RUN: not fsdp-opt %s --fsdp-optimizer="optimizer=sgd warmup-steps=5" 2>&1 | FileCheck %s --check-prefix=NOSCHEDULE
// RUN: not fsdp-opt %s --fsdp-optimizer="optimizer=sgd lr-schedule=linear total-steps=5 warmup-steps=-1" 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// UNKNOWN: error: unknown learning-rate schedule 'step': expected constant, linear, cosine or external
// NOTOTAL: error: the cosine learning-rate schedule needs total-steps: the steps over which the learning rate decays to 0
// CONSTTOTAL: error: total-steps applies to the linear and cosine learning-rate schedules
// NOSCHEDULE: error: warmup-steps needs a constant, linear or cosine learning-rate schedule (with external, the runner sets each step's rate)
// NEGATIVE: error: warmup-steps and total-steps must not be negative

// A schedule makes the learning rate a value of the step, computed in f64
// from the step count as LambdaLR computes it in Python (step k = count - 1
// uses lr * lambda(k)), and an output of the step named `lr`. Cosine with
// warmup: k / max(1, warmup) while k < warmup, then
// max(0, 0.5 * (1 + cos(pi * (k - warmup) / max(1, total - warmup)))).
// SGD's update becomes p + d_p * -lr.
// COSINE:         fsdp.optim_state @"optim:step" : tensor<f64>
// COSINE-LABEL:   func.func @train_step(
// COSINE-SAME:        %[[G:[a-z0-9]+]]: tensor<3xf32>) -> (tensor<f32>, tensor<f64> {fsdp.metric = "lr"})
// COSINE:         %[[P:.+]] = fsdp.get @w
// COSINE:         %[[S0:.+]] = fsdp.get @"optim:step"
// COSINE-NEXT:    %[[S:.+]] = aten.call "aten::add.Scalar"(%[[S0]], 1.000000e+00, 1)
// COSINE-NEXT:    fsdp.update @"optim:step", %[[S]]
// COSINE-NEXT:    %[[K:.+]] = aten.call "aten::add.Scalar"(%[[S]], -1.000000e+00, 1)
// COSINE-NEXT:    %[[WARMING:.+]] = aten.call "aten::div.Scalar"(%[[K]], 2.000000e+00)
// COSINE-NEXT:    %[[KW:.+]] = aten.call "aten::add.Scalar"(%[[K]], -2.000000e+00, 1)
// COSINE-NEXT:    %[[PROGRESS:.+]] = aten.call "aten::div.Scalar"(%[[KW]], 8.000000e+00)
// COSINE-NEXT:    %[[ANGLE:.+]] = aten.call "aten::mul.Scalar"(%[[PROGRESS]], 3.1415926535897931)
// COSINE-NEXT:    %[[COS:.+]] = aten.call "aten::cos"(%[[ANGLE]])
// COSINE-NEXT:    %[[ONE:.+]] = aten.call "aten::add.Scalar"(%[[COS]], 1.000000e+00, 1)
// COSINE-NEXT:    %[[HALF:.+]] = aten.call "aten::mul.Scalar"(%[[ONE]], 5.000000e-01)
// COSINE-NEXT:    %[[AFTER:.+]] = aten.call "aten::clamp_min"(%[[HALF]], 0.000000e+00)
// COSINE-NEXT:    %[[WARM:.+]] = aten.call "aten::lt.Scalar"(%[[K]], 2.000000e+00) {fsdp.optimizer_op} : (tensor<f64>) -> tensor<i1>
// COSINE-NEXT:    %[[FACTOR:.+]] = aten.call "aten::where.self"(%[[WARM]], %[[WARMING]], %[[AFTER]])
// COSINE-NEXT:    %[[LR:.+]] = aten.call "aten::mul.Scalar"(%[[FACTOR]], 1.000000e-01)
// COSINE-NEXT:    %[[NEGLR:.+]] = aten.call "aten::neg"(%[[LR]])
// COSINE-NEXT:    %[[STEP:.+]] = aten.call "aten::mul.Tensor"(%[[G]], %[[NEGLR]]) {fsdp.optimizer_op} : (tensor<3xf32>, tensor<f64>) -> tensor<3xf32>
// COSINE-NEXT:    %[[NEWP:.+]] = aten.call "aten::add.Tensor"(%[[P]], %[[STEP]], 1)
// COSINE-NEXT:    fsdp.update @w, %[[NEWP]]
// COSINE:         return %{{.+}}, %[[LR]] : tensor<f32>, tensor<f64>

// Linear decay: max(0, (total - k) / max(1, total - warmup)); AdamW's step
// size is -lr / bias1, its decay p * (1 - lr * wd), both from the step's lr.
// LINEAR:         %[[K:.+]] = aten.call "aten::add.Scalar"(%{{.+}}, -1.000000e+00, 1)
// LINEAR-NEXT:    %[[WARMING:.+]] = aten.call "aten::div.Scalar"(%[[K]], 1.000000e+00)
// LINEAR-NEXT:    %[[LEFT:.+]] = aten.call "aten::rsub.Scalar"(%[[K]], 1.000000e+01, 1)
// LINEAR-NEXT:    %[[DECAY:.+]] = aten.call "aten::div.Scalar"(%[[LEFT]], 1.000000e+01)
// LINEAR-NEXT:    %[[AFTER:.+]] = aten.call "aten::clamp_min"(%[[DECAY]], 0.000000e+00)
// LINEAR:         %[[LR:.+]] = aten.call "aten::mul.Scalar"(%{{.+}}, 1.000000e-02)
// LINEAR-NEXT:    %[[NEGLR:.+]] = aten.call "aten::neg"(%[[LR]])
// LINEAR:         aten.call "aten::div.Tensor"(%[[NEGLR]], %{{.+}}) {fsdp.optimizer_op} : (tensor<f64>, tensor<f64>) -> tensor<f64>
// LINEAR:         %[[WD:.+]] = aten.call "aten::mul.Scalar"(%[[LR]], 1.000000e-02)
// LINEAR-NEXT:    %[[KEEP:.+]] = aten.call "aten::rsub.Scalar"(%[[WD]], 1.000000e+00, 1)
// LINEAR-NEXT:    aten.call "aten::mul.Tensor"(%{{.+}}, %[[KEEP]]) {fsdp.optimizer_op} : (tensor<3xf32>, tensor<f64>) -> tensor<3xf32>

// External: the rate is state (optim:lr, which the plan starts at lr and the
// runner sets between steps), read by the update and returned as `lr`; no
// step count is kept for it.
// EXTERNAL:         fsdp.optim_state @"optim:lr" : tensor<f64>
// EXTERNAL-NOT:     optim:step
// EXTERNAL-LABEL:   func.func @train_step(
// EXTERNAL-SAME:        %[[G:[a-z0-9]+]]: tensor<3xf32>) -> (tensor<f32>, tensor<f64> {fsdp.metric = "lr"})
// EXTERNAL:         %[[P:.+]] = fsdp.get @w
// EXTERNAL:         %[[LR:.+]] = fsdp.get @"optim:lr" : tensor<f64>
// EXTERNAL-NEXT:    %[[NEGLR:.+]] = aten.call "aten::neg"(%[[LR]])
// EXTERNAL-NEXT:    %[[STEP:.+]] = aten.call "aten::mul.Tensor"(%[[G]], %[[NEGLR]]) {fsdp.optimizer_op} : (tensor<3xf32>, tensor<f64>) -> tensor<3xf32>
// EXTERNAL-NEXT:    %[[NEWP:.+]] = aten.call "aten::add.Tensor"(%[[P]], %[[STEP]], 1)
// EXTERNAL-NEXT:    fsdp.update @w, %[[NEWP]]
// EXTERNAL-NOT:     optim:lr
// EXTERNAL:         return %{{.+}}, %[[LR]] : tensor<f32>, tensor<f64>
module {
  fsdp.param @w : tensor<3xf32> in "" : "M"
  func.func @train_step(%g: tensor<3xf32>) -> tensor<f32> {
    %w = fsdp.get @w : tensor<3xf32>
    %l = aten.call "aten::sum"(%w, none) : (tensor<3xf32>) -> tensor<f32>
    fsdp.grad @w, %g : tensor<3xf32>
    return %l : tensor<f32>
  }
}
