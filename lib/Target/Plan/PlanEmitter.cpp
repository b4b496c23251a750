//===- PlanEmitter.cpp - the plan file, compiler side ----------------------===//

#include "fsdp/Target/Plan/PlanEmitter.h"
#include "fsdp/Target/Plan/PlanTypes.h"

#include "fsdp/Analysis/StepAnalysis.h"
#include "fsdp/Dialect/ATen/IR/ATenDialect.h"
#include "fsdp/Dialect/ATen/IR/OpTable.h"
#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"
#include "fsdp/runtime/PlanOperators.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/JSON.h"

using namespace mlir;
using namespace fsdp;
namespace json = llvm::json;

/// The plan's name of a collective group: the runtime's.
static std::string groupName(CommGroup group) {
  switch (group) {
  case CommGroup::world:
    return std::string(plan::name(plan::CommGroup::World));
  case CommGroup::shard:
    return std::string(plan::name(plan::CommGroup::Shard));
  case CommGroup::replicate:
    return std::string(plan::name(plan::CommGroup::Replicate));
  }
  llvm_unreachable("every group has a name");
}

/// The plan's name of an instruction kind: the runtime's.
static std::string kindName(plan::InstKind kind) {
  return std::string(plan::name(kind));
}

/// The element type of the state `op` (an fsdp.get or fsdp.update) names.
template <typename StateOp> static Type stateElement(StateOp op) {
  Operation *symbol =
      SymbolTable::lookupNearestSymbolFrom(op, op.getNameAttr());
  Type type;
  if (auto param = dyn_cast_or_null<ParamOp>(symbol))
    type = param.getType();
  else if (auto buffer = dyn_cast_or_null<BufferOp>(symbol))
    type = buffer.getType();
  else if (auto state = dyn_cast_or_null<OptimStateOp>(symbol))
    type = state.getType();
  else if (auto flat = dyn_cast_or_null<FlatParamOp>(symbol))
    return flat.getElementType();
  return type ? cast<ShapedType>(type).getElementType() : Type();
}

std::string fsdp::dtypeName(Type type) {
  std::optional<plan::DType> dtype = planDType(type);
  return dtype ? std::string(plan::info(*dtype).name) : std::string();
}

/// Where an op comes from, for the runtime's messages: the module path and
/// the source line (`blocks.1.attn at models.py:90:14`), or "".
static std::string describeLocation(Location loc) {
  std::string module, source;
  loc->walk([&](Location inner) {
    if (auto name = dyn_cast<NameLoc>(inner); name && module.empty())
      module = name.getName().str();
    if (auto file = dyn_cast<FileLineColLoc>(inner); file && source.empty() &&
                                                      file.getLine() > 0)
      source = (file.getFilename().getValue() + ":" + Twine(file.getLine()) +
                ":" + Twine(file.getColumn()))
                   .str();
    return WalkResult::advance();
  });
  if (module.empty())
    return source;
  return source.empty() ? module : module + " at " + source;
}

namespace {

/// Writes a step function as a plan: the state it holds, its inputs, and one
/// instruction per op, each from a function of its own (`instruction`).
class PlanWriter {
public:
  PlanWriter(ModuleOp module, func::FuncOp func) : module(module), func(func) {}
  LogicalResult run(raw_ostream &os);
  /// The function's inputs and instructions alone: the plan's `eval`
  /// program beside the training step (the same state).
  LogicalResult writeProgram(raw_ostream &os);

private:
  int64_t slot(Value value) {
    auto [it, inserted] = slots.try_emplace(value, slots.size());
    return it->second;
  }
  FailureOr<json::Value> typeJson(Operation *op, Type type);
  FailureOr<json::Value> argJson(Operation *op, Attribute arg,
                                 ValueRange operands, unsigned &next);
  /// A call's `args`, with its tensor operands' slots.
  FailureOr<json::Value> argsJson(Operation *op, ArrayAttr args,
                                  ValueRange operands);

  // The state entries, one per symbol.
  LogicalResult declareState();
  FailureOr<json::Object> entryOf(Operation *symbol, Type type,
                                  StringRef name);
  template <typename SymbolOp>
  FailureOr<json::Object> describe(SymbolOp symbol);
  template <typename SymbolOp>
  LogicalResult declare(SymbolOp symbol, StringRef kind);
  LogicalResult declareFlatParam(FlatParamOp flat);
  LogicalResult declareBuffer(BufferOp buffer);
  LogicalResult declareOptimState(OptimStateOp optim);

  // The inputs: the entry block's arguments.
  LogicalResult declareInputs(Block &body);

  // The instructions: one function per op kind.
  LogicalResult emitInstructions(Block &body);
  LogicalResult emitOp(Operation &op);
  FailureOr<json::Object> instruction(GetOp get);
  FailureOr<json::Object> instruction(UpdateOp update);
  FailureOr<json::Object> instruction(aten::ConstantOp constant);
  FailureOr<json::Object> instruction(aten::CallOp call);
  FailureOr<json::Object> instruction(aten::RngStateOp rng);
  FailureOr<json::Object> instruction(aten::SetRngStateOp set);
  FailureOr<json::Object> instruction(aten::AutogradBackwardOp backward);
  FailureOr<json::Object> instruction(AllGatherStartOp gather);
  FailureOr<json::Object> instruction(ReduceScatterStartOp scatter);
  FailureOr<json::Object> instruction(AllReduceStartOp reduce);
  FailureOr<json::Object> instruction(WaitOp wait);
  FailureOr<json::Object> instruction(LocalShardOp local);
  FailureOr<json::Object> instruction(ToDeviceOp copy);
  FailureOr<json::Object> instruction(ToHostOp copy);
  FailureOr<json::Object> instruction(FreeOp free);
  FailureOr<json::Object> instruction(ViewOp view);
  FailureOr<json::Object> typedInstruction(Operation *op, Type type,
                                           plan::InstKind kind);
  FailureOr<json::Object> copyInstruction(Operation *op, plan::InstKind kind);
  void releaseAfter(Operation &op, json::Object &inst);

  // The file.
  void writeHeader(raw_ostream &os);
  LogicalResult writeSettings(raw_ostream &os);
  void writeEntries(raw_ostream &os);

  ModuleOp module;
  func::FuncOp func;
  llvm::DenseMap<Value, int64_t> slots;
  json::Array state, inputs, instructions, outputs;
  int64_t microBatches = 1;
  /// Each slot is released after the instruction that uses it last.
  llvm::DenseMap<Value, Operation *> lastUse;
  /// CPU offload: the step's values in host memory.
  llvm::DenseSet<Value> host;
  /// Whether the evaluation step was written.
  LogicalResult evalResult = success();
};

} // namespace

FailureOr<json::Value> PlanWriter::typeJson(Operation *op, Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape())
    return op->emitOpError("has a value of type ")
           << type << ", which a plan cannot hold";
  std::string dtype = dtypeName(tensor.getElementType());
  if (dtype.empty())
    return op->emitOpError("has element type ")
           << tensor.getElementType() << ", which a plan cannot hold";
  json::Array shape;
  for (int64_t d : tensor.getShape())
    shape.push_back(d);
  return json::Value(json::Object{{"shape", std::move(shape)}, {"dtype", dtype}});
}

/// A float in a plan: a number, or "nan", "inf", "-inf" (JSON has none).
static json::Value floatJson(double v) {
  if (std::isnan(v))
    return "nan";
  if (std::isinf(v))
    return v > 0 ? "inf" : "-inf";
  return v;
}

/// One schema argument (docs/plan-format.md, "Arguments").
/// The written arguments of a call (`mutates`), by schema position.
static json::Array mutatesJson(std::optional<ArrayRef<int64_t>> mutates) {
  json::Array out;
  if (mutates)
    for (int64_t arg : *mutates)
      out.push_back(arg);
  return out;
}

FailureOr<json::Value> PlanWriter::argsJson(Operation *op, ArrayAttr args,
                                            ValueRange operands) {
  json::Array out;
  unsigned next = 0;
  for (Attribute arg : args) {
    FailureOr<json::Value> a = argJson(op, arg, operands, next);
    if (failed(a))
      return failure();
    out.push_back(std::move(*a));
  }
  return json::Value(std::move(out));
}

FailureOr<json::Value> PlanWriter::argJson(Operation *op, Attribute arg,
                                           ValueRange operands,
                                           unsigned &next) {
  if (isa<aten::TensorArgAttr>(arg))
    return json::Value(json::Object{{"t", slot(operands[next++])}});
  if (auto list = dyn_cast<aten::TensorListArgAttr>(arg)) {
    json::Array slotsJson;
    for (int64_t i = 0; i < list.getSize(); ++i)
      slotsJson.push_back(slot(operands[next++]));
    return json::Value(json::Object{{"tl", std::move(slotsJson)}});
  }
  if (isa<aten::NoneAttr>(arg))
    return json::Value(json::Object{{"none", true}});
  if (auto b = dyn_cast<BoolAttr>(arg))
    return json::Value(json::Object{{"b", b.getValue()}});
  if (auto i = dyn_cast<IntegerAttr>(arg))
    return json::Value(json::Object{{"i", i.getValue().getSExtValue()}});
  if (auto f = dyn_cast<FloatAttr>(arg))
    return json::Value(json::Object{{"f", floatJson(f.getValueAsDouble())}});
  if (auto z = dyn_cast<aten::ComplexAttr>(arg))
    return json::Value(json::Object{
        {"c", json::Array{floatJson(z.getReal().getValueAsDouble()),
                          floatJson(z.getImag().getValueAsDouble())}}});
  if (auto s = dyn_cast<StringAttr>(arg))
    return json::Value(json::Object{{"s", s.getValue()}});
  if (auto t = dyn_cast<TypeAttr>(arg)) {
    std::string dtype = dtypeName(t.getValue());
    if (dtype.empty())
      return op->emitOpError("has dtype argument ")
             << t.getValue() << ", which a plan cannot hold";
    return json::Value(json::Object{{"dtype", dtype}});
  }
  if (auto array = dyn_cast<ArrayAttr>(arg)) {
    // A Tensor?[] holds slots and None; other lists hold scalars.
    bool optionalTensors = llvm::any_of(array, [](Attribute a) {
      return isa<aten::TensorArgAttr>(a);
    });
    json::Array elements;
    for (Attribute element : array) {
      if (optionalTensors) {
        if (isa<aten::TensorArgAttr>(element))
          elements.push_back(slot(operands[next++]));
        else
          elements.push_back(nullptr);
        continue;
      }
      FailureOr<json::Value> e = argJson(op, element, operands, next);
      if (failed(e))
        return failure();
      elements.push_back(std::move(*e));
    }
    return json::Value(
        json::Object{{optionalTensors ? "otl" : "l", std::move(elements)}});
  }
  return op->emitOpError("has argument ")
         << arg << ", which a plan cannot hold";
}


//===----------------------------------------------------------------------===//
// State
//===----------------------------------------------------------------------===//

LogicalResult PlanWriter::declareState() {
  llvm::DenseSet<StringAttr> flatMembers;
  for (FlatParamOp flat : module.getOps<FlatParamOp>())
    for (Attribute ref : flat.getParams())
      flatMembers.insert(cast<FlatSymbolRefAttr>(ref).getAttr());
  for (Operation &op : module.getBody()->getOperations()) {
    // A flat parameter's member lives in it, not as state of its own.
    if (auto param = dyn_cast<ParamOp>(op);
        param && flatMembers.contains(param.getSymNameAttr()))
      continue;
    LogicalResult declared =
        llvm::TypeSwitch<Operation *, LogicalResult>(&op)
            .Case([&](ParamOp param) { return declare(param, "param"); })
            .Case([&](FlatParamOp flat) { return declareFlatParam(flat); })
            .Case([&](BufferOp buffer) { return declareBuffer(buffer); })
            .Case([&](OptimStateOp optim) { return declareOptimState(optim); })
            .Default([](Operation *) { return success(); });
    if (failed(declared))
      return failure();
    // CPU offload: state that lives in host memory.
    if (op.hasAttr(kHostAttr) && !state.empty())
      (*state.back().getAsObject())["host"] = true;
  }
  return success();
}

/// Every entry: its type and name.
FailureOr<json::Object> PlanWriter::entryOf(Operation *symbol, Type type,
                                            StringRef name) {
  FailureOr<json::Value> typed = typeJson(symbol, type);
  if (failed(typed))
    return failure();
  json::Object entry = std::move(*typed->getAsObject());
  entry["name"] = name;
  return entry;
}

/// A parameter or buffer: also its module and aliases.
template <typename SymbolOp>
FailureOr<json::Object> PlanWriter::describe(SymbolOp symbol) {
  FailureOr<json::Object> entry =
      entryOf(symbol, symbol.getType(), symbol.getSymName());
  if (failed(entry))
    return failure();
  (*entry)["module"] = symbol.getModulePath();
  (*entry)["class"] = symbol.getModuleClass();
  json::Array aliases;
  if (auto a = symbol.getAliases())
    for (Attribute alias : *a)
      aliases.push_back(cast<StringAttr>(alias).getValue());
  (*entry)["aliases"] = std::move(aliases);
  return entry;
}

template <typename SymbolOp>
LogicalResult PlanWriter::declare(SymbolOp symbol, StringRef kind) {
  FailureOr<json::Object> entry = describe(symbol);
  if (failed(entry))
    return failure();
  (*entry)["kind"] = kind;
  state.push_back(std::move(*entry));
  return success();
}

/// A rank holds its shard (or, replicated, the whole padded buffer); the
/// members say where each parameter lies in the full flat buffer.
LogicalResult PlanWriter::declareFlatParam(FlatParamOp flat) {
  FailureOr<json::Object> flatEntry =
      entryOf(flat, flat.getStateType(), flat.getSymName());
  if (failed(flatEntry))
    return failure();
  json::Object &entry = *flatEntry;
  entry["kind"] = "flat_param";
  entry["module"] = flat.getModulePath();
  entry["numel"] = int64_t(flat.getNumel());
  entry["padded"] = int64_t(flat.getPaddedNumel());
  entry["shards"] = int64_t(flat.getShardGroupSize());
  entry["replicated"] = flat.getReplicated();
  json::Array members;
  for (auto [ref, offset] : llvm::zip(flat.getParams(), flat.getOffsets())) {
    auto param =
        module.lookupSymbol<ParamOp>(cast<FlatSymbolRefAttr>(ref).getAttr());
    FailureOr<json::Object> member = describe(param);
    if (failed(member))
      return failure();
    (*member)["offset"] = offset;
    members.push_back(std::move(*member));
  }
  entry["params"] = std::move(members);
  entry["aliases"] = json::Array();
  state.push_back(std::move(entry));
  return success();
}

LogicalResult PlanWriter::declareBuffer(BufferOp buffer) {
  if (failed(declare(buffer, "buffer")))
    return failure();
  if (buffer.getNonPersistent())
    (*state.back().getAsObject())["persistent"] = false;
  return success();
}

/// Optimizer state starts at zero (the runner's learning rate at lr); it is
/// not in the model file.
LogicalResult PlanWriter::declareOptimState(OptimStateOp optim) {
  FailureOr<json::Object> optimEntry =
      entryOf(optim, optim.getType(), optim.getSymName());
  if (failed(optimEntry))
    return failure();
  json::Object &entry = *optimEntry;
  entry["kind"] = "optim";
  entry["param"] = optim.getParam() ? json::Value(*optim.getParam())
                                    : json::Value(nullptr);
  // The learning rate the runner sets starts at the optimizer's lr.
  entry["init"] = optim.getSymName() == llvm::StringRef(plan::kStateLr.data(),
                                                        plan::kStateLr.size())
                      ? "lr"
                      : "zeros";
  entry["aliases"] = json::Array();
  state.push_back(std::move(entry));
  return success();
}

//===----------------------------------------------------------------------===//
// Inputs
//===----------------------------------------------------------------------===//

LogicalResult PlanWriter::declareInputs(Block &body) {
  for (BlockArgument arg : body.getArguments()) {
    FailureOr<json::Value> type = typeJson(func, arg.getType());
    if (failed(type))
      return failure();
    json::Object entry = std::move(*type->getAsObject());
    auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), kNameAttr);
    entry["name"] = name ? name.getValue().str()
                         : "arg" + std::to_string(arg.getArgNumber());
    entry["slot"] = slot(arg);
    // Gradient accumulation: the micro-batch the input feeds (written only
    // when the step has more than one).
    if (auto micro = func.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(),
                                                        kMicroBatchAttr)) {
      microBatches = std::max(microBatches, micro.getInt() + 1);
      entry["micro_batch"] = micro.getInt();
    }
    inputs.push_back(std::move(entry));
  }
  if (microBatches == 1)
    for (json::Value &entry : inputs)
      entry.getAsObject()->erase("micro_batch");
  return success();
}

//===----------------------------------------------------------------------===//
// Instructions
//===----------------------------------------------------------------------===//

LogicalResult PlanWriter::emitInstructions(Block &body) {
  for (Operation &op : body)
    for (Value operand : op.getOperands())
      lastUse[operand] = &op;
  host = hostValues(body);
  for (Operation &op : body) {
    // The terminator is no instruction: it names the outputs.
    if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (Value v : ret.getOperands())
        outputs.push_back(slot(v));
      continue;
    }
    if (failed(emitOp(op)))
      return failure();
  }
  return success();
}

LogicalResult PlanWriter::emitOp(Operation &op) {
  FailureOr<json::Object> inst =
      llvm::TypeSwitch<Operation *, FailureOr<json::Object>>(&op)
          .Case<GetOp, UpdateOp, aten::ConstantOp, aten::CallOp,
                aten::RngStateOp, aten::SetRngStateOp,
                aten::AutogradBackwardOp, AllGatherStartOp,
                ReduceScatterStartOp, AllReduceStartOp, WaitOp, LocalShardOp,
                ToDeviceOp, ToHostOp, FreeOp, ViewOp>(
              [&](auto kindOp) { return instruction(kindOp); })
          .Default([](Operation *other) -> FailureOr<json::Object> {
            return other->emitOpError("cannot be emitted into a plan yet");
          });
  if (failed(inst))
    return failure();
  releaseAfter(op, *inst);
  instructions.push_back(std::move(*inst));
  return success();
}

/// The slots freed after `op` (`free`), and where its results live.
void PlanWriter::releaseAfter(Operation &op, json::Object &inst) {
  Operation *terminator = func.getBody().front().getTerminator();
  json::Array free;
  llvm::SmallPtrSet<Value, 4> seen;
  for (Value operand : op.getOperands())
    if (lastUse.lookup(operand) == &op && seen.insert(operand).second &&
        !llvm::is_contained(terminator->getOperands(), operand))
      free.push_back(slot(operand));
  // Results nobody reads are released at once.
  for (Value result : op.getResults())
    if (result.use_empty())
      free.push_back(slot(result));
  inst["free"] = std::move(free);
  // CPU offload: an instruction whose results are in host memory says so.
  if (op.getNumResults() > 0 && host.contains(op.getResult(0)))
    inst["host"] = true;
}

/// An instruction that states its result's type (`shape`, `dtype`).
FailureOr<json::Object> PlanWriter::typedInstruction(Operation *op, Type type,
                                                     plan::InstKind kind) {
  FailureOr<json::Value> typed = typeJson(op, type);
  if (failed(typed))
    return failure();
  json::Object inst = std::move(*typed->getAsObject());
  inst["kind"] = kindName(kind);
  return inst;
}

FailureOr<json::Object> PlanWriter::instruction(GetOp get) {
  json::Object inst;
  inst["kind"] = kindName(plan::InstKind::Get);
  inst["state"] = get.getName();
  inst["result"] = slot(get.getResult());
  // Mixed precision: a read rounded to the compute type.
  if (Type elem = get.getType().getElementType(); elem != stateElement(get))
    inst["dtype"] = dtypeName(elem);
  return inst;
}

FailureOr<json::Object> PlanWriter::instruction(UpdateOp update) {
  json::Object inst;
  inst["kind"] = kindName(plan::InstKind::Update);
  inst["state"] = update.getName();
  inst["value"] = slot(update.getValue());
  // Mixed precision: a value in the compute type, widened.
  if (Type elem = update.getValue().getType().getElementType();
      elem != stateElement(update))
    inst["dtype"] = dtypeName(elem);
  return inst;
}

FailureOr<json::Object> PlanWriter::instruction(aten::ConstantOp constant) {
  auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
  FailureOr<json::Value> type = typeJson(constant, constant.getType());
  if (!dense || failed(type))
    return constant.emitOpError(
        "needs a dense value to become a plan constant");
  json::Object inst = std::move(*type->getAsObject());
  inst["kind"] = kindName(plan::InstKind::Constant);
  // Raw little-endian bytes, one element after another (booleans one
  // byte each), so that every value, -inf included, is exact.
  std::string bytes;
  auto tensorType = cast<RankedTensorType>(constant.getType());
  if (tensorType.getElementType().isInteger(1)) {
    for (bool b : dense.getValues<bool>())
      bytes.push_back(b ? 1 : 0);
  } else if (dense.isSplat()) {
    ArrayRef<char> one = dense.getRawData();
    for (int64_t i = 0; i < tensorType.getNumElements(); ++i)
      bytes.append(one.begin(), one.end());
  } else {
    bytes.assign(dense.getRawData().begin(), dense.getRawData().end());
  }
  inst["hex"] = llvm::toHex(bytes, /*LowerCase=*/true);
  inst["result"] = slot(constant.getResult());
  return inst;
}

/// fsdp-run calls only the operators of PlanOperators.def: a plan that
/// calls another is refused here, at the model's line.
static LogicalResult checkPlanOperator(Operation *op, llvm::StringRef overload) {
  if (fsdp::runtime::isPlanOperator(std::string_view(overload.data(),
                                                     overload.size())))
    return success();
  return op->emitOpError()
         << overload
         << " is not an operator fsdp-run runs from a plan (its kernel "
            "trusts its arguments, or it is not an ATen operator): rewrite "
            "the model without it";
}

FailureOr<json::Object> PlanWriter::instruction(aten::CallOp call) {
  if (failed(checkPlanOperator(call, call.getOverload())))
    return failure();
  json::Object inst;
  inst["kind"] = kindName(plan::InstKind::Call);
  inst["op"] = call.getOverload();
  if (std::string where = describeLocation(call.getLoc()); !where.empty())
    inst["loc"] = where;
  FailureOr<json::Value> args =
      argsJson(call, call.getArgs(), call.getOperands());
  if (failed(args))
    return failure();
  inst["args"] = std::move(*args);
  json::Array results;
  for (Value result : call.getResults()) {
    if (failed(typeJson(call, result.getType())))
      return failure();
    results.push_back(slot(result));
  }
  inst["results"] = std::move(results);
  inst["num_schema_results"] = int64_t(call.getNumSchemaResults());
  inst["mutates"] = mutatesJson(call.getMutates());
  inst["list_result"] = call.getListResult();
  if (auto marked =
          call->getAttrOfType<DenseI64ArrayAttr>(aten::kRequiresGradAttr))
    inst["requires_grad"] = json::Array(llvm::map_range(
        marked.asArrayRef(), [](int64_t i) { return json::Value(i); }));
  return inst;
}

FailureOr<json::Object> PlanWriter::instruction(aten::RngStateOp rng) {
  if (failed(typeJson(rng, rng.getType())))
    return failure();
  json::Object inst;
  inst["kind"] = kindName(plan::InstKind::RngState);
  inst["result"] = slot(rng.getState());
  return inst;
}

FailureOr<json::Object> PlanWriter::instruction(aten::SetRngStateOp set) {
  json::Object inst;
  inst["kind"] = kindName(plan::InstKind::SetRngState);
  inst["state"] = slot(set.getState());
  return inst;
}

FailureOr<json::Object>
PlanWriter::instruction(aten::AutogradBackwardOp backward) {
  if (failed(checkPlanOperator(backward, backward.getOverload())))
    return failure();
  json::Object inst;
  inst["kind"] = kindName(plan::InstKind::AutogradBackward);
  inst["op"] = backward.getOverload();
  if (std::string where = describeLocation(backward.getLoc()); !where.empty())
    inst["loc"] = where;
  FailureOr<json::Value> args =
      argsJson(backward, backward.getArgs(), backward.getInputs());
  if (failed(args))
    return failure();
  inst["args"] = std::move(*args);
  inst["num_schema_results"] = backward.getNumForwardResults();
  inst["list_result"] = backward.getListResult();
  inst["mutates"] = mutatesJson(backward.getMutates());
  json::Array grads;
  for (auto [r, g] :
       llvm::zip(backward.getGradResults(), backward.getResultGrads()))
    grads.push_back(json::Object{{"result", r}, {"grad", slot(g)}});
  inst["grads"] = std::move(grads);
  if (Value state = backward.getRngState())
    inst["rng"] = slot(state);
  json::Array wrt, results;
  for (auto [index, grad] : llvm::zip(backward.getWrt(), backward.getGrads())) {
    if (failed(typeJson(backward, grad.getType())))
      return failure();
    wrt.push_back(index);
    results.push_back(slot(grad));
  }
  inst["wrt"] = std::move(wrt);
  inst["results"] = std::move(results);
  return inst;
}

FailureOr<json::Object> PlanWriter::instruction(AllGatherStartOp gather) {
  json::Object inst;
  inst["kind"] = kindName(plan::InstKind::AllGather);
  inst["unit"] = gather.getUnit();
  inst["group"] = groupName(gather.getGroup());
  inst["input"] = slot(gather.getShard());
  inst["result"] = slot(gather.getFuture());
  return inst;
}

FailureOr<json::Object> PlanWriter::instruction(ReduceScatterStartOp scatter) {
  json::Object inst;
  inst["kind"] = kindName(plan::InstKind::ReduceScatter);
  inst["unit"] = scatter.getUnit();
  inst["group"] = groupName(scatter.getGroup());
  if (std::optional<CommGroup> across = scatter.getAcross())
    inst["across"] = groupName(*across);
  inst["reduce"] = stringifyReduceOp(scatter.getReduce());
  inst["input"] = slot(scatter.getInput());
  inst["result"] = slot(scatter.getFuture());
  return inst;
}

FailureOr<json::Object> PlanWriter::instruction(AllReduceStartOp reduce) {
  json::Object inst;
  inst["kind"] = kindName(plan::InstKind::AllReduce);
  inst["group"] = groupName(reduce.getGroup());
  inst["reduce"] = stringifyReduceOp(reduce.getReduce());
  inst["input"] = slot(reduce.getInput());
  inst["result"] = slot(reduce.getFuture());
  return inst;
}

FailureOr<json::Object> PlanWriter::instruction(WaitOp wait) {
  FailureOr<json::Object> inst =
      typedInstruction(wait, wait.getType(), plan::InstKind::Wait);
  if (failed(inst))
    return failure();
  (*inst)["future"] = slot(wait.getFuture());
  (*inst)["result"] = slot(wait.getResult());
  // fsdp-shard's word: a parameter's reduced gradient.
  if (wait->hasAttr(kReducedGradAttr))
    (*inst)["gradient"] = true;
  return inst;
}

FailureOr<json::Object> PlanWriter::instruction(LocalShardOp local) {
  FailureOr<json::Object> inst =
      typedInstruction(local, local.getType(), plan::InstKind::LocalShard);
  if (failed(inst))
    return failure();
  (*inst)["unit"] = local.getUnit();
  (*inst)["group"] = groupName(local.getGroup());
  (*inst)["buffer"] = slot(local.getBuffer());
  (*inst)["result"] = slot(local.getResult());
  return inst;
}

/// CPU offload: a copy into the other memory.
FailureOr<json::Object> PlanWriter::copyInstruction(Operation *op,
                                                    plan::InstKind kind) {
  json::Object inst;
  inst["kind"] = kindName(kind);
  inst["input"] = slot(op->getOperand(0));
  inst["result"] = slot(op->getResult(0));
  return inst;
}

FailureOr<json::Object> PlanWriter::instruction(ToDeviceOp copy) {
  return copyInstruction(copy, plan::InstKind::ToDevice);
}

FailureOr<json::Object> PlanWriter::instruction(ToHostOp copy) {
  return copyInstruction(copy, plan::InstKind::ToHost);
}

FailureOr<json::Object> PlanWriter::instruction(FreeOp free) {
  json::Object inst;
  inst["kind"] = kindName(plan::InstKind::Free);
  inst["buffer"] = slot(free.getBuffer());
  return inst;
}

FailureOr<json::Object> PlanWriter::instruction(ViewOp view) {
  FailureOr<json::Object> inst =
      typedInstruction(view, view.getType(), plan::InstKind::View);
  if (failed(inst))
    return failure();
  (*inst)["buffer"] = slot(view.getBuffer());
  (*inst)["offset"] = int64_t(view.getOffset());
  (*inst)["result"] = slot(view.getResult());
  return inst;
}

//===----------------------------------------------------------------------===//
// The file
//===----------------------------------------------------------------------===//

/// One entry per line: a person can read and diff a plan.
static void writeLines(raw_ostream &os, StringRef key, json::Array &items,
                       bool last) {
  os << "  \"" << key << "\": [";
  for (size_t i = 0; i < items.size(); ++i)
    os << (i ? ",\n    " : "\n    ") << items[i];
  os << (items.empty() ? "]" : "\n  ]") << (last ? "\n" : ",\n");
}

void PlanWriter::writeHeader(raw_ostream &os) {
  os << "{\n  \"format\": \"fsdp-plan\",\n  \"version\": " << kPlanFormatVersion
     << ",\n  \"function\": " << json::Value(func.getSymName())
     << ",\n  \"num_slots\": " << slots.size() << ",\n";
  // How many ranks run the plan, and how they shard (1 and "" unsharded).
  auto world = module->getAttrOfType<IntegerAttr>(kWorldSizeAttr);
  auto group = module->getAttrOfType<IntegerAttr>(kShardGroupSizeAttr);
  auto sharding = module->getAttrOfType<ShardingStrategyAttr>(kShardingAttr);
  os << "  \"world_size\": " << (world ? world.getInt() : 1)
     << ",\n  \"shard_group_size\": " << (group ? group.getInt() : 1)
     << ",\n  \"sharding\": "
     << json::Value(sharding ? stringifyShardingStrategy(sharding.getValue())
                             : StringRef())
     << ",\n";
  // Compiled for a GPU: the step computes as eager PyTorch does there.
  if (auto device = module->getAttrOfType<StringAttr>(kDeviceAttr))
    os << "  \"device\": " << json::Value(device.getValue()) << ",\n";
  if (microBatches > 1)
    os << "  \"micro_batches\": " << microBatches << ",\n";
  if (auto type = module->getAttrOfType<StringAttr>(kStateDictTypeAttr))
    os << "  \"state_dict_type\": " << json::Value(type.getValue()) << ",\n";
}

/// The optimizer's torch.optim settings and the gradient scaler's (for
/// checkpoints in their formats).
LogicalResult PlanWriter::writeSettings(raw_ostream &os) {
  for (auto [attrName, key] : {std::pair(kOptimizerAttr, "optimizer"),
                               std::pair(kGradScalerAttr, "grad_scaler")}) {
    auto settings = module->getAttrOfType<DictionaryAttr>(attrName);
    if (!settings)
      continue;
    json::Object group;
    for (NamedAttribute field : settings) {
      Attribute v = field.getValue();
      if (auto s = dyn_cast<StringAttr>(v))
        group[field.getName().getValue()] = s.getValue();
      else if (auto f = dyn_cast<FloatAttr>(v))
        group[field.getName().getValue()] = f.getValueAsDouble();
      else if (auto b = dyn_cast<BoolAttr>(v))
        group[field.getName().getValue()] = b.getValue();
      else if (auto i = dyn_cast<IntegerAttr>(v))
        group[field.getName().getValue()] = i.getInt();
      else if (auto a = dyn_cast<DenseF64ArrayAttr>(v)) {
        json::Array values;
        for (double x : a.asArrayRef())
          values.push_back(x);
        group[field.getName().getValue()] = std::move(values);
      } else
        return module.emitError("unexpected value in ")
               << attrName << ": " << v;
    }
    os << "  \"" << key << "\": " << json::Value(std::move(group)) << ",\n";
  }
  return success();
}

void PlanWriter::writeEntries(raw_ostream &os) {
  writeLines(os, "state", state, false);
  writeLines(os, "inputs", inputs, false);
  os << "  \"outputs\": " << json::Value(std::move(outputs)) << ",\n";
  // Outputs that are per-step metrics (the scheduled learning rate), by
  // name; absent when there are none.
  json::Array metrics;
  for (unsigned i = 0; i < func.getNumResults(); ++i)
    if (auto name = func.getResultAttrOfType<StringAttr>(i, kMetricAttr))
      metrics.push_back(
          json::Object{{"name", name.getValue()}, {"output", int64_t(i)}});
  if (!metrics.empty())
    os << "  \"metrics\": " << json::Value(std::move(metrics)) << ",\n";
  // The evaluation step: a program of its own over the same state; or
  // why the step has none.
  auto eval = module.lookupSymbol<func::FuncOp>(kEvalStepName);
  auto noEval = module->getAttrOfType<StringAttr>(kNoEvalStepAttr);
  bool more = func.getSymName() == "train_step" && (eval || noEval);
  writeLines(os, "instructions", instructions, !more);
  if (more && noEval)
    os << "  \"no_eval\": " << json::Value(noEval.getValue()) << "\n";
  if (more && eval)
    evalResult = PlanWriter(module, eval).writeProgram(os);
  os << "}\n";
}

LogicalResult PlanWriter::writeProgram(raw_ostream &os) {
  if (!func.getBody().hasOneBlock())
    return func.emitOpError("must be a single block to become a plan");
  Block &body = func.getBody().front();
  if (failed(declareInputs(body)) || failed(emitInstructions(body)))
    return failure();
  os << "  \"eval\": {\n  \"function\": " << json::Value(func.getSymName())
     << ",\n  \"num_slots\": " << slots.size() << ",\n";
  writeLines(os, "inputs", inputs, false);
  os << "  \"outputs\": " << json::Value(std::move(outputs)) << ",\n";
  writeLines(os, "instructions", instructions, true);
  os << "  }\n";
  return success();
}

LogicalResult PlanWriter::run(raw_ostream &os) {
  if (failed(declareState()))
    return failure();
  if (!func.getBody().hasOneBlock())
    return func.emitOpError("must be a single block to become a plan");
  Block &body = func.getBody().front();
  if (failed(declareInputs(body)) || failed(emitInstructions(body)))
    return failure();
  writeHeader(os);
  if (failed(writeSettings(os)))
    return failure();
  writeEntries(os);
  return evalResult;
}

LogicalResult fsdp::emitPlan(ModuleOp module, StringRef entry,
                             raw_ostream &os) {
  auto func = module.lookupSymbol<func::FuncOp>(entry);
  if (!func)
    return module.emitError("no function @") << entry << " to emit as a plan";
  return PlanWriter(module, func).run(os);
}
