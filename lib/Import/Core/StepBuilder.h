//===- StepBuilder.h - what every importer front end shares -----*- C++ -*-===//
//
// The importer's core: what a front end (TorchScript, torch.export) hands
// it is an op call (a dispatcher schema, the arguments as the walk knows
// them, a location), and it builds the `aten.call`, types its results by
// running the op itself on meta tensors (or on small CPU tensors where the
// op has no meta kernel), turns in-place writes into new SSA values and
// buffer writes into `fsdp.update`, and declares the `fsdp.param` /
// `fsdp.buffer` symbols. A front end is a walk of its own graph that binds
// its values to the AbsValues this returns.
//
// Private to lib/Import: it includes libtorch's headers.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_LIB_IMPORT_CORE_STEPBUILDER_H
#define FSDP_LIB_IMPORT_CORE_STEPBUILDER_H

#include "fsdp/Dialect/ATen/IR/ATenDialect.h"
#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"
#include "fsdp/Import/Import.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

#include <ATen/core/function_schema.h>
#include <ATen/core/ivalue.h>
#include <ATen/core/stack.h>
#include <torch/torch.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace fsdp::import {

/// Thrown inside an import to unwind to its entry point; the diagnostic has
/// already been emitted.
struct ImportFailure {};

using Stack = torch::jit::Stack;

/// What the importer knows about a value of the model's graph.
struct AbsValue {
  enum class Kind { Unknown, Tensor, Constant, Module, Sequence };
  Kind kind = Kind::Unknown;
  mlir::Value tensor;              // Kind::Tensor
  c10::IValue constant;            // Kind::Constant (a tensor constant too)
  c10::intrusive_ptr<c10::ivalue::Object> module; // Kind::Module
  std::string path;                // Kind::Module: its path from the root
  std::vector<AbsValue> elements;  // Kind::Sequence: a list, tuple or dict
  bool isTuple = false;
  bool isDict = false;
  std::vector<c10::IValue> keys;   // a dict's keys, one per element

  static AbsValue ofTensor(mlir::Value v) {
    AbsValue a;
    a.kind = Kind::Tensor;
    a.tensor = v;
    return a;
  }
  static AbsValue ofConstant(c10::IValue v) {
    AbsValue a;
    a.kind = Kind::Constant;
    a.constant = std::move(v);
    return a;
  }
  static AbsValue ofSequence(std::vector<AbsValue> elements, bool isTuple) {
    AbsValue a;
    a.kind = Kind::Sequence;
    a.elements = std::move(elements);
    a.isTuple = isTuple;
    return a;
  }
  /// A dict (`prim::DictConstruct`: a traced ModelOutput), its entries in
  /// their order.
  static AbsValue ofDict(std::vector<c10::IValue> keys,
                         std::vector<AbsValue> values) {
    AbsValue a = ofSequence(std::move(values), false);
    a.isDict = true;
    a.keys = std::move(keys);
    return a;
  }
  bool isConstant() const { return kind == Kind::Constant; }
  bool isTensor() const { return kind == Kind::Tensor; }
  /// True if no part of it depends on runtime data.
  bool isFullyConstant() const {
    if (kind == Kind::Constant)
      return true;
    if (kind == Kind::Sequence)
      return llvm::all_of(elements,
                          [](const AbsValue &e) { return e.isFullyConstant(); });
    return false;
  }
};

/// True if `abs` is, or holds in a list or tuple, a tensor for which `pred`
/// holds.
bool holdsTensor(const AbsValue &abs, llvm::function_ref<bool(mlir::Value)> pred);
/// True if `abs` is, or holds in a list or tuple, a constant tensor that
/// shares memory with `t`.
bool holdsConstantAliasing(const AbsValue &abs, const at::Tensor &t);
/// Replaces `old` by `updated` wherever `abs` holds it.
void replaceTensor(AbsValue &abs, mlir::Value old, mlir::Value updated);

/// A parameter or buffer symbol.
struct StateInfo {
  std::string fqn; // canonical name (the first in state_dict order)
  bool isParam = false;
  mlir::RankedTensorType type;
  mlir::RankedTensorType readType; // what the step reads: `type`, or mixed precision's
};

/// One op call, as a front end hands it to emitCall.
struct CallSite {
  const c10::FunctionSchema &schema;
  std::string overload; // `name.overload`
  mlir::Location loc;
  /// The op itself, run on a stack of its arguments (meta tensors to type
  /// it, CPU tensors where it has no meta kernel).
  std::function<void(Stack &)> run;
  /// The arguments in schema order, as the walk knows them, and their
  /// static types (a Tensor[] and an int[] are both sequences).
  std::vector<const AbsValue *> args;
  std::vector<c10::TypePtr> argTypes;
  /// How many values the call binds (its schema's results).
  size_t numOutputs = 0;
  /// The front end's node, for readAfter.
  const void *position = nullptr;

  /// The schema positions of the arguments the op writes.
  std::vector<int64_t> mutated;
  /// The tensors it writes (mutated's), and how many results its schema
  /// has (the new values of the written tensors follow them).
  llvm::SmallVector<mlir::Value> mutatedOperands;
  unsigned numSchemaResults = 0;
  /// Writes through a chain of slices and selects of a base that is read
  /// afterwards (`out[:, :m] = v`): the written tensor's index in
  /// mutatedOperands, the views from it up to the base, and the base, whose
  /// new value scatters the written one back (scatterIntoBases).
  struct Scatter {
    size_t written;
    llvm::SmallVector<aten::CallOp> views;
    mlir::Value base;
  };
  llvm::SmallVector<Scatter> scatters;
};

/// A call's arguments in schema order, and the stack of its meta call.
struct CallArguments {
  llvm::SmallVector<mlir::Attribute> args;
  llvm::SmallVector<mlir::Value> operands;
  Stack stack;
};

/// The types of a call's schema results.
struct CallResults {
  llvm::SmallVector<mlir::Type> types;
  /// Whether the one result is a Tensor[].
  bool list = false;
  /// The types each output stands for (none for None).
  std::vector<std::vector<mlir::Type>> ofOutput;
  /// `aten.result_strides`, one entry per schema result; written only if
  /// anyStrided.
  llvm::SmallVector<mlir::Attribute> strides;
  bool anyStrided = false;
  /// `aten.internal_views`: the schema results the kernel returns as a
  /// view of a tensor of its own (einsum's permuted product), whose
  /// storage two tensors hold.
  llvm::SmallVector<int64_t> internalViews;
};

/// What typing an op without a meta kernel knows of it (typeWithoutMeta).
struct MetalessTyping {
  const CallSite &site;
  const std::string &metaError;
  /// The arguments as the meta call had them.
  Stack args;
  /// The result shapes from ATen's shape function, where it has one.
  std::optional<std::vector<std::vector<int64_t>>> shapes;
  int64_t inputBytes = 0, resultBytes = 0;
};

/// `name.overload`, as the aten dialect spells an op.
std::string overloadName(const c10::FunctionSchema &schema);

/// What both front ends share: types and values, the state symbols, op
/// calls, and the step's end. A front end derives from it, walks its graph
/// into emitCall, and says where a value is read (readAfter) and how to
/// rebind a tensor it holds (replaceEverywhere).
class StepBuilder {
public:
  StepBuilder(mlir::MLIRContext *context, llvm::StringRef path);
  virtual ~StepBuilder();

protected:
  // Types and values.
  mlir::Type elementType(at::ScalarType dtype, mlir::Location loc);
  at::ScalarType scalarType(mlir::Type type, mlir::Location loc);
  mlir::RankedTensorType tensorType(const at::Tensor &t, mlir::Location loc);
  at::Tensor metaTensor(mlir::RankedTensorType type, mlir::Location loc);
  mlir::Value materialize(const at::Tensor &constant, mlir::Location loc);
  /// The most bytes one constant of the step may hold (a mask, a table of
  /// positions); a larger tensor belongs in the model's state, a buffer.
  static constexpr int64_t kMaxConstantBytes = int64_t(64) << 20;
  /// Fails at `loc` where a constant of `shape` and `dtype` would hold more
  /// than kMaxConstantBytes, before anything is read or copied.
  void checkConstantSize(llvm::ArrayRef<int64_t> shape, at::ScalarType dtype,
                         mlir::Location loc);
  /// The SSA tensor `abs` stands for (a constant tensor is materialized), or
  /// null if it is not a tensor.
  mlir::Value tensorValue(const AbsValue &abs, mlir::Location loc);
  /// What a value the step writes in place binds to: a constant tensor
  /// (a folded factory such as `new_zeros`, filled by slices afterwards)
  /// becomes a value of the step, which the write then changes; anything
  /// else is itself. Folding stays where nothing writes. A constant that
  /// shares memory with another the walk holds (a view of it, or it in a
  /// list) stays one: the write is then refused, as a write the other
  /// would not see.
  AbsValue writable(AbsValue abs, mlir::Location loc);
  /// True if a value the walk holds is a constant sharing memory with `t`.
  virtual bool constantShared(const at::Tensor &t) = 0;
  /// The arguments `schema` writes (`Tensor(a!)`).
  static std::vector<size_t> writtenArguments(const c10::FunctionSchema &schema);
  /// The argument result `i` of `schema` aliases, if any: a view's input
  /// (a `Tensor(a)` return: slice, select, view, ...) or the argument an
  /// in-place op writes and returns (`Tensor(a!)`).
  static std::optional<size_t> aliasedArgument(const c10::FunctionSchema &schema,
                                               size_t i);
  mlir::Attribute constantAttr(const c10::IValue &value,
                               const c10::Argument *arg, mlir::Location loc,
                               const std::string &what);
  c10::IValue toIValue(const AbsValue &abs, const c10::TypePtr &type,
                       bool meta, mlir::Location loc);
  AbsValue fromIValue(const c10::IValue &value);

  /// What python/fsdp_export.py stores beside the model
  /// (`fsdp_meta.json`): the input specs, the loss targets, and the buffers
  /// registered with persistent=False.
  struct StoredMetadata {
    std::vector<InputSpec> inputs;
    std::vector<std::string> targets, nonPersistent;
  };
  StoredMetadata readStoredMetadata(const std::string &text,
                                    mlir::Location fileLoc);
  /// The stored input specs, overridden (or added to) by the command line's.
  static std::vector<InputSpec>
  withOverrides(std::vector<InputSpec> stored,
                const std::vector<InputSpec> &overrides);

  // The step's frame.
  mlir::LogicalResult setComputeTypes(const ImportOptions &options,
                                      mlir::Location fileLoc);
  void summarizeInputs(const std::vector<InputSpec> &specs);
  /// Creates the module (holding `targets` as `fsdp.targets`), with the
  /// builder at its end.
  void createModule(mlir::Location fileLoc,
                    const std::vector<std::string> &targets);
  /// The step function `forward` taking `types` (named `names`), with the
  /// builder in its body.
  mlir::func::FuncOp createFunction(mlir::Location fileLoc,
                                    llvm::ArrayRef<mlir::Type> types,
                                    llvm::ArrayRef<std::string> names);
  /// Under mixed precision, a floating-point input in the compute dtype.
  mlir::Value castInput(mlir::Value arg);
  /// Returns `results` and updates the buffers the step changed.
  void finishFunction(llvm::ArrayRef<mlir::Type> inputTypes,
                      llvm::ArrayRef<mlir::Value> results,
                      mlir::Location fileLoc);

  // Model state.
  /// Declares a parameter or buffer symbol (state_dict order).
  void declareStateSymbol(const std::string &fqn, const std::string &modulePath,
                          const std::string &cls, const at::Tensor &t,
                          bool isParam, bool persistent, mlir::Location loc);
  /// Names the symbol `canonical` also `alias` (a tied weight).
  void aliasStateSymbol(const std::string &canonical, const std::string &alias);
  /// The value of the state `fqn` (any of its names) in the step.
  mlir::Value stateValue(const std::string &fqn, mlir::Location loc);

  // Folding: what a front end computes at compile time.
  /// The most elements a folded tensor keeps (larger results are calls of
  /// the step).
  static constexpr int64_t kMaxFoldElements = int64_t(1) << 16;
  /// Whether the op of `schema` may run on constants here: not random, not
  /// reading uninitialized memory, and, where it makes a tensor, an
  /// operator plans may call (none reads or writes files, shared memory or
  /// other process state: aten::from_file never runs here).
  bool mayFold(const c10::FunctionSchema &schema);
  /// Whether running `run` on `stack` (the call's constant arguments, in
  /// schema order) makes results small enough to keep as constants (at most
  /// kMaxFoldElements each). It runs the op on meta tensors first, so
  /// nothing is computed that would not be kept; false where it has no
  /// meta kernel.
  bool foldFits(const c10::FunctionSchema &schema, const Stack &stack,
                const std::function<void(Stack &)> &run);
  /// The input of a factory that reads only its input's type (zeros_like,
  /// new_zeros): zeros of that type without its memory (one element,
  /// expanded).
  at::Tensor typeOnlyInput(mlir::RankedTensorType type, mlir::Location loc);

  // An op call.
  /// Emits the call, and returns what each of its outputs binds to. Only
  /// operators a plan may call are emitted (and typed: an op is never run
  /// here, not even on meta tensors, unless a plan may call it).
  std::vector<AbsValue> emitCall(CallSite &site);
  /// Under mixed precision, a filling factory's float32 dtype argument `a`
  /// of `schema`'s argument `i` is the compute dtype: see argument().
  const AbsValue &computeDtypeArgument(const c10::FunctionSchema &schema,
                                       size_t i, const AbsValue &a,
                                       mlir::Location loc);

  /// True if any value the walk holds for which `aliases` holds is read
  /// after `site`.
  virtual bool readAfter(const CallSite &site,
                         llvm::function_ref<bool(mlir::Value)> aliases) = 0;
  /// Replaces `old` by `updated` wherever the walk holds it.
  virtual void replaceEverywhere(mlir::Value old, mlir::Value updated) = 0;

  /// Emits the error at `loc`, naming the module whose code it is in (the
  /// NameLoc a front end puts around it), as the gradient errors do.
  [[noreturn]] void fail(mlir::Location loc, const llvm::Twine &message);

  mlir::MLIRContext *context;
  mlir::OpBuilder builder;
  std::string path;
  mlir::ModuleOp module;
  mlir::func::FuncOp func;

  // The class of each module, by path (`fsdp.modules`), for messages.
  llvm::StringMap<std::string> moduleClasses;
  // State symbols by every FQN that names them (aliases of tied weights too).
  llvm::StringMap<StateInfo> states;
  // Canonical FQN -> its current value in the step (read lazily, once).
  llvm::StringMap<mlir::Value> current;
  llvm::StringMap<mlir::Value> initial;
  std::vector<std::string> stateOrder;
  // Canonical FQN of a tensor value read from a buffer or parameter, so that
  // an in-place update of it becomes a state update.
  llvm::DenseMap<mlir::Value, std::string> stateOf;
  // The tensor each view (a result aliasing an input) is a view of.
  llvm::DenseMap<mlir::Value, mlir::Value> viewBase;
  // Mixed precision's compute types; null: the model's own.
  mlir::Type paramDtype, bufferDtype;
  // The input specs, for messages about shapes that do not fit the model.
  std::string inputSummary;
  // Module tensors used as constants whose values were read, and their bytes
  // (`fsdp.values_read`, for --fsdp-report).
  std::vector<std::pair<std::string, int64_t>> valuesRead;

private:
  std::vector<int64_t> mutatedArguments(const CallSite &site);
  CallArguments callArguments(const CallSite &site);
  void addTensorList(CallArguments &out, const AbsValue &list,
                     const std::string &what, mlir::Location loc);
  void addOptionalTensorList(CallArguments &out, const AbsValue &list,
                             const std::string &what, mlir::Location loc);
  void addConstantTensorList(CallArguments &out, c10::List<c10::IValue> list,
                             mlir::Location loc);
  bool typeByMeta(const CallSite &site, Stack &stack, std::string &metaError);
  CallResults callResults(const CallSite &site, const Stack &stack,
                          bool kernelLayouts);
  mlir::Attribute resultStridesAttr(const at::Tensor &t, bool ownResult);
  void checkWritesThroughAliases(CallSite &site);
  void scatterIntoBases(const CallSite &site, aten::CallOp call);
  mlir::Value aliasedInput(const CallSite &site, const c10::AliasInfo *info);
  void recordView(mlir::Value result, mlir::Value base);
  mlir::Value writtenResult(const CallSite &site, aten::CallOp call,
                            const c10::AliasInfo *info);
  std::vector<AbsValue> bindResults(const CallSite &site, aten::CallOp call,
                                    const CallResults &results);
  void rebindWritten(const CallSite &site, aten::CallOp call);

  // Typing an op that has no meta kernel.
  Stack typeWithoutMeta(const CallSite &site, const std::string &metaError,
                        bool &kernelLayouts);
  Stack typeByWholeRun(const MetalessTyping &t);
  Stack typeBySample(const MetalessTyping &t);
  Stack typeByProbes(const MetalessTyping &t, int64_t sampleBytes);
  [[noreturn]] void typingTooLarge(const MetalessTyping &t,
                                   const std::string &why);

  // The symbols by canonical FQN.
  llvm::StringMap<mlir::Operation *> symbols;
  // The last `fsdp.get`: state reads stay together at the top, in the order
  // the forward first uses them.
  mlir::Operation *lastRead = nullptr;
  // Overloads whose meta call failed once.
  llvm::StringSet<> noMetaKernel;
  // The calls emitted so far (bounded: kMaxCalls).
  int64_t callsEmitted = 0;
  // The param dtype as a ScalarType argument (computeDtypeArgument).
  AbsValue computeDtype;
};

} // namespace fsdp::import

#endif // FSDP_LIB_IMPORT_CORE_STEPBUILDER_H
