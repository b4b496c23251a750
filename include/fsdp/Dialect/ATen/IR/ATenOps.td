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

#endif // FSDP_DIALECT_ATEN_IR_ATENOPS_TD
