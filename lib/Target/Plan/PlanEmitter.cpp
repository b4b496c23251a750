//===- PlanEmitter.cpp - the plan file, compiler side ----------------------===//

#include "fsdp/Target/Plan/PlanEmitter.h"
#include "fsdp/Target/Plan/PlanTypes.h"

#include "fsdp/Analysis/StepAnalysis.h"
#include "fsdp/Dialect/ATen/IR/ATenDialect.h"
#include "fsdp/Dialect/ATen/IR/OpTable.h"
#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringExtras.h"
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

class PlanWriter {
public:
  LogicalResult run(ModuleOp module, func::FuncOp func, raw_ostream &os);

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

  llvm::DenseMap<Value, int64_t> slots;
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
  if (auto f = dyn_cast<FloatAttr>(arg)) {
    double v = f.getValueAsDouble();
    if (std::isnan(v))
      return json::Value(json::Object{{"f", "nan"}});
    if (std::isinf(v))
      return json::Value(json::Object{{"f", v > 0 ? "inf" : "-inf"}});
    return json::Value(json::Object{{"f", v}});
  }
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

LogicalResult PlanWriter::run(ModuleOp module, func::FuncOp func,
                              raw_ostream &os) {
  json::Array state;
  llvm::DenseSet<StringAttr> flatMembers;
  for (FlatParamOp flat : module.getOps<FlatParamOp>())
    for (Attribute ref : flat.getParams())
      flatMembers.insert(cast<FlatSymbolRefAttr>(ref).getAttr());
  for (Operation &op : module.getBody()->getOperations()) {
    // Every entry: its type and name.
    auto entryOf = [&](Operation *symbol, Type type,
                       StringRef name) -> FailureOr<json::Object> {
      FailureOr<json::Value> typed = typeJson(symbol, type);
      if (failed(typed))
        return failure();
      json::Object entry = std::move(*typed->getAsObject());
      entry["name"] = name;
      return entry;
    };
    // A parameter or buffer: also its module and aliases.
    auto describe = [&](auto symbol) -> FailureOr<json::Object> {
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
    };
    auto declare = [&](auto symbol, StringRef kind) -> LogicalResult {
      FailureOr<json::Object> entry = describe(symbol);
      if (failed(entry))
        return failure();
      (*entry)["kind"] = kind;
      state.push_back(std::move(*entry));
      return success();
    };
    if (auto param = dyn_cast<ParamOp>(op)) {
      // A flat parameter's member lives in it, not as state of its own.
      if (flatMembers.contains(param.getSymNameAttr()))
        continue;
      if (failed(declare(param, "param")))
        return failure();
    } else if (auto flat = dyn_cast<FlatParamOp>(op)) {
      // A rank holds its shard (or, replicated, the whole padded buffer);
      // the members say where each parameter lies in the full flat buffer.
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
        auto param = module.lookupSymbol<ParamOp>(
            cast<FlatSymbolRefAttr>(ref).getAttr());
        FailureOr<json::Object> member = describe(param);
        if (failed(member))
          return failure();
        (*member)["offset"] = offset;
        members.push_back(std::move(*member));
      }
      entry["params"] = std::move(members);
      entry["aliases"] = json::Array();
      state.push_back(std::move(entry));
    } else if (auto buffer = dyn_cast<BufferOp>(op)) {
      if (failed(declare(buffer, "buffer")))
        return failure();
      if (buffer.getNonPersistent())
        (*state.back().getAsObject())["persistent"] = false;
    } else if (auto optim = dyn_cast<OptimStateOp>(op)) {
      // Optimizer state starts at zero; it is not in the model file.
      FailureOr<json::Object> optimEntry =
          entryOf(optim, optim.getType(), optim.getSymName());
      if (failed(optimEntry))
        return failure();
      json::Object &entry = *optimEntry;
      entry["kind"] = "optim";
      entry["param"] = optim.getParam() ? json::Value(*optim.getParam())
                                        : json::Value(nullptr);
      entry["init"] = "zeros";
      entry["aliases"] = json::Array();
      state.push_back(std::move(entry));
    }
    // CPU offload: state that lives in host memory.
    if (op.hasAttr(kHostAttr) && !state.empty())
      (*state.back().getAsObject())["host"] = true;
  }

  if (!func.getBody().hasOneBlock())
    return func.emitOpError("must be a single block to become a plan");
  Block &body = func.getBody().front();
  json::Array inputs;
  int64_t microBatches = 1;
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

  // Each slot is released after the instruction that uses it last.
  llvm::DenseMap<Value, Operation *> lastUse;
  for (Operation &op : body)
    for (Value operand : op.getOperands())
      lastUse[operand] = &op;

  json::Array instructions;
  json::Array outputs;
  llvm::DenseSet<Value> host = hostValues(body);
  for (Operation &op : body) {
    json::Object inst;
    if (auto get = dyn_cast<GetOp>(op)) {
      inst["kind"] = kindName(plan::InstKind::Get);
      inst["state"] = get.getName();
      inst["result"] = slot(get.getResult());
      // Mixed precision: a read rounded to the compute type.
      if (Type elem = get.getType().getElementType(); elem != stateElement(get))
        inst["dtype"] = dtypeName(elem);
    } else if (auto update = dyn_cast<UpdateOp>(op)) {
      inst["kind"] = kindName(plan::InstKind::Update);
      inst["state"] = update.getName();
      inst["value"] = slot(update.getValue());
      // Mixed precision: a value in the compute type, widened.
      if (Type elem = update.getValue().getType().getElementType();
          elem != stateElement(update))
        inst["dtype"] = dtypeName(elem);
    } else if (auto constant = dyn_cast<aten::ConstantOp>(op)) {
      auto dense = dyn_cast<DenseElementsAttr>(constant.getValue());
      FailureOr<json::Value> type = typeJson(&op, constant.getType());
      if (!dense || failed(type))
        return op.emitOpError("needs a dense value to become a plan constant");
      inst = std::move(*type->getAsObject());
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
    } else if (auto call = dyn_cast<aten::CallOp>(op)) {
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
    } else if (auto rng = dyn_cast<aten::RngStateOp>(op)) {
      if (failed(typeJson(&op, rng.getType())))
        return failure();
      inst["kind"] = kindName(plan::InstKind::RngState);
      inst["result"] = slot(rng.getState());
    } else if (auto set = dyn_cast<aten::SetRngStateOp>(op)) {
      inst["kind"] = kindName(plan::InstKind::SetRngState);
      inst["state"] = slot(set.getState());
    } else if (auto backward = dyn_cast<aten::AutogradBackwardOp>(op)) {
      inst["kind"] = kindName(plan::InstKind::AutogradBackward);
      inst["op"] = backward.getOverload();
      if (std::string where = describeLocation(backward.getLoc());
          !where.empty())
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
      for (auto [r, g] : llvm::zip(backward.getGradResults(),
                                   backward.getResultGrads()))
        grads.push_back(json::Object{{"result", r}, {"grad", slot(g)}});
      inst["grads"] = std::move(grads);
      if (Value state = backward.getRngState())
        inst["rng"] = slot(state);
      json::Array wrt, results;
      for (auto [index, grad] :
           llvm::zip(backward.getWrt(), backward.getGrads())) {
        if (failed(typeJson(&op, grad.getType())))
          return failure();
        wrt.push_back(index);
        results.push_back(slot(grad));
      }
      inst["wrt"] = std::move(wrt);
      inst["results"] = std::move(results);
    } else if (auto gather = dyn_cast<AllGatherStartOp>(op)) {
      inst["kind"] = kindName(plan::InstKind::AllGather);
      inst["unit"] = gather.getUnit();
      inst["group"] = groupName(gather.getGroup());
      inst["input"] = slot(gather.getShard());
      inst["result"] = slot(gather.getFuture());
    } else if (auto scatter = dyn_cast<ReduceScatterStartOp>(op)) {
      inst["kind"] = kindName(plan::InstKind::ReduceScatter);
      inst["unit"] = scatter.getUnit();
      inst["group"] = groupName(scatter.getGroup());
      if (std::optional<CommGroup> across = scatter.getAcross())
        inst["across"] = groupName(*across);
      inst["reduce"] = stringifyReduceOp(scatter.getReduce());
      inst["input"] = slot(scatter.getInput());
      inst["result"] = slot(scatter.getFuture());
    } else if (auto reduce = dyn_cast<AllReduceStartOp>(op)) {
      inst["kind"] = kindName(plan::InstKind::AllReduce);
      inst["group"] = groupName(reduce.getGroup());
      inst["reduce"] = stringifyReduceOp(reduce.getReduce());
      inst["input"] = slot(reduce.getInput());
      inst["result"] = slot(reduce.getFuture());
    } else if (auto wait = dyn_cast<WaitOp>(op)) {
      FailureOr<json::Value> type = typeJson(&op, wait.getType());
      if (failed(type))
        return failure();
      inst = std::move(*type->getAsObject());
      inst["kind"] = kindName(plan::InstKind::Wait);
      inst["future"] = slot(wait.getFuture());
      inst["result"] = slot(wait.getResult());
      // fsdp-shard's word: a parameter's reduced gradient.
      if (wait->hasAttr(kReducedGradAttr))
        inst["gradient"] = true;
    } else if (auto local = dyn_cast<LocalShardOp>(op)) {
      FailureOr<json::Value> type = typeJson(&op, local.getType());
      if (failed(type))
        return failure();
      inst = std::move(*type->getAsObject());
      inst["kind"] = kindName(plan::InstKind::LocalShard);
      inst["unit"] = local.getUnit();
      inst["group"] = groupName(local.getGroup());
      inst["buffer"] = slot(local.getBuffer());
      inst["result"] = slot(local.getResult());
    } else if (isa<ToDeviceOp, ToHostOp>(op)) {
      // CPU offload: a copy into the other memory.
      inst["kind"] = kindName(isa<ToHostOp>(op) ? plan::InstKind::ToHost
                                                 : plan::InstKind::ToDevice);
      inst["input"] = slot(op.getOperand(0));
      inst["result"] = slot(op.getResult(0));
    } else if (auto free = dyn_cast<FreeOp>(op)) {
      inst["kind"] = kindName(plan::InstKind::Free);
      inst["buffer"] = slot(free.getBuffer());
    } else if (auto view = dyn_cast<ViewOp>(op)) {
      FailureOr<json::Value> type = typeJson(&op, view.getType());
      if (failed(type))
        return failure();
      inst = std::move(*type->getAsObject());
      inst["kind"] = kindName(plan::InstKind::View);
      inst["buffer"] = slot(view.getBuffer());
      inst["offset"] = int64_t(view.getOffset());
      inst["result"] = slot(view.getResult());
    } else if (auto ret = dyn_cast<func::ReturnOp>(op)) {
      for (Value v : ret.getOperands())
        outputs.push_back(slot(v));
      continue;
    } else {
      return op.emitOpError("cannot be emitted into a plan yet");
    }
    json::Array free;
    llvm::SmallPtrSet<Value, 4> seen;
    for (Value operand : op.getOperands())
      if (lastUse.lookup(operand) == &op && seen.insert(operand).second &&
          !llvm::is_contained(func.getBody().front().getTerminator()->getOperands(),
                              operand))
        free.push_back(slot(operand));
    // Results nobody reads are released at once.
    for (Value result : op.getResults())
      if (result.use_empty())
        free.push_back(slot(result));
    inst["free"] = std::move(free);
    // CPU offload: an instruction whose results are in host memory says so.
    if (op.getNumResults() > 0 && host.contains(op.getResult(0)))
      inst["host"] = true;
    instructions.push_back(std::move(inst));
  }

  // One entry per line: a person can read and diff a plan.
  auto lines = [&](StringRef key, json::Array &items, bool last) {
    os << "  \"" << key << "\": [";
    for (size_t i = 0; i < items.size(); ++i)
      os << (i ? ",\n    " : "\n    ") << items[i];
    os << (items.empty() ? "]" : "\n  ]") << (last ? "\n" : ",\n");
  };
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
  if (microBatches > 1)
    os << "  \"micro_batches\": " << microBatches << ",\n";
  if (auto type = module->getAttrOfType<StringAttr>(kStateDictTypeAttr))
    os << "  \"state_dict_type\": " << json::Value(type.getValue())
       << ",\n";
  // The optimizer's torch.optim settings and the gradient scaler's (for
  // checkpoints in their formats).
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
      }
      else
        return module.emitError("unexpected value in ")
               << attrName << ": " << v;
    }
    os << "  \"" << key << "\": " << json::Value(std::move(group)) << ",\n";
  }
  lines("state", state, false);
  lines("inputs", inputs, false);
  os << "  \"outputs\": " << json::Value(std::move(outputs)) << ",\n";
  // Outputs that are per-step metrics (the scheduled learning rate), by
  // name; absent when there are none.
  json::Array metrics;
  for (unsigned i = 0; i < func.getNumResults(); ++i)
    if (auto name = func.getResultAttrOfType<StringAttr>(i, kMetricAttr))
      metrics.push_back(json::Object{{"name", name.getValue()},
                                     {"output", int64_t(i)}});
  if (!metrics.empty())
    os << "  \"metrics\": " << json::Value(std::move(metrics)) << ",\n";
  lines("instructions", instructions, true);
  os << "}\n";
  return success();
}

LogicalResult fsdp::emitPlan(ModuleOp module, StringRef entry,
                             raw_ostream &os) {
  auto func = module.lookupSymbol<func::FuncOp>(entry);
  if (!func)
    return module.emitError("no function @") << entry << " to emit as a plan";
  return PlanWriter().run(module, func, os);
}
