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

#include "fsdp/Import/Import.h"

#include "../Core/StepBuilder.h"

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
#include "llvm/ADT/DenseSet.h"
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
using namespace fsdp::import;
namespace jit = torch::jit;

using fsdp::runtime::firstLine;

namespace {

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

/// forward's arguments, as the step receives them.
struct StepInputs {
  SmallVector<Type> types;
  SmallVector<std::string> names;
  /// Every input of the graph but self: its default value, or unknown for
  /// an argument of the step.
  SmallVector<std::pair<jit::Value *, AbsValue>> bound;
};

class Importer : public StepBuilder {
public:
  Importer(MLIRContext *context, llvm::StringRef path)
      : StepBuilder(context, path) {}

  OwningOpRef<ModuleOp> run(const ImportOptions &options);

private:
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
  void importStep(const ImportOptions &options, TimingScope &timing,
                  Location fileLoc);
  jit::Module loadModule(jit::ExtraFilesMap &extra, Location fileLoc);
  std::vector<InputSpec> inputSpecs(const std::string &metadata,
                                    const ImportOptions &options,
                                    std::vector<std::string> &storedTargets,
                                    Location fileLoc);
  StepInputs matchInputs(const c10::FunctionSchema &schema,
                         const std::vector<InputSpec> &specs,
                         Location fileLoc);
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
  void visitDictConstruct(jit::Node *node);
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
  /// The node's op call, through the core (StepBuilder::emitCall).
  void emitCall(jit::Node *node, const c10::FunctionSchema &schema);
  bool readAfter(const CallSite &site,
                 llvm::function_ref<bool(Value)> aliases) override;
  void replaceEverywhere(Value old, Value updated) override;
  bool constantShared(const at::Tensor &t) override;

  AbsValue &lookup(jit::Value *value);
  void bind(jit::Value *value, AbsValue abs);
  struct RuntimeWrites {
    llvm::DenseSet<jit::Value *> dynamic;           // hold the step's data
    llvm::DenseMap<jit::Value *, jit::Value *> baseOf; // a view's root base
    llvm::DenseSet<jit::Value *> &written;          // bases written with data
  };
  /// Adds to `w.written` the tensors `block`'s nodes write in place with
  /// the step's data (inputs, parameters, buffers, random draws, and what is
  /// computed from them), directly or through a view (then the view's
  /// base); nested blocks included. A constant written only with constants
  /// (a mask built in place) stays a constant.
  void collectRuntimeWrites(jit::Block *block, RuntimeWrites &w);
  const std::string *stateOfTensor(const at::Tensor &t) const;
  AbsValue attributeAbs(const std::string &name, const c10::IValue &value,
                        jit::Node *node, Location loc);
  Location attributeErrorLoc(jit::Node *node);
  at::Tensor constantValue(const std::string &name, const at::Tensor &t,
                           jit::Node *node);
  void flattenOutputs(const AbsValue &abs, Location loc,
                      SmallVectorImpl<Value> &out);
  /// Input `i` of `node`, as the op receives it: under mixed precision, a
  /// filling factory's float32 dtype is the compute dtype.
  const AbsValue &argument(jit::Node *node, size_t i);

  jit::Graph *graph = nullptr;
  llvm::DenseMap<jit::Value *, AbsValue> env;
  // The values some node writes in place with the step's data, directly or
  // through a view: bound to a constant (a folded `zeros`), they become
  // values of the step (StepBuilder::writable).
  llvm::DenseSet<jit::Value *> written;
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
  // The canonical FQN of each parameter and buffer by its tensor, and by
  // its view of storage (an alias: the same elements): a module attribute
  // that holds one, directly or in a list or tuple (nn.LSTM's
  // `_flat_weights`), is that state.
  llvm::DenseMap<const c10::TensorImpl *, std::string> stateByTensor;
  std::map<TensorView, std::string> stateByView;
  int64_t unrolledIterations = 0;
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
};

} // namespace

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
      aliasStateSymbol(it->second, fqn);
      remember(states.lookup(it->second).fqn);
      return;
    }
    std::string cls = cleanClassName(owner.type()->name()->qualifiedName());
    declareStateSymbol(fqn, modulePath, cls, t, isParam,
                       /*persistent=*/!nonPersistent.contains(fqn), loc);
    remember(fqn);
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
    // A frozen parameter (requires_grad=False) is state the step reads
    // and never trains: a buffer of the step.
    for (const auto &p : m.named_parameters(/*recurse=*/false))
      declare(named.name, m, p.name, p.value,
              /*isParam=*/p.value.requires_grad());
    for (const auto &b : m.named_buffers(/*recurse=*/false))
      declare(named.name, m, b.name, b.value, /*isParam=*/false);
  }
  module->setAttr(kModulesAttr, builder.getArrayAttr(modules));
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
  if (written.contains(value))
    abs = writable(std::move(abs), locationOf(value->node()));
  env[value] = std::move(abs);
}

/// True if a value of type `t` is or holds a tensor (in a list, tuple,
/// optional or dict; an object, a module, is not looked into: a class may
/// hold itself).
static bool holdsTensorType(const c10::TypePtr &t) {
  if (t->kind() == c10::TypeKind::TensorType)
    return true;
  if (t->kind() == c10::TypeKind::ClassType)
    return false;
  return llvm::any_of(t->containedTypes(), holdsTensorType);
}

void Importer::collectRuntimeWrites(jit::Block *block, RuntimeWrites &w) {
  auto rootOf = [&](jit::Value *v) {
    jit::Value *base = w.baseOf.lookup(v);
    return base ? base : v;
  };
  auto dynamic = [&](jit::Value *v) {
    return w.dynamic.contains(v) || w.dynamic.contains(rootOf(v));
  };
  auto mark = [&](jit::Value *v) {
    if (holdsTensorType(v->type()))
      w.dynamic.insert(v);
  };
  for (jit::Node *node : block->nodes()) {
    // Parameters and buffers are the step's data, as is a loop's or a
    // branch's value where anything it reads is.
    if (node->kind() == c10::prim::GetAttr) {
      mark(node->output());
      continue;
    }
    bool fromData = node->isNondeterministic();
    for (jit::Block *inner : node->blocks()) {
      for (jit::Value *param : inner->inputs())
        mark(param);
      collectRuntimeWrites(inner, w);
      fromData |= llvm::any_of(inner->outputs(), dynamic);
    }
    const c10::FunctionSchema *schema = node->maybeSchema();
    std::vector<size_t> written;
    if (schema)
      written = writtenArguments(*schema);
    bool typeOnly =
        schema && aten::hasFact(schema->name(), aten::OpFact::TypeOnlyFactory);
    for (size_t i = 0; i < node->inputs().size(); ++i)
      if (!llvm::is_contained(written, i) && !(typeOnly && i == 0))
        fromData |= dynamic(node->inputs()[i]);
    for (size_t i : written) {
      if (i >= node->inputs().size() || !fromData)
        continue;
      jit::Value *target = node->inputs()[i];
      w.written.insert(rootOf(target));
      w.dynamic.insert(rootOf(target));
      w.dynamic.insert(target);
    }
    if (fromData)
      for (jit::Value *out : node->outputs())
        mark(out);
    for (size_t i = 0; schema && i < node->outputs().size(); ++i) {
      std::optional<size_t> aliased = aliasedArgument(*schema, i);
      if (aliased && *aliased < node->inputs().size())
        w.baseOf[node->outputs()[i]] = rootOf(node->inputs()[*aliased]);
    }
  }
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
  case c10::prim::DictConstruct:
    return visitDictConstruct(node);
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

/// A dict (a traced ModelOutput: `trace(..., strict=False)`), keyed by
/// constant strings or integers.
void Importer::visitDictConstruct(jit::Node *node) {
  Location loc = locationOf(node);
  std::vector<c10::IValue> keys;
  std::vector<AbsValue> values;
  for (size_t i = 0; i + 1 < node->inputs().size(); i += 2) {
    const AbsValue &key = lookup(node->inputs()[i]);
    if (!key.isConstant() || !(key.constant.isString() || key.constant.isInt()))
      fail(loc, "a dict whose keys are not constant strings or integers "
                "cannot be imported");
    keys.push_back(key.constant);
    values.push_back(lookup(node->inputs()[i + 1]));
  }
  bind(node->output(), AbsValue::ofDict(std::move(keys), std::move(values)));
}

static bool sameKey(const c10::IValue &a, const c10::IValue &b) {
  if (a.isString() && b.isString())
    return a.toStringRef() == b.toStringRef();
  return a.isInt() && b.isInt() && a.toInt() == b.toInt();
}

static std::string keyText(const c10::IValue &key) {
  return key.isString() ? "'" + key.toStringRef() + "'"
                        : std::to_string(key.isInt() ? key.toInt() : 0);
}

void Importer::visitUnpack(jit::Node *node) {
  Location loc = locationOf(node);
  AbsValue seq = lookup(node->input());
  std::vector<AbsValue> elements;
  if (seq.isDict) {
    fail(loc, "cannot unpack a dict");
  } else if (seq.kind == AbsValue::Kind::Sequence) {
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
  if (seq.isDict) {
    // `outputs["last_hidden_state"]`: an entry, by its constant key.
    if (!index.isConstant())
      fail(locationOf(node), "a dict is read at a key that is not a constant");
    for (size_t i = 0; i < seq.keys.size(); ++i)
      if (sameKey(seq.keys[i], index.constant)) {
        bind(node->output(), seq.elements[i]);
        return true;
      }
    fail(locationOf(node), "the dict has no entry " + keyText(index.constant));
  }
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
      it->second.isTuple || it->second.isDict)
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

const AbsValue &Importer::argument(jit::Node *node, size_t i) {
  const AbsValue &a = lookup(node->inputs()[i]);
  const c10::FunctionSchema *schema = node->maybeSchema();
  if (!schema)
    return a;
  return computeDtypeArgument(*schema, i, a, locationOf(node));
}

void Importer::emitCall(jit::Node *node, const c10::FunctionSchema &schema) {
  CallSite site{schema, overloadName(schema), locationOf(node)};
  site.run = [op = node->getOperation()](jit::Stack &stack) mutable {
    op(stack);
  };
  for (size_t i = 0; i < node->inputs().size(); ++i) {
    site.args.push_back(&argument(node, i));
    site.argTypes.push_back(node->inputs()[i]->type());
  }
  site.numOutputs = node->outputs().size();
  site.position = node;
  std::vector<AbsValue> outputs = StepBuilder::emitCall(site);
  for (size_t i = 0; i < outputs.size(); ++i)
    bind(node->outputs()[i], std::move(outputs[i]));
}

bool Importer::readAfter(const CallSite &site,
                         llvm::function_ref<bool(Value)> aliases) {
  auto *node = static_cast<const jit::Node *>(site.position);
  for (auto &entry : env) {
    if (!holdsTensor(entry.second, aliases))
      continue;
    for (const jit::Use &use : entry.first->uses())
      if (use.user->isAfter(node))
        return true;
  }
  return false;
}

bool Importer::constantShared(const at::Tensor &t) {
  for (const auto &entry : env)
    if (holdsConstantAliasing(entry.second, t))
      return true;
  return false;
}

void Importer::replaceEverywhere(Value old, Value updated) {
  for (auto &entry : env)
    replaceTensor(entry.second, old, updated);
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
  const c10::FunctionSchema &schema = node->schema();
  if (!mayFold(schema))
    return false;
  jit::Stack stack;
  for (size_t i = 0; i < node->inputs().size(); ++i) {
    AbsValue &a = lookup(node->inputs()[i]);
    if (i == 0 && a.isTensor()) {
      stack.push_back(
          typeOnlyInput(cast<RankedTensorType>(a.tensor.getType()), loc));
    } else if (a.isFullyConstant()) {
      stack.push_back(toIValue(a, node->inputs()[i]->type(), false, loc));
    } else {
      return false;
    }
  }
  jit::Operation op = node->getOperation();
  if (!foldFits(schema, stack, [&](jit::Stack &s) { op(s); }))
    return false;
  op(stack);
  if (!stack[0].isTensor())
    return false;
  bind(node->output(), fromIValue(stack[0]));
  return true;
}

/// All inputs are compile-time constants: the JIT computes the result,
/// unless it is random, reads uninitialized memory (aten::empty and
/// friends run), is an operator a plan may not call, or makes a tensor too
/// large to keep as a constant (known before it runs).
bool Importer::foldOnConstants(jit::Node *node, Location loc) {
  const c10::FunctionSchema &schema = node->schema();
  if (node->isNondeterministic() || !mayFold(schema))
    return false;
  if (!schema.is_vararg()) {
    jit::Stack stack;
    for (size_t i = 0; i < node->inputs().size(); ++i)
      stack.push_back(toIValue(argument(node, i), node->inputs()[i]->type(),
                               /*meta=*/false, loc));
    jit::Operation op = node->getOperation();
    if (!foldFits(schema, stack, [&](jit::Stack &s) { op(s); }))
      return false;
  }
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
  return true;
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
  RuntimeWrites runtimeWrites{llvm::DenseSet<jit::Value *>(),
                              llvm::DenseMap<jit::Value *, jit::Value *>(),
                              written};
  for (jit::Value *input : graph->inputs())
    if (holdsTensorType(input->type()))
      runtimeWrites.dynamic.insert(input);
  collectRuntimeWrites(graph->block(), runtimeWrites);

  inlineTiming.stop();
  TimingScope stateTiming = timing.nest("declare parameters and buffers");
  createModule(fileLoc, storedTargets);
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
/// command line; the stored targets and non-persistent buffers.
std::vector<InputSpec>
Importer::inputSpecs(const std::string &metadata, const ImportOptions &options,
                     std::vector<std::string> &storedTargets,
                     Location fileLoc) {
  StoredMetadata stored;
  if (!metadata.empty())
    stored = readStoredMetadata(metadata, fileLoc);
  storedTargets = stored.targets;
  for (const std::string &name : stored.nonPersistent)
    nonPersistent.insert(name);
  return withOverrides(std::move(stored.inputs), options.inputs);
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

/// The step function, with forward's inputs bound to its arguments (or
/// their defaults) and `self` to the root module.
void Importer::createStep(const StepInputs &inputs, const jit::Module &root,
                          Location fileLoc) {
  std::vector<std::string> names(inputs.names.begin(), inputs.names.end());
  Block *entry =
      &createFunction(fileLoc, inputs.types, names).getBody().front();
  size_t nextArg = 0;
  for (auto &[value, abs] : inputs.bound) {
    if (abs.kind != AbsValue::Kind::Unknown) {
      bind(value, abs);
      continue;
    }
    // Mixed precision: floating-point inputs in the compute dtype.
    bind(value, AbsValue::ofTensor(castInput(entry->getArgument(nextArg++))));
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
  // range of its own in code that was loaded). A dict's entries in their
  // order, its `loss` first (a ModelOutput's own loss, for --loss none).
  for (jit::Value *out : graph->outputs()) {
    AbsValue abs = lookup(out);
    if (abs.isDict)
      for (size_t i = 1; i < abs.keys.size(); ++i)
        if (sameKey(abs.keys[i], c10::IValue(std::string("loss")))) {
          std::rotate(abs.keys.begin(), abs.keys.begin() + i,
                      abs.keys.begin() + i + 1);
          std::rotate(abs.elements.begin(), abs.elements.begin() + i,
                      abs.elements.begin() + i + 1);
        }
    flattenOutputs(abs, locationOf(out->node()), results);
  }
  finishFunction(inputs.types, results, fileLoc);
}

OwningOpRef<ModuleOp> fsdp::importTorchScript(llvm::StringRef path,
                                              const ImportOptions &options,
                                              MLIRContext *context) {
  return Importer(context, path).run(options);
}
