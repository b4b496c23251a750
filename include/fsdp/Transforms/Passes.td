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
  let summary = "Turns @forward into @train_step, which returns the loss, "
                "and builds the evaluation step beside it";
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

    Beside it, the evaluation step `@eval_step` (the forward and the same
    loss, on the same state, which `fsdp-shard` shards alike and the plan
    carries as its `eval` program): made from `@eval_forward`, the model
    in evaluation mode (`fsdp-opt --eval-model` imports it), which must take
    the same inputs and update no state; else from a copy of `@forward`
    where it computes the same in both modes (it updates no buffer and
    draws no random number: dropout with p = 0 counts as none). Otherwise
    there is none, and the module's `fsdp.no_eval_step` says why. Calls
    that read their operands' `requires_grad` (matmul) see it on the
    parameters they read directly, as eager evaluation under
    `torch.no_grad()` does.

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
    Option<"loss", "loss", "std::string", /*default=*/"::fsdp::StepDefaults::loss()",
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

    With `device=cuda` the step is differentiated for a GPU, and the module
    records it (`fsdp.device = "cuda"`, which the optimizer and the plan
    read): dropout becomes `aten::native_dropout`, which eager PyTorch runs
    on a GPU (CUDA's fused kernel draws its own mask), where on the CPU it
    is ATen's `bernoulli_` noise times the input.
  }];
  let options = [
    Option<"device", "device", "std::string", /*default=*/"\"cpu\"",
           "The device the step will run on: cpu or cuda">,
  ];
  let dependentDialects = ["::fsdp::aten::ATenDialect"];
}

def GradAccum : Pass<"fsdp-grad-accum", "mlir::ModuleOp"> {
  let summary = "Gradient accumulation: K micro-batches before each update";
  let description = [{
    Runs after `fsdp-autodiff` (and after `fsdp-shard` in the sharded
    pipeline) and before `fsdp-optimizer`. With `micro-batches=K` > 1 the
    step's forward and backward run K times, one after another, each on its
    own inputs (K copies of the arguments, marked `fsdp.micro_batch = k`;
    the runtime feeds copy k from data entry `step * K + k`), as a
    PyTorch loop does it:

    ```python
    for k in range(K):
        (loss_fn(model(x[k]), y[k]) / K).backward()
    optimizer.step()
    ```

    - Each micro-batch's backward is seeded with `1/K` (the gradient of
      `loss / K`).
    - Each parameter's gradients add up in micro-batch order
      (`g0 + g1 + ...`, as `.grad` accumulates), and one `fsdp.grad` of the
      sum follows the last micro-batch. In the sharded step each
      micro-batch reduces its own gradients (FSDP without `no_sync`), so
      what is accumulated is the rank's reduced shard.
    - A buffer a micro-batch writes (BatchNorm's running statistics) is
      what the next micro-batch reads; the last one's value is the update.
    - The step returns the mean of the micro-batch losses.

    The first op of every micro-batch after the first carries
    `fsdp.micro_batch_start`: a forward starts again there (the phases the
    scheduling passes and the memory model see).
  }];
  let options = [
    Option<"microBatches", "micro-batches", "int64_t", /*default=*/"::fsdp::StepDefaults::gradAccum()",
           "Micro-batches per optimizer step (1: no accumulation)">,
  ];
  let dependentDialects = ["::fsdp::aten::ATenDialect"];
}

def Optimizer : Pass<"fsdp-optimizer", "mlir::ModuleOp"> {
  let summary = "Replaces each fsdp.grad by the optimizer's update";
  let description = [{
    Applies PyTorch's update rule to every parameter with an `fsdp.grad`,
    element for element as `torch.optim` does it (single-tensor form):

    - `sgd`: `maximize` negates the gradient, weight decay added to it,
      momentum buffer (`buf = momentum * buf + (1 - dampening) * grad`; the
      first step copies the gradient, as PyTorch does: zero state with no
      dampening is that copy, and with dampening a step count in
      `optim:step` selects it), Nesterov, `p -= lr * d_p`.
    - `adam` and `adamw`: `maximize` negates the gradient; Adam adds the
      weight decay to the gradient (L2), AdamW decays the parameter
      (`p *= 1 - lr * wd`); the moments `exp_avg` and `exp_avg_sq` (and with
      `amsgrad` their running maximum `max_exp_avg_sq`, which normalizes),
      bias corrections from a step count kept in `optim:step` (f64, as
      Python computes them), `p -= step_size * exp_avg / (sqrt(exp_avg_sq) /
      sqrt(bc2) + eps)`. ATen's CPU kernel computes that last line as
      `p + (-step_size * exp_avg) / denom`, CUDA's (`addcdiv`, and the
      foreach kernels eager Adam runs on a GPU) as
      `p + -step_size * (exp_avg / denom)`: a module for a GPU
      (`fsdp.device = "cuda"`) updates in CUDA's order, but for the units
      whose optimizer state is offloaded to the host.

    With `lr-schedule` (`constant`, `linear` or `cosine`, the formulas of
    `transformers`' `get_constant_schedule_with_warmup`,
    `get_linear_schedule_with_warmup` and `get_cosine_schedule_with_warmup`
    with `warmup-steps` and `total-steps`, as `torch.optim.lr_scheduler
    .LambdaLR` applies them: step k, counting from 0, uses `lr * lambda(k)`)
    the learning rate is a value of the step, computed in f64 from the step
    count `optim:step`, and the step returns it as an output named `lr`
    (result attribute `fsdp.metric`), which `fsdp-run --metrics` reports.
    With `lr-schedule external` the learning rate is read from the state
    `optim:lr` (f64, starting at `lr`; the plan marks it `init: "lr"`), which
    the runner may set between steps (the Python module's `rt.lr`, a user's
    own schedule); the step returns it as `lr` too.

    With `max-grad-norm` the gradients are clipped first, as
    `torch.nn.utils.clip_grad_norm_` and FSDP's `clip_grad_norm_` do: each
    gradient's 2-norm where it is complete, the total over the model (a
    rank's shards of the flat parameters: their norms squared, summed over
    the shard group by an all-reduce; whole gradients counted once), and
    every gradient times `min(1, max_norm / (total + 1e-6))`; every update
    then follows the last gradient. The step returns the total norm as an
    output named `grad_norm`.

    With `grad-scaler`, dynamic loss scaling as PyTorch's
    `ShardedGradScaler` does it (for fp16 mixed precision): the backward's
    seed is multiplied by the scale (`scaler:scale`, f32; its zero start
    stands for `init-scale`), so every gradient is computed scaled; each
    gradient, in its parameter's dtype (f32 under mixed precision), is
    checked for inf/NaN and multiplied by the
    scale's reciprocal (computed in f64, as `GradScaler` does) before
    clipping; the count of gradients found non-finite is summed over every
    rank (an all-reduce over the world); if any rank found one, every
    update of the step (parameters, optimizer state, step count) keeps the
    old value and the scale is multiplied by `backoff-factor`; otherwise
    after `growth-interval` consecutive good steps (`scaler:growth_tracker`)
    it is multiplied by `growth-factor` (where the product is finite). The
    step returns the scale it used and whether it skipped the update, as
    outputs named `scale` and `skipped`. A learning-rate schedule follows
    the step count, so a skipped step does not advance it (as Accelerate's
    scheduler skips its step after a skipped optimizer step).

    Optimizer state is declared as `fsdp.optim_state` symbols named
    `PARAM:momentum_buffer`, `PARAM:exp_avg`, `PARAM:exp_avg_sq`,
    `PARAM:max_exp_avg_sq`.

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
    Option<"optimizer", "optimizer", "std::string", /*default=*/"::fsdp::StepDefaults::optimizer()",
           "sgd, adam or adamw">,
    Option<"lr", "lr", "double", /*default=*/"::fsdp::StepDefaults::lr()", "Learning rate">,
    Option<"momentum", "momentum", "double", /*default=*/"::fsdp::StepDefaults::momentum()",
           "SGD momentum">,
    Option<"nesterov", "nesterov", "bool", /*default=*/"::fsdp::StepDefaults::nesterov()",
           "SGD with Nesterov momentum">,
    Option<"dampening", "dampening", "double", /*default=*/"::fsdp::StepDefaults::dampening()",
           "SGD dampening of the momentum">,
    Option<"maximize", "maximize", "bool", /*default=*/"::fsdp::StepDefaults::maximize()",
           "Maximize the objective (the gradient negated)">,
    Option<"amsgrad", "amsgrad", "bool", /*default=*/"::fsdp::StepDefaults::amsgrad()",
           "Adam/AdamW: normalize by the running maximum of exp_avg_sq">,
    Option<"maxGradNorm", "max-grad-norm", "double", /*default=*/"::fsdp::StepDefaults::maxGradNorm()",
           "Clip the gradients' total 2-norm to this (0: no clipping)">,
    Option<"lrSchedule", "lr-schedule", "std::string", /*default=*/"::fsdp::StepDefaults::lrSchedule()",
           "Learning-rate schedule: constant, linear, cosine or external "
           "(optim:lr, set by the runner) (empty: the learning rate is a "
           "constant of the plan)">,
    Option<"warmupSteps", "warmup-steps", "int64_t", /*default=*/"::fsdp::StepDefaults::warmupSteps()",
           "Steps of linear warmup from 0 to lr">,
    Option<"totalSteps", "total-steps", "int64_t", /*default=*/"::fsdp::StepDefaults::totalSteps()",
           "Steps over which linear and cosine decay to 0">,
    Option<"weightDecay", "weight-decay", "double", /*default=*/"::fsdp::StepDefaults::weightDecay()",
           "Weight decay (negative: PyTorch's default, 0 for sgd and adam, "
           "0.01 for adamw)">,
    Option<"beta1", "beta1", "double", /*default=*/"::fsdp::StepDefaults::beta1()", "Adam/AdamW beta1">,
    Option<"beta2", "beta2", "double", /*default=*/"::fsdp::StepDefaults::beta2()",
           "Adam/AdamW beta2">,
    Option<"eps", "eps", "double", /*default=*/"::fsdp::StepDefaults::eps()", "Adam/AdamW epsilon">,
    Option<"gradScaler", "grad-scaler", "bool", /*default=*/"::fsdp::StepDefaults::gradScaler()",
           "Dynamic loss scaling (ShardedGradScaler)">,
    Option<"initScale", "init-scale", "double", /*default=*/"::fsdp::StepDefaults::initScale()",
           "The gradient scaler's initial scale">,
    Option<"growthFactor", "growth-factor", "double", /*default=*/"::fsdp::StepDefaults::growthFactor()",
           "What the scale is multiplied by after growth-interval good steps">,
    Option<"backoffFactor", "backoff-factor", "double", /*default=*/"::fsdp::StepDefaults::backoffFactor()",
           "What the scale is multiplied by after a step with inf/NaN">,
    Option<"growthInterval", "growth-interval", "int64_t", /*default=*/"::fsdp::StepDefaults::growthInterval()",
           "Consecutive good steps before the scale grows">,
  ];
  let dependentDialects = ["::fsdp::aten::ATenDialect", "::fsdp::FSDPDialect"];
}

def AutoWrap : Pass<"fsdp-auto-wrap", "mlir::ModuleOp"> {
  let summary = "Groups parameters into FSDP units (PyTorch's auto_wrap_policy)";
  let description = [{
    Decides which module owns each parameter's FSDP unit, as FSDP's
    `auto_wrap_policy` does when it wraps modules, and marks every
    `fsdp.param` with `fsdp.unit = "MODULE_PATH"` (`""`: the root unit) or
    `fsdp.ignored` (a parameter of an `ignore-module`, which stays
    unsharded and replicated). The module tree comes from the importer's
    `fsdp.modules` (path and class of every module, preorder).

    - `size` (size_based_auto_wrap_policy, nested as FSDP1 and fairscale):
      bottom-up, a module whose not-yet-wrapped parameters number at least
      `min-num-params` becomes a unit; the root takes the rest. ModuleList
      and ModuleDict are never units, as in FSDP.
    - `class` (transformer_auto_wrap_policy): every module whose class is one
      of `wrap-class` (the full TorchScript name or its last component, e.g.
      `Block`) becomes a unit.
    - `modules`: the modules at the paths `wrap-module` become units.
    - `none`: one unit, the root.

    A parameter belongs to the innermost unit around the module that owns
    it (a tied weight to that of its first name).

    ```mlir
    fsdp.param @"blocks.0.fc.weight" : tensor<64x32xf32> in "blocks.0.fc" : "torch.nn.modules.linear.Linear" {fsdp.unit = "blocks.0"}
    ```
  }];
  let options = [
    Option<"policy", "policy", "std::string", /*default=*/"::fsdp::StepDefaults::autoWrap()",
           "size, class, modules or none">,
    Option<"minNumParams", "min-num-params", "int64_t", /*default=*/"::fsdp::StepDefaults::minNumParams()",
           "size: the parameter count that makes a module a unit (FSDP's "
           "default 1e8)">,
    ListOption<"wrapClasses", "wrap-class", "std::string",
               "class: module classes that become units">,
    ListOption<"wrapModules", "wrap-module", "std::string",
               "modules: module paths that become units">,
    ListOption<"ignoreModules", "ignore-module", "std::string",
               "Module paths whose parameters stay unsharded and replicated">,
  ];
}

def ActivationCheckpointing : Pass<"fsdp-activation-checkpointing",
                                   "mlir::ModuleOp"> {
  let summary = "Recomputes checkpointed regions' activations in the backward";
  let description = [{
    Runs after `fsdp-autodiff` (and `fsdp-auto-wrap`) and before
    `fsdp-shard`. A checkpointed region is a module: its forward keeps
    only what leaves it (its outputs, and the values it reads from
    outside), and the backward computes its forward again just before the
    first backward op that reads one of its other values, which then reads
    the recomputed value instead: `torch.utils.checkpoint` on that module,
    as FSDP's `apply_activation_checkpointing` applies it.

    - `all-units`: every FSDP unit but the root (`fsdp.unit` of the
      parameters, from `fsdp-auto-wrap`).
    - `classes`: the modules of these classes (the full TorchScript name
      or its last component).
    - `modules`: the modules at these paths.

    Regions are the outermost of the modules chosen. The recomputation
    runs, in forward order, only the calls the backward's reads depend on:
    not those that make only the region's outputs, which the forward kept
    (PyTorch's non-reentrant checkpoint stops early the same way), and an
    output the backward reads anyway is read as the forward kept it. Where
    it draws random numbers (`OpFact::Random`: dropout, `bernoulli`, ...),
    it runs every draw of the region up to the last one it needs, with the
    generator's state of the forward (`aten.rng_state` before the region;
    in the backward `aten.set_rng_state` to it, the recomputation, and
    `aten.set_rng_state` back to the state before it), so dropout draws
    the same masks, as with `preserve_rng_state`. The recomputation reads
    the region's parameters in the backward, where `fsdp-shard` gathers
    them anyway (a region over several units: each gathered for its own
    reads). Recomputed calls carry `fsdp.recompute = "REGION"`. A buffer
    update of the region (BatchNorm's running statistics) happens once, in
    the forward.
  }];
  let options = [
    Option<"allUnits", "all-units", "bool", /*default=*/"::fsdp::StepDefaults::activationCheckpointing()",
           "Checkpoint every FSDP unit but the root">,
    ListOption<"classes", "classes", "std::string",
               "Checkpoint the modules of these classes">,
    ListOption<"modules", "modules", "std::string",
               "Checkpoint the modules at these paths">,
  ];
  let dependentDialects = ["::fsdp::aten::ATenDialect"];
}

def Shard : Pass<"fsdp-shard", "mlir::ModuleOp"> {
  let summary = "Flat parameters, sharding strategy and collectives";
  let description = [{
    Runs after `fsdp-auto-wrap` and `fsdp-autodiff`, before
    `fsdp-optimizer`. For each unit it declares one `fsdp.flat_param`
    named `PATH._flat_param` (the root's is `_flat_param`): its trained
    parameters one after another, padded to a multiple of the shard-group
    size. A rank holds one shard; `fsdp.get` of the flat parameter reads it.

    - Before the unit's first use in the forward: `all_gather.start` of the
      shard, `wait`, and an `fsdp.view` per parameter in place of its
      `fsdp.get`; `fsdp.free` after the last forward use (FULL_SHARD,
      HYBRID_SHARD) and the same again around the backward's uses, or one
      gather kept from the forward to the last backward use
      (SHARD_GRAD_OP). NO_SHARD reads the whole flat parameter, no gather.
      Where a checkpointed region's recomputation (`fsdp.recompute`) reads
      several units, FULL_SHARD and HYBRID_SHARD gather each around its
      reads there and again around its own backward's, as FSDP's hooks do
      when the checkpointed forward runs again: held from the
      recomputation to its backward, all the region's units would be
      gathered at once.
    - OSS and SHARDED_DDP (fairscale's optimizer-state sharding, ZeRO-1, and
      ShardedDDP with it, ZeRO-2): the flat parameter is `replicated`, held
      whole by every rank and read without a gather; its gradient and
      optimizer state are sharded over the world. OSS all-reduces (mean)
      the flat gradient and each rank keeps its `fsdp.local_shard`;
      SHARDED_DDP reduce-scatters it. `fsdp-optimizer` updates the rank's
      shard and all-gathers the updated shards into the whole.
    - Once the last member's gradient is complete: the flat gradient
      (padded with zeros) is reduce-scattered (mean) over the shard group;
      NO_SHARD all-reduces it. HYBRID_SHARD's reduction, per
      `hybrid-reduction`: `ordered` (the default), one reduce-scatter
      `across world` (the sum over every rank in rank order, the shard of
      the rank's index in its group: the bits one process accumulating the
      ranks' gradients gets); `two-stage`, a reduce-scatter over the shard
      group then an all-reduce (mean) over the replica group, as PyTorch's
      HYBRID_SHARD (less traffic between nodes; the sum is associated
      differently, so the last bits can differ from one process's). The waits come at the end of the step, so
      reduction overlaps the rest of the backward; `fsdp.grad` of the flat
      parameter follows, and `fsdp-optimizer` updates the shard, with state
      shaped like it.
    - The evaluation step (`@eval_step`, where `fsdp-append-loss` made
      one) reads the units as the forward does: each gathered before its
      first read and freed after its last, whatever the strategy (no
      backward keeps it).
    - Parameters of ignored modules stay whole; their gradients are
      all-reduced (mean) over the world, so replicas stay equal.
      Parameters the loss does not reach (no `fsdp.grad`) are never
      updated and stay whole.

    The module gets `fsdp.world_size`, `fsdp.shard_group_size` and
    `fsdp.sharding`, and with `backend=nccl`, `fsdp.backend = "nccl"`: the
    memory model then counts the buffers NCCL's collectives hold (a
    reduction's input and its result, written in place) instead of Gloo's
    (a buffer for the other ranks' chunks, summed with the rank's own into
    a new result).

    Mixed precision (PyTorch FSDP's `MixedPrecision`): when the step reads
    a unit's parameters in a 16-bit type (the importer's param dtype), the
    unit's `fsdp.get` reads its shard in that type (a rounded copy) and the
    all-gather moves it, half the bytes; the gradients, computed in that
    type, are cast to `reduce-dtype` (if it differs) before the reduction.
    `fsdp-optimizer` casts the reduced shard to the flat parameter's own
    type.

    CPU offload (`offload-params`, PyTorch FSDP's
    `CPUOffload(offload_params=True)`): every flat parameter is marked
    `fsdp.host` (it lives in host memory); the read of its shard is copied
    to the device (`fsdp.to_device`) before the all-gather, and the reduced
    gradient shard, once waited (and cast), back to the host
    (`fsdp.to_host`), where `fsdp-optimizer` updates the shard with state
    of its own on the host. Not for OSS and SHARDED_DDP, whose parameters
    are whole on every rank.

    `offload-units` offloads the named units alone (their module paths,
    `""` the root); `offload-optim-units` moves only the named units'
    optimizer state to the host (`fsdp.host_optim` on the flat parameter,
    DeepSpeed's ZeRO-Offload of the optimizer): the shard stays on the
    device, the reduced gradient shard is copied to the host, and
    `fsdp-optimizer` updates a host copy of the shard and copies the result
    back (what `fsdp-opt --offload auto` chooses under a memory budget).
  }];
  let options = [
    Option<"sharding", "sharding-strategy", "std::string",
           /*default=*/"::fsdp::StepDefaults::sharding()",
           "FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, HYBRID_SHARD, OSS or "
           "SHARDED_DDP">,
    Option<"worldSize", "world-size", "int64_t", /*default=*/"::fsdp::StepDefaults::worldSize()",
           "Number of ranks">,
    Option<"shardGroupSize", "shard-group-size", "int64_t", /*default=*/"::fsdp::StepDefaults::shardGroupSize()",
           "HYBRID_SHARD: ranks per shard group (replicated across groups)">,
    Option<"hybridReduction", "hybrid-reduction", "std::string",
           /*default=*/"::fsdp::StepDefaults::hybridReduction()",
           "HYBRID_SHARD's gradient reduction: ordered (one sum over the "
           "world in rank order) or two-stage (shard group, then replicas)">,
    Option<"backend", "backend", "std::string",
           /*default=*/"::fsdp::StepDefaults::backend()",
           "The communicator the plan will run over: gloo or nccl (what "
           "its collectives hold, in the memory model)">,
    Option<"reduceDtype", "reduce-dtype", "std::string", /*default=*/"\"\"",
           "Mixed precision: the type gradients are reduced in (bf16, f16 or "
           "f32; empty: the gradient's own)">,
    ListOption<"offloadUnits", "offload-units", "std::string",
               "CPU offload of these units (module paths)">,
    ListOption<"offloadOptimUnits", "offload-optim-units", "std::string",
               "CPU offload of these units' optimizer state">,
    Option<"offloadParams", "offload-params", "bool", /*default=*/"::fsdp::StepDefaults::offloadParams()",
           "CPU offload: flat parameters (and their gradients and optimizer "
           "state) live in host memory">,
  ];
  let dependentDialects = ["::fsdp::aten::ATenDialect", "::fsdp::FSDPDialect"];
}

def Prefetch : Pass<"fsdp-prefetch", "mlir::ModuleOp"> {
  let summary = "Decides which all-gathers start ahead of their use "
                "(PyTorch FSDP's backward and forward prefetch)";
  let description = [{
    Runs after `fsdp-shard`, which starts every all-gather right before its
    wait. This pass only decides and records; `fsdp-limit-all-gathers` may
    take decisions back and `fsdp-apply-schedule` moves the ops.

    Within a phase (forward, backward) a unit's gather can start as soon as
    the previous unit's gather has been waited for (the next unit's
    parameters arrive while the current unit computes) or once the previous
    unit's buffer is freed. The decision is written on the
    `fsdp.all_gather.start` as `fsdp.prefetch = "wait"` or `"free"`: start
    it (with the read of its shard) right after the wait, or the free, of
    the phase's previous gather. A gather that already starts there, the
    first of its phase, and a gather whose anchor comes after it keep their
    place.

    - `backward-prefetch`: BACKWARD_PRE (FSDP's default: the next unit's
      gather starts before the current unit's gradient computation, "wait"),
      BACKWARD_POST (after it, once the current unit's parameters are freed,
      "free") or NO_PREFETCH.
    - `forward-prefetch`: the next unit's forward gather starts before the
      current unit's forward computation ("wait").
  }];
  let options = [
    Option<"backwardPrefetch", "backward-prefetch", "std::string",
           /*default=*/"::fsdp::StepDefaults::backwardPrefetch()",
           "BACKWARD_PRE, BACKWARD_POST or NO_PREFETCH">,
    Option<"forwardPrefetch", "forward-prefetch", "bool", /*default=*/"::fsdp::StepDefaults::forwardPrefetch()",
           "Start the next unit's forward all-gather before the current "
           "unit's forward computation">,
  ];
}

def LimitAllGathers : Pass<"fsdp-limit-all-gathers", "mlir::ModuleOp"> {
  let summary = "Takes back prefetches that would hold more gathered "
                "buffers than the limit (FSDP1's limit_all_gathers)";
  let description = [{
    Runs after `fsdp-prefetch`, before `fsdp-apply-schedule`. A gathered
    buffer counts from its all-gather's start (in flight) to its free
    (alive). In start order, a prefetch decision (`fsdp.prefetch`) stays
    only if, where the gather would start, fewer than `limit` other
    gathered buffers count: FSDP1's rate limiter, decided before launch
    instead of by blocking the CPU thread. Buffers kept across phases
    (SHARD_GRAD_OP's) count too. Gathers at their canonical place
    (right before their wait) are never delayed; `limit` 0 means no limit.
  }];
  let options = [
    Option<"limit", "limit", "int64_t",
           /*default=*/"::fsdp::StepDefaults::limitAllGathers()",
           "Most gathered buffers in flight or alive when a prefetched "
           "all-gather starts (0: no limit)">,
  ];
}

def LimitReductions : Pass<"fsdp-limit-reductions", "mlir::ModuleOp"> {
  let summary = "Bounds the gradient reductions in flight";
  let description = [{
    `fsdp-shard` waits for every reduction (reduce-scatter, all-reduce) at
    the end of the step, as late as the optimizer, its consumer, allows. A
    reduction in flight holds the unit's whole flat gradient and the buffer
    it receives into, so without a bound the end of the backward holds every
    unit's unsharded gradient at once. With `limit` N, reduction k is waited
    before reduction k + N starts: this pass marks such a wait with
    `fsdp.wait_before = k + N` (the index of that start among the step's
    reduction starts, in order: reduce-scatters and all-reduces, HYBRID_SHARD's
    replica all-reduces and ignored parameters' all-reduces included), and
    `fsdp-apply-schedule` moves it. FSDP2
    waits for the previous reduce-scatter before it issues the next (1, the
    default); 0 means no bound.
  }];
  let options = [
    Option<"limit", "limit", "int64_t",
           /*default=*/"::fsdp::StepDefaults::limitReductions()",
           "Most reductions in flight (0: no bound)">,
  ];
}

def ApplySchedule : Pass<"fsdp-apply-schedule", "mlir::ModuleOp"> {
  let summary = "Moves collectives to where the scheduling passes decided";
  let description = [{
    Moves each `fsdp.all_gather.start` marked `fsdp.prefetch`, with the
    `fsdp.get` of the shard it sends, right after the wait (`"wait"`) or the
    free (`"free"`) of the previous gather of its phase, and each
    `fsdp.wait` marked `fsdp.wait_before = i` right before the i-th
    reduction start of the step; it drops the marks. Moves only go earlier
    and never past an update of the state a moved read reads; reduction
    starts and frees stay, and all-gathers keep their order among
    themselves. A mark it cannot apply is an error at the op.
  }];
}

def VerifyPlan : Pass<"fsdp-verify-plan", "mlir::ModuleOp"> {
  let summary = "Checks a sharded step's collectives and buffer lifetimes";
  let description = [{
    The checks a sharded `@train_step` must pass before a runtime executes
    it on every rank, each an error at the offending op:

    - every rank issues the same collectives in the same order: no
      collective inside a region (a branch could differ between ranks), and
      the groups agree with the module's sharding (`fsdp.world_size`,
      `fsdp.shard_group_size`);
    - start before wait before use: every future is waited, and a reduced
      input is not written while its collective is in flight;
    - every gathered buffer is freed exactly once, and nothing uses it or a
      view of it after the free;
    - consistent shard sizes: an all-gather sends the unit's own shard
      (`fsdp.get` of its flat parameter), and each flat parameter's shard
      count is the shard-group size.
  }];
}

def MemoryReport : Pass<"fsdp-memory-report", "mlir::ModuleOp"> {
  let summary = "Prints the predicted memory of one rank during the step";
  let description = [{
    Runs the memory model (fsdp/Analysis/MemoryModel.h) on `@train_step`
    (or `@forward` where there is no training step) and prints what
    `fsdp-opt --memory-report` prints, or with `json=true` what
    `--memory-report-json` writes: the bytes of live tensor storages on one
    rank after every instruction, counted as fsdp-run counts them, their
    peak, where it occurs and what it holds. Changes nothing. An op the
    model cannot account for is an error at the op.

    Beside it, the cost model (fsdp/Analysis/CostModel.h) predicts the
    step's time on `machine`: a built-in machine (`cpu`, `h100`) or a file
    `fsdp-run --calibrate` wrote.
  }];
  let options = [
    Option<"json", "json", "bool", /*default=*/"false",
           "print the report as JSON, with the timeline">,
    Option<"machine", "machine", "std::string", /*default=*/"\"cpu\"",
           "the machine whose rates predict the step time: cpu, h100 or a "
           "file fsdp-run --calibrate wrote">,
    ListOption<"kernelSeconds", "kernel-seconds", "double",
               "for tests: each instruction's measured time (negative where "
               "none), as fsdp-opt --measure-kernels measures it, in place "
               "of the rates' estimate">,
    ListOption<"coldKernelSeconds", "cold-kernel-seconds", "double",
               "for tests: the same with the operands evicted from the "
               "caches first">,
  ];
}

#endif // FSDP_TRANSFORMS_PASSES_TD
