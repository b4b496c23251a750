//===- Plan.cpp - reading a plan -------------------------------------------===//

#include "fsdp/runtime/Plan.h"
#include "fsdp/runtime/Files.h"

#include <c10/util/Exception.h>
#include <c10/util/hash.h>

#include <cerrno>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <type_traits>

namespace fsdp::runtime {

std::string firstLine(const std::exception &e) {
  const auto *torchError = dynamic_cast<const c10::Error *>(&e);
  return firstLine(torchError ? torchError->what_without_backtrace()
                              : std::string(e.what()));
}

std::string firstLine(const std::string &text) {
  size_t begin = text.find_first_not_of(" \t\n");
  if (begin == std::string::npos)
    return "an error without a message";
  return text.substr(begin, text.find('\n', begin) - begin);
}

std::optional<int64_t> wholeNumber(const nlohmann::json &v) {
  if (!v.is_number_integer() ||
      (v.is_number_unsigned() &&
       v.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX)))
    return std::nullopt;
  return v.get<int64_t>();
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

c10::ScalarType scalarType(plan::DType dtype) {
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
  case plan::DType::C64: return c10::kComplexFloat;
  case plan::DType::C128: return c10::kComplexDouble;
  }
  return c10::kFloat;
}

c10::ScalarType parseDtype(const std::string &name) {
  if (std::optional<plan::DType> dtype = plan::parseDType(name))
    return scalarType(*dtype);
  throw Error("unknown dtype '" + name + "'");
}

std::optional<plan::DType> planDType(c10::ScalarType dtype) {
  for (const plan::DTypeInfo &i : plan::kDTypes)
    if (scalarType(i.dtype) == dtype)
      return i.dtype;
  return std::nullopt;
}

std::string dtypeName(c10::ScalarType dtype) {
  if (std::optional<plan::DType> d = planDType(dtype))
    return std::string(plan::info(*d).name);
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

/// An integer field: a JSON whole number within int64 (a plan's `1e300` or
/// `2.5` is refused, not converted).
static int64_t integer(const json &v, const std::string &key) {
  std::optional<int64_t> n = wholeNumber(v);
  if (!n)
    throw BadType("'" + key + "' is " + v.dump() +
                  ", not a whole number within 64 bits");
  return *n;
}
static int64_t intAt(const json &o, const char *key) {
  return integer(o.at(key), key);
}
static std::vector<int64_t> intsAt(const json &o, const char *key) {
  const json &list = o.at(key);
  if (!list.is_array())
    throw BadType(std::string("'") + key + "' is " + list.dump() +
                  ", not a list");
  std::vector<int64_t> v;
  for (const json &e : list)
    v.push_back(integer(e, key));
  return v;
}
} // namespace

static TensorSpec parseType(const json &j) {
  TensorSpec t;
  t.shape = intsAt(j, "shape");
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

namespace {

using StateByName = std::map<std::string, const StateEntry *>;

/// Checks one instruction (#i) against the rest of the plan: one handler
/// per kind, chosen by std::visit; a failure names the plan file and the
/// instruction.
class InstructionCheck {
public:
  InstructionCheck(const Plan &plan, const std::string &path,
                   const StateByName &byName, size_t i,
                   const Instruction &inst)
      : plan(plan), path(path), byName(byName), i(i), inst(inst) {}

  void operator()(const inst::Get &get) const;
  void operator()(const inst::Update &update) const;
  void operator()(const inst::Constant &constant) const;
  void operator()(const inst::Call &call) const;
  void operator()(const inst::AutogradBackward &backward) const;
  void operator()(const inst::RngState &rng) const;
  void operator()(const inst::SetRngState &restore) const;
  void operator()(const inst::AllGather &gather) const;
  void operator()(const inst::ReduceScatter &scatter) const;
  void operator()(const inst::AllReduce &reduce) const;
  void operator()(const inst::Wait &wait) const;
  void operator()(const inst::LocalShard &local) const;
  void operator()(const inst::ToDevice &toDevice) const;
  void operator()(const inst::ToHost &toHost) const;
  void operator()(const inst::Free &free) const;
  void operator()(const inst::View &view) const;

  /// A slot of the plan (0 .. num_slots - 1).
  void checkSlot(const json &v) const;

private:
  [[noreturn]] void fail(const std::string &why) const;
  void checkState(const std::string &name, int64_t slot,
                  const std::optional<c10::ScalarType> &castDtype,
                  const char *access) const;
  void checkUnit(const std::string &unit) const;
  void checkArgs(const inst::Call &call) const;
  void checkCopy(int64_t input, int64_t result, bool toHost) const;

  const Plan &plan;
  const std::string &path;
  const StateByName &byName;
  size_t i;
  const Instruction &inst;
};

void InstructionCheck::fail(const std::string &why) const {
  throw Error("plan '" + path + "', instruction #" + std::to_string(i) +
              ": " + why);
}

void InstructionCheck::checkSlot(const json &v) const {
  if (!v.is_number_integer() || v.get<int64_t>() < 0 ||
      v.get<int64_t>() >= plan.numSlots)
    fail("slot " + v.dump() + " is out of range (num_slots " +
         std::to_string(plan.numSlots) + ")");
}

/// A state entry read or written; mixed precision: a parameter or
/// floating-point buffer read or written in a 16-bit floating-point type.
void InstructionCheck::checkState(
    const std::string &name, int64_t slot,
    const std::optional<c10::ScalarType> &castDtype, const char *access) const {
  auto it = byName.find(name);
  if (it == byName.end())
    fail("'" + name + "' is not in the plan's state");
  checkSlot(slot);
  if (!castDtype)
    return;
  const StateEntry &entry = *it->second;
  c10::ScalarType stored = entry.type.dtype;
  if ((*castDtype != c10::kBFloat16 && *castDtype != c10::kHalf) ||
      !c10::isFloatingType(stored) || entry.kind == StateKind::Optim)
    fail("'" + name + "' of dtype " + dtypeName(stored) + " cannot be " +
         access + " as " + dtypeName(*castDtype) +
         " (mixed precision reads and writes parameters and "
         "floating-point buffers as bf16 or f16)");
}

void InstructionCheck::checkUnit(const std::string &unit) const {
  if (!byName.count(unit))
    fail("unit '" + unit + "' is not in the plan's state");
}

/// A call's arguments: objects, their slots in range, and the written ones
/// tensors.
void InstructionCheck::checkArgs(const inst::Call &call) const {
  if (!call.args.is_array())
    fail("args is not a list");
  for (int64_t m : call.mutates)
    if (m < 0 || m >= static_cast<int64_t>(call.args.size()) ||
        !call.args[m].contains("t"))
      fail("writes argument " + std::to_string(m) +
           ", which is not a tensor argument");
  for (const json &arg : call.args) {
    if (!arg.is_object())
      fail("argument " + arg.dump() + " is not an object");
    if (arg.contains("t"))
      checkSlot(arg["t"]);
    if (arg.contains("tl"))
      for (const json &s : arg["tl"])
        checkSlot(s);
    if (arg.contains("otl"))
      for (const json &s : arg["otl"])
        if (!s.is_null())
          checkSlot(s);
  }
}

/// A copy between memories: its result is in the one it copies to.
void InstructionCheck::checkCopy(int64_t input, int64_t result,
                                 bool toHost) const {
  checkSlot(input);
  checkSlot(result);
  if (inst.host != toHost)
    fail(std::string("copies to the ") + (toHost ? "host" : "device") +
         " but says its result is " +
         (inst.host ? "on the host" : "on the device"));
}

void InstructionCheck::operator()(const inst::Get &get) const {
  checkState(get.state, get.result, get.castDtype, "read");
}

void InstructionCheck::operator()(const inst::Update &update) const {
  checkState(update.state, update.value, update.castDtype, "written");
}

void InstructionCheck::operator()(const inst::Constant &constant) const {
  checkSlot(constant.result);
  const std::string &hex = constant.hex;
  if (hex.size() % 2 != 0 ||
      hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
    fail("constant bytes are not hex");
  int64_t bytes = constant.type.numel() *
                  static_cast<int64_t>(c10::elementSize(constant.type.dtype));
  if (static_cast<int64_t>(hex.size() / 2) != bytes)
    fail("constant " + constant.type.str() + " holds " +
         std::to_string(hex.size() / 2) + " bytes, expected " +
         std::to_string(bytes));
}

void InstructionCheck::operator()(const inst::Call &call) const {
  for (int64_t r : call.results)
    checkSlot(r);
  if (call.numSchemaResults < 0 ||
      call.numSchemaResults + call.mutates.size() != call.results.size())
    fail("has " + std::to_string(call.results.size()) +
         " results, expected num_schema_results + written arguments");
  checkArgs(call);
}

void InstructionCheck::operator()(
    const inst::AutogradBackward &backward) const {
  for (int64_t r : backward.results)
    checkSlot(r);
  if (backward.results.size() != backward.wrt.size())
    fail("has " + std::to_string(backward.results.size()) +
         " results, expected one per wrt operand");
  if (backward.rng >= 0)
    checkSlot(backward.rng);
  int64_t previous = -1;
  for (const auto &[result, slot] : backward.resultGrads) {
    checkSlot(slot);
    if (result <= previous || result >= backward.numSchemaResults)
      fail("has a gradient of result " + std::to_string(result) +
           ", which is not one of its " +
           std::to_string(backward.numSchemaResults) +
           " schema results in order");
    previous = result;
  }
  previous = -1;
  for (int64_t w : backward.wrt) {
    if (w <= previous)
      fail("wrt is not in increasing order");
    previous = w;
  }
  checkArgs(backward);
}

void InstructionCheck::operator()(const inst::RngState &rng) const {
  checkSlot(rng.result);
}

void InstructionCheck::operator()(const inst::SetRngState &restore) const {
  checkSlot(restore.state);
}

void InstructionCheck::operator()(const inst::AllGather &gather) const {
  checkUnit(gather.unit);
  checkSlot(gather.input);
  checkSlot(gather.result);
}

void InstructionCheck::operator()(const inst::ReduceScatter &scatter) const {
  checkUnit(scatter.unit);
  checkSlot(scatter.input);
  checkSlot(scatter.result);
}

void InstructionCheck::operator()(const inst::AllReduce &reduce) const {
  checkSlot(reduce.input);
  checkSlot(reduce.result);
}

void InstructionCheck::operator()(const inst::Wait &wait) const {
  checkSlot(wait.future);
  checkSlot(wait.result);
}

void InstructionCheck::operator()(const inst::LocalShard &local) const {
  auto unit = byName.find(local.unit);
  if (unit == byName.end() || unit->second->kind != StateKind::FlatParam)
    fail("unit '" + local.unit + "' is not a flat parameter of the plan");
  const StateEntry &flat = *unit->second;
  TensorSpec shard{{flat.shardNumel()}, flat.type.dtype};
  // Mixed precision: the shard of a gradient reduced in bf16 or f16.
  bool reduced =
      local.type.dtype == c10::kBFloat16 || local.type.dtype == c10::kHalf;
  if (local.type.shape != shard.shape ||
      (local.type.dtype != shard.dtype && !reduced))
    fail("the shard of '" + flat.name + "' is " + shard.str() + ", not " +
         local.type.str());
  if (local.group == CommGroup::Replicate)
    fail("takes a shard over the replica group (flat parameters are "
         "sharded over the shard group)");
  checkSlot(local.buffer);
  checkSlot(local.result);
}

void InstructionCheck::operator()(const inst::ToDevice &toDevice) const {
  checkCopy(toDevice.input, toDevice.result, /*toHost=*/false);
}

void InstructionCheck::operator()(const inst::ToHost &toHost) const {
  checkCopy(toHost.input, toHost.result, /*toHost=*/true);
}

void InstructionCheck::operator()(const inst::Free &free) const {
  checkSlot(free.buffer);
}

void InstructionCheck::operator()(const inst::View &view) const {
  checkSlot(view.buffer);
  checkSlot(view.result);
}

} // namespace

/// Every slot is defined by an input or an instruction's result: a plan
/// that declares more is refused before any slot is allocated.
static void checkSlotCount(const Plan &plan, const std::string &path) {
  int64_t definable = static_cast<int64_t>(plan.inputs.size());
  for (const Instruction &inst : plan.instructions)
    definable += std::max<int64_t>(
        1, inst.call() ? static_cast<int64_t>(inst.call()->results.size()) : 0);
  if (plan.numSlots < 0 || plan.numSlots > definable)
    throw Error("plan '" + path + "': num_slots " +
                std::to_string(plan.numSlots) + " is not between 0 and the " +
                std::to_string(definable) + " values its inputs and "
                "instructions define");
}

/// The state entries by name, each declared once; optimizer state is
/// shaped like the parameter (or the rank's shard of the flat parameter)
/// it belongs to.
static StateByName checkStateEntries(const Plan &plan,
                                     const std::string &path) {
  StateByName byName;
  for (const StateEntry &e : plan.state)
    if (!byName.emplace(e.name, &e).second)
      throw Error("plan '" + path + "': state '" + e.name +
                  "' is declared twice");
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
  return byName;
}

/// Inputs in range; each micro-batch takes every input once, with the same
/// type.
static void checkInputs(const Plan &plan, const std::string &path) {
  for (const InputEntry &in : plan.inputs)
    if (in.slot < 0 || in.slot >= plan.numSlots)
      throw Error("plan '" + path + "': input '" + in.name +
                  "' has an out-of-range slot");
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
}

/// Outputs in range; a metric is a named output (a scalar), reported beside
/// the loss under its own name.
static void checkOutputs(const Plan &plan, const std::string &path) {
  for (int64_t out : plan.outputs)
    if (out < 0 || out >= plan.numSlots)
      throw Error("plan '" + path + "': an output slot is out of range");
  std::set<std::string> metricNames;
  for (const auto &[name, output] : plan.metrics)
    if (output < 1 || output >= static_cast<int64_t>(plan.outputs.size()) ||
        !metricNames.insert(name).second || !plan::isMetric(name))
      throw Error("plan '" + path + "': metric '" + name +
                  "' is not a known metric of a distinct output");
}

/// The world and its shard groups, and each flat parameter's sizes in
/// them.
static void checkWorld(const Plan &plan, const std::string &path) {
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


/// The slots an instruction reads and those it defines.
struct SlotUses {
  std::vector<int64_t> reads, defines;

  void callArgs(const inst::Call &call) {
    for (const json &arg : call.args) {
      if (arg.contains("t"))
        reads.push_back(arg["t"].get<int64_t>());
      if (arg.contains("tl"))
        for (const json &s : arg["tl"])
          reads.push_back(s.get<int64_t>());
      if (arg.contains("otl"))
        for (const json &s : arg["otl"])
          if (!s.is_null())
            reads.push_back(s.get<int64_t>());
    }
    defines.insert(defines.end(), call.results.begin(), call.results.end());
  }
  void operator()(const inst::Get &get) { defines.push_back(get.result); }
  void operator()(const inst::Update &update) { reads.push_back(update.value); }
  void operator()(const inst::Constant &c) { defines.push_back(c.result); }
  void operator()(const inst::Call &call) { callArgs(call); }
  void operator()(const inst::AutogradBackward &backward) {
    callArgs(backward);
    for (const auto &[result, slot] : backward.resultGrads)
      reads.push_back(slot);
    if (backward.rng >= 0)
      reads.push_back(backward.rng);
  }
  void operator()(const inst::RngState &rng) { defines.push_back(rng.result); }
  void operator()(const inst::SetRngState &set) { reads.push_back(set.state); }
  void operator()(const inst::AllGather &c) { pair(c.input, c.result); }
  void operator()(const inst::ReduceScatter &c) { pair(c.input, c.result); }
  void operator()(const inst::AllReduce &c) { pair(c.input, c.result); }
  void operator()(const inst::Wait &c) { pair(c.future, c.result); }
  void operator()(const inst::LocalShard &c) { pair(c.buffer, c.result); }
  void operator()(const inst::ToDevice &c) { pair(c.input, c.result); }
  void operator()(const inst::ToHost &c) { pair(c.input, c.result); }
  void operator()(const inst::Free &free) { reads.push_back(free.buffer); }
  void operator()(const inst::View &view) { pair(view.buffer, view.result); }
  void pair(int64_t read, int64_t defined) {
    reads.push_back(read);
    defines.push_back(defined);
  }
};

/// Every slot is defined before it is read and not read after it is freed
/// (an instruction's `free`, or `free`): a plan that would read an empty
/// slot is refused at load, naming the instruction, instead of failing in
/// the middle of a step. The outputs are defined at the end.
static void checkSlotsDefined(const Plan &plan, const std::string &path) {
  std::vector<char> slots(static_cast<size_t>(plan.numSlots), 0);
  auto defined = [&](int64_t s) -> char & {
    if (s < 0 || s >= plan.numSlots) // checked before; never trusted
      throw Error("plan '" + path + "': slot " + std::to_string(s) +
                  " is out of range");
    return slots[static_cast<size_t>(s)];
  };
  for (const InputEntry &in : plan.inputs)
    defined(in.slot) = 1;
  for (size_t i = 0; i < plan.instructions.size(); ++i) {
    const Instruction &inst = plan.instructions[i];
    SlotUses uses;
    std::visit(uses, inst.op);
    for (int64_t s : uses.reads)
      if (!defined(s))
        throw Error("plan '" + path + "': instruction #" + std::to_string(i) +
                    " (" +
                    (inst.call() ? inst.call()->op
                                 : instructionJson(inst).value("kind", "")) +
                    ") reads slot " + std::to_string(s) +
                    ", which no earlier instruction defines or which was "
                    "freed");
    for (int64_t s : uses.defines)
      defined(s) = 1;
    if (const auto *free = inst.as<inst::Free>())
      defined(free->buffer) = 0;
    for (int64_t s : inst.free)
      defined(s) = 0;
  }
  for (int64_t out : plan.outputs)
    if (!defined(out))
      throw Error("plan '" + path + "': output slot " + std::to_string(out) +
                  " is not defined at the end of the step (never defined, "
                  "or freed)");
}

/// Every slot in range, every state name declared, every call's results and
/// written arguments consistent: a bad plan is an error, never a crash.
static void validate(const Plan &plan, const std::string &path) {
  checkSlotCount(plan, path);
  StateByName byName = checkStateEntries(plan, path);
  checkInputs(plan, path);
  checkOutputs(plan, path);
  for (size_t i = 0; i < plan.instructions.size(); ++i) {
    const Instruction &inst = plan.instructions[i];
    InstructionCheck check(plan, path, byName, i, inst);
    for (int64_t s : inst.free)
      check.checkSlot(s);
    std::visit(check, inst.op);
  }
  // After every slot is known to be in range.
  checkSlotsDefined(plan, path);
  checkWorld(plan, path);
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
  call.results = intsAt(i, "results");
  call.numSchemaResults = intAt(i, "num_schema_results");
  call.mutates = intsAt(i, "mutates");
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
  inst.free = intsAt(i, "free");
  inst.host = i.value("host", false);
  auto slot = [&](const char *key) { return intAt(i, key); };
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
      backward.resultGrads.emplace_back(intAt(g, "result"),
                                        intAt(g, "grad"));
    backward.wrt = intsAt(i, "wrt");
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

/// A state entry of the file (a parameter, buffer, optimizer state or flat
/// parameter).
static StateEntry parseStateEntry(const json &s, const std::string &path) {
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
  if (e.kind == StateKind::Optim) {
    std::string init = s.at("init").get<std::string>();
    // The learning rate the runner sets starts at the optimizer's lr (read
    // with the optimizer below).
    e.initLr = init == "lr" && e.name == plan::kStateLr;
    if (init != "zeros" && !e.initLr)
      throw Error("plan '" + path + "': optimizer state '" + e.name +
                  "' has an initial value other than zeros" +
                  (init == "lr" ? " (only '" + std::string(plan::kStateLr) +
                                      "' starts at the optimizer's lr)"
                                : std::string()));
  }
  if (e.kind == StateKind::Optim && s.at("param").is_string())
    e.param = s.at("param").get<std::string>();
  e.persistent = s.value("persistent", true);
  e.host = s.value("host", false);
  e.type = parseType(s);
  // fsdp-opt trains no complex parameter (complex values live between
  // real ones, and complex buffers are state like any other).
  if ((e.kind == StateKind::Param || e.kind == StateKind::FlatParam) &&
      c10::isComplexType(e.type.dtype))
    throw Error("plan '" + path + "': parameter '" + e.name + "' is " +
                e.type.str() + ": complex parameters are not trained "
                "(fsdp-opt writes none)");
  e.aliases = s.at("aliases").get<std::vector<std::string>>();
  if (e.kind == StateKind::FlatParam) {
    e.numel = intAt(s, "numel");
    e.padded = intAt(s, "padded");
    e.shards = intAt(s, "shards");
    e.replicated = s.at("replicated").get<bool>();
    for (const json &m : s.at("params")) {
      FlatMember member;
      member.name = m.at("name").get<std::string>();
      member.type = parseType(m);
      if (c10::isComplexType(member.type.dtype))
        throw Error("plan '" + path + "': parameter '" + member.name +
                    "' is " + member.type.str() +
                    ": complex parameters are not trained (fsdp-opt writes "
                    "none)");
      member.offset = intAt(m, "offset");
      member.aliases = m.at("aliases").get<std::vector<std::string>>();
      e.members.push_back(std::move(member));
    }
  }
  return e;
}

/// The evaluation step: its own slots, inputs, outputs and instructions
/// over `train`'s state, checked as the training step is; it changes no
/// state and takes one batch (no micro-batches).
static std::shared_ptr<const Plan>
parseEvalProgram(const json &e, const Plan &train, const std::string &path) {
  auto eval = std::make_shared<Plan>();
  eval->digest = train.digest;
  eval->function = e.at("function").get<std::string>();
  eval->numSlots = intAt(e, "num_slots");
  eval->worldSize = train.worldSize;
  eval->shardGroupSize = train.shardGroupSize;
  eval->sharding = train.sharding;
  eval->device = train.device;
  eval->state = train.state;
  std::string where = path + "' evaluation step '" + eval->function;
  for (const json &i : e.at("inputs")) {
    if (i.contains("micro_batch"))
      throw Error("plan '" + where + "': input '" +
                  i.at("name").get<std::string>() +
                  "' names a micro-batch; an evaluation step has none");
    eval->inputs.push_back({i.at("name").get<std::string>(), parseType(i),
                            intAt(i, "slot"), 0});
  }
  eval->outputs = intsAt(e, "outputs");
  for (const json &i : e.at("instructions"))
    eval->instructions.push_back(parseInstruction(i, where));
  validate(*eval, where);
  for (size_t i = 0; i < eval->instructions.size(); ++i) {
    const Instruction &inst = eval->instructions[i];
    if (inst.is<inst::Update>() || inst.is<inst::ReduceScatter>() ||
        inst.is<inst::AutogradBackward>())
      throw Error("plan '" + where + "': instruction #" + std::to_string(i) +
                  " (" + instructionJson(inst).value("kind", "") +
                  ") belongs to training: an evaluation step changes no "
                  "state and computes no gradient");
  }
  if (eval->outputs.empty())
    throw Error("plan '" + where + "' returns nothing (its loss first)");
  return eval;
}

Plan loadPlan(const std::string &path) {
  // A regular file (a pipe would block, /dev/zero never end) of at most
  // kMaxPlanBytes.
  std::vector<char> data = readFile(path, kMaxPlanBytes, Links::Follow, "plan ");
  return parsePlan(std::string(data.begin(), data.end()), path);
}

Plan parsePlan(const std::string &bytes, const std::string &path) {
  json j;
  try {
    j = json::parse(bytes);
  } catch (const json::exception &e) {
    throw Error("plan '" + path + "' is not valid JSON: " + e.what());
  }
  try {
    if (j.value("format", "") != "fsdp-plan")
      throw Error("'" + path + "' is not an fsdp-opt plan (no \"format\": \"fsdp-plan\")");
    int64_t version = intAt(j, "version");
    if (version != kPlanFormatVersion)
      throw Error("plan '" + path + "' has format version " +
                  std::to_string(version) + ", but this fsdp-run reads version " +
                  std::to_string(kPlanFormatVersion) +
                  "; compile it again with a matching fsdp-opt");
    Plan plan;
    plan.digest = c10::sha1(bytes).str();
    plan.function = j.at("function").get<std::string>();
    plan.numSlots = intAt(j, "num_slots");
    plan.worldSize = intAt(j, "world_size");
    plan.shardGroupSize = intAt(j, "shard_group_size");
    plan.sharding = j.at("sharding").get<std::string>();
    if (j.contains("device")) {
      plan.device = j.at("device").get<std::string>();
      if (plan.device != "cuda" && plan.device != "cpu")
        throw Error("plan '" + path + "': device is '" + plan.device +
                    "', expected cuda or cpu");
    }
    for (const json &s : j.at("state"))
      plan.state.push_back(parseStateEntry(s, path));
    if (j.contains("optimizer")) {
      plan.optimizer = j.at("optimizer");
      if (!plan.optimizer.is_object() ||
          !plan.optimizer.contains("name") ||
          !plan.optimizer.at("name").is_string())
        throw Error("plan '" + path + "': optimizer must be an object with "
                    "a name");
    }
    for (StateEntry &e : plan.state) {
      if (!e.initLr)
        continue;
      if (!plan.optimizer.is_object() || !plan.optimizer.contains("lr") ||
          !plan.optimizer.at("lr").is_number())
        throw Error("plan '" + path + "': state '" + e.name +
                    "' starts at the optimizer's lr, which the plan does "
                    "not give");
      if (e.param.size() || e.type.shape.size() || e.type.dtype != at::kDouble)
        throw Error("plan '" + path + "': state '" + e.name +
                    "' must be an f64 scalar of no parameter");
      e.init = plan.optimizer.at("lr").get<double>();
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
      plan.microBatches = intAt(j, "micro_batches");
    for (const json &i : j.at("inputs"))
      plan.inputs.push_back({i.at("name").get<std::string>(), parseType(i),
                             intAt(i, "slot"),
                             i.value("micro_batch", int64_t(0))});
    plan.outputs = intsAt(j, "outputs");
    if (j.contains("metrics"))
      for (const json &m : j.at("metrics"))
        plan.metrics.emplace_back(m.at("name").get<std::string>(),
                                  intAt(m, "output"));
    for (const json &i : j.at("instructions"))
      plan.instructions.push_back(parseInstruction(i, path));
    validate(plan, path);
    if (j.contains("no_eval"))
      plan.noEval = j.at("no_eval").get<std::string>();
    if (j.contains("eval"))
      plan.eval = parseEvalProgram(j.at("eval"), plan, path);
    return plan;
  } catch (const json::exception &e) {
    throw Error("plan '" + path + "' is malformed: " + e.what());
  } catch (const BadType &e) {
    throw Error("plan '" + path + "': " + e.what());
  }
}

} // namespace fsdp::runtime
