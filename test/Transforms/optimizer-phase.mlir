// The optimizer's phase: every op fsdp-optimizer adds is marked
// fsdp.optimizer_op (its updates follow each gradient, interleaved with the
// backward, so the phase is the op's, not a position), and StepOrder puts
// it in the optimizer's phase wherever it sits; the step's own ops are not
// marked. The memory report names the phase of its peak: here AdamW's
// temporaries, beside the parameter and its two moments. (This hand-written
// step has no backward seed: its own ops are the forward's.)
// RUN: fsdp-opt %s --fsdp-optimizer="optimizer=adamw lr=0.01" | FileCheck %s
// RUN: fsdp-opt %s --fsdp-optimizer="optimizer=adamw lr=0.01" --fsdp-memory-report=json=true -o /dev/null | FileCheck %s --check-prefix=REPORT

// CHECK-LABEL: func.func @train_step(
// CHECK-NEXT:    %[[W:.+]] = fsdp.get @w : tensor<3x4xf32>{{$}}
// CHECK-NEXT:    aten.call "aten::sum"(%[[W]], none) : (tensor<3x4xf32>) -> tensor<f32>{{$}}
// CHECK-NEXT:    fsdp.get @"optim:step" {fsdp.optimizer_op} : tensor<f64>
// CHECK:         fsdp.get @"w:exp_avg" {fsdp.optimizer_op} : tensor<3x4xf32>
// CHECK:         fsdp.update @w, %{{.+}} {fsdp.optimizer_op} : tensor<3x4xf32>
// CHECK-NOT:     fsdp.grad
// CHECK:         return %{{.+}} : tensor<f32>{{$}}

// REPORT: "peak_phase":"optimizer"

module {
  fsdp.param @w : tensor<3x4xf32> in "fc" : "M"
  func.func @train_step(%g: tensor<3x4xf32>) -> tensor<f32> {
    %w = fsdp.get @w : tensor<3x4xf32>
    %l = aten.call "aten::sum"(%w, none) : (tensor<3x4xf32>) -> tensor<f32>
    fsdp.grad @w, %g : tensor<3x4xf32>
    return %l : tensor<f32>
  }
}
