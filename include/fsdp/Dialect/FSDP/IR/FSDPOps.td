//===- FSDPOps.td - model state and FSDP ops ---------------------*- tablegen -*-===//
//
// The `fsdp` dialect holds what is not an ATen computation: the model's
// parameters and buffers as module-level symbols, the state updates of
// buffers, and the ops of a fully sharded step (flat-parameter layout,
// asynchronous collectives as start + wait, frees and views into flat
// buffers). Collectives are not Pure: their order is part of the plan.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_DIALECT_FSDP_IR_FSDPOPS_TD
#define FSDP_DIALECT_FSDP_IR_FSDPOPS_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def FSDP_Dialect : Dialect {
  let name = "fsdp";
  let summary = "model state and fully sharded data-parallel execution";
  let cppNamespace = "::fsdp";
  let useDefaultTypePrinterParser = 1;
  let useDefaultAttributePrinterParser = 1;
}

class FSDP_Op<string mnemonic, list<Trait> traits = []>
    : Op<FSDP_Dialect, mnemonic, traits>;

def FSDP_CollectiveStartOpInterface : OpInterface<"CollectiveStartOp"> {
  let cppNamespace = "::fsdp";
  let description = [{
    Starts an asynchronous collective: it reads one tensor and returns a
    future, which one `fsdp.wait` completes. What the passes that place,
    move and check collectives ask of any of them.
  }];
  let methods = [
    InterfaceMethod<"The tensor the collective sends.", "::mlir::Value",
                    "getCollectiveInput">,
    InterfaceMethod<"The future the collective returns.", "::mlir::Value",
                    "getCollectiveFuture", (ins), [{}],
                    [{ return $_op->getResult(0); }]>,
    InterfaceMethod<"Whether it reduces (sums ranks' tensors) rather than "
                    "gathers.", "bool", "isReduction">,
  ];
}

// Flat buffers and their shards.
def FSDP_FlatTensor : TypeConstraint<
    And<[IsTensorTypePred, HasAnyRankOfPred<[1]>, HasStaticShapePred]>,
    "statically shaped 1-D tensor">;

//===----------------------------------------------------------------------===//
// Enums and types
//===----------------------------------------------------------------------===//

// The sharding strategies: PyTorch FSDP's and fairscale's names. The module
// of a sharded step carries its strategy as `fsdp.sharding`.
def FSDP_FullShard : I32EnumAttrCase<"FULL_SHARD", 0>;
def FSDP_ShardGradOp : I32EnumAttrCase<"SHARD_GRAD_OP", 1>;
def FSDP_NoShard : I32EnumAttrCase<"NO_SHARD", 2>;
def FSDP_HybridShard : I32EnumAttrCase<"HYBRID_SHARD", 3>;
def FSDP_Oss : I32EnumAttrCase<"OSS", 4>;
def FSDP_ShardedDdp : I32EnumAttrCase<"SHARDED_DDP", 5>;
def FSDP_ShardingStrategy : I32EnumAttr<"ShardingStrategy",
    "how a step shards parameters, gradients and optimizer state",
    [FSDP_FullShard, FSDP_ShardGradOp, FSDP_NoShard, FSDP_HybridShard,
     FSDP_Oss, FSDP_ShardedDdp]> {
  let cppNamespace = "::fsdp";
  let genSpecializedAttr = 0;
}
def FSDP_ShardingStrategyAttr
    : EnumAttr<FSDP_Dialect, FSDP_ShardingStrategy, "sharding">;

// PyTorch FSDP's BackwardPrefetch: when the backward's next all-gather
// starts (fsdp-prefetch's option). Its one string table.
def FSDP_BackwardPre : I32EnumAttrCase<"BACKWARD_PRE", 0>;
def FSDP_BackwardPost : I32EnumAttrCase<"BACKWARD_POST", 1>;
def FSDP_NoPrefetch : I32EnumAttrCase<"NO_PREFETCH", 2>;
def FSDP_BackwardPrefetch : I32EnumAttr<"BackwardPrefetch",
    "when the backward's next all-gather starts",
    [FSDP_BackwardPre, FSDP_BackwardPost, FSDP_NoPrefetch]> {
  let cppNamespace = "::fsdp";
  let genSpecializedAttr = 0;
}

// HYBRID_SHARD's gradient reduction (fsdp-shard's option): one sum over
// the world in rank order, or reduce-scatter in the shard group then
// all-reduce across groups.
def FSDP_OrderedReduction : I32EnumAttrCase<"Ordered", 0, "ordered">;
def FSDP_TwoStageReduction : I32EnumAttrCase<"TwoStage", 1, "two-stage">;
def FSDP_HybridReduction : I32EnumAttr<"HybridReduction",
    "how HYBRID_SHARD reduces gradients",
    [FSDP_OrderedReduction, FSDP_TwoStageReduction]> {
  let cppNamespace = "::fsdp";
  let genSpecializedAttr = 0;
}

// The auto-wrap policies (fsdp-auto-wrap's option): PyTorch's
// size_based_auto_wrap_policy, ModuleWrapPolicy, explicit modules, none.
def FSDP_SizePolicy : I32EnumAttrCase<"Size", 0, "size">;
def FSDP_ClassPolicy : I32EnumAttrCase<"Class", 1, "class">;
def FSDP_ModulesPolicy : I32EnumAttrCase<"Modules", 2, "modules">;
def FSDP_NoPolicy : I32EnumAttrCase<"None", 3, "none">;
def FSDP_AutoWrapPolicy : I32EnumAttr<"AutoWrapPolicy",
    "which modules become FSDP units",
    [FSDP_SizePolicy, FSDP_ClassPolicy, FSDP_ModulesPolicy, FSDP_NoPolicy]> {
  let cppNamespace = "::fsdp";
  let genSpecializedAttr = 0;
}

// The training step's closed sets: fsdp-append-loss's loss,
// fsdp-optimizer's optimizer (torch.optim's) and learning-rate schedule
// (transformers' get_*_schedule_with_warmup).
def FSDP_CrossEntropyLoss : I32EnumAttrCase<"CrossEntropy", 0, "cross_entropy">;
def FSDP_MSELoss : I32EnumAttrCase<"MSE", 1, "mse">;
def FSDP_NoLoss : I32EnumAttrCase<"None", 2, "none">;
def FSDP_LossKind : I32EnumAttr<"LossKind", "the loss of the training step",
    [FSDP_CrossEntropyLoss, FSDP_MSELoss, FSDP_NoLoss]> {
  let cppNamespace = "::fsdp";
  let genSpecializedAttr = 0;
}
def FSDP_SGD : I32EnumAttrCase<"SGD", 0, "sgd">;
def FSDP_Adam : I32EnumAttrCase<"Adam", 1, "adam">;
def FSDP_AdamW : I32EnumAttrCase<"AdamW", 2, "adamw">;
def FSDP_OptimizerKind : I32EnumAttr<"OptimizerKind", "the optimizer",
    [FSDP_SGD, FSDP_Adam, FSDP_AdamW]> {
  let cppNamespace = "::fsdp";
  let genSpecializedAttr = 0;
}
def FSDP_ConstantSchedule : I32EnumAttrCase<"Constant", 0, "constant">;
def FSDP_LinearSchedule : I32EnumAttrCase<"Linear", 1, "linear">;
def FSDP_CosineSchedule : I32EnumAttrCase<"Cosine", 2, "cosine">;
def FSDP_ExternalSchedule : I32EnumAttrCase<"External", 3, "external">;
def FSDP_LrSchedule : I32EnumAttr<"LrSchedule", "the learning-rate schedule",
    [FSDP_ConstantSchedule, FSDP_LinearSchedule, FSDP_CosineSchedule,
     FSDP_ExternalSchedule]> {
  let cppNamespace = "::fsdp";
  let genSpecializedAttr = 0;
}

def FSDP_CommGroupWorld : I32EnumAttrCase<"world", 0>;
def FSDP_CommGroupShard : I32EnumAttrCase<"shard", 1>;
def FSDP_CommGroupReplicate : I32EnumAttrCase<"replicate", 2>;
def FSDP_CommGroup : I32EnumAttr<"CommGroup",
    "the ranks a collective runs over",
    [FSDP_CommGroupWorld, FSDP_CommGroupShard, FSDP_CommGroupReplicate]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::fsdp";
}
def FSDP_CommGroupAttr : EnumAttr<FSDP_Dialect, FSDP_CommGroup, "group">;

def FSDP_ReduceSum : I32EnumAttrCase<"sum", 0>;
def FSDP_ReduceMean : I32EnumAttrCase<"mean", 1>;
def FSDP_ReduceOp : I32EnumAttr<"ReduceOp", "how a collective combines ranks",
    [FSDP_ReduceSum, FSDP_ReduceMean]> {
  let genSpecializedAttr = 0;
  let cppNamespace = "::fsdp";
}
def FSDP_ReduceOpAttr : EnumAttr<FSDP_Dialect, FSDP_ReduceOp, "reduce">;

def FSDP_FutureType : TypeDef<FSDP_Dialect, "Future"> {
  let mnemonic = "future";
  let summary = "the pending result of an asynchronous collective";
  let description = [{
    Returned by a `*.start` op and consumed by exactly one `fsdp.wait`, which
    yields the tensor. Nothing may read the tensor before the wait.
  }];
  let parameters = (ins "::mlir::RankedTensorType":$tensorType);
  let assemblyFormat = "`<` $tensorType `>`";
  let genVerifyDecl = 1;
}

//===----------------------------------------------------------------------===//
// Model state
//===----------------------------------------------------------------------===//

class FSDP_StateSymbolOp<string mnemonic> : FSDP_Op<mnemonic, [Symbol]> {
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<AnyStaticShapeTensor>:$type,
                       StrAttr:$module_path, StrAttr:$module_class,
                       OptionalAttr<StrArrayAttr>:$aliases);
  let assemblyFormat = [{
    $sym_name `:` $type `in` $module_path `:` $module_class
    (`aliases` $aliases^)? attr-dict
  }];
  let hasVerifier = 1;
}

def FSDP_ParamOp : FSDP_StateSymbolOp<"param"> {
  let summary = "a trainable parameter of the model, named by its FQN";
  let description = [{
    One symbol per distinct parameter tensor, named by its fully-qualified name
    (the first one in `named_parameters` order). `module_path` and
    `module_class` name the module that owns it. A tied weight is one symbol
    whose other FQNs are listed in `aliases`.

    ```mlir
    fsdp.param @"wte.weight" : tensor<50x32xf32> in "wte" : "torch.nn.modules.sparse.Embedding" aliases ["lm_head.weight"]
    ```
  }];
}

def FSDP_BufferOp : FSDP_StateSymbolOp<"buffer"> {
  let summary = "a buffer of the model (running statistics, counters)";
  let description = [{
    A buffer registered with `persistent=False` (a causal mask) is marked
    `non_persistent`: it is not part of the module's `state_dict`, so a
    checkpoint leaves it out.

    ```mlir
    fsdp.buffer @"bn.running_mean" : tensor<16xf32> in "bn" : "torch.nn.modules.batchnorm.BatchNorm2d"
    fsdp.buffer @"attn.mask" : tensor<1x1x16x16xi1> in "attn" : "models.Attention" non_persistent
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<AnyStaticShapeTensor>:$type,
                       StrAttr:$module_path, StrAttr:$module_class,
                       OptionalAttr<StrArrayAttr>:$aliases,
                       UnitAttr:$non_persistent);
  let assemblyFormat = [{
    $sym_name `:` $type `in` $module_path `:` $module_class
    (`aliases` $aliases^)? (`non_persistent` $non_persistent^)? attr-dict
  }];
}

// Not Pure: `fsdp.update` changes what a later `fsdp.get` reads.
def FSDP_GetOp : FSDP_Op<"get",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "reads the value of a parameter, buffer or optimizer state";
  let description = [{
    ```mlir
    %w = fsdp.get @"fc1.weight" : tensor<16x32xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$name);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}

def FSDP_OptimStateOp : FSDP_Op<"optim_state",
    [Symbol, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "optimizer state, zero before the first step";
  let description = [{
    State the optimizer keeps between steps: a parameter's momentum buffer or
    Adam moments (`for` names the parameter; the state is shaped like it), or
    a step count shared by all parameters. It starts at zero, but for
    `optim:lr` (the learning rate the runner sets between steps, `lr-schedule
    external`), which starts at the optimizer's `lr`. Names use `:`,
    which no Python attribute name holds, so they never collide with an FQN.

    ```mlir
    fsdp.optim_state @"fc1.weight:exp_avg" : tensor<16x32xf32> for @"fc1.weight"
    fsdp.optim_state @"optim:step" : tensor<f64>
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name,
                       TypeAttrOf<AnyStaticShapeTensor>:$type,
                       OptionalAttr<FlatSymbolRefAttr>:$param);
  let assemblyFormat = "$sym_name `:` $type (`for` $param^)? attr-dict";
}

def FSDP_GradOp : FSDP_Op<"grad",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "the complete gradient of the loss with respect to a parameter";
  let description = [{
    Placed by reverse-mode differentiation right after the last contribution
    to a parameter's gradient; the optimizer (and, later, gradient
    reduction) starts from here. A parameter the loss does not depend on has
    no `fsdp.grad`, and the optimizer leaves it alone, as PyTorch leaves a
    parameter whose `.grad` is None.

    ```mlir
    fsdp.grad @"fc1.weight", %g : tensor<16x32xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$param, AnyStaticShapeTensor:$value);
  let assemblyFormat = "$param `,` $value attr-dict `:` type($value)";
}

def FSDP_UpdateOp : FSDP_Op<"update",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "writes a state symbol's new value (an explicit state update)";
  let description = [{
    The symbol holds `value` after the step: the in-place updates a module
    makes to its buffers in training mode (BatchNorm's running statistics,
    `num_batches_tracked`), and the optimizer's new parameters and state.

    ```mlir
    fsdp.update @"bn.running_mean", %new : tensor<16xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$name, AnyStaticShapeTensor:$value);
  let assemblyFormat = "$name `,` $value attr-dict `:` type($value)";
}

//===----------------------------------------------------------------------===//
// Sharding
//===----------------------------------------------------------------------===//

def FSDP_FlatParamOp : FSDP_Op<"flat_param",
    [Symbol, DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "an FSDP unit: the layout of its parameters in one flat buffer";
  let description = [{
    The parameters of one FSDP unit (the module at `module_path`) laid out one
    after another in a flat 1-D buffer of `numel` elements, padded to
    `padded_numel` so that it splits into `shard_group_size` equal shards.
    `offsets[i]` is where `params[i]` starts.

    A rank holds its shard of the flat parameter between steps, and its
    gradient and optimizer state are shaped like the shard. A `replicated`
    flat parameter (fairscale's OSS and ShardedDDP) is held whole (all
    `padded_numel` elements) by every rank; only its gradient and optimizer
    state are sharded: each rank updates its shard (`fsdp.local_shard`) and
    the updated shards are gathered back into the whole.

    ```mlir
    fsdp.flat_param @unit0 for "layers.0" params [@"layers.0.w", @"layers.0.b"]
        offsets [0, 512] numel 528 padded 532 shards 4 : f32
    fsdp.flat_param @unit1 for "layers.1" params [@"layers.1.w"]
        offsets [0] numel 512 padded 512 shards 4 replicated : f32
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrAttr:$module_path,
                       FlatSymbolRefArrayAttr:$params,
                       DenseI64ArrayAttr:$offsets, I64Attr:$numel,
                       I64Attr:$padded_numel, I64Attr:$shard_group_size,
                       TypeAttr:$element_type, UnitAttr:$replicated);
  let assemblyFormat = [{
    $sym_name `for` $module_path `params` $params `offsets` $offsets
    `numel` $numel `padded` $padded_numel `shards` $shard_group_size
    (`replicated` $replicated^)? `:` $element_type attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    int64_t getShardNumel() { return getPaddedNumel() / getShardGroupSize(); }
    /// A rank's shard: the type of the flat gradient and optimizer state.
    ::mlir::RankedTensorType getShardType() {
      return ::mlir::RankedTensorType::get({getShardNumel()}, getElementType());
    }
    /// The whole padded flat buffer.
    ::mlir::RankedTensorType getFullType() {
      return ::mlir::RankedTensorType::get({int64_t(getPaddedNumel())},
                                         getElementType());
    }
    /// What a rank holds between steps, and `fsdp.get` reads: its shard, or
    /// the whole buffer if replicated.
    ::mlir::RankedTensorType getStateType() {
      return getReplicated() ? getFullType() : getShardType();
    }
  }];
}

def FSDP_AllGatherStartOp : FSDP_Op<"all_gather.start",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>,
     DeclareOpInterfaceMethods<FSDP_CollectiveStartOpInterface>]> {
  let summary = "starts gathering a unit's flat parameter from its shards";
  let description = [{
    Each rank of `group` contributes its 1-D shard; the full buffer, the
    shards concatenated in rank order, is available from `fsdp.wait`.

    ```mlir
    %f = fsdp.all_gather.start %shard for @unit0 group shard : tensor<133xf32> -> !fsdp.future<tensor<532xf32>>
    ```
  }];
  let arguments = (ins FSDP_FlatTensor:$shard, FlatSymbolRefAttr:$unit,
                       FSDP_CommGroupAttr:$group);
  let results = (outs FSDP_FutureType:$future);
  let assemblyFormat = [{
    $shard `for` $unit `group` $group attr-dict `:` type($shard) `->` type($future)
  }];
  let hasVerifier = 1;
}

def FSDP_ReduceScatterStartOp : FSDP_Op<"reduce_scatter.start",
    [DeclareOpInterfaceMethods<SymbolUserOpInterface>,
     DeclareOpInterfaceMethods<FSDP_CollectiveStartOpInterface>]> {
  let summary = "starts reducing a unit's flat gradient and scattering its shards";
  let description = [{
    Every rank of `group` contributes the full flat gradient; rank r receives
    shard r of the reduction (`mean` divides by the group size).

    With `across world` (HYBRID_SHARD's reduction in one collective), every
    rank of the world contributes and the sum runs over the world in rank
    order, as one process accumulating the ranks' gradients one after
    another adds them; a rank receives the shard of its index in `group`
    (which must be `shard`), and `mean` divides by the world size. It
    computes what a reduce-scatter over the shard group followed by an
    all-reduce over the replica group computes, with one association of the
    sum on every rank.

    ```mlir
    %g = fsdp.reduce_scatter.start %grad for @unit0 group shard reduce mean : tensor<532xf32> -> !fsdp.future<tensor<133xf32>>
    %h = fsdp.reduce_scatter.start %grad for @unit0 group shard across world reduce mean : tensor<532xf32> -> !fsdp.future<tensor<133xf32>>
    ```
  }];
  let arguments = (ins FSDP_FlatTensor:$input, FlatSymbolRefAttr:$unit,
                       FSDP_CommGroupAttr:$group,
                       OptionalAttr<FSDP_CommGroupAttr>:$across,
                       FSDP_ReduceOpAttr:$reduce);
  let results = (outs FSDP_FutureType:$future);
  let assemblyFormat = [{
    $input `for` $unit `group` $group (`across` $across^)? `reduce` $reduce attr-dict `:` type($input) `->` type($future)
  }];
  let hasVerifier = 1;
}

def FSDP_AllReduceStartOp : FSDP_Op<"all_reduce.start",
    [DeclareOpInterfaceMethods<FSDP_CollectiveStartOpInterface>]> {
  let summary = "starts an all-reduce (across replica groups for HYBRID_SHARD)";
  let description = [{
    ```mlir
    %r = fsdp.all_reduce.start %g group replicate reduce mean : tensor<133xf32> -> !fsdp.future<tensor<133xf32>>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$input, FSDP_CommGroupAttr:$group,
                       FSDP_ReduceOpAttr:$reduce);
  let results = (outs FSDP_FutureType:$future);
  let assemblyFormat = [{
    $input `group` $group `reduce` $reduce attr-dict `:` type($input) `->` type($future)
  }];
  let hasVerifier = 1;
}

def FSDP_LocalShardOp : FSDP_Op<"local_shard", [Pure,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "this rank's shard of a unit's whole flat buffer";
  let description = [{
    Rank r of `group` takes elements `[r * shard, (r + 1) * shard)` of
    `buffer`, a whole padded flat buffer of `unit` (its parameters or its
    gradient): what a rank updates of a `replicated` flat parameter. The
    result shares the buffer's storage.

    ```mlir
    %s = fsdp.local_shard %full for @unit1 group shard : tensor<512xf32> -> tensor<128xf32>
    ```
  }];
  let arguments = (ins FSDP_FlatTensor:$buffer, FlatSymbolRefAttr:$unit,
                       FSDP_CommGroupAttr:$group);
  let results = (outs FSDP_FlatTensor:$result);
  let assemblyFormat = [{
    $buffer `for` $unit `group` $group attr-dict `:` type($buffer) `->` type($result)
  }];
  let hasVerifier = 1;
}

def FSDP_WaitOp : FSDP_Op<"wait", [
    TypesMatchWith<"result type is the future's tensor type", "future", "result",
                   "::llvm::cast<::fsdp::FutureType>($_self).getTensorType()">]> {
  let summary = "waits for an asynchronous collective and yields its tensor";
  let description = [{
    ```mlir
    %full = fsdp.wait %f : !fsdp.future<tensor<532xf32>>
    ```
  }];
  let arguments = (ins FSDP_FutureType:$future);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "$future attr-dict `:` type($future)";
  let hasVerifier = 1;
}

def FSDP_FreeOp : FSDP_Op<"free"> {
  let summary = "releases a gathered flat buffer";
  let description = [{
    Ends the life of a buffer that `fsdp.wait` of an all-gather produced;
    nothing may use it afterwards.

    ```mlir
    fsdp.free %full : tensor<532xf32>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$buffer);
  let assemblyFormat = "$buffer attr-dict `:` type($buffer)";
  let hasVerifier = 1;
}

def FSDP_ViewOp : FSDP_Op<"view", [Pure]> {
  let summary = "a typed view of a slice of a flat buffer";
  let description = [{
    The elements `[offset, offset + numel(result))` of the 1-D `buffer`, seen
    with the result's shape (a parameter inside a gathered flat parameter).

    ```mlir
    %w = fsdp.view %full[512] : tensor<532xf32> to tensor<16xf32>
    ```
  }];
  let arguments = (ins FSDP_FlatTensor:$buffer, I64Attr:$offset);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = [{
    $buffer `[` $offset `]` attr-dict `:` type($buffer) `to` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// CPU offload
//===----------------------------------------------------------------------===//

class FSDP_CopyOp<string mnemonic, string where>
    : FSDP_Op<mnemonic, [AllTypesMatch<["input", "result"]>]> {
  let summary = "copies a tensor to " # where # " memory";
  let description = [{
    CPU offload (PyTorch FSDP's `CPUOffload(offload_params=True)`): state
    marked `fsdp.host` lives in host memory; a shard is copied to the
    device before its all-gather and a reduced gradient shard back to the
    host, where the optimizer updates it. The result is a new tensor of the
    operand's type in the other memory.

    ```mlir
    %d = fsdp.to_device %shard : tensor<133xf32>
    %h = fsdp.to_host %grad : tensor<133xf32>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$input);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let builders = [OpBuilder<(ins "::mlir::Value":$input), [{
    build($_builder, $_state, input.getType(), input);
  }]>];
}

def FSDP_ToDeviceOp : FSDP_CopyOp<"to_device", "device">;
def FSDP_ToHostOp : FSDP_CopyOp<"to_host", "host">;

#endif // FSDP_DIALECT_FSDP_IR_FSDPOPS_TD
