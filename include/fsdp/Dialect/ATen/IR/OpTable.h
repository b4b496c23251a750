//===- OpTable.h - what the compiler knows of ATen operators ----*- C++ -*-===//
//
// One table of the facts about ATen operators that the importer, autodiff
// and the memory model act on: which overloads return a view of their
// input, which operators no gradient flows through, how a kernel lays out
// its result, which factories the importer folds or retypes, whose results
// depend on tensor data. Gradient rules live in Gradients.cpp; the facts
// that decide whether and how an op is handled live here.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_DIALECT_ATEN_IR_OPTABLE_H
#define FSDP_DIALECT_ATEN_IR_OPTABLE_H

#include "llvm/ADT/StringRef.h"

#include <string>

namespace fsdp::aten {

/// A fact about an ATen operator. View is a fact of one overload
/// (`aten::to.dtype`); the others hold for every overload of an operator
/// name (`aten::add`), and NonDifferentiable and Random for its in-place
/// form too.
enum class OpFact : unsigned {
  /// The result may share storage with the first tensor argument (a view:
  /// `t`, `transpose.int`, `view`, `reshape`, `expand`, `select.int`, ...;
  /// also `contiguous` and `to.dtype`, which return their input when there
  /// is nothing to do).
  View = 1u << 0,
  /// No gradient flows through it (comparisons, `zeros_like`, random
  /// sampling, `detach`): its results are constants to differentiation.
  NonDifferentiable = 1u << 1,
  /// A TensorIterator kernel: its result is laid out after its tensor
  /// operands.
  Pointwise = 1u << 2,
  /// A copy that keeps its input's layout (preserve_format).
  PreservesLayout = 1u << 3,
  /// A factory that fills a new tensor of its `dtype` (mixed precision
  /// retypes a traced float32 to the compute dtype).
  FillingFactory = 1u << 4,
  /// A factory that reads only the type of its tensor input (`new_zeros`,
  /// `zeros_like`): the importer folds it to a constant.
  TypeOnlyFactory = 1u << 5,
  /// Returns uninitialized memory: never folded to a constant.
  Uninitialized = 1u << 6,
  /// Returns a value read from tensor data (`item`, `equal`): not known
  /// before the step runs.
  DataDependentValue = 1u << 7,
  /// Returns a tensor whose shape depends on tensor data (`nonzero`,
  /// `unique`): a static step cannot hold it.
  DataDependentShape = 1u << 8,
  /// Its CPU implementation reads its operands' requires_grad flag to choose
  /// how to compute (matmul folds a batched operand into a matrix when the
  /// other one requires grad; scaled_dot_product_attention takes the math
  /// kernel for a mask that requires grad): the plan says which operands require grad in
  /// eager training, so that fsdp-run takes the same path and rounds alike.
  ReadsRequiresGrad = 1u << 9,
  /// Draws from the random number generator (ATen's `nondeterministic_seeded`
  /// tag, and the composite ops that reach one: `dropout`,
  /// `feature_dropout`, `rrelu`, ...): a replay of its calls must draw in
  /// the same order from the same state.
  Random = 1u << 10,
};

/// On a call of a ReadsRequiresGrad op: the operands (by operand index) that
/// require grad in eager training.
inline constexpr llvm::StringLiteral kRequiresGradAttr = "aten.requires_grad";

/// True if `fact` holds for the operator: `overloadOrName` is an overload
/// (`aten::add.Tensor`, `aten::relu_`) or a schema name (`aten::add`).
bool hasFact(llvm::StringRef overloadOrName, OpFact fact);

/// `aten::relu_` -> `aten::relu`, `aten::add_.Tensor` -> `aten::add.Tensor`;
/// empty if `overload` is not an in-place form.
std::string functionalForm(llvm::StringRef overload);

} // namespace fsdp::aten

#endif // FSDP_DIALECT_ATEN_IR_OPTABLE_H
