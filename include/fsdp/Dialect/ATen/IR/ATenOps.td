//===- ATenOps.td - ATen compute ops -----------------------------*- tablegen -*-===//
//
// Compute ops are ATen operators keyed by their overload name. One generic op
// carries the call: tensor arguments are SSA operands, every other argument is a
// typed attribute, all in schema order, so the runtime can rebuild the call
// through the ATen dispatcher. Knowledge about individual ops (gradients, cost)
// lives in registries keyed by the overload name, not in op definitions.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_DIALECT_ATEN_IR_ATENOPS_TD
#define FSDP_DIALECT_ATEN_IR_ATENOPS_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/AttrTypeBase.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def ATen_Dialect : Dialect {
  let name = "aten";
  let summary = "ATen operators called by overload name";
  let description = [{
    The compute side of a training step. Every op is a call of one ATen
    operator overload (`aten::linear`, `aten::add.Tensor`); its arguments keep
    the operator schema's order. Shapes and dtypes are static: every tensor is
    a ranked `tensor<...>` with a static shape.
  }];
  let cppNamespace = "::fsdp::aten";
  let useDefaultAttributePrinterParser = 1;
}

class ATen_Attr<string name, string attrMnemonic, list<Trait> traits = []>
    : AttrDef<ATen_Dialect, name, traits> {
  let mnemonic = attrMnemonic;
}

def ATen_NoneAttr : ATen_Attr<"None", "none"> {
  let summary = "an optional argument passed as None";
}

def ATen_TensorArgAttr : ATen_Attr<"TensorArg", "tensor"> {
  let summary = "placeholder: the next tensor operand";
}

def ATen_ComplexAttr : ATen_Attr<"Complex", "complex"> {
  let summary = "a complex scalar argument (Python's 1j): its real and imaginary parts";
  let parameters = (ins "::mlir::FloatAttr":$real, "::mlir::FloatAttr":$imag);
  let assemblyFormat = "`<` $real `,` $imag `>`";
}

def ATen_TensorListArgAttr : ATen_Attr<"TensorListArg", "tensor_list"> {
  let summary = "placeholder: the next `size` tensor operands, as a Tensor[]";
  let parameters = (ins "int64_t":$size);
  let assemblyFormat = "`<` $size `>`";
}

class ATen_Op<string mnemonic, list<Trait> traits = []>
    : Op<ATen_Dialect, mnemonic, traits>;

def ATen_CallOp : ATen_Op<"call"> {
  let summary = "a call of one ATen operator overload";
  let description = [{
    Calls the ATen operator overload `overload` (`namespace::name[.overload]`).
    `args` lists every schema argument in order: `#aten.tensor` stands for the
    next SSA operand, `#aten.tensor_list<n>` for the next `n` operands taken as
    a `Tensor[]`, `#aten.none` for None; anything else is the argument's value
    (integers, floats, booleans, strings, lists of them, and a type for a
    ScalarType). The results are the schema's tensor returns in order (a
    `Tensor[]` return flattened, marked with `list_result`), followed by the new
    value of each argument the operator writes in place, named by `mutates`
    (argument positions): mutation is made functional here.

    The custom form prints the arguments in place:

    ```mlir
    %y = aten.call "aten::linear"(%x, %w, %b)
        : (tensor<8x32xf32>, tensor<16x32xf32>, tensor<16xf32>) -> tensor<8x16xf32>
    %s = aten.call "aten::softmax.int"(%y, -1, none)
        : (tensor<8x16xf32>) -> tensor<8x16xf32>
    %c = aten.call "aten::cat"([%a, %b], 0)
        : (tensor<2x4xf32>, tensor<3x4xf32>) -> tensor<5x4xf32>
    ```
  }];
  let arguments = (ins StrAttr:$overload, ArrayAttr:$args,
                       Variadic<AnyStaticShapeTensor>:$operands,
                       OptionalAttr<DenseI64ArrayAttr>:$mutates,
                       UnitAttr:$list_result);
  let results = (outs Variadic<AnyStaticShapeTensor>:$results);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The operator's name without its overload (`aten::add`).
    llvm::StringRef getOpName();
    /// The number of results that are schema returns (the rest are mutated args).
    unsigned getNumSchemaResults();
  }];
}

def ATen_ConstantOp : ATen_Op<"constant", [Pure,
    TypesMatchWith<"result type matches the value", "value", "result",
                   "$_self">]> {
  let summary = "a constant tensor";
  let description = [{
    A tensor that does not depend on inputs, parameters or state (a causal mask,
    a scalar that shape arithmetic turned into a tensor).

    ```mlir
    %c = aten.constant dense<1.0> : tensor<4x4xf32>
    ```
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs AnyStaticShapeTensor:$result);
  let assemblyFormat = "$value attr-dict";
  let hasVerifier = 1;
}


def ATen_RngStateOp : ATen_Op<"rng_state"> {
  let summary = "the random number generator's state, for a replay";
  let description = [{
    A copy of the state of the default generator of the device the step runs
    on (`torch.get_rng_state()`; 5056 bytes on the CPU), taken right before
    an op that `aten.autograd_backward` computes again, so that the
    recomputation draws the same random numbers (dropout inside an LSTM), as
    `torch.utils.checkpoint` does with `preserve_rng_state`.

    ```mlir
    %s = aten.rng_state : tensor<5056xui8>
    ```
  }];
  let results = (outs AnyStaticShapeTensor:$state);
  let assemblyFormat = "attr-dict `:` type($state)";
  let hasVerifier = 1;
}

def ATen_SetRngStateOp : ATen_Op<"set_rng_state"> {
  let summary = "sets the random number generator's state";
  let description = [{
    Sets the state of the default generator of the device the step runs on
    to `state`, a copy `aten.rng_state` took (`torch.set_rng_state`). An
    activation-checkpointed region's recomputation runs between one that
    replays the forward's state and one that puts the current state back.

    ```mlir
    aten.set_rng_state %s : tensor<5056xui8>
    ```
  }];
  let arguments = (ins AnyStaticShapeTensor:$state);
  let assemblyFormat = "$state attr-dict `:` type($state)";
  let hasVerifier = 1;
}

def ATen_AutogradBackwardOp : ATen_Op<"autograd_backward",
    [AttrSizedOperandSegments]> {
  let summary = "the gradients of one ATen call, by libtorch's autograd";
  let description = [{
    The backward of a call no gradient rule covers: the runtime calls
    `overload` again on `inputs` (the forward call's operands, with its
    `args`, in schema order, as `aten.call` takes them) with the tensors
    named by `wrt` (operand indices) requiring gradients, with autograd
    recording, and the generator set to `rng_state` where given; then it
    back-propagates `result_grads`, the gradients of the forward's schema
    results `grad_results` (indices among its `num_forward_results`, a
    `Tensor[]` return flattened under `list_result`), and returns one
    gradient per `wrt` operand, each a contiguous tensor with a storage of
    its own (zeros where the operand does not reach the results). Arguments
    the forward writes in place (`mutates`) are written into copies.

    Nothing the forward computed is kept for it: what it needs is its
    inputs, which stay alive until it runs, so the memory model sees all of
    it; the price is the forward op computed a second time.

    ```mlir
    %gx, %gw = aten.autograd_backward "aten::cumsum"(%x : tensor<4x5xf32>)
        grads(%g : tensor<4x5xf32>) rng(%s : tensor<5056xui8>)
        {args = [#aten.tensor, 1, #aten.none], grad_results = array<i64: 0>,
         num_forward_results = 1, wrt = array<i64: 0>} -> tensor<4x5xf32>
    ```
  }];
  let arguments = (ins StrAttr:$overload, ArrayAttr:$args,
                       Variadic<AnyStaticShapeTensor>:$inputs,
                       Variadic<AnyStaticShapeTensor>:$result_grads,
                       Optional<AnyStaticShapeTensor>:$rng_state,
                       DenseI64ArrayAttr:$grad_results,
                       DenseI64ArrayAttr:$wrt,
                       I64Attr:$num_forward_results,
                       OptionalAttr<DenseI64ArrayAttr>:$mutates,
                       UnitAttr:$list_result);
  let results = (outs Variadic<AnyStaticShapeTensor>:$grads);
  let assemblyFormat = [{
    $overload `(` $inputs `:` type($inputs) `)`
    `grads` `(` $result_grads `:` type($result_grads) `)`
    (`rng` `(` $rng_state^ `:` type($rng_state) `)`)?
    attr-dict `->` type($grads)
  }];
  let hasVerifier = 1;
}

#endif // FSDP_DIALECT_ATEN_IR_ATENOPS_TD
