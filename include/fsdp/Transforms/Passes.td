//===- Passes.td - fsdp-opt passes ----------------------------*- tablegen -*-===//
//
// The training step (DESIGN.md §2, step 2): a loss appended to the forward,
// reverse-mode differentiation, the optimizer update. Together they are the
// `fsdp-train-step` pipeline; `fsdp-opt --loss ... --optimizer ...` runs it.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_TRANSFORMS_PASSES_TD
#define FSDP_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def AppendLoss : Pass<"fsdp-append-loss", "mlir::ModuleOp"> {
  let summary = "Turns @forward into @train_step, which returns the loss";
  let description = [{
    Renames `@forward` to `@train_step`, appends the targets as arguments and
    the loss to its body, and makes the loss its only result:

    - `cross_entropy`: class indices (i64) against the model's first output,
      mean over all positions. The class scores are in the last dimension
      when the target has the output's shape without it (a language model's
      `[batch, seq, vocab]` against `[batch, seq]`, as
      `F.cross_entropy(out.flatten(0, -2), y.flatten())`), otherwise in
      dimension 1, as `F.cross_entropy(out, y)` expects (`[N, C, d...]`
      against `[N, d...]`).
    - `mse`: `F.mse_loss(out, y)` against a target shaped like the output.
    - `none`: the model returns its own scalar loss first; its targets are
      already among its inputs, so `targets` must be empty.

    Other outputs of the model are dropped.

    ```mlir
    // fsdp-opt --fsdp-append-loss="loss=cross_entropy targets=y:8xi64"
    func.func @train_step(%x: tensor<8x32xf32> {fsdp.name = "x"},
                          %y: tensor<8xi64> {fsdp.name = "y"}) -> tensor<f32> {
      ...
      %logp = aten.call "aten::log_softmax.int"(%logits, 1, none) : ...
      %loss, %w = aten.call "aten::nll_loss_forward"(%logp, %y, none, 1, -100) : ...
      return %loss : tensor<f32>
    }
    ```
  }];
  let options = [
    Option<"loss", "loss", "std::string", /*default=*/"\"cross_entropy\"",
           "The loss: cross_entropy, mse or none (the model returns it)">,
    ListOption<"targets", "targets", "std::string",
               "Target specs NAME:DIMSxDTYPE (default: those the model file "
               "stores, the module's `fsdp.targets`)">,
  ];
  let dependentDialects = ["::fsdp::aten::ATenDialect"];
}

def Autodiff : Pass<"fsdp-autodiff", "mlir::ModuleOp"> {
  let summary = "Reverse-mode differentiation of @train_step's loss";
  let description = [{
    Differentiates the scalar first result of `@train_step` with respect to
    every parameter it reads, appending the backward before the return. Each
    ATen op is differentiated by its rule (include/fsdp/Dialect/ATen/
    Gradients.h), written with ATen ops and ATen's backward kernels; ops
    whose rule needs saved values (batch_norm, layer_norm, dropout,
    max_pool2d) are first rewritten into the ATen op that returns them.
    An op on the path from a parameter to the loss without a rule is an
    error at that op.

    Each parameter's gradient ends in an `fsdp.grad`, placed right after its
    last contribution; a parameter the loss does not depend on gets none.

    ```mlir
    %g = aten.call "aten::mm"(%gt, %x) : ...
    fsdp.grad @fc.weight, %g : tensor<10x32xf32>
    ```
  }];
  let dependentDialects = ["::fsdp::aten::ATenDialect"];
}

def Optimizer : Pass<"fsdp-optimizer", "mlir::ModuleOp"> {
  let summary = "Replaces each fsdp.grad by the optimizer's update";
  let description = [{
    Applies PyTorch's update rule to every parameter with an `fsdp.grad`,
    element for element as `torch.optim` does it (single-tensor form):

    - `sgd`: weight decay added to the gradient, momentum buffer
      (`buf = momentum * buf + grad`, zero before the first step, which is
      PyTorch's first-step copy), Nesterov, `p -= lr * d_p`.
    - `adamw`: decoupled weight decay `p *= 1 - lr * wd`, the moments
      `exp_avg` and `exp_avg_sq`, bias corrections from a step count kept in
      `optim:step` (f64, as Python computes them), `p -= step_size *
      exp_avg / (sqrt(exp_avg_sq) / sqrt(bc2) + eps)`.

    Optimizer state is declared as `fsdp.optim_state` symbols named
    `PARAM:momentum_buffer`, `PARAM:exp_avg`, `PARAM:exp_avg_sq`.

    ```mlir
    fsdp.optim_state @"fc.weight:momentum_buffer" : tensor<10x32xf32> for @fc.weight
    ...
    %m = fsdp.get @"fc.weight:momentum_buffer" : tensor<10x32xf32>
    %m1:2 = aten.call "aten::mul_.Scalar"(%m, 9.000000e-01) {mutates = array<i64: 0>} : ...
    %m2:2 = aten.call "aten::add_.Tensor"(%m1#1, %g, 1) {mutates = array<i64: 0>} : ...
    fsdp.update @"fc.weight:momentum_buffer", %m2#1 : tensor<10x32xf32>
    %p1 = aten.call "aten::add.Tensor"(%p, %m2#1, -1.000000e-02) : ...
    fsdp.update @fc.weight, %p1 : tensor<10x32xf32>
    ```

    Chained updates use ATen's in-place ops, made functional (`mutates`):
    the runtime writes in place when nothing else holds the old value.
  }];
  let options = [
    Option<"optimizer", "optimizer", "std::string", /*default=*/"\"sgd\"",
           "sgd or adamw">,
    Option<"lr", "lr", "double", /*default=*/"1e-3", "Learning rate">,
    Option<"momentum", "momentum", "double", /*default=*/"0.0",
           "SGD momentum">,
    Option<"nesterov", "nesterov", "bool", /*default=*/"false",
           "SGD with Nesterov momentum">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"-1.0",
           "Weight decay (negative: PyTorch's default, 0 for sgd and 0.01 "
           "for adamw)">,
    Option<"beta1", "beta1", "double", /*default=*/"0.9", "AdamW beta1">,
    Option<"beta2", "beta2", "double", /*default=*/"0.999", "AdamW beta2">,
    Option<"eps", "eps", "double", /*default=*/"1e-8", "AdamW epsilon">,
  ];
  let dependentDialects = ["::fsdp::aten::ATenDialect", "::fsdp::FSDPDialect"];
}

#endif // FSDP_TRANSFORMS_PASSES_TD
