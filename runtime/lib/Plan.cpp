//===- Plan.cpp - reading a plan -------------------------------------------===//

#include "fsdp/runtime/Plan.h"

#include <c10/util/Exception.h>

#include <cerrno>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <type_traits>

namespace fsdp::runtime {

std::string firstLine(const std::exception &e) {
  const auto *torchError = dynamic_cast<const c10::Error *>(&e);
  std::string msg = torchError ? torchError->what_without_backtrace() : e.what();
  return msg.substr(0, msg.find('\n'));
}

bool writeAll(int fd, const char *data, size_t size) {
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

using nlohmann::json;

/// libtorch's scalar type of each of the plan's element types.
static c10::ScalarType scalarType(plan::DType dtype) {
  switch (dtype) {
  case plan::DType::F32: return c10::kFloat;
  case plan::DType::F64: return c10::kDouble;
  case plan::DType::F16: return c10::kHalf;
  case plan::DType::BF16: return c10::kBFloat16;
  case plan::DType::I64: return c10::kLong;
  case plan::DType::I32: return c10::kInt;
  case plan::DType::I16: return c10::kShort;
  case plan::DType::I8: return c10::kChar;
  case plan::DType::UI8: return c10::kByte;
  case plan::DType::I1: return c10::kBool;
  }
  return c10::kFloat;
}

c10::ScalarType parseDtype(const std::string &name) {
  if (std::optional<plan::DType> dtype = plan::parseDType(name))
    return scalarType(*dtype);
  throw Error("unknown dtype '" + name + "'");
}

std::string dtypeName(c10::ScalarType dtype) {
  for (const plan::DTypeInfo &i : plan::kDTypes)
    if (scalarType(i.dtype) == dtype)
      return std::string(i.name);
  return c10::toString(dtype);
}

std::string TensorSpec::str() const {
  std::string s;
  for (int64_t d : shape)
    s += std::to_string(d) + "x";
  return s + dtypeName(dtype);
}

/// Elements of one tensor a plan may describe: 2^48 (a 256 TiB f32
/// tensor), far beyond any device, and small enough that byte counts of
/// every dtype stay within int64.
constexpr int64_t kMaxElements = int64_t(1) << 48;

namespace {
/// A malformed tensor type; loadPlan names the plan file.
struct BadType : std::runtime_error {
  using std::runtime_error::runtime_error;
};
} // namespace

static TensorSpec parseType(const json &j) {
  TensorSpec t;
  t.shape = j.at("shape").get<std::vector<int64_t>>();
  t.dtype = parseDtype(j.at("dtype").get<std::string>());
  int64_t numel = 1;
  for (int64_t d : t.shape) {
    if (d < 0)
      throw BadType("shape " + j.at("shape").dump() + " has a negative size");
    if (d > 0 && numel > kMaxElements / d)
      throw BadType("shape " + j.at("shape").dump() + " has more than 2^48 "
                    "elements");
    numel *= d;
  }
  return t;
}

/// Every slot in range, every state name declared, every call's results and
/// written arguments consistent: a bad plan is an error, never a crash.
static void validate(const Plan &plan, const std::string &path) {
  auto fail = [&](size_t i, const std::string &why) {
    throw Error("plan '" + path + "', instruction #" + std::to_string(i) +
                ": " + why);
  };
  auto checkSlot = [&](size_t i, const json &v) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 ||
        v.get<int64_t>() >= plan.numSlots)
      fail(i, "slot " + v.dump() + " is out of range (num_slots " +
                  std::to_string(plan.numSlots) + ")");
  };
  // Every slot is defined by an input or an instruction's result: a plan
  // that declares more is refused before any slot is allocated.
  int64_t definable = static_cast<int64_t>(plan.inputs.size());
  for (const Instruction &inst : plan.instructions)
    definable += std::max<int64_t>(
        1, inst.call() ? static_cast<int64_t>(inst.call()->results.size()) : 0);
  if (plan.numSlots < 0 || plan.numSlots > definable)
    throw Error("plan '" + path + "': num_slots " +
                std::to_string(plan.numSlots) + " is not between 0 and the " +
                std::to_string(definable) + " values its inputs and "
                "instructions define");
  std::map<std::string, const StateEntry *> byName;
  for (const StateEntry &e : plan.state)
    if (!byName.emplace(e.name, &e).second)
      throw Error("plan '" + path + "': state '" + e.name +
                  "' is declared twice");
  // Optimizer state is shaped like the parameter (or the rank's shard of
  // the flat parameter) it belongs to.
  for (const StateEntry &e : plan.state) {
    if (e.kind != StateKind::Optim || e.param.empty())
      continue;
    auto it = byName.find(e.param);
    if (it == byName.end() || !it->second->isParam())
      throw Error("plan '" + path + "': optimizer state '" + e.name +
                  "' belongs to '" + e.param + "', which is not a parameter "
                  "of the plan");
    TensorSpec p = it->second->type;
    if (it->second->replicated) // the rank's shard of a whole flat parameter
      p.shape = {it->second->shardNumel()};
    if (p.shape != e.type.shape || p.dtype != e.type.dtype)
      throw Error("plan '" + path + "': optimizer state '" + e.name + "' is " +
                  e.type.str() + " but its parameter '" + e.param + "' is " +
                  p.str());
  }
  for (const InputEntry &in : plan.inputs)
    if (in.slot < 0 || in.slot >= plan.numSlots)
      throw Error("plan '" + path + "': input '" + in.name +
                  "' has an out-of-range slot");
  // Each micro-batch takes every input once, with the same type.
  if (plan.microBatches < 1 || plan.microBatches > (int64_t(1) << 20))
    throw Error("plan '" + path + "': micro_batches is " +
                std::to_string(plan.microBatches) +
                ", expected 1 to 1048576");
  std::map<std::string, std::pair<TensorSpec, std::set<int64_t>>> inputsByName;
  for (const InputEntry &in : plan.inputs) {
    if (in.microBatch < 0 || in.microBatch >= plan.microBatches)
      throw Error("plan '" + path + "': input '" + in.name +
                  "' is for micro-batch " + std::to_string(in.microBatch) +
                  ", but the plan has " + std::to_string(plan.microBatches));
    auto [it, first] = inputsByName.try_emplace(in.name, in.type, std::set<int64_t>());
    if (!first && (it->second.first.shape != in.type.shape ||
                   it->second.first.dtype != in.type.dtype))
      throw Error("plan '" + path + "': input '" + in.name + "' is " +
                  in.type.str() + " in one micro-batch and " +
                  it->second.first.str() + " in another");
    if (!it->second.second.insert(in.microBatch).second)
      throw Error("plan '" + path + "': input '" + in.name +
                  "' appears twice in micro-batch " +
                  std::to_string(in.microBatch));
  }
  for (const auto &[name, entry] : inputsByName)
    if (static_cast<int64_t>(entry.second.size()) != plan.microBatches)
      throw Error("plan '" + path + "': input '" + name + "' feeds " +
                  std::to_string(entry.second.size()) + " of the " +
                  std::to_string(plan.microBatches) + " micro-batches");
  for (int64_t out : plan.outputs)
    if (out < 0 || out >= plan.numSlots)
      throw Error("plan '" + path + "': an output slot is out of range");
  // A metric is a named output (a scalar), reported beside the loss under
  // its own name.
  std::set<std::string> metricNames;
  for (const auto &[name, output] : plan.metrics)
    if (output < 1 || output >= static_cast<int64_t>(plan.outputs.size()) ||
        !metricNames.insert(name).second || !plan::isMetric(name))
      throw Error("plan '" + path + "': metric '" + name +
                  "' is not a known metric of a distinct output");
  for (size_t i = 0; i < plan.instructions.size(); ++i) {
    const Instruction &inst = plan.instructions[i];
    for (int64_t s : inst.free)
      checkSlot(i, s);
    // Mixed precision: a parameter or floating-point buffer read or written
    // in a 16-bit floating-point type.
    auto checkState = [&](const std::string &name, int64_t slot,
                          const std::optional<c10::ScalarType> &castDtype,
                          const char *access) {
      auto it = byName.find(name);
      if (it == byName.end())
        fail(i, "'" + name + "' is not in the plan's state");
      checkSlot(i, slot);
      if (!castDtype)
        return;
      const StateEntry &entry = *it->second;
      c10::ScalarType stored = entry.type.dtype;
      if ((*castDtype != c10::kBFloat16 && *castDtype != c10::kHalf) ||
          !c10::isFloatingType(stored) || entry.kind == StateKind::Optim)
        fail(i, "'" + name + "' of dtype " + dtypeName(stored) +
                    " cannot be " + access + " as " + dtypeName(*castDtype) +
                    " (mixed precision reads and writes parameters and "
                    "floating-point buffers as bf16 or f16)");
    };
    auto checkUnit = [&](const std::string &unit) {
      if (!byName.count(unit))
        fail(i, "unit '" + unit + "' is not in the plan's state");
    };
    auto checkArgs = [&](const inst::Call &call) {
      if (!call.args.is_array())
        fail(i, "args is not a list");
      for (int64_t m : call.mutates)
        if (m < 0 || m >= static_cast<int64_t>(call.args.size()) ||
            !call.args[m].contains("t"))
          fail(i, "writes argument " + std::to_string(m) +
                      ", which is not a tensor argument");
      for (const json &arg : call.args) {
        if (!arg.is_object())
          fail(i, "argument " + arg.dump() + " is not an object");
        if (arg.contains("t"))
          checkSlot(i, arg["t"]);
        if (arg.contains("tl"))
          for (const json &s : arg["tl"])
            checkSlot(i, s);
        if (arg.contains("otl"))
          for (const json &s : arg["otl"])
            if (!s.is_null())
              checkSlot(i, s);
      }
    };
    if (const auto *get = inst.as<inst::Get>()) {
      checkState(get->state, get->result, get->castDtype, "read");
    } else if (const auto *update = inst.as<inst::Update>()) {
      checkState(update->state, update->value, update->castDtype, "written");
    } else if (const auto *constant = inst.as<inst::Constant>()) {
      checkSlot(i, constant->result);
      const std::string &hex = constant->hex;
      if (hex.size() % 2 != 0 ||
          hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
        fail(i, "constant bytes are not hex");
      int64_t bytes = constant->type.numel() *
                      static_cast<int64_t>(c10::elementSize(constant->type.dtype));
      if (static_cast<int64_t>(hex.size() / 2) != bytes)
        fail(i, "constant " + constant->type.str() + " holds " +
                    std::to_string(hex.size() / 2) + " bytes, expected " +
                    std::to_string(bytes));
    } else if (const auto *rng = inst.as<inst::RngState>()) {
      checkSlot(i, rng->result);
    } else if (const auto *restore = inst.as<inst::SetRngState>()) {
      checkSlot(i, restore->state);
    } else if (const auto *call = inst.as<inst::Call>()) {
      for (int64_t r : call->results)
        checkSlot(i, r);
      if (call->numSchemaResults < 0 ||
          call->numSchemaResults + call->mutates.size() != call->results.size())
        fail(i, "has " + std::to_string(call->results.size()) +
                    " results, expected num_schema_results + written arguments");
      checkArgs(*call);
    } else if (const auto *backward = inst.as<inst::AutogradBackward>()) {
      for (int64_t r : backward->results)
        checkSlot(i, r);
      if (backward->results.size() != backward->wrt.size())
        fail(i, "has " + std::to_string(backward->results.size()) +
                    " results, expected one per wrt operand");
      if (backward->rng >= 0)
        checkSlot(i, backward->rng);
      int64_t previous = -1;
      for (const auto &[result, slot] : backward->resultGrads) {
        checkSlot(i, slot);
        if (result <= previous || result >= backward->numSchemaResults)
          fail(i, "has a gradient of result " + std::to_string(result) +
                      ", which is not one of its " +
                      std::to_string(backward->numSchemaResults) +
                      " schema results in order");
        previous = result;
      }
      previous = -1;
      for (int64_t w : backward->wrt) {
        if (w <= previous)
          fail(i, "wrt is not in increasing order");
        previous = w;
      }
      checkArgs(*backward);
    } else if (const auto *local = inst.as<inst::LocalShard>()) {
      auto unit = byName.find(local->unit);
      if (unit == byName.end() || unit->second->kind != StateKind::FlatParam)
        fail(i, "unit '" + local->unit + "' is not a flat parameter of the plan");
      const StateEntry &flat = *unit->second;
      TensorSpec shard{{flat.shardNumel()}, flat.type.dtype};
      // Mixed precision: the shard of a gradient reduced in bf16 or f16.
      bool reduced = local->type.dtype == c10::kBFloat16 ||
                     local->type.dtype == c10::kHalf;
      if (local->type.shape != shard.shape ||
          (local->type.dtype != shard.dtype && !reduced))
        fail(i, "the shard of '" + flat.name + "' is " + shard.str() +
                    ", not " + local->type.str());
      if (local->group == CommGroup::Replicate)
        fail(i, "takes a shard over the replica group (flat parameters are "
                "sharded over the shard group)");
      checkSlot(i, local->buffer);
      checkSlot(i, local->result);
    } else if (const auto *gather = inst.as<inst::AllGather>()) {
      checkUnit(gather->unit);
      checkSlot(i, gather->input);
      checkSlot(i, gather->result);
    } else if (const auto *scatter = inst.as<inst::ReduceScatter>()) {
      checkUnit(scatter->unit);
      checkSlot(i, scatter->input);
      checkSlot(i, scatter->result);
    } else if (const auto *reduce = inst.as<inst::AllReduce>()) {
      checkSlot(i, reduce->input);
      checkSlot(i, reduce->result);
    } else if (const auto *wait = inst.as<inst::Wait>()) {
      checkSlot(i, wait->future);
      checkSlot(i, wait->result);
    } else if (const auto *view = inst.as<inst::View>()) {
      checkSlot(i, view->buffer);
      checkSlot(i, view->result);
    } else if (const auto *free = inst.as<inst::Free>()) {
      checkSlot(i, free->buffer);
    } else {
      // A copy between memories: its result is in the one it copies to.
      const auto *toHost = inst.as<inst::ToHost>();
      const auto *toDevice = inst.as<inst::ToDevice>();
      checkSlot(i, toHost ? toHost->input : toDevice->input);
      checkSlot(i, toHost ? toHost->result : toDevice->result);
      if (inst.host != (toHost != nullptr))
        fail(i, std::string("copies to the ") +
                    (toHost ? "host" : "device") +
                    " but says its result is " +
                    (inst.host ? "on the host" : "on the device"));
    }
  }
  if (plan.worldSize > kMaxWorldSize)
    throw Error("plan '" + path + "': world size " +
                std::to_string(plan.worldSize) + " is more than " +
                std::to_string(kMaxWorldSize) + " ranks");
  if (plan.worldSize < 1 || plan.shardGroupSize < 1 ||
      plan.worldSize % plan.shardGroupSize != 0)
    throw Error("plan '" + path + "': shard-group size " +
                std::to_string(plan.shardGroupSize) +
                " does not divide the world size " +
                std::to_string(plan.worldSize));
  for (const StateEntry &e : plan.state) {
    if (e.kind != StateKind::FlatParam)
      continue;
    if (e.shards != plan.shardGroupSize || e.padded % e.shards != 0 ||
        e.padded < e.numel || e.type.shape.size() != 1 ||
        (e.replicated ? e.padded : e.shardNumel()) != e.type.shape[0])
      throw Error("plan '" + path + "': flat parameter '" + e.name +
                  "' has inconsistent sizes (numel " + std::to_string(e.numel) +
                  ", padded " + std::to_string(e.padded) + ", " +
                  std::to_string(e.shards) + " shards)");
    if (e.padded > kMaxElements)
      throw Error("plan '" + path + "': flat parameter '" + e.name +
                  "' has more than 2^48 elements");
    for (const FlatMember &m : e.members) {
      if (m.offset < 0 || m.offset > e.numel - m.type.numel())
        throw Error("plan '" + path + "': parameter '" + m.name +
                    "' lies outside its flat parameter '" + e.name + "'");
    }
  }
}

static CommGroup parseGroup(const std::string &group, const std::string &path) {
  if (std::optional<CommGroup> g = plan::parseCommGroup(group))
    return *g;
  throw Error("plan '" + path + "': unknown group '" + group + "'");
}

static std::optional<c10::ScalarType> parseCast(const json &i) {
  if (!i.contains("dtype"))
    return std::nullopt;
  return parseDtype(i.at("dtype").get<std::string>());
}

static void parseCall(const json &i, inst::Call &call) {
  call.op = i.at("op").get<std::string>();
  call.args = i.at("args");
  call.results = i.at("results").get<std::vector<int64_t>>();
  call.numSchemaResults = i.at("num_schema_results").get<int64_t>();
  call.mutates = i.at("mutates").get<std::vector<int64_t>>();
  call.listResult = i.at("list_result").get<bool>();
  call.loc = i.value("loc", "");
  call.requiresGrad =
      i.value("requires_grad", std::vector<int64_t>{});
}

static bool parseMean(const json &i, const std::string &path) {
  std::string reduce = i.at("reduce").get<std::string>();
  if (reduce != "sum" && reduce != "mean")
    throw Error("plan '" + path + "': unknown reduction '" + reduce + "'");
  return reduce == "mean";
}

/// One instruction of the file (docs/plan-format.md), checked for its own
/// fields; validate() checks it against the rest of the plan.
static Instruction parseInstruction(const json &i, const std::string &path) {
  Instruction inst;
  std::string kindName = i.at("kind").get<std::string>();
  std::optional<InstKind> kind = plan::parseInstKind(kindName);
  if (!kind)
    throw Error("plan '" + path + "': unknown instruction kind '" + kindName +
                "'");
  inst.free = i.at("free").get<std::vector<int64_t>>();
  inst.host = i.value("host", false);
  auto slot = [&](const char *key) { return i.at(key).get<int64_t>(); };
  auto unit = [&] { return i.value("unit", ""); };
  auto group = [&] { return parseGroup(i.at("group").get<std::string>(), path); };
  switch (*kind) {
  case InstKind::Get:
    inst.op = inst::Get{i.at("state").get<std::string>(), slot("result"),
                        parseCast(i)};
    break;
  case InstKind::Update:
    inst.op = inst::Update{i.at("state").get<std::string>(), slot("value"),
                           parseCast(i)};
    break;
  case InstKind::Constant:
    inst.op = inst::Constant{parseType(i), i.at("hex").get<std::string>(),
                             slot("result")};
    break;
  case InstKind::Call: {
    inst::Call call;
    parseCall(i, call);
    inst.op = std::move(call);
    break;
  }
  case InstKind::AutogradBackward: {
    // The gradients of a call: the call's own fields and more.
    inst::AutogradBackward backward;
    parseCall(i, backward);
    for (const json &g : i.at("grads"))
      backward.resultGrads.emplace_back(g.at("result").get<int64_t>(),
                                        g.at("grad").get<int64_t>());
    backward.wrt = i.at("wrt").get<std::vector<int64_t>>();
    if (i.contains("rng"))
      backward.rng = slot("rng");
    inst.op = std::move(backward);
    break;
  }
  case InstKind::RngState:
    inst.op = inst::RngState{slot("result")};
    break;
  case InstKind::SetRngState:
    inst.op = inst::SetRngState{slot("state")};
    break;
  case InstKind::AllGather:
    if (i.contains("across"))
      throw Error("plan '" + path + "': 'across' on all_gather (only a "
                  "reduce_scatter sums across the world)");
    inst.op = inst::AllGather{unit(), group(), slot("input"), slot("result")};
    break;
  case InstKind::ReduceScatter: {
    inst::ReduceScatter scatter{unit(), group(), false, parseMean(i, path),
                                slot("input"), slot("result")};
    if (i.contains("across")) {
      if (parseGroup(i.at("across").get<std::string>(), path) !=
              CommGroup::World ||
          scatter.group != CommGroup::Shard)
        throw Error("plan '" + path + "': a reduce_scatter sums across "
                    "the world and scatters over the shard group, or "
                    "neither");
      scatter.acrossWorld = true;
    }
    inst.op = std::move(scatter);
    break;
  }
  case InstKind::AllReduce:
    if (i.contains("across"))
      throw Error("plan '" + path + "': 'across' on all_reduce (only a "
                  "reduce_scatter sums across the world)");
    inst.op = inst::AllReduce{group(), parseMean(i, path), slot("input"),
                              slot("result")};
    break;
  case InstKind::Wait:
    inst.op = inst::Wait{slot("future"), slot("result"), parseType(i),
                         i.value("gradient", false)};
    break;
  case InstKind::LocalShard:
    inst.op = inst::LocalShard{i.at("unit").get<std::string>(), group(), slot("buffer"), slot("result"),
                               parseType(i)};
    break;
  case InstKind::ToDevice:
    inst.op = inst::ToDevice{slot("input"), slot("result")};
    break;
  case InstKind::ToHost:
    inst.op = inst::ToHost{slot("input"), slot("result")};
    break;
  case InstKind::Free:
    inst.op = inst::Free{slot("buffer")};
    break;
  case InstKind::View:
    inst.op = inst::View{slot("buffer"), slot("result"), slot("offset"),
                         parseType(i)};
    break;
  }
  return inst;
}

static void writeType(json &j, const TensorSpec &type) {
  j["shape"] = type.shape;
  j["dtype"] = dtypeName(type.dtype);
}

static void writeCall(json &j, const inst::Call &call) {
  j["op"] = call.op;
  if (!call.loc.empty())
    j["loc"] = call.loc;
  j["args"] = call.args;
  j["results"] = call.results;
  j["num_schema_results"] = call.numSchemaResults;
  j["mutates"] = call.mutates;
  j["list_result"] = call.listResult;
  if (!call.requiresGrad.empty())
    j["requires_grad"] = call.requiresGrad;
}

json instructionJson(const Instruction &inst) {
  json j = json::object();
  j["kind"] = std::string(plan::name(inst.kind()));
  std::visit(
      [&](const auto &op) {
        using T = std::decay_t<decltype(op)>;
        if constexpr (std::is_same_v<T, inst::Get>) {
          j["state"] = op.state;
          j["result"] = op.result;
          if (op.castDtype)
            j["dtype"] = dtypeName(*op.castDtype);
        } else if constexpr (std::is_same_v<T, inst::Update>) {
          j["state"] = op.state;
          j["value"] = op.value;
          if (op.castDtype)
            j["dtype"] = dtypeName(*op.castDtype);
        } else if constexpr (std::is_same_v<T, inst::Constant>) {
          writeType(j, op.type);
          j["hex"] = op.hex;
          j["result"] = op.result;
        } else if constexpr (std::is_same_v<T, inst::Call>) {
          writeCall(j, op);
        } else if constexpr (std::is_same_v<T, inst::AutogradBackward>) {
          writeCall(j, op);
          json grads = json::array();
          for (const auto &[result, grad] : op.resultGrads)
            grads.push_back({{"result", result}, {"grad", grad}});
          j["grads"] = std::move(grads);
          if (op.rng >= 0)
            j["rng"] = op.rng;
          j["wrt"] = op.wrt;
        } else if constexpr (std::is_same_v<T, inst::RngState>) {
          j["result"] = op.result;
        } else if constexpr (std::is_same_v<T, inst::SetRngState>) {
          j["state"] = op.state;
        } else if constexpr (std::is_same_v<T, inst::AllGather>) {
          j["unit"] = op.unit;
          j["group"] = std::string(plan::name(op.group));
          j["input"] = op.input;
          j["result"] = op.result;
        } else if constexpr (std::is_same_v<T, inst::ReduceScatter>) {
          j["unit"] = op.unit;
          j["group"] = std::string(plan::name(op.group));
          if (op.acrossWorld)
            j["across"] = std::string(plan::name(CommGroup::World));
          j["reduce"] = op.mean ? "mean" : "sum";
          j["input"] = op.input;
          j["result"] = op.result;
        } else if constexpr (std::is_same_v<T, inst::AllReduce>) {
          j["group"] = std::string(plan::name(op.group));
          j["reduce"] = op.mean ? "mean" : "sum";
          j["input"] = op.input;
          j["result"] = op.result;
        } else if constexpr (std::is_same_v<T, inst::Wait>) {
          writeType(j, op.type);
          j["future"] = op.future;
          j["result"] = op.result;
          if (op.gradient)
            j["gradient"] = true;
        } else if constexpr (std::is_same_v<T, inst::LocalShard>) {
          writeType(j, op.type);
          j["unit"] = op.unit;
          j["group"] = std::string(plan::name(op.group));
          j["buffer"] = op.buffer;
          j["result"] = op.result;
        } else if constexpr (std::is_same_v<T, inst::ToDevice> ||
                             std::is_same_v<T, inst::ToHost>) {
          j["input"] = op.input;
          j["result"] = op.result;
        } else if constexpr (std::is_same_v<T, inst::Free>) {
          j["buffer"] = op.buffer;
        } else {
          static_assert(std::is_same_v<T, inst::View>);
          writeType(j, op.type);
          j["buffer"] = op.buffer;
          j["offset"] = op.offset;
          j["result"] = op.result;
        }
      },
      inst.op);
  j["free"] = inst.free;
  if (inst.host)
    j["host"] = true;
  return j;
}

Plan loadPlan(const std::string &path) {
  std::ifstream in(path);
  if (!in)
    throw Error("cannot open plan '" + path + "'");
  json j;
  try {
    in >> j;
  } catch (const json::exception &e) {
    throw Error("plan '" + path + "' is not valid JSON: " + e.what());
  }
  try {
    if (j.value("format", "") != "fsdp-plan")
      throw Error("'" + path + "' is not an fsdp-opt plan (no \"format\": \"fsdp-plan\")");
    int64_t version = j.at("version").get<int64_t>();
    if (version != kPlanFormatVersion)
      throw Error("plan '" + path + "' has format version " +
                  std::to_string(version) + ", but this fsdp-run reads version " +
                  std::to_string(kPlanFormatVersion) +
                  "; compile it again with a matching fsdp-opt");
    Plan plan;
    plan.function = j.at("function").get<std::string>();
    plan.numSlots = j.at("num_slots").get<int64_t>();
    plan.worldSize = j.at("world_size").get<int64_t>();
    plan.shardGroupSize = j.at("shard_group_size").get<int64_t>();
    plan.sharding = j.at("sharding").get<std::string>();
    for (const json &s : j.at("state")) {
      StateEntry e;
      e.name = s.at("name").get<std::string>();
      std::string kind = s.at("kind").get<std::string>();
      if (kind == "param")
        e.kind = StateKind::Param;
      else if (kind == "buffer")
        e.kind = StateKind::Buffer;
      else if (kind == "optim")
        e.kind = StateKind::Optim;
      else if (kind == "flat_param")
        e.kind = StateKind::FlatParam;
      else
        throw Error("plan '" + path + "': state '" + e.name +
                    "' has unknown kind '" + kind + "'");
      if (e.kind == StateKind::Optim && s.at("init").get<std::string>() != "zeros")
        throw Error("plan '" + path + "': optimizer state '" + e.name +
                    "' has an initial value other than zeros");
      if (e.kind == StateKind::Optim && s.at("param").is_string())
        e.param = s.at("param").get<std::string>();
      e.persistent = s.value("persistent", true);
      e.host = s.value("host", false);
      e.type = parseType(s);
      e.aliases = s.at("aliases").get<std::vector<std::string>>();
      if (e.kind == StateKind::FlatParam) {
        e.numel = s.at("numel").get<int64_t>();
        e.padded = s.at("padded").get<int64_t>();
        e.shards = s.at("shards").get<int64_t>();
        e.replicated = s.at("replicated").get<bool>();
        for (const json &m : s.at("params")) {
          FlatMember member;
          member.name = m.at("name").get<std::string>();
          member.type = parseType(m);
          member.offset = m.at("offset").get<int64_t>();
          member.aliases = m.at("aliases").get<std::vector<std::string>>();
          e.members.push_back(std::move(member));
        }
      }
      plan.state.push_back(std::move(e));
    }
    if (j.contains("optimizer")) {
      plan.optimizer = j.at("optimizer");
      if (!plan.optimizer.is_object() ||
          !plan.optimizer.contains("name") ||
          !plan.optimizer.at("name").is_string())
        throw Error("plan '" + path + "': optimizer must be an object with "
                    "a name");
    }
    if (j.contains("grad_scaler")) {
      plan.gradScaler = j.at("grad_scaler");
      for (const char *key :
           {"init_scale", "growth_factor", "backoff_factor", "growth_interval"})
        if (!plan.gradScaler.is_object() || !plan.gradScaler.contains(key) ||
            !plan.gradScaler.at(key).is_number())
          throw Error("plan '" + path + "': grad_scaler must be an object "
                      "with a number '" + key + "'");
    }
    if (j.contains("state_dict_type")) {
      plan.stateDictType = j.at("state_dict_type").get<std::string>();
      if (plan.stateDictType != "FULL_STATE_DICT" &&
          plan.stateDictType != "SHARDED_STATE_DICT")
        throw Error("plan '" + path + "': state_dict_type is '" +
                    plan.stateDictType +
                    "', expected FULL_STATE_DICT or SHARDED_STATE_DICT");
    }
    if (j.contains("micro_batches"))
      plan.microBatches = j.at("micro_batches").get<int64_t>();
    for (const json &i : j.at("inputs"))
      plan.inputs.push_back({i.at("name").get<std::string>(), parseType(i),
                             i.at("slot").get<int64_t>(),
                             i.value("micro_batch", int64_t(0))});
    plan.outputs = j.at("outputs").get<std::vector<int64_t>>();
    if (j.contains("metrics"))
      for (const json &m : j.at("metrics"))
        plan.metrics.emplace_back(m.at("name").get<std::string>(),
                                  m.at("output").get<int64_t>());
    for (const json &i : j.at("instructions"))
      plan.instructions.push_back(parseInstruction(i, path));
    validate(plan, path);
    return plan;
  } catch (const json::exception &e) {
    throw Error("plan '" + path + "' is malformed: " + e.what());
  } catch (const BadType &e) {
    throw Error("plan '" + path + "': " + e.what());
  }
}

} // namespace fsdp::runtime
