//===- Import.cpp - torch.export programs to the aten/fsdp dialects --------===//
//
// The torch.export front end: reads the archive torch.export.save writes (a
// zip holding `models/model.json`, the serialized ExportedProgram, and the
// weights and constants configs), with no Python. Its graph is already a
// list of ATen op calls by overload: each node is a call of the core
// (StepBuilder::emitCall), which types it by the op's own meta kernel as
// for TorchScript, so the two front ends build the same IR for the same
// ops. Parameters and buffers come from the graph signature by FQN; the
// compiler reads no weight values (lifted constants it reads, as
// TorchScript's constant attributes).
//
//===----------------------------------------------------------------------===//

#include "fsdp/Import/Import.h"

#include "../Core/StepBuilder.h"

#include "fsdp/Dialect/ATen/IR/OpTable.h"
#include "fsdp/runtime/ModelArchive.h"
#include "fsdp/Support/JSON.h"
#include "fsdp/runtime/Plan.h"

#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/JSON.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/csrc/jit/runtime/operator.h>

#include <algorithm>
#include <functional>
#include <limits>
#include <map>

using namespace mlir;
using namespace fsdp;
using namespace fsdp::import;
namespace json = llvm::json;

using fsdp::runtime::firstLine;

namespace {

/// A dimension of a tensor as torch.export recorded it: a number, or a
/// symbolic expression (`s77`, `2*s77`) with the size it was traced at.
struct RecordedDim {
  std::optional<int64_t> size; // static
  std::string expr;            // symbolic: the expression
  std::string symbol;          // symbolic: its symbol, where it is one alone
  std::optional<int64_t> hint, min, max;
};

/// A placeholder of the graph: what the signature says it is.
struct Placeholder {
  enum class Kind { Parameter, Buffer, Constant, UserInput, ConstantInput } kind;
  std::string fqn; // parameter, buffer, constant: its name in the configs
  bool persistent = true;
  // A constant input (a bool, int, float, string or None argument the
  // program was specialised on): the value it was exported with.
  llvm::json::Value value = nullptr;
};

class ExportImporter : public StepBuilder {
public:
  ExportImporter(MLIRContext *context, llvm::StringRef path)
      : StepBuilder(context, path) {}

  OwningOpRef<ModuleOp> run(const ImportOptions &options);

private:
  void importStep(const ImportOptions &options, Location fileLoc);
  const json::Object &readProgram(Location fileLoc);
  std::pair<llvm::StringRef, const json::Object *>
  signatureEntry(const json::Value &v, const char *what, Location fileLoc);
  void readSignature(const json::Object &signature, Location fileLoc);
  void declareModules(const json::Object &program, const json::Array &nodes);
  void readModuleClasses(const json::Array &nodes);
  void declareState(const json::Object &graph, Location fileLoc);
  /// `state`: "parameter 'FQN'" or "buffer 'FQN'" where `name` is one.
  at::Tensor metaOf(const json::Object &graph, llvm::StringRef name,
                    Location loc,
                    std::optional<std::string> state = std::nullopt);
  struct RecordedType;
  RecordedType recordedType(const json::Object &graph, llvm::StringRef name,
                            Location loc);
  void checkInputSpec(const json::Object &graph, const InputSpec &spec,
                      std::map<std::string, int64_t> &symbols, Location loc);

  void visitNode(const json::Object &node, size_t index);
  bool visitRegion(const json::Object &node, llvm::StringRef target,
                   Location loc);
  void visitGraph(const json::Object &graph, Location loc);
  bool visitSymbolic(const json::Object &node, llvm::StringRef target,
                     Location loc);
  double floatOf(const json::Value &v, Location loc);
  AbsValue argumentValue(const json::Object &arg, const c10::Argument &schemaArg,
                         Location loc);
  std::optional<c10::OperatorHandle>
  scalarOverload(const c10::FunctionSchema &schema,
                 const std::vector<AbsValue> &args);
  std::vector<AbsValue> callOp(const c10::OperatorHandle &op,
                               std::vector<AbsValue> args, Location loc);
  std::optional<std::vector<AbsValue>>
  foldOnConstants(const c10::OperatorHandle &op, std::vector<AbsValue> &args,
                  Location loc);
  void bindOutputs(const json::Object &node, std::vector<AbsValue> outputs,
                   Location loc);
  Location locationOf(const json::Object &node);
  Location locate(const json::Object &node);

  const AbsValue &lookup(llvm::StringRef name, Location loc);
  std::optional<size_t> lossOutput(const json::Object &graphModule,
                                   size_t userOutputs);
  struct RuntimeWrites {
    llvm::StringSet<> dynamic;                // tensors holding the step's data
    llvm::StringMap<std::string> baseOf;      // a view's base (its root)
    llvm::StringSet<> &written;               // bases written with data
  };
  /// Adds to `w.written` the tensors `graph`'s nodes write in place with
  /// the step's data, directly or through a view (then the view's base).
  void collectRuntimeWrites(const json::Object &graph, RuntimeWrites &w);
  void bind(llvm::StringRef name, AbsValue abs) {
    env[name.str()] = std::move(abs);
  }
  bool readAfter(const CallSite &site,
                 llvm::function_ref<bool(Value)> aliases) override;
  void replaceEverywhere(Value old, Value updated) override;
  bool constantShared(const at::Tensor &t) override;

  std::unique_ptr<fsdp::runtime::ModelArchive> archive;
  json::Value programJson = nullptr;
  // The graph's values by name.
  std::map<std::string, AbsValue> env;
  // The values some node writes in place with the step's data, directly or
  // through a view: bound to a constant (a folded `new_zeros`), they become
  // values of the step (StepBuilder::writable).
  llvm::StringSet<> writtenNames;
  // The graphs being walked, outermost first: the program's, and the
  // regions (a higher-order op's subgraph) inside it. Names are unique
  // across them all (torch.export numbers one namespace).
  struct Scope {
    // Where each value is last read in this graph: a node's index, or the
    // number of nodes for a graph output.
    llvm::StringMap<size_t> lastUse;
    // The node being visited.
    size_t index = 0;
  };
  std::vector<Scope> scopes;
  /// The names a region's graph reads from outside it (read by its nodes,
  /// its regions' included, or returned, and not defined in it), computed
  /// once per graph: a node holding the region reads them.
  const std::vector<std::string> &freeNames(const json::Object &graph);
  /// Records in `lastUse` that the node at `index` reads the names in `v`
  /// (a region's free names where `v` holds its graph).
  void indexUses(const json::Value &v, size_t index,
                 llvm::StringMap<size_t> &lastUse);
  llvm::DenseMap<const json::Object *, std::vector<std::string>> freeNamesOf;
  // Each node's location, once computed (a region's is its first node's).
  llvm::DenseMap<const json::Object *, Location> locations;
  // The placeholders, by name, in the graph's order.
  std::vector<std::string> placeholderOrder;
  llvm::StringMap<Placeholder> placeholders;
  // The modules' classes, from the nodes' nn_module_stack.
  std::vector<std::string> modulePaths;
};

} // namespace

//===----------------------------------------------------------------------===//
// JSON helpers
//===----------------------------------------------------------------------===//

/// The one member of a union object (`{"as_tensor": {...}}`); none where
/// `object` is null or empty.
static std::pair<llvm::StringRef, const json::Value *>
unionMember(const json::Object *object) {
  if (object)
    for (const auto &member : *object)
      return {member.first, &member.second};
  return {"", nullptr};
}

static std::string str(const json::Value &v) {
  std::string out;
  llvm::raw_string_ostream os(out);
  os << v;
  return out;
}

//===----------------------------------------------------------------------===//
// Archive and signature
//===----------------------------------------------------------------------===//

const json::Object &ExportImporter::readProgram(Location fileLoc) {
  try {
    archive = std::make_unique<fsdp::runtime::ModelArchive>(path);
  } catch (const std::exception &e) {
    fail(fileLoc, e.what());
  }
  std::string text;
  try {
    text = archive->readText("models/model.json");
  } catch (const std::exception &e) {
    fail(fileLoc, std::string(e.what()) +
                      " (fsdp-opt reads the program torch.export.save names "
                      "'model')");
  }
  auto parsed = parseJSON(text);
  if (!parsed) {
    std::string error = llvm::toString(parsed.takeError());
    fail(fileLoc, "'" + path + "': models/model.json is not JSON: " + error);
  }
  programJson = std::move(*parsed);
  const json::Object *program = programJson.getAsObject();
  if (!program || !program->getObject("graph_module"))
    fail(fileLoc, "'" + path + "': models/model.json has no graph_module");
  return *program;
}

/// A constant input's value as Python writes it (True, 2.5, None, 'text').
static std::string pythonText(const json::Value &value) {
  const json::Object *object = value.getAsObject();
  auto [kind, body] = unionMember(object);
  if (!body)
    return str(value);
  if (kind == "as_none")
    return "None";
  if (kind == "as_bool" && body->getAsBoolean())
    return *body->getAsBoolean() ? "True" : "False";
  if (kind == "as_string" && body->getAsString())
    return "'" + body->getAsString()->str() + "'";
  return str(*body);
}

/// An entry of the graph signature, `{"KIND": {...}}`: its kind and object.
std::pair<llvm::StringRef, const json::Object *>
ExportImporter::signatureEntry(const json::Value &v, const char *what,
                               Location fileLoc) {
  auto [kind, body] = unionMember(v.getAsObject());
  const json::Object *object = body ? body->getAsObject() : nullptr;
  if (!object)
    fail(fileLoc, "'" + path + "': malformed " + what + " spec " + str(v));
  return {kind, object};
}

void ExportImporter::readSignature(const json::Object &signature,
                                   Location fileLoc) {
  const json::Array *inputs = signature.getArray("input_specs");
  if (!inputs)
    fail(fileLoc, "'" + path + "': the graph signature has no input_specs");
  for (const json::Value &v : *inputs) {
    auto [kind, object] = signatureEntry(v, "input", fileLoc);
    const json::Object *arg = object->getObject("arg");
    Placeholder p;
    std::optional<llvm::StringRef> name;
    if (kind == "parameter" || kind == "buffer" || kind == "tensor_constant") {
      name = arg ? arg->getString("name") : std::nullopt;
      p.kind = kind == "parameter" ? Placeholder::Kind::Parameter
               : kind == "buffer"  ? Placeholder::Kind::Buffer
                                   : Placeholder::Kind::Constant;
      auto fqn = object->getString(kind == "parameter" ? "parameter_name"
                                   : kind == "buffer"  ? "buffer_name"
                                                       : "tensor_constant_name");
      if (!fqn)
        fail(fileLoc, "'" + path + "': malformed input spec " + str(v));
      p.fqn = fqn->str();
      if (auto persistent = object->getBoolean("persistent"))
        p.persistent = *persistent;
    } else if (kind == "user_input") {
      const json::Object *tensor = arg ? arg->getObject("as_tensor") : nullptr;
      if (!tensor)
        fail(fileLoc, "forward takes an input that is not a tensor (" +
                          str(v) + "): fsdp-opt trains on tensor inputs; "
                          "export the model with its other arguments fixed");
      name = tensor->getString("name");
      p.kind = Placeholder::Kind::UserInput;
    } else if (kind == "constant_input") {
      // torch.export specialised the program on this value; the step
      // takes it as that constant.
      name = object->getString("name");
      const json::Object *value = object->getObject("value");
      auto [valueKind, body] = unionMember(value);
      if (!body || !(valueKind == "as_none" || valueKind == "as_bool" ||
                     valueKind == "as_int" || valueKind == "as_float" ||
                     valueKind == "as_string"))
        fail(fileLoc, "the program takes a constant input " + str(v) +
                          " that is not a bool, int, float, string or None, "
                          "which fsdp-opt cannot import");
      p.kind = Placeholder::Kind::ConstantInput;
      p.value = llvm::json::Object{{valueKind.str(), *body}};
    } else {
      fail(fileLoc, "the program takes a " + kind.str() +
                        " input, which fsdp-opt cannot import (custom "
                        "objects and effect tokens are not supported)");
    }
    if (!name)
      fail(fileLoc, "'" + path + "': malformed input spec " + str(v));
    placeholderOrder.push_back(name->str());
    placeholders[*name] = p;
  }
}

/// The dtype and dimensions torch.export recorded for value `name`.
struct ExportImporter::RecordedType {
  at::ScalarType dtype;
  std::vector<RecordedDim> dims;
};

ExportImporter::RecordedType
ExportImporter::recordedType(const json::Object &graph, llvm::StringRef name,
                             Location loc) {
  const json::Object *values = graph.getObject("tensor_values");
  const json::Object *meta = values ? values->getObject(name) : nullptr;
  if (!meta)
    fail(loc, "'" + path + "': no tensor metadata for '" + name + "'");
  std::optional<at::ScalarType> dtype;
  if (auto code = meta->getInteger("dtype"))
    dtype = fsdp::runtime::exportScalarType(*code);
  if (!dtype)
    fail(loc, "'" + name + "' has a dtype fsdp-opt does not know (" +
                  str(*meta->get("dtype")) + ")");
  const json::Object *ranges = programJson.getAsObject()
                                   ? programJson.getAsObject()->getObject(
                                         "range_constraints")
                                   : nullptr;
  RecordedType type{*dtype, {}};
  const json::Array *dims = meta->getArray("sizes");
  if (!dims)
    fail(loc, "'" + path + "': no sizes recorded for '" + name + "'");
  for (const json::Value &d : *dims) {
    RecordedDim dim;
    auto [kind, body] = unionMember(d.getAsObject());
    const json::Object *expr =
        kind == "as_expr" && body ? body->getAsObject() : nullptr;
    if (kind == "as_int" && body && body->getAsInteger()) {
      dim.size = *body->getAsInteger();
    } else if (expr && expr->getString("expr_str")) {
      // sympy's srepr (`Symbol('s77', positive=True, integer=True)`) or
      // its str (`s77`, `2*s77`).
      llvm::StringRef text = *expr->getString("expr_str");
      dim.expr = text.str();
      if (text.consume_front("Symbol('"))
        dim.symbol = text.take_until([](char c) { return c == '\''; }).str();
      else if (!text.empty() && llvm::all_of(text, [](char c) {
                 return llvm::isAlnum(c) || c == '_';
               }) && !llvm::isDigit(text.front()))
        dim.symbol = text.str();
      if (!dim.symbol.empty())
        dim.expr = dim.symbol;
      if (const json::Object *hint = expr->getObject("hint"))
        dim.hint = hint->getInteger("as_int");
      const json::Object *range =
          ranges && !dim.symbol.empty() ? ranges->getObject(dim.symbol) : nullptr;
      if (range) {
        dim.min = range->getInteger("min_val");
        dim.max = range->getInteger("max_val");
      }
    } else {
      fail(loc, "'" + path + "': malformed size of '" + name + "' (" + str(d) +
                    ")");
    }
    type.dims.push_back(std::move(dim));
  }
  return type;
}

/// A symbolic dimension as a message names it: `s77 (2 <= s77 <= 64,
/// exported at 4)`.
static std::string describe(const RecordedDim &dim) {
  std::string text = dim.expr + " (";
  if (dim.min || dim.max)
    text += (dim.min ? std::to_string(*dim.min) + " <= " : "") + dim.expr +
            (dim.max ? " <= " + std::to_string(*dim.max) : "") + ", ";
  return text + "exported at " +
         (dim.hint ? std::to_string(*dim.hint) : std::string("?")) + ")";
}

/// A meta tensor of the type torch.export recorded for value `name`; a
/// symbolic dimension is an error naming it and its range.
at::Tensor ExportImporter::metaOf(const json::Object &graph,
                                  llvm::StringRef name, Location loc,
                                  std::optional<std::string> state) {
  RecordedType type = recordedType(graph, name, loc);
  std::vector<int64_t> sizes;
  for (auto [i, dim] : llvm::enumerate(type.dims)) {
    if (!dim.size && state)
      fail(loc, "dimension " + std::to_string(i) + " of " + *state +
                    " is symbolic: " + describe(dim) +
                    "; a parameter or buffer has a static shape: export "
                    "the model with static shapes for its state");
    if (!dim.size)
      fail(loc, "dimension " + std::to_string(i) + " of '" + name +
                    "' is symbolic: " + describe(dim) +
                    "; give its static shape with --input " + name +
                    ":DIMSxDTYPE, or export with static shapes");
    sizes.push_back(*dim.size);
  }
  return at::empty(sizes,
                   at::TensorOptions().dtype(type.dtype).device(at::kMeta));
}

/// A size expression as torch.export records it (sympy's srepr):
/// Integer(2), Symbol('s77', positive=True, integer=True), Mul(...),
/// Add(...). Anything else is not read (and not checked).
struct SizeExpr {
  enum Kind { Int, Sym, Mul, Add } kind = Int;
  int64_t value = 0;
  std::string name;
  std::vector<SizeExpr> args;
};

static std::optional<SizeExpr> parseSizeExpr(llvm::StringRef &text,
                                             unsigned depth = 0) {
  text = text.ltrim();
  size_t open = text.find('(');
  if (open == llvm::StringRef::npos || depth > 64)
    return std::nullopt;
  llvm::StringRef head = text.take_front(open).trim();
  text = text.drop_front(open + 1).ltrim();
  SizeExpr e;
  if (head == "Integer") {
    size_t end = text.find(')');
    if (end == llvm::StringRef::npos ||
        text.take_front(end).trim().getAsInteger(10, e.value))
      return std::nullopt;
    text = text.drop_front(end + 1);
    return e;
  }
  if (head == "Symbol") {
    if (!text.consume_front("'"))
      return std::nullopt;
    size_t quote = text.find('\'');
    size_t end = text.find(')');
    if (quote == llvm::StringRef::npos || end == llvm::StringRef::npos ||
        end < quote)
      return std::nullopt;
    e.kind = SizeExpr::Sym;
    e.name = text.take_front(quote).str();
    text = text.drop_front(end + 1);
    return e;
  }
  if (head != "Mul" && head != "Add")
    return std::nullopt;
  e.kind = head == "Mul" ? SizeExpr::Mul : SizeExpr::Add;
  while (true) {
    std::optional<SizeExpr> arg = parseSizeExpr(text, depth + 1);
    if (!arg)
      return std::nullopt;
    e.args.push_back(std::move(*arg));
    text = text.ltrim();
    if (text.consume_front(","))
      continue;
    if (text.consume_front(")"))
      return e;
    return std::nullopt;
  }
}

/// Its value where every symbol in it is known (and it fits 64 bits).
static std::optional<int64_t>
evaluateSize(const SizeExpr &e, const std::map<std::string, int64_t> &symbols) {
  switch (e.kind) {
  case SizeExpr::Int:
    return e.value;
  case SizeExpr::Sym: {
    auto it = symbols.find(e.name);
    if (it == symbols.end())
      return std::nullopt;
    return it->second;
  }
  case SizeExpr::Mul:
  case SizeExpr::Add: {
    int64_t total = e.kind == SizeExpr::Mul ? 1 : 0;
    for (const SizeExpr &arg : e.args) {
      std::optional<int64_t> v = evaluateSize(arg, symbols);
      if (!v || (e.kind == SizeExpr::Mul
                     ? __builtin_mul_overflow(total, *v, &total)
                     : __builtin_add_overflow(total, *v, &total)))
        return std::nullopt;
    }
    return total;
  }
  }
  return std::nullopt;
}

/// Checks that `spec` (--input, or the shape stored beside the program) is
/// a type the program was exported for: its dtype, its static dimensions,
/// each symbolic one in its range and one size per symbol (`symbols`,
/// over all the inputs).
void ExportImporter::checkInputSpec(const json::Object &graph,
                                    const InputSpec &spec,
                                    std::map<std::string, int64_t> &symbols,
                                    Location loc) {
  RecordedType type = recordedType(graph, spec.name, loc);
  std::string given = "--input " + spec.str();
  at::ScalarType dtype = scalarType(spec.elementType(context), loc);
  if (dtype != type.dtype) {
    std::string recorded;
    llvm::raw_string_ostream os(recorded);
    os << elementType(type.dtype, loc);
    fail(loc, given + ": the program was exported with '" + spec.name +
                  "' of dtype " + recorded);
  }
  if (spec.shape.size() != type.dims.size())
    fail(loc, given + ": the program was exported with '" + spec.name +
                  "' of " + std::to_string(type.dims.size()) + " dimensions");
  for (auto [i, dim] : llvm::enumerate(type.dims)) {
    int64_t n = spec.shape[i];
    std::string which = "dimension " + std::to_string(i) + " ";
    if (dim.size) {
      if (n != *dim.size)
        fail(loc, given + ": " + which + "is " + std::to_string(*dim.size) +
                      " in the program (static: export it with a dynamic "
                      "dimension, torch.export.Dim, to compile other sizes)");
      continue;
    }
    if ((dim.min && n < *dim.min) || (dim.max && n > *dim.max))
      fail(loc, given + ": " + which + "is " + describe(dim) +
                    ", which does not allow " + std::to_string(n));
    if (dim.symbol.empty()) {
      // An expression of symbols (2*s77): its value where the other
      // dimensions given fix them; k*s alone fixes s.
      llvm::StringRef text = dim.expr;
      std::optional<SizeExpr> e = parseSizeExpr(text);
      if (!e)
        continue;
      if (std::optional<int64_t> v = evaluateSize(*e, symbols)) {
        if (*v != n)
          fail(loc, given + ": " + which + "is " + describe(dim) + ", " +
                        std::to_string(*v) + " with the sizes given for its "
                        "symbols, not " + std::to_string(n));
        continue;
      }
      if (e->kind == SizeExpr::Mul && e->args.size() == 2) {
        const SizeExpr *k = &e->args[0], *sym = &e->args[1];
        if (k->kind != SizeExpr::Int)
          std::swap(k, sym);
        if (k->kind == SizeExpr::Int && sym->kind == SizeExpr::Sym &&
            k->value > 0) {
          if (n % k->value != 0)
            fail(loc, given + ": " + which + "is " + describe(dim) +
                          ", a multiple of " + std::to_string(k->value) +
                          ", not " + std::to_string(n));
          symbols.emplace(sym->name, n / k->value);
        }
      }
      continue;
    }
    auto [it, fresh] = symbols.emplace(dim.symbol, n);
    if (!fresh && it->second != n)
      fail(loc, given + ": " + which + "is " + dim.symbol +
                    ", which another input gives as " +
                    std::to_string(it->second));
  }
}

/// The ATen operator a node's target names (`torch.ops.aten.add.Tensor`;
/// `default` is the overload without a name), if this libtorch has it.
static std::optional<c10::OperatorHandle> atenOperator(llvm::StringRef target) {
  if (!target.consume_front("torch.ops.aten."))
    return std::nullopt;
  auto [name, overload] = target.rsplit('.');
  return c10::Dispatcher::singleton().findSchema(
      {"aten::" + name.str(), overload == "default" ? "" : overload.str()});
}

/// A JSON value serialized as a string inside the program (an output
/// tree, a tree node's context), parsed; none if it does not parse.
static std::optional<json::Value> parseEmbedded(llvm::StringRef text) {
  llvm::Expected<json::Value> parsed = parseJSON(text);
  if (!parsed) {
    llvm::consumeError(parsed.takeError());
    return std::nullopt;
  }
  return std::move(*parsed);
}

/// The subgraphs a node holds (a region's, a branch's).
static SmallVector<const json::Object *> subgraphs(const json::Object &node) {
  SmallVector<const json::Object *> graphs;
  if (const json::Array *inputs = node.getArray("inputs"))
    for (const json::Value &v : *inputs) {
      const json::Object *in = v.getAsObject();
      auto [kind, body] = unionMember(in ? in->getObject("arg") : nullptr);
      if (kind == "as_graph" && body && body->getAsObject())
        if (const json::Object *graph = body->getAsObject()->getObject("graph"))
          graphs.push_back(graph);
    }
  return graphs;
}

/// The classes the nodes' nn_module_stack name, regions' nodes included.
void ExportImporter::readModuleClasses(const json::Array &nodes) {
  for (const json::Value &n : nodes) {
    const json::Object *node = n.getAsObject();
    if (!node)
      continue;
    for (const json::Object *graph : subgraphs(*node))
      if (const json::Array *inner = graph->getArray("nodes"))
        readModuleClasses(*inner);
    const json::Object *metadata = node->getObject("metadata");
    auto stack = metadata ? metadata->getString("nn_module_stack")
                          : std::nullopt;
    if (!stack)
      continue;
    // "KEY,PATH,CLASS;KEY,PATH,CLASS": the outermost first.
    SmallVector<llvm::StringRef> frames;
    stack->split(frames, ';', -1, /*KeepEmpty=*/false);
    for (llvm::StringRef frame : frames) {
      auto [key, rest] = frame.split(',');
      size_t comma = rest.rfind(',');
      if (comma == llvm::StringRef::npos)
        continue;
      moduleClasses.try_emplace(rest.take_front(comma).str(),
                                rest.drop_front(comma + 1).str());
    }
  }
}

/// The module tree (`fsdp.modules`): the module call graph's FQNs in order
/// (named_modules' preorder), each with the class its nn_module_stack names.
void ExportImporter::declareModules(const json::Object &program,
                                    const json::Array &nodes) {
  readModuleClasses(nodes);
  const json::Object *graphModule = program.getObject("graph_module");
  const json::Array *calls =
      graphModule ? graphModule->getArray("module_call_graph") : nullptr;
  if (calls)
    for (const json::Value &c : *calls)
      if (const json::Object *entry = c.getAsObject())
        if (auto fqn = entry->getString("fqn"))
          modulePaths.push_back(fqn->str());
  if (llvm::find(modulePaths, "") == modulePaths.end())
    modulePaths.insert(modulePaths.begin(), "");
  SmallVector<Attribute> modules;
  for (const std::string &m : modulePaths)
    modules.push_back(builder.getStrArrayAttr({m, moduleClasses.lookup(m)}));
  module->setAttr(kModulesAttr, builder.getArrayAttr(modules));
}

/// The parameter and buffer symbols, in state_dict order: each module's
/// parameters, then its buffers, modules in preorder.
void ExportImporter::declareState(const json::Object &graph,
                                  Location fileLoc) {
  auto owner = [](llvm::StringRef fqn) {
    size_t dot = fqn.rfind('.');
    return dot == llvm::StringRef::npos ? std::string() : fqn.take_front(dot).str();
  };
  std::vector<std::string> order;
  llvm::StringSet<> placed;
  for (const std::string &m : modulePaths)
    for (Placeholder::Kind kind :
         {Placeholder::Kind::Parameter, Placeholder::Kind::Buffer})
      for (const std::string &name : placeholderOrder) {
        const Placeholder &p = placeholders.find(name)->second;
        if (p.kind == kind && owner(p.fqn) == m && placed.insert(name).second)
          order.push_back(name);
      }
  for (const std::string &name : placeholderOrder) {
    const Placeholder &p = placeholders.find(name)->second;
    if ((p.kind == Placeholder::Kind::Parameter ||
         p.kind == Placeholder::Kind::Buffer) &&
        placed.insert(name).second)
      order.push_back(name);
  }
  // Tied weights (`lm_head.weight = wte.weight`): torch.export lifts each
  // name, and the weights config points both at one record. One symbol,
  // the first name canonical, the others its aliases (as TorchScript's).
  using Key = std::tuple<std::string, int64_t, std::vector<int64_t>,
                         std::vector<int64_t>>;
  std::map<Key, std::string> canonical;
  for (const std::string &name : order) {
    const Placeholder &p = placeholders.find(name)->second;
    if (const fsdp::runtime::ModelArchive::Entry *entry = archive->find(p.fqn);
        entry && entry->numel() != 0) {
      auto [it, inserted] = canonical.emplace(
          Key{entry->record, entry->storageOffset, entry->sizes,
              entry->strides},
          p.fqn);
      if (!inserted) {
        if (states.lookup(it->second).isParam !=
            (p.kind == Placeholder::Kind::Parameter && entry->requiresGrad))
          fail(fileLoc, "'" + p.fqn + "' and '" + it->second +
                            "' are one tensor, but one is a parameter and "
                            "the other a buffer");
        aliasStateSymbol(it->second, p.fqn);
        continue;
      }
    }
    std::string modulePath = owner(p.fqn);
    // A frozen parameter (requires_grad=False) is state the step reads and
    // never trains: a buffer of the step.
    const fsdp::runtime::ModelArchive::Entry *entry = archive->find(p.fqn);
    bool trained = p.kind == Placeholder::Kind::Parameter &&
                   (!entry || entry->requiresGrad);
    declareStateSymbol(p.fqn, modulePath, moduleClasses.lookup(modulePath),
                       metaOf(graph, name, fileLoc,
                              (p.kind == Placeholder::Kind::Parameter
                                   ? "parameter '"
                                   : "buffer '") +
                                  p.fqn + "'"),
                       trained, p.persistent, fileLoc);
  }
}

//===----------------------------------------------------------------------===//
// Values
//===----------------------------------------------------------------------===//

const AbsValue &ExportImporter::lookup(llvm::StringRef name, Location loc) {
  auto it = env.find(name.str());
  if (it != env.end())
    return it->second;
  // State is read where the forward first uses it, as TorchScript's is.
  auto p = placeholders.find(name);
  if (p != placeholders.end() &&
      (p->second.kind == Placeholder::Kind::Parameter ||
       p->second.kind == Placeholder::Kind::Buffer))
    return env[name.str()] = AbsValue::ofTensor(stateValue(p->second.fqn, loc));
  if (p != placeholders.end() &&
      p->second.kind == Placeholder::Kind::ConstantInput) {
    const json::Object &value = *p->second.value.getAsObject();
    auto [kind, body] = unionMember(&value);
    c10::IValue constant;
    if (kind == "as_bool" && body->getAsBoolean())
      constant = *body->getAsBoolean();
    else if (kind == "as_int" && body->getAsInteger())
      constant = *body->getAsInteger();
    else if (kind == "as_float")
      constant = floatOf(*body, loc);
    else if (kind == "as_string" && body->getAsString())
      constant = body->getAsString()->str();
    else if (kind != "as_none")
      fail(loc, "malformed constant input '" + name + "'");
    return env[name.str()] = AbsValue::ofConstant(constant);
  }
  if (p != placeholders.end() && p->second.kind == Placeholder::Kind::Constant) {
    const fsdp::runtime::ModelArchive::Entry *entry =
        archive->find(p->second.fqn);
    if (!entry)
      fail(loc, "the archive has no values for constant '" + p->second.fqn +
                    "'");
    // Before it is read: a record of a few bytes may declare a large
    // tensor with strides 0.
    checkConstantSize(entry->sizes, entry->dtype, loc);
    at::Tensor value = archive->read(*entry);
    valuesRead.push_back({p->second.fqn, static_cast<int64_t>(value.nbytes())});
    AbsValue constant = AbsValue::ofConstant(value);
    return env[name.str()] = writtenNames.contains(name)
                                 ? writable(std::move(constant), loc)
                                 : std::move(constant);
  }
  fail(loc, "value '" + name + "' is used before it is defined");
}

bool ExportImporter::readAfter(const CallSite &site,
                               llvm::function_ref<bool(Value)> aliases) {
  for (const auto &[name, abs] : env)
    if (holdsTensor(abs, aliases))
      for (const Scope &scope : scopes)
        if (scope.lastUse.lookup(name) > scope.index)
          return true;
  return false;
}

bool ExportImporter::constantShared(const at::Tensor &t) {
  for (const auto &[name, abs] : env)
    if (holdsConstantAliasing(abs, t))
      return true;
  return false;
}

void ExportImporter::replaceEverywhere(Value old, Value updated) {
  for (auto &entry : env)
    replaceTensor(entry.second, old, updated);
}

//===----------------------------------------------------------------------===//
// Locations: the node's stack trace, named by its module path
//===----------------------------------------------------------------------===//

/// The innermost frame of the user's code (outside torch's package) in the
/// node's stack trace, or the innermost one; named by the path of the
/// module whose code the node is (the last entry of its nn_module_stack).
Location ExportImporter::locationOf(const json::Object &node) {
  auto known = locations.find(&node);
  if (known != locations.end())
    return known->second;
  Location loc = locate(node);
  locations.try_emplace(&node, loc);
  return loc;
}

Location ExportImporter::locate(const json::Object &node) {
  Location loc = UnknownLoc::get(context);
  const json::Object *metadata = node.getObject("metadata");
  if (!metadata || !metadata->getString("stack_trace")) {
    // A region torch.export made has no stack trace of its own: where its
    // first node is.
    for (const json::Object *graph : subgraphs(node))
      if (const json::Array *nodes = graph->getArray("nodes"))
        for (const json::Value &n : *nodes)
          if (const json::Object *inner = n.getAsObject()) {
            Location innerLoc = locationOf(*inner);
            if (!isa<UnknownLoc>(innerLoc))
              return innerLoc;
          }
    return loc;
  }
  if (auto trace = metadata->getString("stack_trace")) {
    // `File "PATH", line N, in FUNCTION` lines, the outermost first.
    std::optional<std::pair<std::string, unsigned>> user, innermost;
    SmallVector<llvm::StringRef> lines;
    trace->split(lines, '\n');
    for (llvm::StringRef line : lines) {
      line = line.trim();
      if (!line.consume_front("File \""))
        continue;
      auto [file, rest] = line.split('"');
      unsigned lineNo = 0;
      if (!rest.consume_front(", line ") ||
          rest.take_while(llvm::isDigit).getAsInteger(10, lineNo))
        continue;
      // Code torch generated (`<eval_with_key>.80`) is no one's source.
      if (file.starts_with("<"))
        continue;
      innermost = {file.str(), lineNo};
      bool inTorch = file.contains("/site-packages/torch/") ||
                     file.contains("/dist-packages/torch/");
      if (!inTorch)
        user = innermost;
    }
    if (auto frame = user ? user : innermost)
      loc = FileLineColLoc::get(context, frame->first, frame->second, 1);
  }
  if (auto stack = metadata->getString("nn_module_stack")) {
    llvm::StringRef last = stack->rsplit(';').second;
    if (last.empty())
      last = *stack;
    llvm::StringRef rest = last.split(',').second;
    size_t comma = rest.rfind(',');
    llvm::StringRef modulePath =
        comma == llvm::StringRef::npos ? llvm::StringRef() : rest.take_front(comma);
    if (!modulePath.empty())
      loc = NameLoc::get(StringAttr::get(context, modulePath), loc);
  }
  return loc;
}

//===----------------------------------------------------------------------===//
// Nodes
//===----------------------------------------------------------------------===//

/// A float as the serialized program writes it: a number, or "Infinity",
/// "-Infinity" or "NaN" (which JSON has no numbers for).
double ExportImporter::floatOf(const json::Value &v, Location loc) {
  if (std::optional<double> x = v.getAsNumber())
    return *x;
  if (std::optional<llvm::StringRef> text = v.getAsString()) {
    if (*text == "Infinity")
      return std::numeric_limits<double>::infinity();
    if (*text == "-Infinity")
      return -std::numeric_limits<double>::infinity();
    if (*text == "NaN")
      return std::numeric_limits<double>::quiet_NaN();
  }
  fail(loc, "malformed float " + str(v));
}

/// An argument of a call, as the serialized program writes it.
AbsValue ExportImporter::argumentValue(const json::Object &arg,
                                       const c10::Argument &schemaArg,
                                       Location loc) {
  auto [kind, body] = unionMember(&arg);
  if (!body)
    fail(loc, "malformed argument '" + schemaArg.name() + "'");
  auto tensorNamed = [&](const json::Value &v) -> AbsValue {
    const json::Object *t = v.getAsObject();
    auto name = t ? t->getString("name") : std::nullopt;
    if (!name)
      fail(loc, "malformed tensor argument '" + schemaArg.name() + "'");
    return lookup(*name, loc);
  };
  auto optionalTensor = [&](const json::Value &v) -> AbsValue {
    const json::Object *o = v.getAsObject();
    if (!o || o->get("as_none"))
      return AbsValue::ofConstant(c10::IValue());
    const json::Value *t = o->get("as_tensor");
    if (!t)
      fail(loc, "malformed optional tensor in '" + schemaArg.name() + "'");
    return tensorNamed(*t);
  };
  // A SymInt or SymBool: a number, or a value the graph computed (a
  // constant here: shapes are static).
  auto symbolic = [&](const json::Value &v) -> c10::IValue {
    const json::Object *o = v.getAsObject();
    if (o)
      if (auto [k, b] = unionMember(o); b) {
        if (k == "as_int" && b->getAsInteger())
          return *b->getAsInteger();
        if (k == "as_bool" && b->getAsBoolean())
          return *b->getAsBoolean();
        if (k == "as_float" && b->getAsNumber())
          return *b->getAsNumber();
        if (k == "as_name" && b->getAsString()) {
          const AbsValue &a = lookup(*b->getAsString(), loc);
          if (a.isConstant())
            return a.constant;
        }
      }
    fail(loc, "argument '" + schemaArg.name() + "' is a symbolic value (" +
                  str(v) + ") fsdp-opt cannot make static");
  };
  const json::Array *list = body->getAsArray();
  if (kind == "as_none")
    return AbsValue::ofConstant(c10::IValue());
  if (kind == "as_tensor")
    return tensorNamed(*body);
  if (kind == "as_optional_tensor")
    return optionalTensor(*body);
  if ((kind == "as_tensors" || kind == "as_optional_tensors") && list) {
    std::vector<AbsValue> elements;
    for (const json::Value &e : *list)
      elements.push_back(kind == "as_tensors" ? tensorNamed(e)
                                              : optionalTensor(e));
    return AbsValue::ofSequence(std::move(elements), /*isTuple=*/false);
  }
  if (kind == "as_int" && body->getAsInteger())
    return AbsValue::ofConstant(*body->getAsInteger());
  if (kind == "as_float")
    return AbsValue::ofConstant(floatOf(*body, loc));
  if (kind == "as_bool" && body->getAsBoolean())
    return AbsValue::ofConstant(*body->getAsBoolean());
  if (kind == "as_string" && body->getAsString())
    return AbsValue::ofConstant(body->getAsString()->str());
  // A list element of another type is malformed, not 0, false or "".
  auto element = [&](auto value, const json::Value &e, const char *what) {
    if (!value)
      fail(loc, "malformed argument '" + schemaArg.name() + "': element " +
                    str(e) + " of its list is not " + what);
    return *value;
  };
  if (kind == "as_ints" && list) {
    c10::List<int64_t> values;
    for (const json::Value &e : *list)
      values.push_back(element(e.getAsInteger(), e, "an integer"));
    return AbsValue::ofConstant(values);
  }
  if (kind == "as_floats" && list) {
    c10::List<double> values;
    for (const json::Value &e : *list)
      values.push_back(floatOf(e, loc));
    return AbsValue::ofConstant(values);
  }
  if (kind == "as_bools" && list) {
    c10::List<bool> values;
    for (const json::Value &e : *list)
      values.push_back(element(e.getAsBoolean(), e, "a bool"));
    return AbsValue::ofConstant(values);
  }
  if (kind == "as_strings" && list) {
    c10::List<std::string> values;
    for (const json::Value &e : *list)
      values.push_back(element(e.getAsString(), e, "a string").str());
    return AbsValue::ofConstant(values);
  }
  if (kind == "as_sym_int" || kind == "as_sym_bool" || kind == "as_sym_float")
    return AbsValue::ofConstant(symbolic(*body));
  if (kind == "as_sym_ints" && list) {
    c10::List<int64_t> values;
    for (const json::Value &e : *list)
      values.push_back(symbolic(e).toInt());
    return AbsValue::ofConstant(values);
  }
  if (kind == "as_scalar_type" && body->getAsInteger()) {
    std::optional<at::ScalarType> dtype =
        fsdp::runtime::exportScalarType(*body->getAsInteger());
    if (!dtype)
      fail(loc, "argument '" + schemaArg.name() + "' names a dtype (" +
                    str(*body) + ") fsdp-opt does not know");
    return AbsValue::ofConstant(static_cast<int64_t>(*dtype));
  }
  if (kind == "as_memory_format" && body->getAsInteger()) {
    // serde: 1 contiguous, 2 channels last, 3 channels last 3d, 4 preserve.
    static const at::MemoryFormat formats[] = {
        at::MemoryFormat::Contiguous, at::MemoryFormat::Contiguous,
        at::MemoryFormat::ChannelsLast, at::MemoryFormat::ChannelsLast3d,
        at::MemoryFormat::Preserve};
    int64_t code = *body->getAsInteger();
    if (code < 1 || code > 4)
      fail(loc, "argument '" + schemaArg.name() + "' names a memory format (" +
                    str(*body) + ") fsdp-opt does not know");
    return AbsValue::ofConstant(static_cast<int64_t>(formats[code]));
  }
  if (kind == "as_layout" && body->getAsInteger()) {
    if (*body->getAsInteger() != 7)
      fail(loc, "argument '" + schemaArg.name() +
                    "' asks for a layout other than strided");
    return AbsValue::ofConstant(static_cast<int64_t>(at::kStrided));
  }
  if (kind == "as_device") {
    // Plans are device-neutral: the run's device is chosen at load.
    return AbsValue::ofConstant(c10::Device(c10::kCPU));
  }
  if (kind == "as_complex")
    if (const json::Object *z = body->getAsObject())
      return AbsValue::ofConstant(c10::complex<double>(
          z->getNumber("real").value_or(0), z->getNumber("imag").value_or(0)));
  fail(loc, "argument '" + schemaArg.name() + "' is a " + kind.str() +
                ", which fsdp-opt cannot import");
}

/// Shape arithmetic on values that are constants here (static shapes):
/// `aten.sym_size.int`, Python's operators on them, and the asserts that
/// check them. True if `target` is one of those.
bool ExportImporter::visitSymbolic(const json::Object &node,
                                   llvm::StringRef target, Location loc) {
  static const llvm::StringSet<> asserts = {
      "torch.ops.aten._assert_tensor_metadata.default",
      "torch.ops.aten._assert_scalar.default",
      "torch.ops.aten.sym_constrain_range_for_size.default",
      "torch.ops.aten._assert_async.msg"};
  if (asserts.contains(target))
    return true; // what they check holds for the static types
  const json::Array *inputs = node.getArray("inputs");
  const json::Array *outputs = node.getArray("outputs");
  auto bindOne = [&](c10::IValue value) {
    if (!outputs || outputs->size() != 1)
      fail(loc, target + " has no single output");
    const json::Object *out = (*outputs)[0].getAsObject();
    auto [k, b] = unionMember(out);
    const json::Object *named = b ? b->getAsObject() : nullptr;
    auto name = named ? named->getString("as_name") : std::nullopt;
    if (!name)
      name = named ? named->getString("name") : std::nullopt;
    if (!name)
      fail(loc, target + " has a malformed output");
    bind(*name, AbsValue::ofConstant(std::move(value)));
  };
  auto input = [&](size_t i) -> c10::IValue {
    const json::Object *in =
        inputs && i < inputs->size() ? (*inputs)[i].getAsObject() : nullptr;
    const json::Object *arg = in ? in->getObject("arg") : nullptr;
    if (!arg)
      fail(loc, target + " lacks argument " + std::to_string(i));
    c10::Argument any("x", c10::AnyType::get());
    auto [k, b] = unionMember(arg);
    if (k == "as_tensor") {
      const AbsValue &t = argumentValue(*arg, any, loc);
      if (!t.isTensor())
        fail(loc, target + ": argument is not a tensor of the step");
      return metaTensor(cast<RankedTensorType>(t.tensor.getType()), loc);
    }
    AbsValue a = argumentValue(*arg, any, loc);
    if (!a.isConstant())
      fail(loc, target + ": argument is not a constant");
    return a.constant;
  };
  if (target == "torch.ops.aten.sym_size.int" ||
      target == "torch.ops.aten.sym_stride.int") {
    at::Tensor t = input(0).toTensor();
    int64_t dim = c10::maybe_wrap_dim(input(1).toInt(), t.dim());
    bindOne(target.contains("size") ? t.size(dim) : t.stride(dim));
    return true;
  }
  if (target == "torch.ops.aten.sym_numel.default") {
    bindOne(input(0).toTensor().numel());
    return true;
  }
  if (!target.starts_with("_operator."))
    return false;
  llvm::StringRef op = target.drop_front(strlen("_operator."));
  c10::IValue a = input(0);
  // Python's integers do not overflow; a symbolic size beyond 64 bits is
  // no size a plan can have.
  auto overflow = [&]() -> int64_t {
    fail(loc, target + ": the result does not fit in 64 bits");
  };
  if (op == "neg" || op == "not_") {
    if (op == "not_") {
      bindOne(!a.toBool());
      return true;
    }
    int64_t negated = 0;
    if (__builtin_sub_overflow(int64_t(0), a.toInt(), &negated))
      overflow();
    bindOne(negated);
    return true;
  }
  c10::IValue b = input(1);
  if (a.isInt() && b.isInt()) {
    int64_t x = a.toInt(), y = b.toInt();
    // Python's floor division and modulo (rounding toward negative
    // infinity; the remainder takes the divisor's sign).
    auto floorDiv = [&] {
      if (y == 0)
        fail(loc, target + ": division by zero");
      if (x == std::numeric_limits<int64_t>::min() && y == -1)
        overflow();
      int64_t q = x / y;
      return (x % y != 0 && ((x < 0) != (y < 0))) ? q - 1 : q;
    };
    auto floorMod = [&] {
      if (y == 0)
        fail(loc, target + ": division by zero");
      if (y == -1)
        return int64_t(0);
      int64_t m = x % y;
      return (m != 0 && ((m < 0) != (y < 0))) ? m + y : m;
    };
    auto checked = [&](bool (*f)(int64_t, int64_t, int64_t *)) {
      int64_t out = 0;
      if (f(x, y, &out))
        overflow();
      return out;
    };
    std::optional<c10::IValue> r;
    if (op == "add")
      r = checked([](int64_t p, int64_t q, int64_t *o) {
        return __builtin_add_overflow(p, q, o);
      });
    else if (op == "sub")
      r = checked([](int64_t p, int64_t q, int64_t *o) {
        return __builtin_sub_overflow(p, q, o);
      });
    else if (op == "mul")
      r = checked([](int64_t p, int64_t q, int64_t *o) {
        return __builtin_mul_overflow(p, q, o);
      });
    else if (op == "floordiv") r = floorDiv();
    else if (op == "mod") r = floorMod();
    else if (op == "eq") r = x == y;
    else if (op == "ne") r = x != y;
    else if (op == "lt") r = x < y;
    else if (op == "le") r = x <= y;
    else if (op == "gt") r = x > y;
    else if (op == "ge") r = x >= y;
    if (r) {
      bindOne(*r);
      return true;
    }
  }
  if (a.isBool() && b.isBool() && (op == "and_" || op == "or_")) {
    bindOne(op == "and_" ? a.toBool() && b.toBool() : a.toBool() || b.toBool());
    return true;
  }
  fail(loc, target + " on " + a.tagKind() + " and " + b.tagKind() +
                " is not supported");
}

void ExportImporter::visitNode(const json::Object &node, size_t index) {
  scopes.back().index = index;
  Location loc = locationOf(node);
  auto target = node.getString("target");
  if (!target)
    fail(loc, "a node without a target");
  if (visitSymbolic(node, *target, loc) || visitRegion(node, *target, loc))
    return;
  if (!target->starts_with("torch.ops.aten."))
    fail(loc, *target + " is not an ATen operator; fsdp-opt imports ATen "
                        "operators only");
  std::optional<c10::OperatorHandle> op = atenOperator(*target);
  if (!op)
    fail(loc, *target + " is not an operator this libtorch has");
  const c10::FunctionSchema &schema = op->schema();

  // Arguments by name; the schema's defaults for those left out.
  llvm::StringMap<const json::Object *> given;
  if (const json::Array *inputs = node.getArray("inputs"))
    for (const json::Value &v : *inputs)
      if (const json::Object *in = v.getAsObject())
        if (auto argName = in->getString("name"))
          given[*argName] = in->getObject("arg");
  std::vector<AbsValue> args;
  args.reserve(schema.arguments().size());
  for (const c10::Argument &arg : schema.arguments()) {
    auto it = given.find(arg.name());
    if (it != given.end() && it->second)
      args.push_back(argumentValue(*it->second, arg, loc));
    else if (arg.default_value())
      args.push_back(AbsValue::ofConstant(*arg.default_value()));
    else
      fail(loc, *target + " is given no argument '" + arg.name() + "'");
  }
  // A Python number where the schema takes a Tensor (`x.add_(1)` records
  // add_.Tensor with other=1; eager wraps the number): the overload that
  // takes a Scalar there, as TorchScript's schema matching picks.
  if (std::optional<c10::OperatorHandle> scalar = scalarOverload(schema, args))
    return bindOutputs(node, callOp(*scalar, std::move(args), loc), loc);
  bindOutputs(node, callOp(*op, std::move(args), loc), loc);
}

/// True for a number where `arg` takes a Tensor.
static bool numberForTensor(const c10::Argument &arg, const AbsValue &value) {
  return arg.type()->kind() == c10::TypeKind::TensorType &&
         value.isConstant() &&
         (value.constant.isInt() || value.constant.isDouble() ||
          value.constant.isBool() || value.constant.isComplexDouble());
}

std::optional<c10::OperatorHandle>
ExportImporter::scalarOverload(const c10::FunctionSchema &schema,
                               const std::vector<AbsValue> &args) {
  const std::vector<c10::Argument> &params = schema.arguments();
  bool any = false;
  for (size_t i = 0; i < params.size(); ++i)
    any |= numberForTensor(params[i], args[i]);
  if (!any)
    return std::nullopt;
  for (const std::shared_ptr<torch::jit::Operator> &candidate :
       torch::jit::getAllOperatorsFor(
           c10::Symbol::fromQualString(schema.name()))) {
    const c10::FunctionSchema &other = candidate->schema();
    if (other.arguments().size() != params.size() ||
        other.returns().size() != schema.returns().size() ||
        other.is_mutable() != schema.is_mutable())
      continue;
    bool fits = true;
    for (size_t i = 0; fits && i < params.size(); ++i) {
      const c10::Argument &a = params[i], &b = other.arguments()[i];
      fits = numberForTensor(a, args[i])
                 ? b.type()->kind() == c10::TypeKind::NumberType
                 : *a.type() == *b.type();
    }
    if (!fits)
      continue;
    if (std::optional<c10::OperatorHandle> handle =
            c10::Dispatcher::singleton().findSchema(
                {other.name(), other.overload_name()}))
      return handle;
  }
  return std::nullopt;
}

/// A call on compile-time constants is computed here, as the TorchScript
/// front end does (masks built from `arange`, `zeros`, `ones_like(x)` stay
/// constants): unless it is random, reads uninitialized memory, or makes
/// a tensor too large to keep. A factory that reads only its tensor
/// input's type (`zeros_like`) runs on zeros of that type.
std::optional<std::vector<AbsValue>>
ExportImporter::foldOnConstants(const c10::OperatorHandle &op,
                                std::vector<AbsValue> &args, Location loc) {
  const c10::FunctionSchema &schema = op.schema();
  if (op.hasTag(at::Tag::nondeterministic_seeded) || !mayFold(schema))
    return std::nullopt;
  bool typeOnly = aten::hasFact(schema.name(), aten::OpFact::TypeOnlyFactory);
  Stack stack;
  for (size_t i = 0; i < args.size(); ++i) {
    const AbsValue &a = computeDtypeArgument(schema, i, args[i], loc);
    if (typeOnly && i == 0 && a.isTensor()) {
      stack.push_back(
          typeOnlyInput(cast<RankedTensorType>(a.tensor.getType()), loc));
    } else if (a.isFullyConstant()) {
      stack.push_back(toIValue(a, schema.arguments()[i].type(), false, loc));
    } else {
      return std::nullopt;
    }
  }
  // Its results' sizes first, on meta tensors: nothing is computed that
  // would not be kept.
  if (!foldFits(schema, stack, [&](Stack &s) { op.callBoxed(s); }))
    return std::nullopt;
  try {
    op.callBoxed(stack);
  } catch (const c10::Error &e) {
    fail(loc, "evaluating " + overloadName(schema) + " on constants failed: " +
                  e.what_without_backtrace());
  }
  std::vector<AbsValue> outputs;
  for (const c10::IValue &r : stack)
    outputs.push_back(r.isTensorList()
                          ? [&] {
                              std::vector<AbsValue> elements;
                              for (const at::Tensor &t : r.toTensorVector())
                                elements.push_back(AbsValue::ofConstant(t));
                              return AbsValue::ofSequence(elements, false);
                            }()
                          : AbsValue::ofConstant(r));
  return outputs;
}

/// The results of `op` on `args`: folded where they are constants, else
/// a call of the core.
std::vector<AbsValue> ExportImporter::callOp(const c10::OperatorHandle &op,
                                             std::vector<AbsValue> args,
                                             Location loc) {
  const c10::FunctionSchema &schema = op.schema();
  if (std::optional<std::vector<AbsValue>> folded =
          foldOnConstants(op, args, loc))
    return std::move(*folded);
  CallSite site{schema, overloadName(schema), loc};
  site.run = [op](Stack &stack) { op.callBoxed(stack); };
  for (size_t i = 0; i < args.size(); ++i) {
    site.args.push_back(&computeDtypeArgument(schema, i, args[i], loc));
    site.argTypes.push_back(schema.arguments()[i].type());
  }
  site.numOutputs = schema.returns().size();
  return StepBuilder::emitCall(site);
}

void ExportImporter::bindOutputs(const json::Object &node,
                                 std::vector<AbsValue> outputs, Location loc) {
  const json::Array *declared = node.getArray("outputs");
  if (!declared)
    return;
  auto nameOf = [](const json::Value &v) -> std::optional<llvm::StringRef> {
    const json::Object *o = v.getAsObject();
    return o ? o->getString("name") : std::nullopt;
  };
  for (size_t i = 0; i < declared->size() && i < outputs.size(); ++i) {
    const json::Object *out = (*declared)[i].getAsObject();
    auto [kind, body] = unionMember(out);
    if (!body || kind == "as_none")
      continue;
    if (kind == "as_tensor") {
      if (auto name = nameOf(*body))
        bind(*name, writtenNames.contains(*name)
                        ? writable(std::move(outputs[i]), loc)
                        : outputs[i]);
    } else if (kind == "as_tensors" && body->getAsArray()) {
      const json::Array &names = *body->getAsArray();
      AbsValue &list = outputs[i];
      if (list.kind != AbsValue::Kind::Sequence ||
          list.elements.size() != names.size())
        fail(loc, "the program's outputs of this call do not match its "
                  "results");
      for (size_t j = 0; j < names.size(); ++j)
        if (auto name = nameOf(names[j]))
          bind(*name, writtenNames.contains(*name)
                          ? writable(std::move(list.elements[j]), loc)
                          : list.elements[j]);
    } else {
      fail(loc, "an output of kind " + kind.str() + " is not supported");
    }
  }
}

//===----------------------------------------------------------------------===//
// Graphs and regions
//===----------------------------------------------------------------------===//

/// Records the last node that reads each value (an output: past the last).
/// A region's subgraph is read by the node that holds it.
void ExportImporter::indexUses(const json::Value &v, size_t index,
                               llvm::StringMap<size_t> &lastUse) {
  if (const json::Object *o = v.getAsObject()) {
    for (const auto &member : *o) {
      if (member.first == "as_graph") {
        // A region: what it reads from outside, computed once (walking
        // its whole body at each level made nesting quadratic).
        const json::Object *body = member.second.getAsObject();
        if (const json::Object *graph = body ? body->getObject("graph") : nullptr)
          for (const std::string &name : freeNames(*graph))
            lastUse[name] = index;
      } else if ((member.first == "name" || member.first == "as_name") &&
                 member.second.getAsString()) {
        lastUse[*member.second.getAsString()] = index;
      } else {
        indexUses(member.second, index, lastUse);
      }
    }
  } else if (const json::Array *a = v.getAsArray()) {
    for (const json::Value &e : *a)
      indexUses(e, index, lastUse);
  }
}

const std::vector<std::string> &
ExportImporter::freeNames(const json::Object &graph) {
  auto found = freeNamesOf.find(&graph);
  if (found != freeNamesOf.end())
    return found->second;
  llvm::StringMap<size_t> read;
  llvm::StringSet<> defined;
  auto define = [&](const json::Value &v) {
    llvm::StringMap<size_t> names;
    indexUses(v, 0, names);
    for (const auto &entry : names)
      defined.insert(entry.first());
  };
  if (const json::Array *inputs = graph.getArray("inputs"))
    for (const json::Value &in : *inputs)
      define(in);
  if (const json::Array *nodes = graph.getArray("nodes"))
    for (const json::Value &n : *nodes)
      if (const json::Object *node = n.getAsObject()) {
        if (const json::Value *inputs = node->get("inputs"))
          indexUses(*inputs, 0, read);
        if (const json::Value *outputs = node->get("outputs"))
          define(*outputs);
      }
  if (const json::Value *outputs = graph.get("outputs"))
    indexUses(*outputs, 0, read);
  std::vector<std::string> free;
  for (const auto &entry : read)
    if (!defined.contains(entry.first()))
      free.push_back(entry.first().str());
  std::sort(free.begin(), free.end());
  return freeNamesOf[&graph] = std::move(free);
}

/// In the walk's order, which tensors hold the step's data (user inputs,
/// parameters, buffers, random draws, and what is computed from them), which
/// are views of which, and so which constants a write of the step's data
/// reaches (its view's base). A constant written only with constants (a
/// mask built in place) stays a constant.
void ExportImporter::collectRuntimeWrites(const json::Object &graph,
                                          RuntimeWrites &w) {
  const json::Array *nodes = graph.getArray("nodes");
  if (!nodes)
    return;
  auto rootOf = [&](llvm::StringRef name) {
    auto it = w.baseOf.find(name);
    return it == w.baseOf.end() ? name.str() : it->second;
  };
  auto dynamic = [&](llvm::StringRef name) {
    if (w.dynamic.contains(name) || w.dynamic.contains(rootOf(name)))
      return true;
    auto p = placeholders.find(name);
    return p != placeholders.end() &&
           (p->second.kind == Placeholder::Kind::UserInput ||
            p->second.kind == Placeholder::Kind::Parameter ||
            p->second.kind == Placeholder::Kind::Buffer);
  };
  auto namesIn = [&](const json::Value *v) {
    llvm::StringMap<size_t> names;
    if (v)
      indexUses(*v, 0, names);
    return names;
  };
  auto tensorName = [](const json::Object *arg) -> std::optional<llvm::StringRef> {
    auto [kind, body] = unionMember(arg);
    const json::Object *tensor = body ? body->getAsObject() : nullptr;
    if (kind != "as_tensor" || !tensor)
      return std::nullopt;
    return tensor->getString("name");
  };
  for (const json::Value &n : *nodes) {
    const json::Object *node = n.getAsObject();
    if (!node)
      continue;
    const json::Array *outputs = node->getArray("outputs");
    auto markOutputs = [&] {
      if (outputs)
        for (const json::Value &out : *outputs) {
          // Tensors only: sizes are static, and a number read from data
          // is refused anyway.
          auto [kind, body] = unionMember(out.getAsObject());
          if (kind == "as_tensor" || kind == "as_tensors")
            for (const auto &name : namesIn(body))
              w.dynamic.insert(name.first());
        }
    };
    // A region: its inputs as data (their values are the node's), its
    // results data if anything it reads is.
    SmallVector<const json::Object *> regions = subgraphs(*node);
    if (!regions.empty()) {
      for (const json::Object *sub : regions) {
        for (const auto &name : namesIn(sub->get("inputs")))
          w.dynamic.insert(name.first());
        collectRuntimeWrites(*sub, w);
      }
      markOutputs();
      continue;
    }
    std::optional<c10::OperatorHandle> op =
        atenOperator(node->getString("target").value_or(""));
    if (!op) {
      if (llvm::any_of(namesIn(node->get("inputs")),
                       [&](const auto &e) { return dynamic(e.first()); }))
        markOutputs();
      continue;
    }
    const c10::FunctionSchema &schema = op->schema();
    llvm::StringMap<const json::Value *> given;
    if (const json::Array *inputs = node->getArray("inputs"))
      for (const json::Value &v : *inputs)
        if (const json::Object *in = v.getAsObject())
          if (auto argName = in->getString("name"))
            given[*argName] = in->get("arg");
    auto argumentOf = [&](size_t i) { return given.lookup(schema.arguments()[i].name()); };
    std::vector<size_t> written = writtenArguments(schema);
    bool typeOnly = aten::hasFact(schema.name(), aten::OpFact::TypeOnlyFactory);
    bool fromData = op->hasTag(at::Tag::nondeterministic_seeded);
    for (size_t i = 0; i < schema.arguments().size(); ++i)
      if (!llvm::is_contained(written, i) && !(typeOnly && i == 0))
        for (const auto &name : namesIn(argumentOf(i)))
          fromData |= dynamic(name.first());
    for (size_t i : written) {
      const json::Value *arg = argumentOf(i);
      auto target = tensorName(arg ? arg->getAsObject() : nullptr);
      if (!target || !fromData)
        continue;
      std::string root = rootOf(*target);
      w.written.insert(root);
      w.dynamic.insert(root);
      w.dynamic.insert(*target);
    }
    if (fromData)
      markOutputs();
    if (outputs)
      for (size_t i = 0; i < outputs->size(); ++i) {
        auto out = tensorName((*outputs)[i].getAsObject());
        std::optional<size_t> viewed = aliasedArgument(schema, i);
        const json::Value *arg = viewed ? argumentOf(*viewed) : nullptr;
        if (auto base = tensorName(arg ? arg->getAsObject() : nullptr); out && base)
          w.baseOf[*out] = rootOf(*base);
      }
  }
}

/// Visits the nodes of `graph` in the innermost scope, which it indexes.
void ExportImporter::visitGraph(const json::Object &graph, Location loc) {
  const json::Array *nodes = graph.getArray("nodes");
  if (!nodes)
    fail(loc, "'" + path + "': a graph without nodes");
  Scope &scope = scopes.back();
  for (size_t i = 0; i < nodes->size(); ++i)
    if (const json::Object *node = (*nodes)[i].getAsObject())
      if (const json::Value *inputs = node->get("inputs"))
        indexUses(*inputs, i, scope.lastUse);
  if (const json::Array *outputs = graph.getArray("outputs"))
    for (const json::Value &o : *outputs)
      indexUses(o, nodes->size(), scope.lastUse);

  for (size_t i = 0; i < nodes->size(); ++i) {
    const json::Object *node = (*nodes)[i].getAsObject();
    if (!node)
      fail(loc, "'" + path + "': malformed node " + std::to_string(i));
    try {
      visitNode(*node, i);
    } catch (const c10::Error &e) {
      fail(locationOf(*node), "importing " +
                                  node->getString("target").value_or("?").str() +
                                  " failed: " +
                                  firstLine(e.what_without_backtrace()));
    }
  }
  scopes.back().index = nodes->size();
}

/// The regions torch.export wraps around a grad-mode or autocast context
/// in the training IR (`with torch.no_grad():`, `torch.autocast(...,
/// enabled=False)`, LlamaRotaryEmbedding's decorators): the subgraph's
/// nodes are the step's, and a region without grad makes its results
/// constants to differentiation (`aten::detach`). An autocast region that
/// casts is refused: the graph does not hold its casts, which autocast
/// applies as each op runs. Other higher-order ops are refused by name.
bool ExportImporter::visitRegion(const json::Object &node,
                                 llvm::StringRef target, Location loc) {
  if (!target.starts_with("torch.ops.higher_order."))
    return false;
  bool gradMode = target == "torch.ops.higher_order.wrap_with_set_grad_enabled";
  bool autocast = target == "torch.ops.higher_order.wrap_with_autocast";
  if (!gradMode && !autocast)
    fail(loc, target + " is a higher-order op (control flow or a wrapped "
                       "region), which fsdp-opt cannot import; export "
                       "the model without it");
  const json::Array *inputs = node.getArray("inputs");
  // wrap_with_set_grad_enabled(enabled, graph, *args);
  // wrap_with_autocast(device_type, dtype, enabled, cache_enabled, graph,
  // *args).
  size_t enabledAt = gradMode ? 0 : 2;
  auto argOf = [&](size_t i) -> std::pair<llvm::StringRef, const json::Value *> {
    const json::Object *in =
        inputs && i < inputs->size() ? (*inputs)[i].getAsObject() : nullptr;
    return unionMember(in ? in->getObject("arg") : nullptr);
  };
  auto [enabledKind, enabledBody] = argOf(enabledAt);
  std::optional<bool> enabled =
      enabledKind == "as_bool" && enabledBody ? enabledBody->getAsBoolean()
                                              : std::nullopt;
  size_t graphAt = enabledAt + (gradMode ? 1 : 2);
  auto [graphKind, graphBody] = argOf(graphAt);
  const json::Object *wrapped =
      graphKind == "as_graph" && graphBody && graphBody->getAsObject()
          ? graphBody->getAsObject()->getObject("graph")
          : nullptr;
  const json::Array *params = wrapped ? wrapped->getArray("inputs") : nullptr;
  const json::Array *results = wrapped ? wrapped->getArray("outputs") : nullptr;
  if (!enabled || !params || !results ||
      inputs->size() != graphAt + 1 + params->size())
    fail(loc, "'" + path + "': malformed " + target + " node");
  if (autocast && *enabled)
    fail(loc, "a torch.autocast region cannot be imported: the program does "
              "not hold the casts autocast makes as each op runs; export "
              "the model without autocast and compile it with "
              "--mixed-precision (FSDP's MixedPrecision)");

  // The subgraph's inputs are the node's arguments.
  auto tensorName = [&](const json::Value &v) -> llvm::StringRef {
    auto [kind, body] = unionMember(v.getAsObject());
    const json::Object *t =
        kind == "as_tensor" && body ? body->getAsObject() : nullptr;
    std::optional<llvm::StringRef> name = t ? t->getString("name") : std::nullopt;
    if (!name)
      fail(loc, target + " takes an argument of kind " + kind.str() +
                    ", which fsdp-opt does not support");
    return *name;
  };
  for (size_t i = 0; i < params->size(); ++i) {
    const json::Object *in = (*inputs)[graphAt + 1 + i].getAsObject();
    const json::Value *arg = in ? in->get("arg") : nullptr;
    if (!arg)
      fail(loc, "'" + path + "': malformed " + target + " node");
    AbsValue value = lookup(tensorName(*arg), loc);
    bind(tensorName((*params)[i]), std::move(value));
  }
  scopes.emplace_back();
  visitGraph(*wrapped, loc);

  std::vector<AbsValue> outputs;
  static const c10::OperatorHandle detach =
      *c10::Dispatcher::singleton().findSchema({"aten::detach", ""});
  for (const json::Value &r : *results) {
    AbsValue value = lookup(tensorName(r), loc);
    if (gradMode && !*enabled && value.isTensor())
      value = std::move(callOp(detach, {value}, loc).front());
    outputs.push_back(std::move(value));
  }
  scopes.pop_back();
  bindOutputs(node, std::move(outputs), loc);
  return true;
}

//===----------------------------------------------------------------------===//
// Entry point
//===----------------------------------------------------------------------===//

void ExportImporter::importStep(const ImportOptions &options,
                                Location fileLoc) {
  const json::Object &program = readProgram(fileLoc);
  const json::Object &graphModule = *program.getObject("graph_module");
  const json::Object *graph = graphModule.getObject("graph");
  const json::Object *signature = graphModule.getObject("signature");
  const json::Array *nodes = graph ? graph->getArray("nodes") : nullptr;
  if (!graph || !signature || !nodes)
    fail(fileLoc, "'" + path + "': the program has no graph or signature");
  // What python/fsdp_export.py stored beside the program.
  StoredMetadata stored;
  std::string metadata =
      archive->readTextIfPresent(std::string("extra/") + kMetadataExtraFile);
  if (!metadata.empty())
    stored = readStoredMetadata(metadata, fileLoc);
  std::vector<std::string> &targets = stored.targets;
  std::vector<InputSpec> specs =
      withOverrides(std::move(stored.inputs), options.inputs);
  readSignature(*signature, fileLoc);

  RuntimeWrites runtimeWrites{llvm::StringSet<>(),
                              llvm::StringMap<std::string>(), writtenNames};
  collectRuntimeWrites(*graph, runtimeWrites);
  createModule(fileLoc, targets);
  declareModules(program, *nodes);
  declareState(*graph, fileLoc);

  // forward's inputs: --input (or the stored spec) where given, else the
  // type torch.export recorded.
  SmallVector<Type> types;
  std::vector<std::string> names, userInputs;
  for (const std::string &name : placeholderOrder)
    if (placeholders.find(name)->second.kind == Placeholder::Kind::UserInput)
      userInputs.push_back(name);
  std::vector<bool> used(specs.size(), false);
  std::map<std::string, int64_t> symbols;
  for (const std::string &name : userInputs) {
    auto it = llvm::find_if(specs,
                            [&](const InputSpec &s) { return s.name == name; });
    if (it != specs.end()) {
      used[it - specs.begin()] = true;
      checkInputSpec(*graph, *it, symbols, fileLoc);
      types.push_back(RankedTensorType::get(it->shape, it->elementType(context)));
    } else {
      types.push_back(tensorType(metaOf(*graph, name, fileLoc), fileLoc));
    }
    names.push_back(name);
  }
  for (size_t i = 0; i < specs.size(); ++i)
    if (auto p = placeholders.find(specs[i].name);
        !used[i] && p != placeholders.end() &&
        p->second.kind == Placeholder::Kind::ConstantInput)
      fail(fileLoc, "--input names '" + specs[i].name +
                        "', a constant input: the program was exported "
                        "with " + specs[i].name + "=" +
                        pythonText(p->second.value) + ", and takes that "
                        "value; "
                        "export it again to give another");
  for (size_t i = 0; i < specs.size(); ++i)
    if (!used[i])
      fail(fileLoc, "--input names '" + specs[i].name +
                        "', which is not an input of the program (inputs: " +
                        llvm::join(userInputs, ", ") + ")");
  std::vector<InputSpec> actual;
  for (size_t i = 0; i < names.size(); ++i) {
    auto type = cast<RankedTensorType>(types[i]);
    InputSpec spec;
    spec.name = names[i];
    spec.shape = type.getShape().vec();
    spec.dtype = "";
    llvm::raw_string_ostream os(spec.dtype);
    os << type.getElementType();
    actual.push_back(spec);
  }
  summarizeInputs(actual);
  Block *entry = &createFunction(fileLoc, types, names).getBody().front();
  for (size_t i = 0; i < names.size(); ++i)
    bind(names[i], AbsValue::ofTensor(castInput(entry->getArgument(i))));

  scopes.emplace_back();
  visitGraph(*graph, fileLoc);

  // The outputs: the user's results, and buffers' new values.
  SmallVector<Value> results;
  const json::Array *outputSpecs = signature->getArray("output_specs");
  if (!outputSpecs)
    fail(fileLoc, "'" + path + "': the graph signature has no output_specs");
  size_t userOutputs = llvm::count_if(*outputSpecs, [](const json::Value &v) {
    const json::Object *o = v.getAsObject();
    return o && o->getObject("user_output");
  });
  std::optional<size_t> loss = lossOutput(graphModule, userOutputs);
  userOutputs = 0;
  for (const json::Value &v : *outputSpecs) {
    auto [kind, object] = signatureEntry(v, "output", fileLoc);
    const json::Object *arg = object->getObject("arg");
    if (!arg)
      fail(fileLoc, "'" + path + "': malformed output spec " + str(v));
    if (kind == "user_output") {
      bool isLoss = loss && *loss == userOutputs++;
      auto [argKind, argBody] = unionMember(arg);
      if (argKind == "as_none")
        continue;
      const json::Object *tensor =
          argKind == "as_tensor" && argBody ? argBody->getAsObject() : nullptr;
      auto name = tensor ? tensor->getString("name") : std::nullopt;
      if (!name)
        fail(fileLoc, "the program returns a value that is not a tensor (" +
                          str(v) + ")");
      const AbsValue &abs = lookup(*name, fileLoc);
      Value value = tensorValue(abs, fileLoc);
      if (!value)
        fail(fileLoc, "the program returns a value that is not a tensor");
      results.insert(isLoss ? results.begin() : results.end(), value);
    } else if (kind == "buffer_mutation") {
      auto name = arg->getString("name");
      auto fqn = object->getString("buffer_name");
      if (!name || !fqn || !states.count(*fqn))
        fail(fileLoc, "'" + path + "': malformed output spec " + str(v));
      Value value = tensorValue(lookup(*name, fileLoc), fileLoc);
      current[states.lookup(*fqn).fqn] = value;
    } else {
      fail(fileLoc, "the program has a " + kind.str() +
                        " output, which fsdp-opt cannot import (export the "
                        "forward only, without mutating its inputs)");
    }
  }
  finishFunction(types, results, fileLoc);
}

/// Where the program returns a dict or a ModelOutput with a `loss` entry
/// (its output tree, `out_spec`, names it), that entry's index among the
/// `userOutputs` user outputs: the loss --loss none takes, wherever the
/// model put it.
std::optional<size_t>
ExportImporter::lossOutput(const json::Object &graphModule, size_t userOutputs) {
  const json::Array *calls = graphModule.getArray("module_call_graph");
  const json::Object *call =
      calls && !calls->empty() ? (*calls)[0].getAsObject() : nullptr;
  const json::Object *signature = call ? call->getObject("signature") : nullptr;
  std::optional<llvm::StringRef> text =
      signature ? signature->getString("out_spec") : std::nullopt;
  if (!text)
    return std::nullopt;
  std::optional<json::Value> parsed = parseEmbedded(*text);
  if (!parsed)
    return std::nullopt;
  // [version, tree]; a tree is {type, context, children_spec}, a leaf one
  // without a type.
  const json::Array *versioned = parsed->getAsArray();
  const json::Object *tree = versioned && versioned->size() == 2
                                 ? (*versioned)[1].getAsObject()
                                 : nullptr;
  std::function<size_t(const json::Object &)> leaves =
      [&](const json::Object &node) -> size_t {
    const json::Array *children = node.getArray("children_spec");
    if (!node.getString("type") || !children)
      return 1;
    size_t n = 0;
    for (const json::Value &c : *children)
      if (const json::Object *child = c.getAsObject())
        n += leaves(*child);
    return n;
  };
  const json::Array *children = tree ? tree->getArray("children_spec") : nullptr;
  std::optional<llvm::StringRef> context =
      tree ? tree->getString("context") : std::nullopt;
  if (!children || !context)
    return std::nullopt;
  std::optional<json::Value> keys = parseEmbedded(*context);
  const json::Array *names = keys ? keys->getAsArray() : nullptr;
  // The tree's leaves are the user outputs, in order.
  if (!names || names->size() != children->size() || leaves(*tree) != userOutputs)
    return std::nullopt;
  size_t index = 0;
  for (size_t i = 0; i < names->size(); ++i) {
    const json::Object *child = (*children)[i].getAsObject();
    if (!child)
      return std::nullopt;
    if ((*names)[i].getAsString() == std::optional<llvm::StringRef>("loss"))
      return leaves(*child) == 1 ? std::optional<size_t>(index) : std::nullopt;
    index += leaves(*child);
  }
  return std::nullopt;
}

OwningOpRef<ModuleOp> ExportImporter::run(const ImportOptions &options) {
  Location fileLoc = FileLineColLoc::get(context, path, 0, 0);
  context->loadDialect<aten::ATenDialect, FSDPDialect, func::FuncDialect>();
  if (failed(setComputeTypes(options, fileLoc)))
    return nullptr;
  try {
    importStep(options, fileLoc);
  } catch (const ImportFailure &) {
    if (module)
      module.erase();
    return nullptr;
  } catch (const std::exception &e) {
    emitError(fileLoc) << "import failed: " << firstLine(e.what());
    if (module)
      module.erase();
    return nullptr;
  }
  OwningOpRef<ModuleOp> result(module);
  if (failed(verify(*result)))
    return nullptr;
  return result;
}

OwningOpRef<ModuleOp> fsdp::importExportedProgram(llvm::StringRef path,
                                                  const ImportOptions &options,
                                                  MLIRContext *context) {
  return ExportImporter(context, path).run(options);
}
