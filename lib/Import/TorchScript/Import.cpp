//===- Import.cpp - TorchScript to the aten/fsdp dialects ------------------===//
//
// The importer inlines the module's `forward`, cleans it up with libtorch's
// own JIT passes, and then walks the graph as an abstract interpreter:
//  - tensor values become SSA values of static type; the type of every op's
//    results comes from running the op itself on meta tensors (ATen's own
//    shape functions), so no shape rule is written twice;
//  - everything else (ints, lists, module attributes, `self.training`) is a
//    compile-time constant, computed by the JIT operator itself; control flow
//    on constants is folded, control flow on tensor data is a diagnostic;
//  - in-place updates become new SSA values, and buffer updates explicit
//    `fsdp.update` ops.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Import/TorchScript/Import.h"

#include "fsdp/Dialect/ATen/IR/ATenBuilder.h"
#include "fsdp/Dialect/ATen/IR/ATenDialect.h"
#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"
#include "fsdp/Target/Plan/PlanTypes.h"
#include "fsdp/runtime/ModelArchive.h"
#include "fsdp/runtime/Plan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/JSON.h"

#include <torch/csrc/jit/api/module.h>
#include <torch/jit.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/constant_propagation.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/csrc/jit/runtime/interpreter.h>
#include <torch/csrc/jit/runtime/symbolic_shape_registry.h>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/torch.h>

#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

using namespace mlir;
using namespace fsdp;
namespace jit = torch::jit;

using fsdp::runtime::firstLine;

namespace {

/// Thrown inside the walk to unwind to the entry point; the diagnostic has
/// already been emitted.
struct ImportFailure {};

/// What the interpreter knows about a TorchScript value.
struct AbsValue {
  enum class Kind { Unknown, Tensor, Constant, Module, Sequence };
  Kind kind = Kind::Unknown;
  Value tensor;                    // Kind::Tensor
  c10::IValue constant;            // Kind::Constant (a tensor constant too)
  c10::intrusive_ptr<c10::ivalue::Object> module; // Kind::Module
  std::string path;                // Kind::Module: its path from the root
  std::vector<AbsValue> elements;  // Kind::Sequence: a list or tuple
  bool isTuple = false;

  static AbsValue ofTensor(Value v) {
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
bool holdsTensor(const AbsValue &abs, llvm::function_ref<bool(Value)> pred) {
  if (abs.isTensor())
    return pred(abs.tensor);
  return llvm::any_of(abs.elements,
                      [&](const AbsValue &e) { return holdsTensor(e, pred); });
}

/// Replaces `old` by `updated` wherever `abs` holds it.
void replaceTensor(AbsValue &abs, Value old, Value updated) {
  if (abs.isTensor() && abs.tensor == old)
    abs.tensor = updated;
  for (AbsValue &e : abs.elements)
    replaceTensor(e, old, updated);
}

/// A parameter or buffer symbol.
struct StateInfo {
  std::string fqn; // canonical name (the first in state_dict order)
  bool isParam = false;
  RankedTensorType type;
  RankedTensorType readType; // what the step reads: `type`, or mixed precision's
};

/// The elements of storage a tensor is: two tensors with the same view are
/// the same values (an alias of a parameter is that parameter).
using TensorView = std::tuple<const void *, int64_t, std::vector<int64_t>,
                              std::vector<int64_t>, at::ScalarType>;

TensorView viewOf(const at::Tensor &t) {
  return {t.storage().unsafeGetStorageImpl(), t.storage_offset(),
          t.sizes().vec(), t.strides().vec(), t.scalar_type()};
}

/// False where a value of `type` holds no tensor (numbers, strings, bools,
/// and lists, tuples, dicts and optionals of them): a module attribute of
/// that type is a constant as it is.
bool mayHoldTensors(const c10::TypePtr &type) {
  switch (type->kind()) {
  case c10::TypeKind::IntType:
  case c10::TypeKind::FloatType:
  case c10::TypeKind::ComplexType:
  case c10::TypeKind::NumberType:
  case c10::TypeKind::BoolType:
  case c10::TypeKind::StringType:
  case c10::TypeKind::NoneType:
  case c10::TypeKind::DeviceObjType:
  case c10::TypeKind::ScalarTypeType:
  case c10::TypeKind::LayoutType:
  case c10::TypeKind::MemoryFormatType:
    return false;
  case c10::TypeKind::ListType:
  case c10::TypeKind::TupleType:
  case c10::TypeKind::DictType:
  case c10::TypeKind::OptionalType:
    return llvm::any_of(type->containedTypes(), [](const c10::TypePtr &t) {
      return mayHoldTensors(t);
    });
  default:
    return true;
  }
}

std::string cleanClassName(const std::string &qualified) {
  // `__torch__.models.___torch_mangle_3.Block` -> `models.Block`
  std::string result;
  std::stringstream ss(qualified);
  std::string part;
  while (std::getline(ss, part, '.')) {
    if (part == "__torch__" || part.rfind("___torch_mangle_", 0) == 0)
      continue;
    if (!result.empty())
      result += ".";
    result += part;
  }
  return result;
}

/// A call the importer inlined: where it was made (in the caller's code),
/// the function it called, and the call the caller's own code was inlined
/// from (null: the caller is forward).
struct CallFrame {
  jit::SourceRange site;
  std::string callee; // qualified name
  std::shared_ptr<const CallFrame> caller;
};

/// A position in the model's source: a candidate for a diagnostic.
struct SourceFrame {
  std::string file;
  unsigned line = 0, col = 0;
  /// In torch's package (or libtorch's built-in code), not the user's.
  bool inTorch = false;
};

/// One op call, as emitCall's steps share it.
struct CallSite {
  jit::Node *node;
  const c10::FunctionSchema &schema;
  std::string overload; // `name.overload`
  Location loc;
  /// The schema positions of the arguments the op writes.
  std::vector<int64_t> mutated;
  /// The tensors it writes (mutated's), and how many results its schema
  /// has (the new values of the written tensors follow them).
  SmallVector<Value> mutatedOperands;
  unsigned numSchemaResults = 0;
  /// Writes through a chain of slices and selects of a base that is read
  /// afterwards (`out[:, :m] = v`): the written tensor's index in
  /// mutatedOperands, the views from it up to the base, and the base, whose
  /// new value scatters the written one back (scatterIntoBases).
  struct Scatter {
    size_t written;
    SmallVector<aten::CallOp> views;
    Value base;
  };
  SmallVector<Scatter> scatters;
};

/// A call's arguments in schema order, and the stack of its meta call.
struct CallArguments {
  SmallVector<Attribute> args;
  SmallVector<Value> operands;
  jit::Stack stack;
};

/// The types of a call's schema results.
struct CallResults {
  SmallVector<Type> types;
  /// Whether the one result is a Tensor[].
  bool list = false;
  /// The types each node output stands for (none for None).
  std::vector<std::vector<Type>> ofOutput;
  /// `aten.result_strides`, one entry per schema result; written only if
  /// anyStrided.
  SmallVector<Attribute> strides;
  bool anyStrided = false;
  /// `aten.internal_views`: the schema results the kernel returns as a
  /// view of a tensor of its own (einsum's permuted product), whose
  /// storage two tensors hold.
  SmallVector<int64_t> internalViews;
};

/// What typing an op without a meta kernel knows of it (typeWithoutMeta).
struct MetalessTyping {
  jit::Node *node;
  const c10::FunctionSchema &schema;
  const std::string &overload;
  const std::string &metaError;
  Location loc;
  /// The arguments as the meta call had them.
  jit::Stack args;
  /// The result shapes from ATen's shape function, where it has one.
  std::optional<std::vector<std::vector<int64_t>>> shapes;
  int64_t inputBytes = 0, resultBytes = 0;
};

/// forward's arguments, as the step receives them.
struct StepInputs {
  SmallVector<Type> types;
  SmallVector<std::string> names;
  /// Every input of the graph but self: its default value, or unknown for
  /// an argument of the step.
  SmallVector<std::pair<jit::Value *, AbsValue>> bound;
};

class Importer {
public:
  Importer(MLIRContext *context, llvm::StringRef path)
      : context(context), builder(context), path(path.str()) {}

  OwningOpRef<ModuleOp> run(const ImportOptions &options);

private:
  // Types and values.
  Type elementType(at::ScalarType dtype, Location loc);
  at::ScalarType scalarType(Type type, Location loc);
  RankedTensorType tensorType(const at::Tensor &t, Location loc);
  at::Tensor metaTensor(RankedTensorType type, Location loc);
  Value materialize(const at::Tensor &constant, Location loc);
  /// The SSA tensor `abs` stands for (a constant tensor is materialized), or
  /// null if it is not a tensor.
  Value tensorValue(const AbsValue &abs, Location loc);
  Attribute constantAttr(const c10::IValue &value, const c10::Argument *arg,
                         Location loc, const std::string &what);

  // Inlining that remembers which module's code each node came from, and
  // the calls it was inlined through.
  void inlineCalls(jit::Block *block);
  std::string modulePathOf(jit::Value *module);
  void tagInlined(jit::Node *node, const std::string &modulePath,
                  const std::shared_ptr<const CallFrame> &frame);

  // Locations.
  Location locationOf(const jit::Node *node);
  std::vector<SourceFrame> framesOf(const jit::Node *node);
  void addFrames(const jit::SourceRange &range, const std::string &function,
                 bool callSite, std::vector<SourceFrame> &frames);
  bool addTracedFrames(const jit::SourceRange &range,
                       std::vector<SourceFrame> &frames);
  bool underTorch(llvm::StringRef file) const;

  // The entry point's steps.
  LogicalResult setComputeTypes(const ImportOptions &options,
                                Location fileLoc);
  void importStep(const ImportOptions &options, TimingScope &timing,
                  Location fileLoc);
  jit::Module loadModule(jit::ExtraFilesMap &extra, Location fileLoc);
  std::vector<InputSpec> inputSpecs(const std::string &metadata,
                                    const ImportOptions &options,
                                    std::vector<std::string> &storedTargets,
                                    Location fileLoc);
  std::vector<InputSpec> readMetadata(const std::string &metadata,
                                      std::vector<std::string> &storedTargets,
                                      Location fileLoc);
  StepInputs matchInputs(const c10::FunctionSchema &schema,
                         const std::vector<InputSpec> &specs,
                         Location fileLoc);
  void summarizeInputs(const std::vector<InputSpec> &specs);
  void createStep(const StepInputs &inputs, const jit::Module &root,
                  Location fileLoc);
  void finishStep(const StepInputs &inputs, Location fileLoc);

  // The walk: one function per node kind.
  void declareState(const jit::Module &root);
  void indexSkippedValues(const jit::Module &root);
  void walkBlock(jit::Block *block);
  void visitNode(jit::Node *node);
  void visitConstant(jit::Node *node);
  void visitGetAttr(jit::Node *node);
  void visitSetAttr(jit::Node *node);
  void visitIf(jit::Node *node);
  void visitLoop(jit::Node *node);
  void visitConstruct(jit::Node *node);
  void visitUnpack(jit::Node *node);
  // These return false where they do not apply: the node is then an
  // operator like any other.
  bool visitIndex(jit::Node *node);
  bool visitAppend(jit::Node *node);
  bool visitListConcat(jit::Node *node);
  bool visitSequenceLength(jit::Node *node);
  bool visitIdentity(jit::Node *node);
  void visitRefinement(jit::Node *node);
  [[noreturn]] void visitRaiseException(jit::Node *node);
  void visitNumToTensor(jit::Node *node);
  void visitWithoutSchema(jit::Node *node);
  bool visitTensorMetadata(jit::Node *node);
  void visitOperator(jit::Node *node);
  bool foldTypeOnlyFactory(jit::Node *node, Location loc);
  bool foldOnConstants(jit::Node *node, Location loc);
  void visitTypeProperty(jit::Node *node, Location loc);
  void evaluateConstant(jit::Node *node);

  // An op call: emitCall's steps.
  void emitCall(jit::Node *node, const c10::FunctionSchema &schema);
  std::vector<int64_t> mutatedArguments(const CallSite &site);
  CallArguments callArguments(const CallSite &site);
  void addTensorList(CallArguments &out, const AbsValue &list,
                     const std::string &what, Location loc);
  void addOptionalTensorList(CallArguments &out, const AbsValue &list,
                             const std::string &what, Location loc);
  void addConstantTensorList(CallArguments &out, c10::List<c10::IValue> list,
                             Location loc);
  bool typeByMeta(const CallSite &site, jit::Stack &stack,
                  std::string &metaError);
  CallResults callResults(const CallSite &site, const jit::Stack &stack,
                          bool kernelLayouts);
  Attribute resultStridesAttr(const at::Tensor &t, bool ownResult);
  void checkWritesThroughAliases(CallSite &site);
  void scatterIntoBases(const CallSite &site, aten::CallOp call);
  Value aliasedInput(const CallSite &site, const c10::AliasInfo *info);
  void recordView(Value result, Value base);
  Value writtenResult(const CallSite &site, aten::CallOp call,
                      const c10::AliasInfo *info);
  void bindResults(const CallSite &site, aten::CallOp call,
                   const CallResults &results);
  void rebindWritten(const CallSite &site, aten::CallOp call);

  // Typing an op that has no meta kernel.
  jit::Stack typeWithoutMeta(jit::Node *node, const c10::FunctionSchema &schema,
                             const std::string &overload,
                             const std::string &metaError, Location loc,
                             bool &kernelLayouts);
  jit::Stack typeByWholeRun(const MetalessTyping &t);
  jit::Stack typeBySample(const MetalessTyping &t);
  jit::Stack typeByProbes(const MetalessTyping &t, int64_t sampleBytes);
  [[noreturn]] void typingTooLarge(const MetalessTyping &t,
                                   const std::string &why);

  AbsValue &lookup(jit::Value *value);
  void bind(jit::Value *value, AbsValue abs);
  c10::IValue toIValue(const AbsValue &abs, const c10::TypePtr &type,
                       bool meta, Location loc);
  AbsValue fromIValue(const c10::IValue &value);
  Value stateValue(const std::string &fqn, Location loc);
  const std::string *stateOfTensor(const at::Tensor &t) const;
  AbsValue attributeAbs(const std::string &name, const c10::IValue &value,
                        jit::Node *node, Location loc);
  Location attributeErrorLoc(jit::Node *node);
  at::Tensor constantValue(const std::string &name, const at::Tensor &t,
                           jit::Node *node);
  void flattenOutputs(const AbsValue &abs, Location loc,
                      SmallVectorImpl<Value> &out);

  /// Emits the error at `loc`, naming the module whose code it is in (the
  /// NameLoc locationOf puts around it), as the gradient errors do.
  [[noreturn]] void fail(Location loc, const llvm::Twine &message) {
    InFlightDiagnostic diag = emitError(loc) << message;
    if (auto name = dyn_cast<NameLoc>(loc)) {
      std::string path = name.getName().str();
      diag << " [in module '" << path << "'";
      auto cls = moduleClasses.find(path);
      if (cls != moduleClasses.end())
        diag << " (" << cls->second << ")";
      diag << "]";
    }
    throw ImportFailure{};
  }

  MLIRContext *context;
  OpBuilder builder;
  std::string path;
  ModuleOp module;
  func::FuncOp func;

  jit::Graph *graph = nullptr;
  llvm::DenseMap<jit::Value *, AbsValue> env;
  // The path of the module whose code each inlined node is (absent: root).
  llvm::DenseMap<const jit::Node *, std::string> nodeModule;
  // The innermost call each inlined node was inlined through (absent: it is
  // forward's own code).
  llvm::DenseMap<const jit::Node *, std::shared_ptr<const CallFrame>>
      callFrames;
  // forward's qualified name (the function of the code no call frame holds).
  std::string forwardName;
  // Each node's location, once computed.
  llvm::DenseMap<const jit::Node *, Location> locations;
  // Torch's package directories (ending in "torch/"), as the traced stacks
  // name them.
  llvm::StringSet<> torchRoots;
  // The class of each module, by path (`fsdp.modules`), for messages.
  llvm::StringMap<std::string> moduleClasses;
  // State symbols by every FQN that names them (aliases of tied weights too).
  llvm::StringMap<StateInfo> states;
  // The canonical FQN of each parameter and buffer by its tensor, and by
  // its view of storage (an alias: the same elements): a module attribute
  // that holds one, directly or in a list or tuple (nn.LSTM's
  // `_flat_weights`), is that state.
  llvm::DenseMap<const c10::TensorImpl *, std::string> stateByTensor;
  std::map<TensorView, std::string> stateByView;
  // Canonical FQN -> its current value in the step (read lazily, once).
  llvm::StringMap<Value> current;
  llvm::StringMap<Value> initial;
  std::vector<std::string> stateOrder;
  // Canonical FQN of a tensor value read from a buffer or parameter, so that
  // an in-place update of it becomes a state update.
  llvm::DenseMap<Value, std::string> stateOf;
  // The tensor each view (a result aliasing an input) is a view of.
  llvm::DenseMap<Value, Value> viewBase;
  int64_t unrolledIterations = 0;
  // The last `fsdp.get`: state reads stay together at the top, in the order
  // the forward first uses them.
  Operation *lastRead = nullptr;
  // Overloads whose meta call failed once.
  llvm::StringSet<> noMetaKernel;
  // Mixed precision's compute types (ImportOptions); null: the model's own.
  Type paramDtype, bufferDtype;
  // The param dtype as a ScalarType argument (see argument()).
  AbsValue computeDtypeArgument;
  /// Input `i` of `node`, as the op receives it: under mixed precision, a
  /// filling factory's float32 dtype is the compute dtype.
  AbsValue &argument(jit::Node *node, size_t i);
  // The input specs, for messages about shapes that do not fit the model.
  std::string inputSummary;
  // Buffers registered with persistent=False (fsdp_export.py records them).
  llvm::StringSet<> nonPersistent;
  // The archive, read without the values of its tensors; the values of
  // module tensors that are not state, read when the step uses them.
  std::unique_ptr<fsdp::runtime::ModelArchive> archive;
  // The storages jit::load made for records whose values it skipped (they
  // hold whatever that memory held), with the archive's entry of a tensor
  // in the record; and the values read for constants on them, by tensor.
  llvm::DenseMap<const c10::StorageImpl *,
                 const fsdp::runtime::ModelArchive::Entry *>
      skippedStorages;
  llvm::DenseMap<const c10::TensorImpl *, at::Tensor> constantValues;
  std::vector<std::pair<std::string, int64_t>> valuesRead;
};

} // namespace

//===----------------------------------------------------------------------===//
// Types
//===----------------------------------------------------------------------===//

/// Through the plan's dtype table (PlanSchema.h): a tensor the importer
/// types is one a plan can hold.
Type Importer::elementType(at::ScalarType dtype, Location loc) {
  if (std::optional<plan::DType> d = fsdp::runtime::planDType(dtype))
    return fsdp::elementType(*d, context);
  fail(loc, llvm::Twine("tensors of dtype ") + c10::toString(dtype) +
                " are not supported");
}

at::ScalarType Importer::scalarType(Type type, Location loc) {
  if (std::optional<plan::DType> d = planDType(type))
    return fsdp::runtime::scalarType(*d);
  std::string name;
  llvm::raw_string_ostream os(name);
  os << type;
  fail(loc, "element type " + name + " has no ATen dtype");
}

RankedTensorType Importer::tensorType(const at::Tensor &t, Location loc) {
  return RankedTensorType::get(t.sizes().vec(),
                               elementType(t.scalar_type(), loc));
}

at::Tensor Importer::metaTensor(RankedTensorType type, Location loc) {
  return at::empty(type.getShape().vec(),
                   at::TensorOptions()
                       .dtype(scalarType(type.getElementType(), loc))
                       .device(at::kMeta));
}

Value Importer::materialize(const at::Tensor &constant, Location loc) {
  at::Tensor t = constant.contiguous().cpu();
  RankedTensorType type = tensorType(t, loc);
  DenseElementsAttr value;
  if (t.scalar_type() == at::kBool) {
    auto data = t.data_ptr<bool>();
    value = DenseElementsAttr::get(
        type, llvm::ArrayRef<bool>(data, data + t.numel()));
  } else {
    llvm::ArrayRef<char> raw(static_cast<const char *>(t.data_ptr()),
                             t.numel() * t.element_size());
    value = DenseElementsAttr::getFromRawBuffer(type, raw);
  }
  return aten::ConstantOp::create(builder, loc, type, value);
}

Value Importer::tensorValue(const AbsValue &abs, Location loc) {
  if (abs.isTensor())
    return abs.tensor;
  if (abs.isConstant() && abs.constant.isTensor())
    return materialize(abs.constant.toTensor(), loc);
  return Value();
}

//===----------------------------------------------------------------------===//
// Locations: the TorchScript source range, named by the module path
//===----------------------------------------------------------------------===//

/// The range `range` was generated from (the model's own source, for code
/// that was saved and loaded), or `range` itself.
static jit::SourceRange originalRange(const jit::SourceRange &range) {
  if (auto original = range.findSourceRangeThatGenerated())
    return *original;
  return range;
}

/// The file, line and (0-based) column of `range`, if it names a file.
static std::optional<std::tuple<std::string, size_t, size_t>>
fileLineCol(const jit::SourceRange &range) {
  auto flc = range.file_line_col();
  if (!flc || std::get<0>(*flc).empty())
    return std::nullopt;
  return flc;
}

/// True for code in torch's package, by the qualified name of its function
/// (`__torch__.torch.nn.functional.pad`, a torch.nn module's method).
static bool isTorchFunction(llvm::StringRef qualifiedName) {
  return qualifiedName.starts_with("__torch__.torch.");
}

bool Importer::underTorch(llvm::StringRef file) const {
  return llvm::any_of(torchRoots, [&](const auto &root) {
    return file.starts_with(root.getKey());
  });
}

/// The frames of the Python stack torch.jit.trace recorded for a traced
/// node: its source text is one "FILE(LINE): FUNCTION" line per frame,
/// innermost first (libtorch's tracer), the source's file and line those of
/// the first. Frames in torch's package are marked: the package is the
/// directory of torch/jit/_trace.py, the tracer's own frame, which every
/// traced stack holds (or of torch/nn/modules/module.py); the frames beyond
/// the tracer's are the code that called torch.jit.trace, not the model's.
/// False if `range` is not such a stack.
bool Importer::addTracedFrames(const jit::SourceRange &range,
                               std::vector<SourceFrame> &frames) {
  const std::shared_ptr<jit::Source> &source = range.source();
  if (!source || !source->filename() || source->filename()->empty())
    return false;
  std::string text = source->text_str().str();
  if (!llvm::StringRef(text).starts_with(
          *source->filename() + "(" +
          std::to_string(source->starting_line_no()) + "): "))
    return false;
  SmallVector<SourceFrame> stack;
  SmallVector<llvm::StringRef> lines;
  llvm::StringRef(text).split(lines, '\n', -1, /*KeepEmpty=*/false);
  for (llvm::StringRef line : lines) {
    size_t close = line.rfind("): ");
    size_t open =
        close == llvm::StringRef::npos ? close : line.rfind('(', close);
    unsigned lineNo;
    if (open == llvm::StringRef::npos ||
        line.slice(open + 1, close).getAsInteger(10, lineNo))
      continue;
    llvm::StringRef file = line.take_front(open);
    for (llvm::StringRef anchor :
         {"torch/jit/_trace.py", "torch/nn/modules/module.py"})
      if (file.ends_with(anchor) &&
          (file.size() == anchor.size() ||
           file[file.size() - anchor.size() - 1] == '/'))
        torchRoots.insert(file.drop_back(anchor.size() - strlen("torch/")));
    SourceFrame frame;
    frame.file = file.str();
    frame.line = lineNo;
    frame.col = 1;
    stack.push_back(frame);
  }
  for (SourceFrame &frame : stack) {
    frame.inTorch = underTorch(frame.file);
    if (frame.inTorch && llvm::StringRef(frame.file).ends_with("jit/_trace.py"))
      break;
    frames.push_back(frame);
  }
  return true;
}

/// The frames `range` names, in code of `function` (a qualified name): a
/// traced node's whole Python stack, or one position of scripted code.
/// `callSite`: the range is a call the importer inlined.
void Importer::addFrames(const jit::SourceRange &range,
                         const std::string &function, bool callSite,
                         std::vector<SourceFrame> &frames) {
  jit::SourceRange original = originalRange(range);
  // A call of a TorchScript function, in code that was saved and loaded:
  // its range is the callee's name, which the archive's debug information
  // gives to the function's constant (no source); the `(` that follows is
  // the call's own.
  if (callSite && !fileLineCol(original) && range.source() &&
      range.end() < range.source()->size())
    original = originalRange(
        jit::SourceRange(range.source(), range.end(), range.end() + 1));
  if (addTracedFrames(original, frames))
    return;
  auto flc = fileLineCol(original);
  if (!flc)
    return;
  auto [file, line, col] = *flc;
  SourceFrame frame;
  frame.file = file;
  frame.line = line;
  frame.col = col + 1;
  // `<string>`: TorchScript's built-in functions, libtorch's own code.
  frame.inTorch = isTorchFunction(function) || underTorch(file) ||
                  llvm::StringRef(file).starts_with("<");
  frames.push_back(frame);
}

/// The positions of `node`'s code, innermost first: its own range, then
/// the calls it was inlined through. A node the TorchScript compiler gave
/// no range (an assignment's SetAttr, a tuple unpack, in code that was
/// loaded) takes that of the statement that computed its last operand
/// with one, in the node's own function.
std::vector<SourceFrame> Importer::framesOf(const jit::Node *node) {
  std::vector<SourceFrame> frames;
  std::shared_ptr<const CallFrame> own = callFrames.lookup(node);
  addFrames(node->sourceRange(), own ? own->callee : forwardName,
            /*callSite=*/false, frames);
  if (frames.empty())
    for (const jit::Value *input : llvm::reverse(node->inputs())) {
      const jit::Node *producer = input->node();
      std::shared_ptr<const CallFrame> frame = callFrames.lookup(producer);
      if (frame == own) {
        addFrames(producer->sourceRange(), own ? own->callee : forwardName,
                  /*callSite=*/false, frames);
      } else {
        // The producer was inlined through a call in the node's function.
        while (frame && frame->caller != own)
          frame = frame->caller;
        if (frame)
          addFrames(frame->site, own ? own->callee : forwardName,
                    /*callSite=*/true, frames);
      }
      if (!frames.empty())
        break;
    }
  for (const CallFrame *frame = own.get(); frame; frame = frame->caller.get())
    addFrames(frame->site,
              frame->caller ? frame->caller->callee : forwardName,
              /*callSite=*/true, frames);
  return frames;
}

/// The innermost frame of the user's code (outside torch's package), or the
/// innermost frame where every one is torch's; named by the path of the
/// module whose code the node is.
Location Importer::locationOf(const jit::Node *node) {
  auto cached = locations.find(node);
  if (cached != locations.end())
    return cached->second;
  Location loc = UnknownLoc::get(context);
  std::vector<SourceFrame> frames = framesOf(node);
  auto user = llvm::find_if(
      frames, [](const SourceFrame &frame) { return !frame.inTorch; });
  if (user == frames.end())
    user = frames.begin();
  if (user != frames.end())
    loc = FileLineColLoc::get(context, user->file, user->line, user->col);
  std::string modulePath = nodeModule.lookup(node);
  if (!modulePath.empty())
    loc = NameLoc::get(StringAttr::get(context, modulePath), loc);
  locations.try_emplace(node, loc);
  return loc;
}

//===----------------------------------------------------------------------===//
// Inlining
//===----------------------------------------------------------------------===//

std::string Importer::modulePathOf(jit::Value *module) {
  if (module == graph->inputs()[0])
    return "";
  jit::Node *node = module->node();
  if (node->kind() == c10::prim::GetAttr) {
    std::string parent = modulePathOf(node->input());
    const std::string &name = node->s(c10::attr::name);
    return parent.empty() ? name : parent + "." + name;
  }
  return nodeModule.lookup(node);
}

void Importer::tagInlined(jit::Node *node, const std::string &modulePath,
                          const std::shared_ptr<const CallFrame> &frame) {
  nodeModule[node] = modulePath;
  callFrames[node] = frame;
  for (jit::Block *block : node->blocks())
    for (jit::Node *inner : block->nodes())
      tagInlined(inner, modulePath, frame);
}

/// Inlines every call, as libtorch's Inline pass does, and tags the inlined
/// nodes with the path of the module whose method they come from (the path
/// follows the GetAttr chain from `self`, so ModuleList members keep their
/// full name, `blocks.3`) and with the calls they were inlined through, the
/// outer ones too (libtorch's own callstack keeps only the innermost call
/// here: the callee's graph is inlined before its own calls are).
void Importer::inlineCalls(jit::Block *block) {
  for (jit::Node *cur = block->nodes().front(); cur != block->return_node();) {
    jit::NodeKind kind = cur->kind();
    jit::GraphFunction *callee = nullptr;
    std::string calleePath = nodeModule.lookup(cur);
    if (kind == c10::prim::CallMethod) {
      if (auto classType = cur->input(0)->type()->cast<c10::ClassType>()) {
        callee = jit::tryToGraphFunction(
            classType->getMethod(cur->s(c10::attr::name)));
        calleePath = modulePathOf(cur->input(0));
      }
    } else if (kind == c10::prim::CallFunction) {
      auto fnType = cur->input(0)->type()->cast<c10::FunctionType>();
      if (fnType) {
        callee = jit::tryToGraphFunction(*fnType->function());
        if (callee)
          cur->removeInput(0);
      }
    }
    if (!callee) {
      for (jit::Block *inner : cur->blocks())
        inlineCalls(inner);
      cur = cur->next();
      continue;
    }
    jit::Node *prev = cur->prev();
    jit::Node *next = cur->next();
    auto frame = std::make_shared<const CallFrame>(
        CallFrame{cur->sourceRange(), callee->qualname().qualifiedName(),
                  callFrames.lookup(cur)});
    nodeModule.erase(cur);
    callFrames.erase(cur);
    // The callee's own graph, not its optimized (already inlined) one, so
    // that nested calls keep their module paths.
    jit::inlineCallTo(cur, callee, /*use_graph=*/false);
    for (jit::Node *n = prev->next(); n != next; n = n->next())
      tagInlined(n, calleePath, frame);
    // Visit what was inlined: it may hold calls of its own.
    cur = prev->next();
  }
}

//===----------------------------------------------------------------------===//
// Model state
//===----------------------------------------------------------------------===//

void Importer::declareState(const jit::Module &root) {
  Location loc = FileLineColLoc::get(context, path, 0, 0);
  // Tied tensors share storage, offset, sizes and strides.
  using Key = std::tuple<const void *, int64_t, std::vector<int64_t>,
                         std::vector<int64_t>>;
  std::map<Key, std::string> canonical;
  llvm::StringMap<Operation *> symbols;

  auto declare = [&](const std::string &modulePath, const jit::Module &owner,
                     const std::string &name, const at::Tensor &t,
                     bool isParam) {
    std::string fqn = modulePath.empty() ? name : modulePath + "." + name;
    auto remember = [&](const std::string &canonicalFqn) {
      stateByTensor.try_emplace(t.unsafeGetTensorImpl(), canonicalFqn);
      if (t.numel() != 0)
        stateByView.try_emplace(viewOf(t), canonicalFqn);
    };
    Key key{t.storage().unsafeGetStorageImpl(), t.storage_offset(),
            t.sizes().vec(), t.strides().vec()};
    // Empty tensors have no storage to share: never tied.
    auto [it, inserted] = t.numel() == 0
                              ? std::make_pair(canonical.end(), true)
                              : canonical.emplace(key, fqn);
    if (!inserted) {
      // A tied weight: one symbol, with this FQN as an alias.
      StateInfo info = states.lookup(it->second);
      states[fqn] = info;
      remember(info.fqn);
      Operation *symbol = symbols.lookup(it->second);
      auto addAlias = [&](auto op) {
        SmallVector<Attribute> aliases;
        if (auto existing = op.getAliases())
          aliases.append(existing->begin(), existing->end());
        aliases.push_back(builder.getStringAttr(fqn));
        op.setAliasesAttr(builder.getArrayAttr(aliases));
      };
      if (auto param = dyn_cast<ParamOp>(symbol))
        addAlias(param);
      else
        addAlias(cast<BufferOp>(symbol));
      return;
    }
    StateInfo info;
    info.fqn = fqn;
    info.isParam = isParam;
    info.type = tensorType(t, loc);
    if (isParam && isa<ComplexType>(info.type.getElementType()))
      fail(loc, "parameter '" + fqn + "' is complex (" +
                    c10::toString(t.scalar_type()) +
                    "): fsdp-opt shards real parameters only; hold it as "
                    "real pairs (torch.view_as_real(w), a [..., 2] "
                    "parameter) and take torch.view_as_complex of it in "
                    "forward");
    if (isParam && !isa<FloatType>(info.type.getElementType()))
      fail(loc, "parameter '" + fqn + "' is not floating point");
    info.readType = info.type;
    if (Type compute = isParam ? paramDtype : bufferDtype;
        compute && isa<FloatType>(info.type.getElementType()))
      info.readType = RankedTensorType::get(info.type.getShape(), compute);
    states[fqn] = info;
    remember(fqn);
    stateOrder.push_back(fqn);
    std::string cls = cleanClassName(owner.type()->name()->qualifiedName());
    Operation *op;
    if (isParam)
      op = ParamOp::create(builder, loc, fqn, info.type, modulePath, cls,
                                   ArrayAttr());
    else
      op = BufferOp::create(builder, loc, fqn, info.type, modulePath, cls,
                            ArrayAttr(), nonPersistent.contains(fqn));
    symbols[fqn] = op;
  };

  // state_dict order: each module's parameters, then its buffers, preorder.
  // The module tree (path and class of every module, preorder) is kept as
  // `fsdp.modules` for auto-wrapping by module class or path.
  SmallVector<Attribute> modules;
  for (const auto &named : root.named_modules()) {
    const jit::Module &m = named.value;
    std::string cls = cleanClassName(m.type()->name()->qualifiedName());
    modules.push_back(builder.getStrArrayAttr({named.name, cls}));
    moduleClasses[named.name] = cls;
    for (const auto &p : m.named_parameters(/*recurse=*/false))
      declare(named.name, m, p.name, p.value, /*isParam=*/true);
    for (const auto &b : m.named_buffers(/*recurse=*/false))
      declare(named.name, m, b.name, b.value, /*isParam=*/false);
  }
  module->setAttr(kModulesAttr, builder.getArrayAttr(modules));
}

Value Importer::stateValue(const std::string &fqn, Location loc) {
  const StateInfo &info = states.find(fqn)->second;
  Value &value = current[info.fqn];
  if (!value) {
    // Read each symbol once, at the start of the step.
    OpBuilder::InsertionGuard guard(builder);
    if (lastRead)
      builder.setInsertionPointAfter(lastRead);
    else
      builder.setInsertionPointToStart(&func.getBody().front());
    auto read = GetOp::create(builder, loc, info.readType,
                              FlatSymbolRefAttr::get(context, info.fqn));
    lastRead = read;
    value = read;
    initial[info.fqn] = value;
    stateOf[value] = info.fqn;
  }
  return value;
}

/// The state a tensor that a module attribute holds is: a parameter or
/// buffer itself, or an alias of one (the same elements of the same
/// storage, as a tensor the archive's pickle names twice reads back); null
/// if it is neither.
const std::string *Importer::stateOfTensor(const at::Tensor &t) const {
  if (!t.defined())
    return nullptr;
  auto same = stateByTensor.find(t.unsafeGetTensorImpl());
  if (same != stateByTensor.end())
    return &same->second;
  if (t.numel() == 0 || !t.has_storage() || t.layout() != at::kStrided ||
      t.is_quantized() || t.is_conj() || t.is_neg())
    return nullptr;
  auto alias = stateByView.find(viewOf(t));
  return alias == stateByView.end() ? nullptr : &alias->second;
}

/// Which storages of the loaded module hold no values: jit::load read the
/// archive through readerSkippingValues, which leaves the records of the
/// module tensors it finds unread, and a list, a tuple or another attribute
/// can hold the same tensors (nn.LSTM's `_flat_weights`). A module shared
/// by two parents is walked at both paths: the archive names its tensors at
/// one of them.
void Importer::indexSkippedValues(const jit::Module &root) {
  if (!archive)
    return;
  std::function<void(const c10::ivalue::Object &, const std::string &)> walk =
      [&](const c10::ivalue::Object &object, const std::string &prefix) {
        std::shared_ptr<c10::ClassType> type = object.type();
        size_t slots = std::min(object.slots().size(), type->numAttributes());
        for (size_t i = 0; i < slots; ++i) {
          const c10::IValue &value = object.getSlot(i);
          std::string name = prefix + type->getAttributeName(i);
          if (value.isObject() && value.toObjectRef().type()->is_module()) {
            walk(value.toObjectRef(), name + ".");
            continue;
          }
          if (!value.isTensor() || !value.toTensor().has_storage())
            continue;
          const fsdp::runtime::ModelArchive::Entry *entry = archive->find(name);
          if (entry && archive->valuesSkipped(*entry))
            skippedStorages.try_emplace(
                value.toTensor().storage().unsafeGetStorageImpl(), entry);
        }
      };
  walk(*root._ivalue(), "");
}

//===----------------------------------------------------------------------===//
// Values
//===----------------------------------------------------------------------===//

AbsValue &Importer::lookup(jit::Value *value) {
  auto it = env.find(value);
  if (it == env.end())
    fail(locationOf(value->node()),
         "value %" + value->debugName() + " is used before it is defined");
  return it->second;
}

void Importer::bind(jit::Value *value, AbsValue abs) {
  env[value] = std::move(abs);
}

AbsValue Importer::fromIValue(const c10::IValue &value) {
  return AbsValue::ofConstant(value);
}

c10::IValue Importer::toIValue(const AbsValue &abs, const c10::TypePtr &type,
                               bool meta, Location loc) {
  switch (abs.kind) {
  case AbsValue::Kind::Constant:
    if (meta && abs.constant.isTensor())
      return abs.constant.toTensor().to(at::kMeta);
    return abs.constant;
  case AbsValue::Kind::Tensor:
    if (!meta)
      fail(loc, "internal: a runtime tensor has no constant value");
    return metaTensor(cast<RankedTensorType>(abs.tensor.getType()), loc);
  case AbsValue::Kind::Module:
    return abs.module;
  case AbsValue::Kind::Sequence: {
    if (abs.isTuple) {
      std::vector<c10::IValue> elems;
      auto tupleType = type ? type->cast<c10::TupleType>() : nullptr;
      for (size_t i = 0; i < abs.elements.size(); ++i)
        elems.push_back(toIValue(abs.elements[i],
                                 tupleType ? tupleType->elements()[i] : nullptr,
                                 meta, loc));
      return c10::ivalue::Tuple::create(std::move(elems));
    }
    c10::TypePtr elemType = c10::AnyType::get();
    if (type)
      if (auto listType = type->cast<c10::ListType>())
        elemType = listType->getElementType();
    c10::impl::GenericList list(elemType);
    for (const AbsValue &e : abs.elements)
      list.push_back(toIValue(e, elemType, meta, loc));
    return list;
  }
  case AbsValue::Kind::Unknown:
    break;
  }
  fail(loc, "a value the importer could not determine is used here");
}

//===----------------------------------------------------------------------===//
// The walk
//===----------------------------------------------------------------------===//

void Importer::walkBlock(jit::Block *block) {
  for (jit::Node *node : block->nodes()) {
    try {
      visitNode(node);
    } catch (const c10::Error &e) {
      fail(locationOf(node), std::string("importing ") +
                                 node->kind().toQualString() + " failed: " +
                                 firstLine(e.what_without_backtrace()));
    } catch (const std::exception &e) {
      // libtorch's other errors (jit::ErrorReport: "Schema not found for
      // node") are the node's too.
      fail(locationOf(node), std::string("importing ") +
                                 node->kind().toQualString() + " failed: " +
                                 firstLine(e.what()));
    }
  }
}

void Importer::visitNode(jit::Node *node) {
  jit::NodeKind kind = node->kind();
  switch (kind) {
  case c10::prim::Constant:
    return visitConstant(node);
  case c10::prim::GetAttr:
    return visitGetAttr(node);
  case c10::prim::SetAttr:
    return visitSetAttr(node);
  case c10::prim::If:
    return visitIf(node);
  case c10::prim::Loop:
    return visitLoop(node);
  case c10::prim::ListConstruct:
  case c10::prim::TupleConstruct:
    return visitConstruct(node);
  case c10::prim::ListUnpack:
  case c10::prim::TupleUnpack:
    return visitUnpack(node);
  // The cases that return only where they apply: else the node is an
  // operator like any other.
  case c10::prim::TupleIndex:
  case c10::aten::__getitem__:
    if (visitIndex(node))
      return;
    break;
  case c10::aten::append:
    if (visitAppend(node))
      return;
    break;
  case c10::aten::add:
    if (visitListConcat(node))
      return;
    break;
  case c10::aten::len:
    if (visitSequenceLength(node))
      return;
    break;
  case c10::aten::__is__:
  case c10::aten::__isnot__:
    if (visitIdentity(node))
      return;
    break;
  case c10::prim::unchecked_cast:
  case c10::prim::unchecked_unwrap_optional:
  case c10::aten::_unwrap_optional:
    return visitRefinement(node);
  case c10::aten::warn:
  case c10::prim::Print:
    // Messages for the user while tracing or scripting; no part of the step.
    return;
  case c10::prim::RaiseException:
    return visitRaiseException(node);
  case c10::prim::Uninitialized:
    bind(node->output(), AbsValue());
    return;
  case c10::prim::NumToTensor:
    return visitNumToTensor(node);
  case c10::prim::CallMethod:
  case c10::prim::CallFunction:
    fail(locationOf(node), std::string("call ") + kind.toQualString() +
                               " left after inlining is not supported");
  case c10::prim::PythonOp:
    fail(locationOf(node),
         "a Python function (prim::PythonOp) cannot be imported; "
         "script or trace it into TorchScript operators");
  default:
    break;
  }
  if (visitTensorMetadata(node))
    return;
  if (node->maybeSchema())
    return visitOperator(node);
  visitWithoutSchema(node);
}

void Importer::visitConstant(jit::Node *node) {
  auto value = jit::toIValue(node->output());
  bind(node->output(), fromIValue(value ? *value : c10::IValue()));
}

void Importer::visitConstruct(jit::Node *node) {
  std::vector<AbsValue> elements;
  for (jit::Value *input : node->inputs())
    elements.push_back(lookup(input));
  bind(node->output(),
       AbsValue::ofSequence(std::move(elements),
                            node->kind() == c10::prim::TupleConstruct));
}

void Importer::visitUnpack(jit::Node *node) {
  Location loc = locationOf(node);
  AbsValue seq = lookup(node->input());
  std::vector<AbsValue> elements;
  if (seq.kind == AbsValue::Kind::Sequence) {
    elements = seq.elements;
  } else if (seq.isConstant() && seq.constant.isList()) {
    for (const c10::IValue &e : seq.constant.toListRef())
      elements.push_back(fromIValue(e));
  } else if (seq.isConstant() && seq.constant.isTuple()) {
    for (const c10::IValue &e : seq.constant.toTupleRef().elements())
      elements.push_back(fromIValue(e));
  } else {
    fail(loc, "cannot unpack this value statically");
  }
  if (elements.size() != node->outputs().size())
    fail(loc, "unpacks " + llvm::Twine(node->outputs().size()) +
                  " values from a sequence of " + llvm::Twine(elements.size()));
  for (size_t i = 0; i < elements.size(); ++i)
    bind(node->outputs()[i], elements[i]);
}

/// A constant index into a sequence the walk knows.
bool Importer::visitIndex(jit::Node *node) {
  AbsValue seq = lookup(node->inputs()[0]);
  AbsValue index = lookup(node->inputs()[1]);
  if (seq.kind != AbsValue::Kind::Sequence || !index.isConstant() ||
      !index.constant.isInt())
    return false;
  int64_t i = index.constant.toInt();
  int64_t n = seq.elements.size();
  if (i < 0)
    i += n;
  if (i < 0 || i >= n)
    fail(locationOf(node), "index " + llvm::Twine(index.constant.toInt()) +
                               " is out of range for a sequence of " +
                               llvm::Twine(n));
  bind(node->output(), seq.elements[i]);
  return true;
}

/// List building (`[f(x) for x in xs]` in scripted code): the walk owns the
/// list, so appending is appending to what it knows.
bool Importer::visitAppend(jit::Node *node) {
  if (node->inputs().size() != 2)
    return false;
  auto it = env.find(node->inputs()[0]);
  if (it == env.end() || it->second.kind != AbsValue::Kind::Sequence ||
      it->second.isTuple)
    return false;
  it->second.elements.push_back(lookup(node->inputs()[1]));
  bind(node->output(), it->second);
  return true;
}

/// List concatenation (`(q,) + kv.chunk(2)` in nn.MultiheadAttention): the
/// walk knows both lists, so the result is their elements.
bool Importer::visitListConcat(jit::Node *node) {
  if (node->inputs().size() != 2 ||
      node->output()->type()->kind() != c10::TypeKind::ListType)
    return false;
  AbsValue a = lookup(node->inputs()[0]), b = lookup(node->inputs()[1]);
  auto elementsOf = [&](const AbsValue &v, std::vector<AbsValue> &out) -> bool {
    if (v.kind == AbsValue::Kind::Sequence) {
      out.insert(out.end(), v.elements.begin(), v.elements.end());
      return true;
    }
    if (v.isConstant() && v.constant.isList()) {
      for (const c10::IValue &e : v.constant.toListRef())
        out.push_back(fromIValue(e));
      return true;
    }
    return false;
  };
  std::vector<AbsValue> elements;
  if ((a.isFullyConstant() && b.isFullyConstant()) ||
      !elementsOf(a, elements) || !elementsOf(b, elements))
    return false;
  bind(node->output(), AbsValue::ofSequence(std::move(elements), false));
  return true;
}

bool Importer::visitSequenceLength(jit::Node *node) {
  if (node->inputs().size() != 1)
    return false;
  AbsValue seq = lookup(node->input());
  if (seq.kind != AbsValue::Kind::Sequence)
    return false;
  bind(node->output(), fromIValue(int64_t(seq.elements.size())));
  return true;
}

/// Identity of values the walk knows: the same SSA tensor is the same
/// object, a tensor is never None.
bool Importer::visitIdentity(jit::Node *node) {
  AbsValue a = lookup(node->inputs()[0]), b = lookup(node->inputs()[1]);
  std::optional<bool> same;
  if (a.isTensor() && b.isTensor())
    same = a.tensor == b.tensor;
  else if ((a.isTensor() && b.isConstant() && b.constant.isNone()) ||
           (b.isTensor() && a.isConstant() && a.constant.isNone()))
    same = false;
  if (!same)
    return false;
  bind(node->output(),
       fromIValue(node->kind() == c10::aten::__is__ ? *same : !*same));
  return true;
}

/// Refinements of a static type: the value itself passes through.
void Importer::visitRefinement(jit::Node *node) {
  AbsValue value = lookup(node->input());
  if (value.isConstant() && value.constant.isNone())
    fail(locationOf(node),
         "a None value is used where the model expects a value");
  bind(node->output(), value);
}

void Importer::visitRaiseException(jit::Node *node) {
  std::string message = "the model raises an exception here";
  AbsValue msg = lookup(node->inputs()[0]);
  if (msg.isConstant() && msg.constant.isString())
    message += ": " + msg.constant.toStringRef();
  fail(locationOf(node), message);
}

void Importer::visitNumToTensor(jit::Node *node) {
  AbsValue scalar = lookup(node->input());
  if (!scalar.isConstant())
    fail(locationOf(node),
         "prim::NumToTensor of a value that is not a constant");
  bind(node->output(),
       fromIValue(c10::scalar_to_tensor(scalar.constant.toScalar())));
}

/// Remaining prim ops without schema (prim::dtype etc. have schemas): the
/// interpreter's own implementation, when all inputs are constant.
void Importer::visitWithoutSchema(jit::Node *node) {
  bool allConstant = llvm::all_of(node->inputs(), [&](jit::Value *v) {
    return lookup(v).isFullyConstant();
  });
  if (allConstant && node->blocks().empty()) {
    try {
      evaluateConstant(node);
      return;
    } catch (const std::exception &) {
      // c10::Error, or jit::ErrorReport for a node without an operator
      // (prim::CreateObject of `with torch.no_grad():`).
    }
  }
  fail(locationOf(node), std::string("operator ") +
                             node->kind().toQualString() +
                             " cannot be imported");
}

void Importer::visitGetAttr(jit::Node *node) {
  Location loc = locationOf(node);
  AbsValue object = lookup(node->input());
  const std::string &name = node->s(c10::attr::name);
  if (object.kind != AbsValue::Kind::Module)
    fail(loc, "attribute '" + name + "' of a value that is not a module");
  std::string fqn = object.path.empty() ? name : object.path + "." + name;
  c10::IValue value = object.module->getAttr(name);
  if (value.isObject() && value.toObject()->type()->is_module()) {
    AbsValue sub;
    sub.kind = AbsValue::Kind::Module;
    sub.module = value.toObject();
    sub.path = fqn;
    bind(node->output(), sub);
    return;
  }
  if (value.isTensor() && states.count(fqn)) {
    bind(node->output(), AbsValue::ofTensor(stateValue(fqn, loc)));
    return;
  }
  // Every other attribute (hyper-parameters, `training`, constants) is a
  // compile-time constant, but for the parameters and buffers it holds.
  bind(node->output(), attributeAbs(fqn, value, node, loc));
}

/// Where an error about the attribute a GetAttr reads is: the GetAttr's
/// location or, where it has none (a loaded archive keeps no source range
/// for `self.table` in forward), the first use of its value.
Location Importer::attributeErrorLoc(jit::Node *node) {
  if (framesOf(node).empty() && !node->output()->uses().empty())
    return locationOf(node->output()->uses().front().user);
  return locationOf(node);
}

/// A module attribute that is not a module, as the walk binds it. A tensor
/// that is a parameter or buffer (stateOfTensor) is that state, also where
/// the attribute holds it in a list or a tuple: nn.LSTM, GRU and RNN pass
/// `self._flat_weights`, a list of the same tensors as `weight_ih_l0` and
/// the rest, to aten::lstm; the step must read (and train) the parameters,
/// not the values the archive was saved with. Any other tensor is a
/// constant with the model's values (constantValue). A dict that holds a
/// parameter or buffer is refused: the walk knows no dict of step tensors.
AbsValue Importer::attributeAbs(const std::string &name,
                                const c10::IValue &value, jit::Node *node,
                                Location loc) {
  if (value.isTensor()) {
    const at::Tensor &t = value.toTensor();
    if (const std::string *state = stateOfTensor(t))
      return AbsValue::ofTensor(stateValue(*state, loc));
    return fromIValue(constantValue(name, t, node));
  }
  if (value.isList() && !mayHoldTensors(value.toList().elementType()))
    return fromIValue(value);
  if (value.isList() || value.isTuple()) {
    bool isTuple = value.isTuple();
    c10::ArrayRef<c10::IValue> items =
        isTuple ? value.toTupleRef().elements().asArrayRef()
                : value.toListRef();
    std::vector<AbsValue> elements;
    bool constant = true, changed = false;
    for (size_t i = 0; i < items.size(); ++i) {
      elements.push_back(attributeAbs(name + "[" + std::to_string(i) + "]",
                                      items[i], node, loc));
      const AbsValue &e = elements.back();
      if (!e.isConstant())
        constant = false;
      else if (!e.constant.isSameIdentity(items[i]))
        changed = true;
    }
    if (!constant)
      return AbsValue::ofSequence(std::move(elements), isTuple);
    if (!changed)
      return fromIValue(value);
    // The same list or tuple, with the values read.
    std::vector<c10::IValue> read;
    for (AbsValue &e : elements)
      read.push_back(std::move(e.constant));
    if (isTuple) {
      std::shared_ptr<c10::TupleType> type = value.toTupleRef().type();
      if (type->schema()) // a NamedTuple keeps its type
        return fromIValue(c10::ivalue::Tuple::createNamed(std::move(read),
                                                          c10::TypePtr(type)));
      return fromIValue(c10::ivalue::Tuple::create(std::move(read)));
    }
    c10::impl::GenericList list(value.toList().elementType());
    for (c10::IValue &e : read)
      list.push_back(std::move(e));
    return fromIValue(list);
  }
  if (value.isGenericDict()) {
    c10::impl::GenericDict dict = value.toGenericDict();
    if (!mayHoldTensors(dict.valueType()))
      return fromIValue(value);
    c10::impl::GenericDict read(dict.keyType(), dict.valueType());
    bool changed = false;
    for (const auto &item : dict) {
      std::ostringstream key;
      key << item.key();
      AbsValue e =
          attributeAbs(name + "[" + key.str() + "]", item.value(), node, loc);
      if (!e.isConstant()) {
        std::string held;
        item.value().visit([&](const c10::IValue &v) {
          const std::string *state =
              v.isTensor() ? stateOfTensor(v.toTensor()) : nullptr;
          if (held.empty() && state)
            held = *state;
          return !held.empty();
        });
        fail(attributeErrorLoc(node),
             "attribute '" + name + "' holds " +
                 (states.lookup(held).isParam ? "parameter '" : "buffer '") +
                 held + "' in a dict: the step reads parameters and buffers "
                        "that a module holds directly, in a list or in a "
                        "tuple");
      }
      changed |= !e.constant.isSameIdentity(item.value());
      read.insert(item.key(), e.constant);
    }
    return fromIValue(changed ? c10::IValue(read) : value);
  }
  return fromIValue(value);
}

/// The values of a module tensor used as a constant: the one kind of tensor
/// whose values the compiler reads (an archive saved without weights keeps
/// these). jit::load left the records of the archive's module tensors
/// unread (indexSkippedValues): a tensor on one of those storages is read
/// through the archive, the elements of its own view, never from the
/// storage. `name` is what --fsdp-report calls it.
at::Tensor Importer::constantValue(const std::string &name,
                                   const at::Tensor &t, jit::Node *node) {
  if (!t.has_storage())
    return t;
  auto skipped = skippedStorages.find(t.storage().unsafeGetStorageImpl());
  if (skipped == skippedStorages.end())
    return t;
  if (t.layout() != at::kStrided || t.is_quantized() || t.is_conj() ||
      t.is_neg())
    fail(attributeErrorLoc(node), "internal: the values of module tensor '" +
                                      name +
                                      "' were not read from the archive");
  at::Tensor &cached = constantValues[t.unsafeGetTensorImpl()];
  if (!cached.defined()) {
    fsdp::runtime::ModelArchive::Entry entry = *skipped->second;
    entry.dtype = t.scalar_type();
    entry.sizes = t.sizes().vec();
    entry.strides = t.strides().vec();
    entry.storageOffset = t.storage_offset();
    try {
      cached = archive->read(entry);
    } catch (const std::exception &e) {
      fail(attributeErrorLoc(node), e.what());
    }
    valuesRead.emplace_back(name, static_cast<int64_t>(cached.nbytes()));
  }
  return cached;
}

void Importer::visitSetAttr(jit::Node *node) {
  Location loc = locationOf(node);
  AbsValue object = lookup(node->inputs()[0]);
  const std::string &name = node->s(c10::attr::name);
  std::string fqn = object.path.empty() ? name : object.path + "." + name;
  auto it = states.find(fqn);
  if (object.kind != AbsValue::Kind::Module || it == states.end() ||
      it->second.isParam)
    fail(loc, "assignment to attribute '" + fqn +
                  "' is supported for buffers only");
  AbsValue value = lookup(node->inputs()[1]);
  Value tensor = tensorValue(value, loc);
  if (!tensor)
    fail(loc, "buffer '" + fqn + "' is assigned a value that is not a tensor");
  if (tensor.getType() != it->second.type)
    fail(loc, "buffer '" + fqn + "' changes type in the step");
  stateValue(fqn, loc);
  current[it->second.fqn] = tensor;
  // Later in-place updates of the assigned tensor update the buffer.
  stateOf[tensor] = it->second.fqn;
}

void Importer::visitIf(jit::Node *node) {
  Location loc = locationOf(node);
  AbsValue cond = lookup(node->input());
  if (!cond.isConstant() || !cond.constant.isBool())
    fail(loc, "control flow depends on tensor data (prim::If on a value "
              "that is not a compile-time constant)");
  jit::Block *taken = node->blocks()[cond.constant.toBool() ? 0 : 1];
  walkBlock(taken);
  for (size_t i = 0; i < node->outputs().size(); ++i)
    bind(node->outputs()[i], lookup(taken->outputs()[i]));
}

void Importer::visitLoop(jit::Node *node) {
  Location loc = locationOf(node);
  AbsValue tripCount = lookup(node->inputs()[0]);
  AbsValue cond = lookup(node->inputs()[1]);
  if (!tripCount.isConstant() || !cond.isConstant())
    fail(loc, "loop bounds depend on tensor data (prim::Loop whose trip count "
              "or condition is not a compile-time constant)");
  jit::Block *body = node->blocks()[0];
  std::vector<AbsValue> carried;
  for (size_t i = 2; i < node->inputs().size(); ++i)
    carried.push_back(lookup(node->inputs()[i]));
  int64_t trips = tripCount.constant.toInt();
  bool go = cond.constant.toBool();
  for (int64_t i = 0; go && i < trips; ++i) {
    if (++unrolledIterations > 100000)
      fail(loc, "loops unroll to more than 100000 iterations");
    bind(body->inputs()[0], fromIValue(i));
    for (size_t j = 0; j < carried.size(); ++j)
      bind(body->inputs()[j + 1], carried[j]);
    walkBlock(body);
    AbsValue next = lookup(body->outputs()[0]);
    if (!next.isConstant())
      fail(loc, "loop condition depends on tensor data");
    go = next.constant.toBool();
    for (size_t j = 0; j < carried.size(); ++j)
      carried[j] = lookup(body->outputs()[j + 1]);
  }
  for (size_t j = 0; j < carried.size(); ++j)
    bind(node->outputs()[j], carried[j]);
}

/// Shape and dtype queries on tensors of static type fold to constants.
bool Importer::visitTensorMetadata(jit::Node *node) {
  if (node->inputs().empty())
    return false;
  AbsValue &first = lookup(node->inputs()[0]);
  if (!first.isTensor())
    return false;
  auto type = cast<RankedTensorType>(first.tensor.getType());
  Location loc = locationOf(node);
  jit::NodeKind kind = node->kind();
  std::vector<int64_t> shape = type.getShape().vec();
  auto constantArg = [&](size_t i) -> c10::IValue {
    AbsValue &a = lookup(node->inputs()[i]);
    if (!a.isConstant())
      fail(loc, "argument is not a compile-time constant");
    return a.constant;
  };
  if (kind == c10::aten::size && node->inputs().size() == 1) {
    bind(node->output(), fromIValue(c10::IValue(shape)));
    return true;
  }
  if (kind == c10::aten::size && node->inputs().size() == 2) {
    int64_t dim = constantArg(1).toInt();
    int64_t rank = shape.size();
    if (dim < -rank || dim >= rank)
      fail(loc, "dimension " + llvm::Twine(dim) + " is out of range for a "
                                                   "tensor of rank " +
                    llvm::Twine(rank));
    bind(node->output(), fromIValue(shape[dim < 0 ? dim + rank : dim]));
    return true;
  }
  if (kind == c10::aten::dim || kind == c10::aten::len) {
    if (kind == c10::aten::len && shape.empty())
      fail(loc, "len() of a 0-d tensor");
    bind(node->output(), fromIValue(kind == c10::aten::dim
                                        ? int64_t(shape.size())
                                        : shape[0]));
    return true;
  }
  if (kind == c10::Symbol::fromQualString("aten::numel")) {
    bind(node->output(), fromIValue(type.getNumElements()));
    return true;
  }
  if (kind == c10::prim::dtype) {
    bind(node->output(), fromIValue(int64_t(
                             scalarType(type.getElementType(), loc))));
    return true;
  }
  if (kind == c10::prim::device) {
    bind(node->output(), fromIValue(c10::Device(c10::kCPU)));
    return true;
  }
  if (kind == c10::prim::is_cuda || kind == c10::Symbol::fromQualString("prim::is_meta")) {
    bind(node->output(), fromIValue(false));
    return true;
  }
  if (kind == c10::Symbol::fromQualString("prim::is_cpu")) {
    bind(node->output(), fromIValue(true));
    return true;
  }
  if (kind == c10::prim::requires_grad) {
    bind(node->output(), fromIValue(true));
    return true;
  }
  return false;
}

AbsValue &Importer::argument(jit::Node *node, size_t i) {
  AbsValue &a = lookup(node->inputs()[i]);
  // Mixed precision: a traced model records `dtype=x.dtype` as the dtype
  // the tracer saw, float32. A factory that fills a new float32 tensor
  // (nn.LSTM's initial state, stochastic depth's noise) creates the compute
  // dtype instead, as the model's code does in eager on bf16 tensors.
  // Ranges (`arange`, `linspace`) keep their dtype: bf16 would round their
  // integers.
  const c10::FunctionSchema *schema = node->maybeSchema();
  if (!paramDtype || !schema || i >= schema->arguments().size() ||
      schema->arguments()[i].name() != "dtype" ||
      !aten::hasFact(schema->name(), aten::OpFact::FillingFactory) ||
      !a.isConstant() || !a.constant.isInt() ||
      a.constant.toInt() != static_cast<int64_t>(at::kFloat))
    return a;
  if (computeDtypeArgument.kind != AbsValue::Kind::Constant)
    computeDtypeArgument = fromIValue(c10::IValue(static_cast<int64_t>(
        scalarType(paramDtype, locationOf(node)))));
  return computeDtypeArgument;
}

void Importer::evaluateConstant(jit::Node *node) {
  jit::Stack stack;
  for (size_t i = 0; i < node->inputs().size(); ++i)
    stack.push_back(toIValue(argument(node, i), node->inputs()[i]->type(),
                             /*meta=*/false, locationOf(node)));
  // The interpreter passes vararg operators their argument count.
  if (node->maybeSchema() && node->schema().is_vararg())
    stack.push_back(int64_t(node->inputs().size()));
  // Arguments the op writes (list.append, list.__setitem__, ...) are bound
  // to their new value afterwards: the stack holds handles to the same lists.
  std::vector<std::pair<jit::Value *, c10::IValue>> written;
  if (const c10::FunctionSchema *schema = node->maybeSchema())
    for (size_t i = 0; i < schema->arguments().size() && i < stack.size(); ++i)
      if (const auto *alias = schema->arguments()[i].alias_info())
        if (alias->isWrite())
          written.push_back({node->inputs()[i], stack[i]});
  jit::Operation op = node->getOperation();
  op(stack);
  for (size_t i = 0; i < node->outputs().size(); ++i)
    bind(node->outputs()[i], fromIValue(stack[i]));
  for (auto &[input, value] : written)
    if (!value.isTensor())
      bind(input, fromIValue(value));
}

namespace {
/// Operators whose schema does not say that they write an argument, but do:
/// batch_norm updates the running statistics in training mode.
struct HiddenMutation {
  const char *name;
  std::vector<int64_t> args;
  int64_t trainingArg; // the argument that says whether it writes, or -1
};
const HiddenMutation kHiddenMutations[] = {
    {"aten::batch_norm", {3, 4}, 5},
    {"aten::instance_norm", {3, 4}, 5},
};
} // namespace

void Importer::visitOperator(jit::Node *node) {
  const c10::FunctionSchema &schema = node->schema();
  bool anyTensor = false;
  for (jit::Value *input : node->inputs())
    anyTensor |= holdsTensor(lookup(input), [](Value) { return true; });
  bool returnsTensor = llvm::any_of(schema.returns(), [](const c10::Argument &r) {
    return r.type()->isSubtypeOf(*c10::TensorType::get()) ||
           r.type()->isSubtypeOf(*c10::ListType::ofTensors());
  });
  Location loc = locationOf(node);
  if (anyTensor &&
      aten::hasFact(schema.name(), aten::OpFact::TypeOnlyFactory) &&
      foldTypeOnlyFactory(node, loc))
    return;
  if (!anyTensor) {
    if (foldOnConstants(node, loc))
      return;
    if (!returnsTensor)
      fail(loc, schema.name() + " cannot be evaluated at compile time");
  } else if (!returnsTensor) {
    return visitTypeProperty(node, loc);
  }
  emitCall(node, schema);
}

/// Factories that read only the type of their tensor input (new_zeros,
/// zeros_like, ...) make a constant: masks built from them stay constants.
bool Importer::foldTypeOnlyFactory(jit::Node *node, Location loc) {
  jit::Stack stack;
  for (size_t i = 0; i < node->inputs().size(); ++i) {
    AbsValue &a = lookup(node->inputs()[i]);
    if (i == 0 && a.isTensor()) {
      auto type = cast<RankedTensorType>(a.tensor.getType());
      stack.push_back(at::zeros(
          type.getShape().vec(),
          at::TensorOptions().dtype(scalarType(type.getElementType(), loc))));
    } else if (a.isFullyConstant()) {
      stack.push_back(toIValue(a, node->inputs()[i]->type(), false, loc));
    } else {
      return false;
    }
  }
  node->getOperation()(stack);
  if (!stack[0].isTensor() || stack[0].toTensor().numel() > (1 << 16))
    return false;
  bind(node->output(), fromIValue(stack[0]));
  return true;
}

/// All inputs are compile-time constants: the JIT computes the result,
/// unless it is random or too large to keep as a constant. Uninitialized
/// memory is no constant: aten::empty and friends run.
bool Importer::foldOnConstants(jit::Node *node, Location loc) {
  const c10::FunctionSchema &schema = node->schema();
  if (node->isNondeterministic() ||
      aten::hasFact(schema.name(), aten::OpFact::Uninitialized))
    return false;
  try {
    evaluateConstant(node);
  } catch (const c10::Error &e) {
    fail(loc, "evaluating " + schema.name() + " on constants failed: " +
                  e.what_without_backtrace());
  } catch (const std::exception &e) {
    // The interpreter's own errors (`1 // 0`, `int("abc")`).
    fail(loc, "evaluating " + schema.name() + " on constants failed: " +
                  firstLine(e.what()));
  }
  return llvm::all_of(node->outputs(), [&](jit::Value *out) {
    AbsValue &a = lookup(out);
    return !a.isConstant() || !a.constant.isTensor() ||
           a.constant.toTensor().numel() <= (1 << 16);
  });
}

/// True if `value` is, or holds in a list or tuple, a tensor.
static bool holdsTensorValue(const c10::IValue &value) {
  if (value.isTensor())
    return true;
  if (value.isList())
    return llvm::any_of(value.toListRef(), holdsTensorValue);
  if (value.isTuple())
    return llvm::any_of(value.toTupleRef().elements(), holdsTensorValue);
  return false;
}

/// An op on tensors that returns no tensor. A property of the tensors'
/// static types (is_floating_point, is_nested) is what the op computes on
/// meta tensors; a value read from tensor data is not known before the step
/// runs.
void Importer::visitTypeProperty(jit::Node *node, Location loc) {
  const c10::FunctionSchema &schema = node->schema();
  if (!aten::hasFact(schema.name(), aten::OpFact::DataDependentValue)) {
    jit::Stack stack;
    for (jit::Value *input : node->inputs())
      stack.push_back(toIValue(lookup(input), input->type(), /*meta=*/true,
                               loc));
    try {
      node->getOperation()(stack);
      if (llvm::none_of(stack, holdsTensorValue)) {
        for (size_t i = 0; i < node->outputs().size(); ++i)
          bind(node->outputs()[i], fromIValue(stack[i]));
        return;
      }
      // Declared as returning Tensor? or a tuple: a computation after all.
      return emitCall(node, schema);
    } catch (const c10::Error &) {
    }
  }
  fail(loc, schema.name() +
                " reads a value from tensor data, which a static "
                "training step cannot depend on");
}

Attribute Importer::constantAttr(const c10::IValue &value,
                                 const c10::Argument *arg, Location loc,
                                 const std::string &what) {
  if (value.isNone())
    return aten::NoneAttr::get(context);
  bool isDtype = arg && arg->real_type()->kind() == c10::TypeKind::ScalarTypeType;
  if (!isDtype && arg)
    if (auto opt = arg->real_type()->cast<c10::OptionalType>())
      isDtype = opt->getElementType()->kind() == c10::TypeKind::ScalarTypeType;
  if (value.isInt() && isDtype)
    return TypeAttr::get(elementType(
        static_cast<at::ScalarType>(value.toInt()), loc));
  if (value.isBool())
    return builder.getBoolAttr(value.toBool());
  if (value.isInt())
    return builder.getI64IntegerAttr(value.toInt());
  if (value.isDouble())
    return builder.getF64FloatAttr(value.toDouble());
  if (value.isComplexDouble()) {
    c10::complex<double> z = value.toComplexDouble();
    return aten::ComplexAttr::get(context, builder.getF64FloatAttr(z.real()),
                                  builder.getF64FloatAttr(z.imag()));
  }
  if (value.isString())
    return builder.getStringAttr(value.toStringRef());
  if (value.isDevice())
    return builder.getStringAttr(value.toDevice().str());
  if (value.isList()) {
    SmallVector<Attribute> elements;
    for (const c10::IValue &e : value.toListRef())
      elements.push_back(constantAttr(e, nullptr, loc, what));
    return builder.getArrayAttr(elements);
  }
  if (value.isTuple()) {
    SmallVector<Attribute> elements;
    for (const c10::IValue &e : value.toTupleRef().elements())
      elements.push_back(constantAttr(e, nullptr, loc, what));
    return builder.getArrayAttr(elements);
  }
  fail(loc, what + " of type " + value.tagKind() +
                " cannot be kept as an attribute");
}

/// What the importer may allocate to type one op without a meta kernel.
constexpr int64_t kCpuTypingBudget = int64_t(256) << 20;
/// Results up to this size are computed whole even when a shape function
/// knows them (which checks the shape function against the op); larger ones
/// take one sample.
constexpr int64_t kWholeRunBytes = int64_t(16) << 20;

/// Byte counts that saturate at INT64_MAX instead of overflowing.
static int64_t saturatingMul(int64_t a, int64_t b) {
  constexpr int64_t max = std::numeric_limits<int64_t>::max();
  return a != 0 && b > max / a ? max : a * b;
}
static int64_t saturatingAdd(int64_t a, int64_t b) {
  constexpr int64_t max = std::numeric_limits<int64_t>::max();
  return b > max - a ? max : a + b;
}
static int64_t numelOf(llvm::ArrayRef<int64_t> shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n = saturatingMul(n, std::max<int64_t>(d, 0));
  return n;
}

/// The result shapes of `schema` from ATen's own shape function (the JIT's
/// symbolic shape registry), given the arguments with runtime tensors as
/// meta tensors; none if it has no shape function or one that does not run
/// on these arguments.
static std::optional<std::vector<std::vector<int64_t>>>
shapesFromShapeFunction(const c10::FunctionSchema &schema,
                        const jit::Stack &args) {
  c10::optional<std::shared_ptr<jit::Graph>> graph =
      jit::shapeComputeGraphForSchema(schema);
  // What torch.jit.trace records for a convolution has no shape function of
  // its own; aten::convolution's takes its leading arguments.
  if (!graph && schema.name() == "aten::_convolution")
    if (auto handle = c10::Dispatcher::singleton().findSchema(
            {"aten::convolution", ""}))
      graph = jit::shapeComputeGraphForSchema(handle->schema());
  if (!graph || (*graph)->inputs().size() > args.size())
    return std::nullopt;
  jit::Stack stack;
  for (size_t i = 0; i < (*graph)->inputs().size(); ++i) {
    const c10::IValue &v = args[i];
    if (v.isTensor())
      stack.push_back(c10::List<int64_t>(v.toTensor().sizes().vec()));
    else if (v.isList() &&
             llvm::any_of(v.toListRef(),
                          [](const c10::IValue &e) { return e.isTensor(); }))
      return std::nullopt; // shape functions take no tensor lists
    else
      stack.push_back(v);
  }
  try {
    jit::Code code(*graph, "shape");
    jit::InterpreterState(code).run(stack);
  } catch (const std::exception &) {
    return std::nullopt;
  }
  if (stack.size() != 1)
    return std::nullopt;
  std::vector<c10::IValue> results;
  if (stack[0].isTuple())
    results = stack[0].toTupleRef().elements().vec();
  else
    results.push_back(stack[0]);
  std::vector<std::vector<int64_t>> shapes;
  for (const c10::IValue &r : results) {
    if (!r.isIntList())
      return std::nullopt;
    shapes.push_back(r.toIntVector());
  }
  return shapes;
}

/// Bytes of the runtime tensors (meta tensors here) an op would be given.
static int64_t runtimeTensorBytes(const c10::IValue &x) {
  if (x.isTensor() && x.toTensor().is_meta())
    return saturatingMul(numelOf(x.toTensor().sizes()),
                         static_cast<int64_t>(x.toTensor().element_size()));
  int64_t bytes = 0;
  if (x.isList())
    for (const c10::IValue &e : x.toListRef())
      bytes = saturatingAdd(bytes, runtimeTensorBytes(e));
  return bytes;
}

/// How runOnCpu shrinks the inputs: `batch` > 0, inputs whose first
/// dimension is `batch` get one sample; kAllOnes, every dimension of every
/// input is 1; kAllButLast, every one but the last (0 stays 0).
constexpr int64_t kAllOnes = -1, kAllButLast = -2;

/// `x` on the CPU, filled with `fill`, shrunk as `batch` says (runOnCpu);
/// an argument the op writes gets memory of its own, and so does every
/// input of a whole run (batch 0): contiguous, as the meta call has them,
/// so that the kernel lays its results out as it will in the step.
static c10::IValue cpuValue(const c10::IValue &x, double fill, int64_t batch,
                            bool written) {
  if (x.isTensor() && x.toTensor().is_meta()) {
    const at::Tensor &t = x.toTensor();
    std::vector<int64_t> sizes = t.sizes().vec();
    if (batch > 0 && !sizes.empty() && sizes[0] == batch)
      sizes[0] = 1;
    if (batch == kAllOnes || batch == kAllButLast)
      for (size_t d = 0; d + (batch == kAllButLast) < sizes.size(); ++d)
        sizes[d] = std::min<int64_t>(sizes[d], 1);
    at::TensorOptions options = t.options().device(at::kCPU);
    if (written || batch == 0)
      return at::full(sizes, fill, options);
    return at::full({}, fill, options).expand(sizes);
  }
  if (x.isList()) {
    c10::impl::GenericList list(x.toList().elementType());
    for (const c10::IValue &e : x.toListRef())
      list.push_back(cpuValue(e, fill, batch, written));
    return list;
  }
  return x;
}

/// Runs the op on the CPU on inputs filled with `fill` and shrunk as `batch`
/// says (kAllOnes). Sets `error` to the error's first line on failure.
static std::optional<jit::Stack> runOnCpu(const MetalessTyping &t, double fill,
                                          int64_t batch, std::string &error) {
  jit::Stack cpuStack;
  for (size_t i = 0; i < t.args.size(); ++i)
    cpuStack.push_back(
        cpuValue(t.args[i], fill, batch,
                 t.schema.is_mutable({c10::SchemaArgType::input, i})));
  try {
    t.node->getOperation()(cpuStack);
  } catch (const c10::Error &e) {
    error = firstLine(e.what_without_backtrace());
    return std::nullopt;
  }
  return cpuStack;
}

/// runOnCpu on zeros, or on ones where the kernel refuses zeros (istft's
/// window must not vanish). `error` is the zeros' error where both fail.
static std::optional<jit::Stack> runOnCpuFilled(const MetalessTyping &t,
                                                int64_t batch,
                                                std::string &error,
                                                double *fill = nullptr) {
  if (std::optional<jit::Stack> ran = runOnCpu(t, 0.0, batch, error)) {
    if (fill)
      *fill = 0.0;
    return ran;
  }
  std::string onZeros = error;
  if (std::optional<jit::Stack> ran = runOnCpu(t, 1.0, batch, error)) {
    if (fill)
      *fill = 1.0;
    return ran;
  }
  error = onZeros;
  return std::nullopt;
}

/// The tensor results of a run.
static std::vector<at::Tensor> tensorsOf(const jit::Stack &ran) {
  std::vector<at::Tensor> results;
  for (const c10::IValue &r : ran)
    if (r.isTensor())
      results.push_back(r.toTensor());
  return results;
}

/// Meta tensors of the dtypes of `results` with the shape function's shapes.
static jit::Stack withShapes(const MetalessTyping &t,
                             const std::vector<at::Tensor> &results) {
  jit::Stack typed;
  for (size_t i = 0; i < results.size(); ++i)
    typed.push_back(
        at::empty((*t.shapes)[i], results[i].options().device(at::kMeta)));
  return typed;
}

/// Result types of an op that has no meta kernel, without allocating more
/// than kCpuTypingBudget however large the step's tensors are:
///  - the op itself runs on the CPU on inputs that hold one value each
///    (zeros, then ones: a result whose shape differs depends on tensor
///    data), when its inputs fit the budget and its results (from ATen's
///    shape function, where it has one) are small;
///  - larger: shapes from the shape function and dtypes from the op run on
///    one sample (the first dimension of the inputs that have the batch,
///    narrowed to 1), or, where there is no sample to take or it is too
///    large, on inputs with every dimension (but the last) 1, or whole;
///  - otherwise an error that says so.
jit::Stack Importer::typeWithoutMeta(jit::Node *node,
                                     const c10::FunctionSchema &schema,
                                     const std::string &overload,
                                     const std::string &metaError,
                                     Location loc, bool &kernelLayouts) {
  MetalessTyping t{node, schema, overload, metaError, loc};
  kernelLayouts = false;
  // The arguments as the meta call had them: runtime tensors as meta
  // tensors, constants with their values.
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    jit::Value *input = node->inputs()[i];
    AbsValue &a = lookup(input);
    t.args.push_back(toIValue(a, input->type(), /*meta=*/!a.isFullyConstant(),
                              loc));
  }
  t.shapes = shapesFromShapeFunction(schema, t.args);
  for (const c10::IValue &arg : t.args)
    t.inputBytes = saturatingAdd(t.inputBytes, runtimeTensorBytes(arg));
  if (t.shapes)
    for (const std::vector<int64_t> &shape : *t.shapes)
      t.resultBytes =
          saturatingAdd(t.resultBytes, saturatingMul(numelOf(shape), 8));

  // Kernels may copy their expanded inputs whole (.contiguous()), so the
  // inputs count too.
  if (t.inputBytes <= kCpuTypingBudget &&
      (!t.shapes || t.resultBytes <= kWholeRunBytes)) {
    kernelLayouts = true; // the results are the kernel's own
    return typeByWholeRun(t);
  }
  if (!t.shapes)
    typingTooLarge(t, "no shape function either; its inputs hold " +
                          std::to_string(t.inputBytes >> 20) + " MiB");
  return typeBySample(t);
}

/// The op run whole, on zeros and on ones (ones and twos where it refuses
/// zeros): results whose shapes differ depend on tensor data.
jit::Stack Importer::typeByWholeRun(const MetalessTyping &t) {
  std::string error;
  double fill = 0.0;
  std::optional<jit::Stack> zeros = runOnCpuFilled(t, 0, error, &fill);
  std::optional<jit::Stack> ones =
      zeros ? runOnCpu(t, fill + 1.0, 0, error) : std::nullopt;
  if (!zeros || !ones)
    fail(t.loc, "cannot infer the result types of " + t.overload + ": " +
                    error + " (model inputs: " + inputSummary + ")");
  for (size_t i = 0; i < zeros->size() && i < ones->size(); ++i) {
    const c10::IValue &z = (*zeros)[i], &o = (*ones)[i];
    bool same = true;
    if (z.isTensor() && o.isTensor())
      same = z.toTensor().sizes() == o.toTensor().sizes();
    else if (z.isTensorList() && o.isTensorList()) {
      auto a = z.toTensorList().vec(), b = o.toTensorList().vec();
      same = a.size() == b.size();
      for (size_t j = 0; same && j < a.size(); ++j)
        same = a[j].sizes() == b[j].sizes();
    }
    if (!same)
      fail(t.loc, t.overload + " returns a tensor whose shape depends on "
                               "tensor data; a static training step needs "
                               "static shapes");
  }
  return std::move(*zeros);
}

void Importer::typingTooLarge(const MetalessTyping &t, const std::string &why) {
  // A meta kernel that refused the arguments has said what is wrong.
  if (!t.metaError.empty())
    fail(t.loc, t.overload + ": " + t.metaError + " (model inputs: " +
                    inputSummary + ")");
  fail(t.loc, "cannot infer the result types of " + t.overload +
                  " without allocating its tensors: this libtorch has no "
                  "meta kernel for it, and " + why + " (model inputs: " +
                  inputSummary + ")");
}

/// Shapes from the shape function, dtypes from the op run on one sample:
/// the batch is the first dimension of the first result.
jit::Stack Importer::typeBySample(const MetalessTyping &t) {
  const std::vector<std::vector<int64_t>> &shapes = *t.shapes;
  int64_t batch = !shapes.empty() && !shapes[0].empty() ? shapes[0][0] : 0;
  int64_t sampleBytes = 0;
  for (const std::vector<int64_t> &shape : shapes)
    sampleBytes = saturatingAdd(
        sampleBytes,
        saturatingMul(numelOf(shape), 8) /
            (batch > 1 && !shape.empty() && shape[0] == batch ? batch : 1));
  if (batch <= 1 || sampleBytes > kCpuTypingBudget ||
      t.inputBytes / batch > kCpuTypingBudget)
    return typeByProbes(t, sampleBytes);
  std::string error;
  std::optional<jit::Stack> sample = runOnCpuFilled(t, batch, error);
  if (!sample)
    typingTooLarge(t, "it does not run on one sample of its inputs (" + error +
                          ")");
  // The sample's results must be the shape function's, one sample smaller.
  std::vector<at::Tensor> results = tensorsOf(*sample);
  bool agree = results.size() == shapes.size();
  for (size_t i = 0; agree && i < results.size(); ++i) {
    std::vector<int64_t> expected = shapes[i];
    if (!expected.empty() && expected[0] == batch)
      expected[0] = 1;
    agree = results[i].sizes().vec() == expected;
  }
  if (!agree)
    typingTooLarge(t, "its results on one sample do not match its shape "
                      "function");
  return withShapes(t, results);
}

/// No sample to take (a batch of one) or too large a one: the shapes are the
/// shape function's, and the dtypes those of the op run on inputs with every
/// dimension 1, or every one but the last (a layer norm's), where the op
/// takes such inputs: a result's dtype does not depend on shapes. Otherwise
/// the op runs whole if that fits the budget.
jit::Stack Importer::typeByProbes(const MetalessTyping &t,
                                  int64_t sampleBytes) {
  for (int64_t probe : {kAllOnes, kAllButLast}) {
    std::string ignored;
    std::optional<jit::Stack> ran = runOnCpuFilled(t, probe, ignored);
    if (!ran)
      continue;
    std::vector<at::Tensor> results = tensorsOf(*ran);
    if (results.size() == t.shapes->size())
      return withShapes(t, results);
  }
  std::string error;
  if (t.inputBytes <= kCpuTypingBudget && t.resultBytes <= kCpuTypingBudget)
    if (std::optional<jit::Stack> whole = runOnCpuFilled(t, 0, error))
      return std::move(*whole);
  typingTooLarge(t, "one sample of its results alone holds " +
                        std::to_string(sampleBytes >> 20) + " MiB");
}

/// `name.overload`, as the aten dialect spells an op.
static std::string overloadName(const c10::FunctionSchema &schema) {
  std::string overload = schema.name();
  if (!schema.overload_name().empty())
    overload += "." + schema.overload_name();
  return overload;
}

void Importer::emitCall(jit::Node *node, const c10::FunctionSchema &schema) {
  CallSite site{node, schema, overloadName(schema), locationOf(node)};
  site.mutated = mutatedArguments(site);
  // The shape of these results depends on tensor data.
  if (aten::hasFact(schema.name(), aten::OpFact::DataDependentShape))
    fail(site.loc, site.overload + " returns a tensor whose shape depends on "
                                   "tensor data; a static training step "
                                   "needs static shapes");
  if (schema.is_vararg() || node->inputs().size() != schema.arguments().size())
    fail(site.loc, site.overload + " has a variable argument list");

  CallArguments arguments = callArguments(site);
  // Types from the meta call; ops without a meta kernel are typed by
  // typeWithoutMeta.
  std::string metaError;
  bool typed = typeByMeta(site, arguments.stack, metaError);
  bool kernelLayouts = typed;
  if (!typed)
    arguments.stack = typeWithoutMeta(node, schema, site.overload, metaError,
                                      site.loc, kernelLayouts);
  CallResults results = callResults(site, arguments.stack, kernelLayouts);
  site.numSchemaResults = results.types.size();
  // The new values of mutated arguments follow the schema's results.
  for (int64_t arg : site.mutated) {
    AbsValue &a = lookup(node->inputs()[arg]);
    if (!a.isTensor())
      fail(site.loc, site.overload + " writes argument '" +
                         schema.arguments()[arg].name() +
                         "', which is not a tensor of the step");
    results.types.push_back(a.tensor.getType());
    site.mutatedOperands.push_back(a.tensor);
  }
  checkWritesThroughAliases(site);

  auto call = aten::CallOp::create(
      builder, site.loc, results.types, builder.getStringAttr(site.overload),
      builder.getArrayAttr(arguments.args), arguments.operands,
      site.mutated.empty() ? DenseI64ArrayAttr()
                           : builder.getDenseI64ArrayAttr(site.mutated),
      results.list ? builder.getUnitAttr() : UnitAttr());
  if (results.anyStrided)
    call->setAttr("aten.result_strides", builder.getArrayAttr(results.strides));
  if (!results.internalViews.empty())
    call->setAttr("aten.internal_views",
                  builder.getDenseI64ArrayAttr(results.internalViews));
  bindResults(site, call, results);
  rebindWritten(site, call);
  scatterIntoBases(site, call);
}

/// Which arguments the op writes: those its schema says, and those a
/// HiddenMutation says in training mode.
std::vector<int64_t> Importer::mutatedArguments(const CallSite &site) {
  const c10::FunctionSchema &schema = site.schema;
  std::vector<int64_t> mutated;
  for (size_t i = 0; i < schema.arguments().size(); ++i) {
    const auto *alias = schema.arguments()[i].alias_info();
    if (alias && alias->isWrite())
      mutated.push_back(i);
  }
  for (const HiddenMutation &hidden : kHiddenMutations) {
    if (schema.name() != hidden.name)
      continue;
    AbsValue &training = lookup(site.node->inputs()[hidden.trainingArg]);
    if (!training.isConstant() || !training.constant.isBool())
      fail(site.loc,
           std::string(hidden.name) + ": `training` is not a constant");
    if (!training.constant.toBool())
      continue;
    for (int64_t arg : hidden.args)
      if (lookup(site.node->inputs()[arg]).isTensor())
        mutated.push_back(arg);
  }
  return mutated;
}

/// Arguments in schema order, and the meta-tensor call that types results.
CallArguments Importer::callArguments(const CallSite &site) {
  CallArguments out;
  for (size_t i = 0; i < site.schema.arguments().size(); ++i) {
    const c10::Argument &arg = site.schema.arguments()[i];
    jit::Value *input = site.node->inputs()[i];
    AbsValue &a = argument(site.node, i);
    out.stack.push_back(toIValue(a, input->type(), /*meta=*/true, site.loc));
    std::string what = "argument '" + arg.name() + "' of " + site.overload;
    if (Value tensor = tensorValue(a, site.loc)) {
      out.operands.push_back(tensor);
      out.args.push_back(aten::TensorArgAttr::get(context));
    } else if (a.kind == AbsValue::Kind::Sequence &&
               input->type()->isSubtypeOf(*c10::ListType::ofTensors())) {
      addTensorList(out, a, what, site.loc);
    } else if (a.kind == AbsValue::Kind::Sequence &&
               input->type()->isSubtypeOf(*c10::ListType::create(
                   c10::OptionalType::create(c10::TensorType::get())))) {
      addOptionalTensorList(out, a, what, site.loc);
    } else if (a.isFullyConstant()) {
      c10::IValue value = toIValue(a, input->type(), /*meta=*/false, site.loc);
      bool holdsTensors =
          value.isTensorList() ||
          (value.isList() &&
           llvm::any_of(value.toListRef(),
                        [](const c10::IValue &e) { return e.isTensor(); }));
      if (holdsTensors)
        addConstantTensorList(out, value.toList(), site.loc);
      else
        out.args.push_back(constantAttr(value, &arg, site.loc, what));
    } else {
      fail(site.loc,
           what + " is neither a tensor nor a compile-time constant");
    }
  }
  return out;
}

/// A Tensor[]: its tensors' operands.
void Importer::addTensorList(CallArguments &out, const AbsValue &list,
                             const std::string &what, Location loc) {
  for (const AbsValue &e : list.elements) {
    Value tensor = tensorValue(e, loc);
    if (!tensor)
      fail(loc, what + " holds a value that is not a tensor");
    out.operands.push_back(tensor);
  }
  out.args.push_back(
      aten::TensorListArgAttr::get(context, list.elements.size()));
}

/// A Tensor?[] (the indices of aten::index): operands and None in place.
void Importer::addOptionalTensorList(CallArguments &out, const AbsValue &list,
                                     const std::string &what, Location loc) {
  SmallVector<Attribute> elements;
  for (const AbsValue &e : list.elements) {
    if (Value tensor = tensorValue(e, loc)) {
      out.operands.push_back(tensor);
      elements.push_back(aten::TensorArgAttr::get(context));
    } else if (e.isConstant() && e.constant.isNone()) {
      elements.push_back(aten::NoneAttr::get(context));
    } else {
      fail(loc, what + " holds a value that is neither a tensor nor None");
    }
  }
  // Without a None it is written (and read back) as a plain tensor list.
  if (!elements.empty() &&
      llvm::all_of(elements, llvm::IsaPred<aten::TensorArgAttr>))
    out.args.push_back(
        aten::TensorListArgAttr::get(context, elements.size()));
  else
    out.args.push_back(builder.getArrayAttr(elements));
}

/// A constant Tensor[], or a Tensor?[] (constant indices, None for the
/// dimensions they skip).
void Importer::addConstantTensorList(CallArguments &out,
                                     c10::List<c10::IValue> list,
                                     Location loc) {
  SmallVector<Attribute> elements;
  for (const c10::IValue &e : list) {
    if (e.isNone()) {
      elements.push_back(aten::NoneAttr::get(context));
      continue;
    }
    out.operands.push_back(materialize(e.toTensor(), loc));
    elements.push_back(aten::TensorArgAttr::get(context));
  }
  if (llvm::all_of(elements, llvm::IsaPred<aten::TensorArgAttr>))
    out.args.push_back(aten::TensorListArgAttr::get(context, list.size()));
  else
    out.args.push_back(builder.getArrayAttr(elements));
}

/// Types `stack` by the op's meta kernel; false where it has none
/// (remembered, since a failed attempt costs an exception with a backtrace)
/// or it refuses these arguments.
bool Importer::typeByMeta(const CallSite &site, jit::Stack &stack,
                          std::string &metaError) {
  if (noMetaKernel.contains(site.overload))
    return false;
  try {
    site.node->getOperation()(stack);
    return true;
  } catch (const c10::NotImplementedError &) {
    noMetaKernel.insert(site.overload);
  } catch (const c10::Error &e) {
    // A meta kernel that refuses these arguments, or a composite op that
    // reads tensor data: the CPU says which.
    metaError = firstLine(e.what_without_backtrace());
  }
  return false;
}

/// The types of the schema's results, from the typed stack; their strides
/// where the stack holds the kernel's own results (`kernelLayouts`).
CallResults Importer::callResults(const CallSite &site, const jit::Stack &stack,
                                  bool kernelLayouts) {
  CallResults out;
  jit::Node *node = site.node;
  for (size_t i = 0; i < node->outputs().size(); ++i) {
    const c10::IValue &result = stack[i];
    std::vector<Type> types;
    if (result.isTensor()) {
      types.push_back(tensorType(result.toTensor(), site.loc));
      const c10::AliasInfo *info = i < site.schema.returns().size()
                                       ? site.schema.returns()[i].alias_info()
                                       : nullptr;
      Attribute strides =
          resultStridesAttr(result.toTensor(), kernelLayouts && !info);
      out.anyStrided |= isa<DenseI64ArrayAttr>(strides);
      if (kernelLayouts && !info && result.toTensor().is_view())
        out.internalViews.push_back(static_cast<int64_t>(out.strides.size()));
      out.strides.push_back(strides);
    } else if (result.isTensorList()) {
      if (node->outputs().size() != 1)
        fail(site.loc,
             site.overload + " returns a Tensor[] among other results");
      out.list = true;
      for (const at::Tensor &t : result.toTensorList().vec()) {
        types.push_back(tensorType(t, site.loc));
        out.strides.push_back(builder.getUnitAttr());
      }
    } else if (!result.isNone()) {
      fail(site.loc, site.overload + " returns a " + result.tagKind() +
                         " computed from tensor data");
    }
    out.types.append(types.begin(), types.end());
    out.ofOutput.push_back(types);
  }
  return out;
}

/// A kernel result laid out dense but not contiguous by the meta kernel or
/// the CPU kernel of a whole run (an einsum's permuted product, a
/// batch_first LSTM's output, stft's transposed frames): its strides, for
/// the memory model (`aten.result_strides`); a unit where the result is
/// contiguous or not the kernel's own (`ownResult` false: a view).
Attribute Importer::resultStridesAttr(const at::Tensor &t, bool ownResult) {
  if (!ownResult || !t.defined() || t.is_contiguous() ||
      !t.is_non_overlapping_and_dense())
    return builder.getUnitAttr();
  return builder.getDenseI64ArrayAttr(
      llvm::ArrayRef<int64_t>(t.strides().data(), t.strides().size()));
}

/// The views from `target` up to `root` if each is a slice or a select of
/// the one before (what a write through them scatters back through: `x[:,
/// :m] = v`, `x[..., 0] = 0`), innermost first; empty otherwise.
static SmallVector<aten::CallOp> scatterableViews(Value target, Value root) {
  SmallVector<aten::CallOp> views;
  for (Value v = target; v != root;) {
    auto view = v.getDefiningOp<aten::CallOp>();
    if (!view || view.getNumOperands() != 1 || view.getNumResults() != 1 ||
        (view.getOverload() != "aten::slice.Tensor" &&
         view.getOverload() != "aten::select.int"))
      return {};
    views.push_back(view);
    v = view.getOperand(0);
  }
  return views;
}

/// Writing through an alias changes the other tensors of its alias class
/// (the base and its views) too. The functional rebinding (rebindWritten)
/// is exact if none of them is read afterwards; a write through slices and
/// selects of a base also gives the base a new value, the written one
/// scattered back (scatterIntoBases), so the base may be read afterwards
/// too. A buffer is never written through a view.
void Importer::checkWritesThroughAliases(CallSite &site) {
  for (auto [k, target] : llvm::enumerate(site.mutatedOperands)) {
    Value root = viewBase.lookup(target);
    if (!root)
      root = target;
    if (root != target && stateOf.count(root))
      fail(site.loc, site.overload + " writes in place into a view of '" +
                         stateOf.lookup(root) +
                         "', which is not supported; assign the whole tensor");
    SmallVector<aten::CallOp> views;
    if (root != target)
      views = scatterableViews(target, root);
    auto aliases = [&](Value v) {
      if (v == target || (!views.empty() && v == root))
        return false;
      return v == root || viewBase.lookup(v) == root;
    };
    if (!views.empty())
      site.scatters.push_back({k, views, root});
    for (auto &entry : env) {
      if (!holdsTensor(entry.second, aliases))
        continue;
      for (const jit::Use &use : entry.first->uses())
        if (use.user->isAfter(site.node))
          fail(site.loc, site.overload +
                             " writes in place into a tensor that shares "
                             "memory with another one read later (a view "
                             "or its base), which is not supported; use "
                             "the out-of-place op or .clone()");
    }
  }
}

/// The input a result aliases (a view: `Tensor(a)` in the schema), if any.
Value Importer::aliasedInput(const CallSite &site,
                             const c10::AliasInfo *info) {
  if (!info || info->isWrite())
    return Value();
  for (size_t j = 0; j < site.schema.arguments().size(); ++j) {
    const c10::AliasInfo *argInfo = site.schema.arguments()[j].alias_info();
    if (argInfo && !argInfo->isWrite() &&
        argInfo->beforeSets() == info->beforeSets() &&
        lookup(site.node->inputs()[j]).isTensor())
      return lookup(site.node->inputs()[j]).tensor;
  }
  return Value();
}

void Importer::recordView(Value result, Value base) {
  Value root = viewBase.lookup(base);
  viewBase[result] = root ? root : base;
}

/// The new value of the argument a `Tensor(a!)` return writes, if any: an
/// in-place op returns the tensor it wrote.
Value Importer::writtenResult(const CallSite &site, aten::CallOp call,
                              const c10::AliasInfo *info) {
  if (!info || !info->isWrite())
    return Value();
  for (auto [k, arg] : llvm::enumerate(site.mutated)) {
    const c10::AliasInfo *argInfo = site.schema.arguments()[arg].alias_info();
    if (argInfo && argInfo->beforeSets() == info->beforeSets())
      return call.getResult(site.numSchemaResults + k);
  }
  return Value();
}

/// Binds the node's outputs to the call's results.
void Importer::bindResults(const CallSite &site, aten::CallOp call,
                           const CallResults &results) {
  jit::Node *node = site.node;
  unsigned next = 0;
  for (size_t i = 0; i < node->outputs().size(); ++i) {
    const std::vector<Type> &types = results.ofOutput[i];
    const c10::AliasInfo *info = i < site.schema.returns().size()
                                     ? site.schema.returns()[i].alias_info()
                                     : nullptr;
    if (results.list) {
      // `Tensor(a)[]`: every element is a view of the input.
      if (info && !info->containedTypes().empty())
        info = &info->containedTypes()[0];
      Value base = aliasedInput(site, info);
      std::vector<AbsValue> elements;
      for (size_t j = 0; j < types.size(); ++j) {
        Value element = call.getResult(next++);
        if (base)
          recordView(element, base);
        elements.push_back(AbsValue::ofTensor(element));
      }
      bind(node->outputs()[i], AbsValue::ofSequence(elements, false));
    } else if (types.empty()) {
      bind(node->outputs()[i], fromIValue(c10::IValue()));
    } else {
      Value result = call.getResult(next++);
      if (Value base = aliasedInput(site, info))
        recordView(result, base);
      if (Value written = writtenResult(site, call, info))
        result = written;
      bind(node->outputs()[i], AbsValue::ofTensor(result));
    }
  }
}

/// Rebinds every name of a written tensor to its new value; a written buffer
/// gets a state update.
void Importer::rebindWritten(const CallSite &site, aten::CallOp call) {
  for (auto [k, old] : llvm::enumerate(site.mutatedOperands)) {
    Value updated = call.getResult(site.numSchemaResults + k);
    for (auto &entry : env)
      replaceTensor(entry.second, old, updated);
    auto state = stateOf.find(old);
    if (state != stateOf.end()) {
      std::string fqn = state->second;
      if (states.lookup(fqn).isParam)
        fail(site.loc, site.overload + " writes parameter '" + fqn +
                           "' in place inside the forward");
      current[fqn] = updated;
      stateOf[updated] = fqn;
    }
  }
}

/// A write through slices and selects of a base (site.scatters): the base's
/// new value is the written tensor scattered back through each view
/// (slice_scatter, select_scatter), which every name of the base now holds.
void Importer::scatterIntoBases(const CallSite &site, aten::CallOp call) {
  for (const CallSite::Scatter &s : site.scatters) {
    Value value = call.getResult(site.numSchemaResults + s.written);
    for (aten::CallOp view : s.views) {
      Value parent = view.getOperand(0);
      bool slice = view.getOverload() == "aten::slice.Tensor";
      // A slice as large as its input (x[:, ...]'s `:`) is all of it.
      if (slice && view.getResult(0).getType() == parent.getType())
        continue;
      // slice_scatter(self, src, dim, start, end, step) and
      // select_scatter(self, src, dim, index): the view's own arguments.
      SmallVector<Attribute> args{aten::TensorArgAttr::get(context),
                                  aten::TensorArgAttr::get(context)};
      args.append(view.getArgs().begin() + 1, view.getArgs().end());
      value = aten::CallOp::create(
                  builder, site.loc, TypeRange{parent.getType()},
                  builder.getStringAttr(slice ? "aten::slice_scatter"
                                              : "aten::select_scatter"),
                  builder.getArrayAttr(args), ValueRange{parent, value},
                  DenseI64ArrayAttr(), UnitAttr())
                  .getResult(0);
    }
    for (auto &entry : env)
      replaceTensor(entry.second, s.base, value);
  }
}

void Importer::flattenOutputs(const AbsValue &abs, Location loc,
                              SmallVectorImpl<Value> &out) {
  if (Value tensor = tensorValue(abs, loc)) {
    out.push_back(tensor);
  } else if (abs.isConstant() && abs.constant.isNone()) {
    // An absent optional output (GoogLeNet's aux logits in training).
  } else if (abs.kind == AbsValue::Kind::Sequence) {
    for (const AbsValue &e : abs.elements)
      flattenOutputs(e, loc, out);
  } else if (abs.isConstant() &&
             (abs.constant.isTuple() || abs.constant.isList())) {
    for (const c10::IValue &e : abs.constant.isTuple()
                                    ? abs.constant.toTupleRef().elements().vec()
                                    : abs.constant.toListRef().vec())
      flattenOutputs(fromIValue(e), loc, out);
  } else {
    fail(loc, "the model returns a value that is not a tensor or a tuple or "
              "list of tensors");
  }
}

/// Erases computations nothing reads. The IR is functional (every write is
/// a new value), so an op without a used result, a state update or a
/// written argument someone reads is dead.
static void removeDeadOps(func::FuncOp func) {
  Block &body = func.getBody().front();
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body))) {
    if (!isa<aten::CallOp, aten::ConstantOp, GetOp>(op))
      continue;
    if (llvm::all_of(op.getResults(), [](Value r) { return r.use_empty(); }))
      op.erase();
  }
}

//===----------------------------------------------------------------------===//
// Entry point
//===----------------------------------------------------------------------===//

OwningOpRef<ModuleOp> Importer::run(const ImportOptions &options) {
  Location fileLoc = FileLineColLoc::get(context, path, 0, 0);
  context->loadDialect<aten::ATenDialect, FSDPDialect, func::FuncDialect>();
  TimingScope noTiming;
  TimingScope &timing = options.timing ? *options.timing : noTiming;
  if (failed(setComputeTypes(options, fileLoc)))
    return nullptr;
  try {
    importStep(options, timing, fileLoc);
  } catch (const ImportFailure &) {
    if (module)
      module.erase();
    return nullptr;
  } catch (const c10::Error &e) {
    emitError(fileLoc) << "import failed: "
                       << firstLine(e.what_without_backtrace());
    if (module)
      module.erase();
    return nullptr;
  } catch (const std::exception &e) {
    emitError(fileLoc) << "import failed: " << firstLine(e.what());
    if (module)
      module.erase();
    return nullptr;
  }
  TimingScope verifyTiming = timing.nest("verify");
  OwningOpRef<ModuleOp> result(module);
  if (failed(verify(*result)))
    return nullptr;
  return result;
}

/// Mixed precision's compute types (bf16 or f16; null: the model's own).
LogicalResult Importer::setComputeTypes(const ImportOptions &options,
                                        Location fileLoc) {
  auto computeType = [&](const std::string &name) -> Type {
    if (name != "bf16" && name != "f16")
      return Type();
    return elementTypeNamed(name, context);
  };
  paramDtype = computeType(options.paramDtype);
  bufferDtype = computeType(options.bufferDtype);
  for (const std::string *name : {&options.paramDtype, &options.bufferDtype})
    if (!name->empty() && !computeType(*name)) {
      emitError(fileLoc) << "mixed precision dtype '" << *name
                         << "': expected bf16 or f16";
      return failure();
    }
  return success();
}

/// The import itself: every failure throws (see run).
void Importer::importStep(const ImportOptions &options, TimingScope &timing,
                          Location fileLoc) {
  TimingScope loadTiming = timing.nest("load archive");
  jit::ExtraFilesMap extra{{kMetadataExtraFile, ""}};
  jit::Module root = loadModule(extra, fileLoc);
  std::vector<std::string> storedTargets;
  std::vector<InputSpec> specs =
      inputSpecs(extra[kMetadataExtraFile], options, storedTargets, fileLoc);

  loadTiming.stop();
  TimingScope inlineTiming = timing.nest("inline and JIT clean-up");
  jit::Method forward = root.get_method("forward");
  forwardName = forward.function().qualname().qualifiedName();
  std::shared_ptr<jit::Graph> graphOwner = forward.graph()->copy();
  graph = graphOwner.get();
  inlineCalls(graph->block());
  // No LowerSimpleTuples or EliminateDeadCode, and constant propagation
  // only on immutable types: in libtorch 1.13 the others drop an in-place
  // op on a tensor that a list holds (`feats = [h]; h.relu_()`), changing
  // what the list reads. The walk folds tuples and the remaining constants
  // itself; dead ops are removed from the functional IR it builds.
  jit::ConstantPropagationImmutableTypes(graphOwner);

  inlineTiming.stop();
  TimingScope stateTiming = timing.nest("declare parameters and buffers");
  module = ModuleOp::create(fileLoc);
  if (!storedTargets.empty()) {
    SmallVector<Attribute> targets;
    for (const std::string &t : storedTargets)
      targets.push_back(builder.getStringAttr(t));
    module->setAttr(kTargetsAttr, builder.getArrayAttr(targets));
  }
  builder.setInsertionPointToEnd(module.getBody());
  declareState(root);
  indexSkippedValues(root);
  stateTiming.stop();
  TimingScope walkTiming = timing.nest("walk graph");

  StepInputs inputs =
      matchInputs(forward.function().getSchema(), specs, fileLoc);
  summarizeInputs(specs);
  createStep(inputs, root, fileLoc);
  try {
    walkBlock(graph->block());
  } catch (const c10::Error &e) {
    fail(fileLoc, std::string("import failed: ") +
                      firstLine(e.what_without_backtrace()));
  }
  finishStep(inputs, fileLoc);
}

/// The module's code, types and attributes, without the values of its
/// parameters and buffers: the compiler needs their shapes only.
jit::Module Importer::loadModule(jit::ExtraFilesMap &extra,
                                 Location fileLoc) {
  jit::Module root;
  try {
    archive = std::make_unique<fsdp::runtime::ModelArchive>(path);
  } catch (const std::exception &e) {
    fail(fileLoc, e.what());
  }
  try {
    // On the CPU, whatever device the model was saved from: a module
    // saved on a GPU names cuda:N for its storages, which a CPU libtorch
    // cannot allocate (the values are never read, but the storages are
    // made).
    root = jit::load(archive->readerSkippingValues(), c10::Device(c10::kCPU),
                     extra);
  } catch (const c10::Error &e) {
    fail(fileLoc, "cannot load '" + path + "' as TorchScript: " +
                      firstLine(e.what_without_backtrace()));
  }
  if (!root.is_training())
    emitWarning(fileLoc)
        << "the module in '" << path
        << "' was saved in eval mode: importing its eval-mode behaviour "
           "(BatchNorm running statistics, no dropout); call model.train() "
           "before tracing or scripting to train it";
  if (!root.find_method("forward"))
    fail(fileLoc, "the TorchScript module in '" + path +
                      "' has no forward method");
  return root;
}

/// Input specs: those stored by python/fsdp_export.py, overridden by the
/// command line.
std::vector<InputSpec>
Importer::inputSpecs(const std::string &metadata, const ImportOptions &options,
                     std::vector<std::string> &storedTargets,
                     Location fileLoc) {
  std::vector<InputSpec> specs;
  if (!metadata.empty())
    specs = readMetadata(metadata, storedTargets, fileLoc);
  for (const InputSpec &spec : options.inputs) {
    auto it = llvm::find_if(
        specs, [&](const InputSpec &s) { return s.name == spec.name; });
    if (it != specs.end())
      *it = spec;
    else
      specs.push_back(spec);
  }
  return specs;
}

/// What python/fsdp_export.py stores with the module: its input specs, the
/// loss targets, and the buffers registered with persistent=False.
std::vector<InputSpec>
Importer::readMetadata(const std::string &metadata,
                       std::vector<std::string> &storedTargets,
                       Location fileLoc) {
  auto json = llvm::json::parse(metadata);
  const llvm::json::Array *inputs = nullptr;
  if (json)
    if (auto *object = json->getAsObject()) {
      inputs = object->getArray("inputs");
      // Loss targets are not forward inputs: the training step reads
      // them from the module (`fsdp.targets`).
      if (const llvm::json::Array *targets = object->getArray("targets"))
        for (const llvm::json::Value &t : *targets)
          if (auto text = t.getAsString())
            storedTargets.push_back(text->str());
      if (const llvm::json::Array *names =
              object->getArray("non_persistent_buffers"))
        for (const llvm::json::Value &n : *names)
          if (auto text = n.getAsString())
            nonPersistent.insert(*text);
    }
  if (!inputs)
    fail(fileLoc, std::string("malformed ") + kMetadataExtraFile + " in '" +
                      path + "'");
  std::vector<InputSpec> specs;
  for (const llvm::json::Value &v : *inputs) {
    InputSpec spec;
    std::string error;
    auto text = v.getAsString();
    if (!text || !parseInputSpec(*text, spec, error))
      fail(fileLoc, std::string(kMetadataExtraFile) + ": " +
                        (text ? error : "input is not a string"));
    specs.push_back(spec);
  }
  return specs;
}

/// Inputs: every tensor argument of forward needs a spec; others take
/// their defaults.
StepInputs Importer::matchInputs(const c10::FunctionSchema &schema,
                                 const std::vector<InputSpec> &specs,
                                 Location fileLoc) {
  StepInputs inputs;
  std::vector<bool> used(specs.size(), false);
  std::vector<std::string> missing;
  for (size_t i = 1; i < graph->inputs().size(); ++i) {
    jit::Value *input = graph->inputs()[i];
    std::string name = i < schema.arguments().size()
                           ? schema.arguments()[i].name()
                           : input->debugName();
    auto it = llvm::find_if(
        specs, [&](const InputSpec &s) { return s.name == name; });
    if (it != specs.end()) {
      used[it - specs.begin()] = true;
      if (!input->type()->isSubtypeOf(*c10::TensorType::get()) &&
          !input->type()->isSubtypeOf(
              *c10::OptionalType::create(c10::TensorType::get())))
        fail(fileLoc, "input '" + name + "' of forward has type " +
                          input->type()->repr_str() + ", not Tensor");
      inputs.types.push_back(
          RankedTensorType::get(it->shape, it->elementType(context)));
      inputs.names.push_back(name);
      inputs.bound.push_back({input, AbsValue()});
      continue;
    }
    if (i < schema.arguments().size() &&
        schema.arguments()[i].default_value()) {
      inputs.bound.push_back(
          {input, fromIValue(*schema.arguments()[i].default_value())});
      continue;
    }
    missing.push_back(name);
  }
  std::string expected;
  for (size_t i = 1; i < schema.arguments().size(); ++i)
    expected += (i > 1 ? ", " : "") + schema.arguments()[i].name();
  for (size_t i = 0; i < specs.size(); ++i)
    if (!used[i])
      fail(fileLoc, "--input names '" + specs[i].name +
                        "', which is not an input of forward (inputs: " +
                        expected + ")");
  if (!missing.empty()) {
    std::string names;
    for (const std::string &m : missing)
      names += (names.empty() ? "" : ", ") + m;
    fail(fileLoc, "no shape for input(s) " + names +
                      " of forward: pass --input NAME:DIMSxDTYPE "
                      "(e.g. --input " + missing[0] + ":8x32xf32)");
  }
  return inputs;
}

/// The input specs, for messages about shapes that do not fit the model.
void Importer::summarizeInputs(const std::vector<InputSpec> &specs) {
  for (const InputSpec &spec : specs)
    inputSummary += (inputSummary.empty() ? "" : ", ") + spec.str();
  // Mixed precision types the step in other dtypes: say which.
  auto dtypeText = [](Type t) {
    std::string s;
    llvm::raw_string_ostream os(s);
    os << t;
    return s;
  };
  if (paramDtype)
    inputSummary += "; mixed precision: parameters and floating-point "
                    "inputs in " + dtypeText(paramDtype);
  if (paramDtype || bufferDtype)
    inputSummary += std::string(paramDtype ? "," : "; mixed precision:") +
                    " floating-point buffers in " +
                    (bufferDtype ? dtypeText(bufferDtype)
                                 : std::string("their own dtype"));
}

/// The step function, with forward's inputs bound to its arguments (or
/// their defaults) and `self` to the root module.
void Importer::createStep(const StepInputs &inputs, const jit::Module &root,
                          Location fileLoc) {
  func = func::FuncOp::create(builder, fileLoc, "forward",
                              builder.getFunctionType(inputs.types, {}));
  Block *entry = func.addEntryBlock();
  for (size_t i = 0; i < inputs.names.size(); ++i)
    func.setArgAttr(i, kNameAttr, builder.getStringAttr(inputs.names[i]));
  builder.setInsertionPointToEnd(entry);
  size_t nextArg = 0;
  for (auto &[value, abs] : inputs.bound) {
    if (abs.kind != AbsValue::Kind::Unknown) {
      bind(value, abs);
      continue;
    }
    Value arg = entry->getArgument(nextArg++);
    // Mixed precision: floating-point inputs in the compute dtype.
    if (paramDtype &&
        isa<FloatType>(cast<RankedTensorType>(arg.getType()).getElementType()))
      arg = aten::ATenBuilder(builder, arg.getLoc()).cast(arg, paramDtype);
    bind(value, AbsValue::ofTensor(arg));
  }
  AbsValue self;
  self.kind = AbsValue::Kind::Module;
  self.module = root._ivalue();
  bind(graph->inputs()[0], self);
}

/// The step's results and state updates, once the walk is done.
void Importer::finishStep(const StepInputs &inputs, Location fileLoc) {
  SmallVector<Value> results;
  // At the code that computed each output (the return statement has no
  // range of its own in code that was loaded).
  for (jit::Value *out : graph->outputs())
    flattenOutputs(lookup(out), locationOf(out->node()), results);
  // Buffers the step changed keep their new value.
  for (const std::string &fqn : stateOrder) {
    Value now = current.lookup(fqn);
    if (now && now != initial.lookup(fqn))
      UpdateOp::create(builder, now.getLoc(),
                       FlatSymbolRefAttr::get(context, fqn), now);
  }
  func::ReturnOp::create(builder, fileLoc, results);
  func.setType(
      builder.getFunctionType(inputs.types, ValueRange(results).getTypes()));
  removeDeadOps(func);
  // What the compiler read of the archive's tensor values (for
  // --fsdp-report): module tensors used as constants.
  SmallVector<Attribute> read;
  for (const auto &[name, bytes] : valuesRead)
    read.push_back(builder.getArrayAttr(
        {builder.getStringAttr(name), builder.getI64IntegerAttr(bytes)}));
  module->setAttr(kValuesReadAttr, builder.getArrayAttr(read));
}

OwningOpRef<ModuleOp> fsdp::importTorchScript(llvm::StringRef path,
                                              const ImportOptions &options,
                                              MLIRContext *context) {
  return Importer(context, path).run(options);
}
