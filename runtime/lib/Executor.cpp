//===- Executor.cpp - runs a plan on one rank ------------------------------===//

#include "fsdp/runtime/Executor.h"
#include "fsdp/runtime/ModelArchive.h"
#include "fsdp/runtime/PlanOperators.h"

#include <ATen/CPUGeneratorImpl.h>
#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/jit/serialization/export.h>
#include <torch/csrc/jit/serialization/pickler.h>
#include <torch/script.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <optional>
#include <thread>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <limits>

namespace fsdp::runtime {

using nlohmann::json;

//===----------------------------------------------------------------------===//
// State
//===----------------------------------------------------------------------===//

State loadState(const Plan &plan, const std::string &modelPath,
                int shardRank, int64_t *bytesRead) {
  ModelArchive archive(modelPath);
  if (!archive.hasWeights())
    throw Error("model '" + modelPath +
                "' was saved without weights (fsdp_export.save(..., "
                "weights=False)): a plan can be compiled from it and its "
                "memory predicted, but training needs the model saved with "
                "its weights");
  // Tensors the archive does not find (ModelArchive says which) come from
  // loading the whole module, once.
  std::optional<std::map<std::string, at::Tensor>> module;
  int64_t moduleBytes = 0;
  auto loadModule = [&]() -> std::map<std::string, at::Tensor> & {
    if (module)
      return *module;
    torch::jit::Module m;
    try {
      m = torch::jit::load(modelPath, c10::Device(c10::kCPU));
    } catch (const c10::Error &e) {
      throw Error("cannot load model '" + modelPath + "': " + firstLine(e));
    }
    module.emplace();
    for (const auto &p : m.named_parameters(/*recurse=*/true))
      (*module)[p.name] = p.value.detach();
    for (const auto &b : m.named_buffers(/*recurse=*/true))
      (*module)[b.name] = b.value.detach();
    for (const auto &[name, t] : *module)
      moduleBytes += static_cast<int64_t>(t.nbytes());
    return *module;
  };
  // Elements [begin, end) of the flattened tensor `name` (or an alias),
  // after checking its shape and dtype against the plan's; end = -1: all.
  auto read = [&](const std::string &name,
                  const std::vector<std::string> &aliases,
                  const TensorSpec &type, const char *what, int64_t begin,
                  int64_t end) {
    auto check = [&](const TensorSpec &found) {
      if (found.shape != type.shape || found.dtype != type.dtype)
        throw Error(std::string(what) + " '" + name + "' is " + found.str() +
                    " in '" + modelPath + "' but " + type.str() +
                    " in the plan");
    };
    std::vector<std::string> names{name};
    names.insert(names.end(), aliases.begin(), aliases.end());
    for (const std::string &n : names)
      if (const ModelArchive::Entry *entry = archive.find(n)) {
        check({entry->sizes, entry->dtype});
        return end < 0 ? archive.read(*entry)
                       : archive.readFlat(*entry, begin, end);
      }
    std::map<std::string, at::Tensor> &found = loadModule();
    auto it = found.end();
    for (size_t i = 0; it == found.end() && i < names.size(); ++i)
      it = found.find(names[i]);
    if (it == found.end())
      throw Error(std::string("the plan needs ") + what + " '" + name +
                  "', which '" + modelPath + "' does not have");
    const at::Tensor &t = it->second;
    check({t.sizes().vec(), t.scalar_type()});
    return end < 0 ? t.clone()
                   : t.contiguous().view({-1}).narrow(0, begin, end - begin).clone();
  };
  State state;
  for (const StateEntry &entry : plan.state) {
    if (entry.kind == StateKind::FlatParam) {
      // Only this rank's shard: the parts of the members that fall in
      // [begin, end) of the padded flat buffer (the padding stays zero);
      // all of it if every rank holds it whole.
      int64_t shard = entry.type.shape[0];
      int64_t begin = entry.replicated ? 0 : shardRank * shard;
      int64_t end = begin + shard;
      at::Tensor mine =
          at::zeros({shard}, at::TensorOptions().dtype(entry.type.dtype));
      for (const FlatMember &m : entry.members) {
        int64_t lo = std::max(begin, m.offset);
        int64_t hi = std::min(end, m.offset + m.type.numel());
        if (lo < hi)
          mine.narrow(0, lo - begin, hi - lo)
              .copy_(read(m.name, m.aliases, m.type, "parameter",
                          lo - m.offset, hi - m.offset));
        else // still checked against the plan, nothing read
          read(m.name, m.aliases, m.type, "parameter", 0, 0);
      }
      state[entry.name] = mine;
      continue;
    }
    if (!entry.fromModel()) {
      state[entry.name] = at::full(entry.type.shape, entry.init,
                                   at::TensorOptions().dtype(entry.type.dtype));
      continue;
    }
    state[entry.name] = read(entry.name, entry.aliases, entry.type,
                             entry.isParam() ? "parameter" : "buffer", 0, -1);
  }
  if (bytesRead)
    *bytesRead = archive.bytesRead() + moduleBytes;
  return state;
}

void placeState(const Plan &plan, State &state, c10::Device device) {
  for (const StateEntry &entry : plan.state) {
    at::Tensor &t = state.at(entry.name);
    if (!entry.host)
      t = t.to(device);
    else if (device.is_cuda())
      t = t.to(c10::kCPU).pin_memory();
  }
}

State gatherFlatParams(const Plan &plan, const State &state,
                       Communicator &comm) {
  State whole;
  for (const StateEntry &entry : plan.state) {
    if (entry.kind != StateKind::FlatParam)
      continue;
    at::Tensor full =
        entry.replicated
            ? state.at(entry.name)
            : comm.allGather(state.at(entry.name), CommGroup::Shard)->wait();
    for (const FlatMember &m : entry.members)
      whole[m.name] = full.narrow(0, m.offset, m.type.numel())
                          .view(m.type.shape)
                          .clone();
  }
  return whole;
}

State stateDict(const Plan &plan, const State &state, const State &gathered) {
  State out;
  auto add = [&](const std::string &name,
                 const std::vector<std::string> &aliases, const at::Tensor &t) {
    out[name] = t;
    for (const std::string &alias : aliases)
      out[alias] = t;
  };
  for (const StateEntry &entry : plan.state) {
    if (entry.kind == StateKind::FlatParam) {
      for (const FlatMember &m : entry.members)
        add(m.name, m.aliases, gathered.at(m.name));
      continue;
    }
    if (!entry.fromModel() || !entry.persistent)
      continue;
    add(entry.name, entry.aliases, state.at(entry.name));
  }
  return out;
}

void saveState(const Plan &plan, const State &state, const State &gathered,
               const std::string &path) {
  c10::impl::GenericDict dict(c10::StringType::get(), c10::TensorType::get());
  for (const auto &[name, t] : stateDict(plan, state, gathered))
    dict.insert(name, t);
  writeFileAtomically(path, saveForTorchLoad(dict));
}

int64_t parameterAndOptimizerBytes(const Plan &plan, const State &state) {
  int64_t bytes = 0;
  for (const StateEntry &entry : plan.state)
    if (entry.kind != StateKind::Buffer)
      bytes += state.at(entry.name).nbytes();
  return bytes;
}

/// The process's umask, read without changing it (umask(2) would, for a
/// moment, for every thread); 022 where /proc does not say.
static mode_t processUmask() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("Umask:", 0) == 0)
      return static_cast<mode_t>(std::stoul(line.substr(6), nullptr, 8));
  return 022;
}

namespace {
/// The minor page faults this process has taken so far.
int64_t minorPageFaults() {
  struct rusage usage;
  if (::getrusage(RUSAGE_SELF, &usage) != 0)
    return 0;
  return usage.ru_minflt;
}

/// Faults a fresh page in and sleeps 10 ms (FSDP_TEST_FAULTING_TIMED_RUNS).
void faultAndStall() {
  long page = ::sysconf(_SC_PAGESIZE);
  void *fresh = ::mmap(nullptr, page, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (fresh != MAP_FAILED) {
    static_cast<volatile char *>(fresh)[0] = 1;
    ::munmap(fresh, page);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

/// The same value with every list, dict and tuple untyped (element type Any),
/// so that the pickler writes plain Python containers, and every tensor in
/// CPU memory.
c10::IValue untyped(const c10::IValue &value) {
  // What torch.load reads anywhere: CPU tensors.
  if (value.isTensor() && !value.toTensor().is_cpu())
    return value.toTensor().cpu();
  if (value.isList()) {
    c10::impl::GenericList list(c10::AnyType::get());
    for (const c10::IValue &item : value.toListRef())
      list.push_back(untyped(item));
    return list;
  }
  if (value.isGenericDict()) {
    c10::impl::GenericDict source = value.toGenericDict();
    c10::impl::GenericDict dict(source.keyType(), c10::AnyType::get());
    for (const auto &entry : source)
      dict.insert(entry.key(), untyped(entry.value()));
    return dict;
  }
  if (value.isTuple()) {
    std::vector<c10::IValue> items;
    for (const c10::IValue &item : value.toTupleRef().elements())
      items.push_back(untyped(item));
    return c10::ivalue::Tuple::create(std::move(items));
  }
  return value;
}
} // namespace

std::vector<char> saveForTorchLoad(const c10::IValue &value) {
  std::vector<char> pickled;
  torch::jit::Pickler pickler(
      [&](const char *bytes, size_t size) {
        pickled.insert(pickled.end(), bytes, bytes + size);
      },
      /*tensor_table=*/nullptr, /*type_renamer=*/nullptr,
      /*memoized_class_types=*/nullptr, /*get_tensor_id=*/nullptr,
      /*tag_aggregates=*/false);
  pickler.protocol();
  pickler.pushIValue(untyped(value));
  pickler.stop();
  std::vector<char> archive;
  caffe2::serialize::PyTorchStreamWriter writer(
      [&](const void *bytes, size_t size) {
        const char *begin = static_cast<const char *>(bytes);
        archive.insert(archive.end(), begin, begin + size);
        return size;
      });
  torch::jit::writeArchiveAndTensors("data", pickled.data(), pickled.size(),
                                     pickler.tensorData(), writer);
  writer.writeEndOfFile();
  return archive;
}

void writeFileAtomically(const std::string &path, const std::vector<char> &bytes) {
  // A device or pipe (/dev/stdout, a FIFO) is written in place: renaming
  // over it would replace it.
  struct stat info;
  if (::stat(path.c_str(), &info) == 0 && !S_ISREG(info.st_mode)) {
    std::ofstream out(path, std::ios::binary);
    out.write(bytes.data(), bytes.size());
    out.close();
    if (!out)
      throw Error("cannot write '" + path + "'");
    return;
  }
  // A new file beside the target (created exclusively under an unpredictable
  // name, never through a symbolic link), renamed over it once complete.
  std::string tmp = path + ".fsdp-run.XXXXXX";
  int fd = ::mkstemp(tmp.data());
  if (fd < 0)
    throw Error("cannot write '" + path + "': " + std::strerror(errno));
  bool ok = ::fchmod(fd, 0666 & ~processUmask()) == 0 &&
            writeAll(fd, bytes.data(), bytes.size());
  // On disk before it replaces the target: whole or absent, even across a
  // crash of the machine.
  if (ok && ::fsync(fd) != 0)
    ok = false;
  int error = ok ? 0 : errno;
  if (::close(fd) != 0 && ok) {
    ok = false;
    error = errno;
  }
  if (ok && std::rename(tmp.c_str(), path.c_str()) != 0) {
    ok = false;
    error = errno;
  }
  if (!ok) {
    ::unlink(tmp.c_str());
    throw Error("cannot write '" + path + "'" +
                (error ? std::string(": ") + std::strerror(error) : ""));
  }
}

at::Tensor generatorState(c10::Device device) {
  at::Generator gen = at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void setGeneratorState(c10::Device device, const at::Tensor &state) {
  at::Generator gen = at::globalContext().defaultGenerator(device);
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

//===----------------------------------------------------------------------===//
// Building calls
//===----------------------------------------------------------------------===//

/// A plan's integer argument: a JSON whole number within int64.
static int64_t intArg(const json &v, const std::string &where) {
  std::optional<int64_t> n = wholeNumber(v);
  if (!n)
    throw Error(where + ": integer argument " + v.dump() +
                " is not a whole number within 64 bits");
  return *n;
}

static double parseFloat(const json &v) {
  if (v.is_string()) {
    std::string s = v.get<std::string>();
    if (s == "inf")
      return std::numeric_limits<double>::infinity();
    if (s == "-inf")
      return -std::numeric_limits<double>::infinity();
    return std::numeric_limits<double>::quiet_NaN();
  }
  return v.get<double>();
}

/// A non-tensor argument, typed as the schema wants it.
static c10::IValue scalarArg(const json &arg, const c10::TypePtr &type,
                             const std::string &where) {
  c10::TypePtr t = type;
  if (auto opt = t->cast<c10::OptionalType>())
    t = opt->getElementType();
  if (arg.contains("none"))
    return c10::IValue();
  if (arg.contains("b"))
    return c10::IValue(arg["b"].get<bool>());
  if (arg.contains("i")) {
    int64_t v = intArg(arg["i"], where);
    if (t->kind() == c10::TypeKind::FloatType)
      return c10::IValue(static_cast<double>(v));
    if (t->kind() == c10::TypeKind::BoolType)
      return c10::IValue(v != 0);
    return c10::IValue(v);
  }
  if (arg.contains("f"))
    return c10::IValue(parseFloat(arg["f"]));
  if (arg.contains("c")) {
    const json &parts = arg["c"];
    if (!parts.is_array() || parts.size() != 2)
      throw Error(where + ": a complex argument is [real, imaginary]");
    return c10::IValue(
        c10::complex<double>(parseFloat(parts[0]), parseFloat(parts[1])));
  }
  if (arg.contains("s")) {
    std::string s = arg["s"].get<std::string>();
    if (t->kind() == c10::TypeKind::DeviceObjType)
      return c10::IValue(c10::Device(s));
    return c10::IValue(s);
  }
  if (arg.contains("dtype"))
    return c10::IValue(
        static_cast<int64_t>(parseDtype(arg["dtype"].get<std::string>())));
  if (arg.contains("l")) {
    c10::TypePtr elem = c10::AnyType::get();
    if (auto list = t->cast<c10::ListType>())
      elem = list->getElementType();
    const json &items = arg["l"];
    if (elem->kind() == c10::TypeKind::IntType ||
        elem->kind() == c10::TypeKind::SymIntType) {
      std::vector<int64_t> v;
      for (const json &e : items)
        v.push_back(intArg(e.at("i"), where));
      return c10::IValue(v);
    }
    if (elem->kind() == c10::TypeKind::FloatType) {
      std::vector<double> v;
      for (const json &e : items)
        v.push_back(e.contains("i") ? e["i"].get<double>() : parseFloat(e["f"]));
      return c10::IValue(v);
    }
    if (elem->kind() == c10::TypeKind::BoolType) {
      c10::List<bool> v;
      for (const json &e : items)
        v.push_back(e.at("b").get<bool>());
      return c10::IValue(v);
    }
    c10::impl::GenericList v(elem);
    for (const json &e : items)
      v.push_back(scalarArg(e, elem, where));
    return c10::IValue(v);
  }
  throw Error(where + ": unreadable argument " + arg.dump());
}

/// A `Device` or `Device?` argument (factories' `device`).
static bool isDeviceArgument(const c10::Argument &argument) {
  c10::TypePtr t = argument.type();
  if (auto opt = t->cast<c10::OptionalType>())
    t = opt->getElementType();
  return t->kind() == c10::TypeKind::DeviceObjType;
}

/// A plan is a file people share: it may call only the operators fsdp-opt
/// emits (PlanOperators.def: none reads or writes files, none makes a view
/// of memory outside its operand, and those whose kernels trust an index
/// are guarded), and every argument an operator writes (by its schema's
/// alias annotations) must be one the plan says it writes, so that the
/// executor copies it first.
static void checkCallIsContained(const c10::FunctionSchema &schema,
                                 const inst::Call &call,
                                 const std::string &where) {
  if (!isPlanOperator(call.op))
    throw Error(where + ": " + call.op + " is not an operator a plan may "
                "call (fsdp-run calls only those fsdp-opt emits: "
                "docs/plan-format.md)");
  for (size_t a = 0; a < schema.arguments().size(); ++a) {
    const c10::AliasInfo *alias = schema.arguments()[a].alias_info();
    if (!alias || !alias->isWrite())
      continue;
    if (!schema.arguments()[a].type()->isSubtypeOf(*c10::TensorType::get()) &&
        !schema.arguments()[a].type()->isSubtypeOf(
            *c10::OptionalType::ofTensor()))
      throw Error(where + ": writes its argument '" +
                  schema.arguments()[a].name() + "', a list, which a plan "
                  "cannot say");
    if (!std::count(call.mutates.begin(), call.mutates.end(),
                    static_cast<int64_t>(a)))
      throw Error(where + ": writes its argument '" +
                  schema.arguments()[a].name() + "' (#" + std::to_string(a) +
                  "), which the plan's 'mutates' does not list");
  }
}

/// Every tensor a call returned lies within its storage (no operator on
/// the list makes one that does not; this holds the line if one did).
/// `where` names the call, asked only for an error: this runs every call.
template <typename Where>
static void checkResultsWithinStorage(const std::vector<at::Tensor> &results,
                                      const Where &where) {
  for (size_t r = 0; r < results.size(); ++r)
    if (!withinStorage(results[r]))
      throw Error(where() + ": result #" + std::to_string(r) +
                  " reaches outside its storage");
}

/// The future slot a collective start defines; nullopt for any other
/// instruction.
static std::optional<int64_t> collectiveFuture(const Instruction &inst) {
  if (const auto *gather = inst.as<inst::AllGather>())
    return gather->result;
  if (const auto *scatter = inst.as<inst::ReduceScatter>())
    return scatter->result;
  if (const auto *reduce = inst.as<inst::AllReduce>())
    return reduce->result;
  return std::nullopt;
}

/// A constant's tensor, from the bytes the plan spells in hex.
static at::Tensor constantTensor(size_t i, const inst::Constant &constant) {
  const std::string &hex = constant.hex;
  std::string bytes;
  for (size_t k = 0; k + 1 < hex.size(); k += 2)
    bytes.push_back(static_cast<char>(std::stoi(hex.substr(k, 2), nullptr, 16)));
  at::Tensor t = at::empty(constant.type.shape,
                           at::TensorOptions().dtype(constant.type.dtype));
  if (static_cast<size_t>(t.nbytes()) != bytes.size())
    throw Error("plan constant #" + std::to_string(i) + " holds " +
                std::to_string(bytes.size()) + " bytes, expected " +
                std::to_string(t.nbytes()));
  std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
  return t;
}

/// An operator call, resolved and checked against its schema.
Executor::Call Executor::prepareCall(size_t i, const Instruction &inst,
                                     c10::Device device) {
  const inst::Call *planned = inst.call();
  const auto *backward = inst.as<inst::AutogradBackward>();
  std::string where = "instruction #" + std::to_string(i) + " (" +
                      (backward ? "autograd backward of " : "") +
                      planned->op + ")";
  auto dot = planned->op.find('.');
  std::string name = planned->op.substr(0, dot);
  std::string overload =
      dot == std::string::npos ? "" : planned->op.substr(dot + 1);
  auto handle = c10::Dispatcher::singleton().findSchema({name, overload});
  if (!handle)
    throw Error(where + ": this libtorch has no operator " + planned->op);
  Call call;
  call.op = *handle;
  call.guard = operatorGuard(planned->op);
  const c10::FunctionSchema &schema = handle->schema();
  checkCallIsContained(schema, *planned, where);
  if (schema.arguments().size() != planned->args.size())
    throw Error(where + ": the plan passes " +
                std::to_string(planned->args.size()) +
                " arguments, this libtorch's schema takes " +
                std::to_string(schema.arguments().size()));
  for (size_t a = 0; a < planned->args.size(); ++a) {
    const json &arg = planned->args[a];
    std::vector<int64_t> argSlots;
    int kind = 0;
    c10::IValue constant;
    if (arg.contains("t")) {
      kind = 1;
      argSlots.push_back(arg["t"].get<int64_t>());
    } else if (arg.contains("tl")) {
      kind = 2;
      argSlots = arg["tl"].get<std::vector<int64_t>>();
    } else if (arg.contains("otl")) {
      kind = 3;
      for (const json &e : arg["otl"])
        argSlots.push_back(e.is_null() ? -1 : e.get<int64_t>());
    } else {
      constant = scalarArg(arg, schema.arguments()[a].type(), where);
      // A device the importer folded (`device=x.device`), or none (a
      // factory's default, the CPU): the device the call runs on.
      if (isDeviceArgument(schema.arguments()[a]) &&
          (constant.isDevice() || constant.isNone()))
        constant = c10::IValue(device);
    }
    for (size_t k = 0; k < argSlots.size(); ++k)
      if (argSlots[k] >= 0)
        call.operands.emplace_back(a, k);
    call.argKind.push_back(kind);
    call.argSlots.push_back(std::move(argSlots));
    call.constants.push_back(std::move(constant));
  }
  for (int64_t r : planned->requiresGrad)
    if (r < 0 || r >= static_cast<int64_t>(call.operands.size()))
      throw Error(where + ": marks operand #" + std::to_string(r) +
                  " as requiring grad, but the call has " +
                  std::to_string(call.operands.size()) + " tensor operands");
  for (int64_t w : backward ? backward->wrt : std::vector<int64_t>())
    if (w < 0 || w >= static_cast<int64_t>(call.operands.size()))
      throw Error(where + ": differentiates operand #" + std::to_string(w) +
                  ", but the call has " +
                  std::to_string(call.operands.size()) + " tensor operands");
  for (int64_t a : planned->mutates) {
    int64_t slot = call.argSlots[a][0];
    int uses = 0;
    for (const std::vector<int64_t> &argSlots : call.argSlots)
      uses += std::count(argSlots.begin(), argSlots.end(), slot);
    call.donate.push_back(uses == 1 && std::count(inst.free.begin(),
                                                  inst.free.end(), slot));
  }
  return call;
}

Executor::Executor(const Plan &plan, Communicator *comm)
    : plan(plan), comm(comm) {
  if (!this->comm) {
    single = createSingleRankCommunicator();
    this->comm = single.get();
  }
  device = this->comm->device();
  if (device.is_cuda() &&
      std::any_of(plan.instructions.begin(), plan.instructions.end(),
                  [](const Instruction &inst) {
                    return inst.as<inst::ToHost>() || inst.as<inst::ToDevice>();
                  }))
    copier = cuda::makeCopier(device);
  // CPU offload: the state the plan keeps in host memory.
  for (const StateEntry &e : plan.state)
    if (e.host)
      hostState.insert(e.name);
  // Every wait completes a collective started before it.
  std::set<int64_t> started;
  for (size_t i = 0; i < plan.instructions.size(); ++i) {
    const Instruction &inst = plan.instructions[i];
    if (std::optional<int64_t> future = collectiveFuture(inst))
      started.insert(*future);
    if (const auto *wait = inst.as<inst::Wait>())
      if (!started.count(wait->future))
        throw Error("plan instruction #" + std::to_string(i) +
                    " waits on slot " + std::to_string(wait->future) +
                    ", which no collective started");
  }
  calls.resize(plan.instructions.size());
  constants.resize(plan.instructions.size());
  for (size_t i = 0; i < plan.instructions.size(); ++i) {
    const Instruction &inst = plan.instructions[i];
    // The plan is device-neutral: its constants and the devices folded into
    // its calls are the run's device (the host's, for what CPU offload
    // computes there).
    c10::Device where = inst.host ? c10::Device(c10::kCPU) : device;
    if (const auto *constant = inst.as<inst::Constant>())
      constants[i] = constantTensor(i, *constant).to(where);
    else if (inst.call())
      calls[i] = prepareCall(i, inst, where);
  }
}

/// An autograd_backward's gradient as the plan binds it: contiguous, in a
/// storage of its own (a copy where it is strided, a view into a larger
/// storage, or `shared`: in a storage a live value holds).
static at::Tensor boundGradient(at::Tensor g, bool shared) {
  if (!g.is_contiguous() || g.storage_offset() != 0 ||
      static_cast<int64_t>(g.storage().nbytes()) !=
          static_cast<int64_t>(g.nbytes()) ||
      shared)
    return g.clone(at::MemoryFormat::Contiguous);
  return g;
}

Executor::CallMeasurement
Executor::measureCall(const Plan &plan, size_t i,
                      std::vector<at::Tensor> operands, int timedRuns,
                      const std::function<void()> &evict) {
  const Instruction &inst = plan.instructions.at(i);
  const inst::Call *planned = inst.call();
  const auto *backward = inst.as<inst::AutogradBackward>();
  std::string where =
      "instruction #" + std::to_string(i) +
      (planned ? " (" + planned->op + ")" : std::string(" (not a call)"));
  if (!planned)
    throw Error(where + ": only a call can be measured");
  Call call = prepareCall(i, inst, c10::Device(c10::kCPU));
  size_t expected = call.operands.size() +
                    (backward ? backward->resultGrads.size() : 0);
  if (operands.size() != expected)
    throw Error(where + ": " + std::to_string(operands.size()) +
                " operands given, the instruction takes " +
                std::to_string(expected));
  // The operands' storages, each once: what a result holds beyond them is
  // a live tensor, not workspace.
  std::unordered_set<const void *> seen;
  for (const at::Tensor &t : operands)
    if (t.defined() && t.has_storage())
      seen.insert(t.storage().unsafeGetStorageImpl());
  // The bytes of `t`'s storage where `stored` (the operands' and earlier
  // results' storages) does not hold it yet: a live tensor, not workspace.
  auto resultBytes = [](std::unordered_set<const void *> &stored,
                        const at::Tensor &t) -> int64_t {
    if (t.defined() && t.has_storage() &&
        stored.insert(t.storage().unsafeGetStorageImpl()).second)
      return static_cast<int64_t>(t.storage().nbytes());
    return 0;
  };
  AllocatorCounter &counter = AllocatorCounter::install();
  // One run: what it allocates beyond its results' storages.
  std::function<int64_t()> run;
  std::vector<at::Tensor> resultGrads;
  at::Tensor rng;
  std::optional<at::NoGradGuard> noGrad;
  if (backward) {
    // As the executor runs it: the recomputation, one backward, and each
    // gradient contiguous in a storage of its own.
    resultGrads.assign(operands.begin() + call.operands.size(), operands.end());
    operands.resize(call.operands.size());
    if (backward->rng >= 0)
      rng = generatorState(c10::kCPU);
    run = [&] {
      std::unordered_set<const void *> stored = seen;
      int64_t results = 0;
      torch::jit::Stack stack;
      int64_t before = counter.current();
      counter.resetPeak();
      std::vector<at::Tensor> grads = autogradGrads(
          i, call, *backward, operands, resultGrads, rng, c10::kCPU, stack);
      for (at::Tensor &g : grads) {
        bool shared = stored.count(g.storage().unsafeGetStorageImpl()) > 0;
        g = boundGradient(std::move(g), shared);
        results += resultBytes(stored, g);
      }
      return std::max<int64_t>(0, counter.peak() - before - results);
    };
  } else {
    // As the step runs it: operands eager training has requiring grad
    // (attention's kernel choice reads it), nothing recorded.
    for (int64_t r : planned->requiresGrad) {
      operands[r] = operands[r].detach().requires_grad_(true);
      if (!noGrad)
        noGrad.emplace();
    }
    run = [&] {
      std::unordered_set<const void *> stored = seen;
      int64_t results = 0;
      torch::jit::Stack stack;
      stackOf(call, stack, [&](size_t operand, int64_t) -> const at::Tensor & {
        return operands[operand];
      });
      int64_t before = counter.current();
      counter.resetPeak();
      try {
        if (call.guard)
          call.guard(stack, where);
        call.op->callBoxed(stack);
      } catch (const c10::Error &e) {
        throw Error(where + ": " + firstLine(e));
      }
      int64_t peak = counter.peak();
      for (const c10::IValue &v : stack) {
        if (v.isTensor())
          results += resultBytes(stored, v.toTensor());
        else if (v.isTensorList())
          for (const at::Tensor &t : v.toTensorVector())
            results += resultBytes(stored, t);
      }
      stack.clear();
      return std::max<int64_t>(0, peak - before - results);
    };
  }
  CallMeasurement out;
  out.workspaceBytes = run();
  // The results of each timed run are freed inside it, as a step frees
  // what it no longer reads: its allocations come from what malloc keeps.
  // A run that faulted pages in timed this process's heap growing (malloc
  // took fresh pages for a result where the block the run before freed was
  // not reused), not the kernel: fsdp-run's heap stops growing after its
  // first steps. Such runs count only where every run faulted (a result
  // too large for the heap is mapped afresh every time, in a step too).
  // For tests of that rule: the first N timed runs of every call, warm
  // and then cold, also fault a fresh page in and take 10 ms more.
  long faulting = 0;
  if (const char *n = std::getenv("FSDP_TEST_FAULTING_TIMED_RUNS")) {
    char *end = nullptr;
    faulting = std::strtol(n, &end, 10);
    if (end == n || *end != '\0')
      faulting = 0;
  }
  // The median of `timedRuns` runs, each after `before` where given.
  auto timed = [&](const std::function<void()> &before) {
    std::vector<double> times, clean;
    for (int k = 0; k < timedRuns; ++k) {
      if (before)
        before();
      int64_t faults = minorPageFaults();
      auto start = std::chrono::steady_clock::now();
      if (k < faulting)
        faultAndStall();
      (void)run();
      double seconds = std::chrono::duration<double>(
                           std::chrono::steady_clock::now() - start)
                           .count();
      times.push_back(seconds);
      if (minorPageFaults() == faults)
        clean.push_back(seconds);
    }
    std::vector<double> &counted = clean.empty() ? times : clean;
    if (counted.empty())
      return 0.0;
    std::sort(counted.begin(), counted.end());
    return counted[counted.size() / 2];
  };
  // Warm first: the run before left the operands in the caches.
  out.seconds = timed(nullptr);
  out.coldSeconds = evict ? timed(evict) : out.seconds;
  return out;
}

//===----------------------------------------------------------------------===//
// Running
//===----------------------------------------------------------------------===//

void Executor::buildStack(const Call &call, torch::jit::Stack &stack,
                          const std::map<size_t, at::Tensor> &replace) const {
  stackOf(call, stack, [&](size_t operand, int64_t slot) -> const at::Tensor & {
    auto it = replace.find(operand);
    return it != replace.end() ? it->second : slots[slot];
  });
}

void Executor::stackOf(
    const Call &call, torch::jit::Stack &stack,
    const std::function<const at::Tensor &(size_t, int64_t)> &operandTensor) {
  stack.clear();
  size_t operand = 0;
  auto tensor = [&](int64_t slot) -> const at::Tensor & {
    return operandTensor(operand++, slot);
  };
  for (size_t a = 0; a < call.argKind.size(); ++a) {
    const std::vector<int64_t> &s = call.argSlots[a];
    switch (call.argKind[a]) {
    case 0:
      stack.push_back(call.constants[a]);
      break;
    case 1:
      stack.push_back(tensor(s[0]));
      break;
    case 2: {
      c10::List<at::Tensor> list;
      for (int64_t slot : s)
        list.push_back(tensor(slot));
      stack.push_back(std::move(list));
      break;
    }
    default: {
      c10::List<c10::optional<at::Tensor>> list;
      for (int64_t slot : s)
        list.push_back(slot < 0 ? c10::optional<at::Tensor>()
                                : c10::optional<at::Tensor>(tensor(slot)));
      stack.push_back(std::move(list));
      break;
    }
    }
  }
}

std::vector<at::Tensor>
Executor::callResults(size_t i, const inst::Call &inst,
                      const torch::jit::Stack &stack) {
  std::vector<at::Tensor> results;
  if (inst.listResult) {
    results = stack[0].toTensorList().vec();
  } else {
    for (size_t r = 0; r < stack.size() &&
                       results.size() < static_cast<size_t>(inst.numSchemaResults);
         ++r)
      if (stack[r].isTensor())
        results.push_back(stack[r].toTensor());
  }
  if (static_cast<int64_t>(results.size()) != inst.numSchemaResults)
    throw Error("instruction #" + std::to_string(i) + " (" + inst.op +
                ") returned " + std::to_string(results.size()) +
                " tensors, the plan expects " +
                std::to_string(inst.numSchemaResults));
  return results;
}

void Executor::count(const at::Tensor &t, bool host) {
  if (!t.defined())
    return;
  Counted &c = storages[t.storage().unsafeGetStorageImpl()];
  if (c.refs++ > 0)
    return;
  // A new storage: in the memory the plan says its instruction's results
  // are in (CPU offload), counted apart.
  c.bytes = t.storage().nbytes();
  c.host = host;
  if (host) {
    hostLive += c.bytes;
    hostPeak = std::max(hostPeak, hostLive);
    return;
  }
  live += c.bytes;
  peak = std::max(peak, live);
  instructionPeak = std::max(instructionPeak, live);
}

void Executor::uncount(const at::Tensor &t) {
  if (!t.defined())
    return;
  auto it = storages.find(t.storage().unsafeGetStorageImpl());
  if (it != storages.end() && --it->second.refs == 0) {
    (it->second.host ? hostLive : live) -= it->second.bytes;
    storages.erase(it);
  }
}

void Executor::set(int64_t slot, at::Tensor t) {
  release(slot);
  count(t, resultsOnHost);
  slots[slot] = std::move(t);
}

void Executor::hold(int64_t slot, std::vector<at::Tensor> tensors) {
  for (const at::Tensor &t : tensors)
    count(t);
  for (const at::Tensor &t : held[slot])
    uncount(t);
  held[slot] = std::move(tensors);
}

void Executor::release(int64_t slot) {
  uncount(slots[slot]);
  slots[slot].reset();
  for (const at::Tensor &t : held[slot])
    uncount(t);
  held[slot].clear();
}

std::vector<at::Tensor> Executor::run(std::vector<at::Tensor> inputs,
                                      State &state) {
  slots.assign(plan.numSlots, at::Tensor());
  futures.clear();
  futures.resize(plan.numSlots);
  held.assign(plan.numSlots, {});
  storages.clear();
  live = peak = 0;
  hostLive = hostPeak = 0;
  resultsOnHost = false;
  gradBytes = 0;
  hostMoves = 0;
  waitMs = 0;
  // The state lives through the step; views of it (a transposed weight)
  // add nothing. CPU offload: state in host memory counts apart.
  for (const auto &[name, t] : state)
    count(t, hostState.count(name) > 0);
  peak = live;
  for (size_t i = 0; i < plan.inputs.size(); ++i)
    set(plan.inputs[i].slot, std::move(inputs[i]));
  startLive = live;
  after.clear();
  during.clear();
  allocDuring.clear();
  after.reserve(plan.instructions.size());
  during.reserve(plan.instructions.size());
  // What the allocator holds beyond the live bytes counted here (what the
  // caller keeps outside the step) is taken off its readings.
  int64_t allocOffset = allocator ? allocator->current() - live : 0;
  allocPeak = live;

  torch::jit::Stack stack;
  const bool profiling = !profile.empty();
  if (profiling)
    ++profiledRunCount;
  for (size_t i = 0; i < plan.instructions.size(); ++i) {
    const Instruction &inst = plan.instructions[i];
    auto began = profiling ? std::chrono::steady_clock::now()
                           : std::chrono::steady_clock::time_point();
    instructionPeak = live;
    if (allocator)
      allocator->resetPeak();
    resultsOnHost = inst.host;
    // The host computes with what was copied to it once it has landed.
    if (copier && inst.host)
      copier->waitForHost();
    std::visit([&](const auto &op) { execute({i, state, stack}, op); },
               inst.op);
    // A call leaves its results on the stack: they go now, so that the
    // results the plan frees here are given back here, not at the next
    // call.
    stack.clear();
    // What a collective holds in flight counts until its wait frees the
    // future's slot.
    if (std::optional<int64_t> future = collectiveFuture(inst))
      hold(*future, futures[*future]->held());
    for (int64_t slot : inst.free)
      release(slot);
    after.push_back(live);
    during.push_back(instructionPeak);
    if (allocator) {
      allocDuring.push_back(allocator->peak() - allocOffset);
      allocPeak = std::max(allocPeak, allocDuring.back());
    }
    if (profiling)
      profile[i] += std::chrono::duration<double, std::milli>(
                        std::chrono::steady_clock::now() - began)
                        .count();
  }
  // The step ends with its state where the plan left it, on either side.
  if (copier)
    copier->waitForHost();
  std::vector<at::Tensor> outputs;
  for (int64_t slot : plan.outputs)
    outputs.push_back(slots[slot]);
  slots.clear();
  held.clear();
  storages.clear();
  return outputs;
}


//===----------------------------------------------------------------------===//
// Instructions: one handler per kind, in Plan.h's order
//===----------------------------------------------------------------------===//

void Executor::execute(const InstContext &c, const inst::Get &get) {
  // A read shares the state's storage: its bytes count once, and the
  // state keeps them counted after the read's slot is released. Mixed
  // precision reads a rounded copy.
  if (get.castDtype)
    set(get.result, c.state.at(get.state).to(*get.castDtype));
  else
    set(get.result, c.state.at(get.state));
}

void Executor::execute(const InstContext &c, const inst::Update &update) {
  // The state holds the new value (counted while the state holds it)
  // instead of the old one; mixed precision widens it to the state's
  // type.
  at::Tensor &entry = c.state[update.state];
  at::Tensor next = slots[update.value];
  if (update.castDtype)
    next = next.to(entry.scalar_type());
  // State keeps its shape and dtype: what --save and a checkpoint write
  // must resume.
  if (next.sizes() != entry.sizes() ||
      next.scalar_type() != entry.scalar_type())
    throw Error("instruction #" + std::to_string(c.i) + " (update of '" +
                update.state + "'): the value is " +
                TensorSpec{next.sizes().vec(), next.scalar_type()}.str() +
                ", but the state is " +
                TensorSpec{entry.sizes().vec(), entry.scalar_type()}.str());
  if (hostState.count(update.state) && entry.is_contiguous() &&
      entry.storage().use_count() == 1) {
    // CPU offload: the new value goes into the state's own buffer (pinned
    // on a GPU, where a new pageable tensor would make the next
    // host-to-device copies synchronous). Nothing else reads the old
    // value: its storage is the state's alone.
    entry.copy_(next);
    if (next.storage().unsafeGetStorageImpl() !=
        slots[update.value].storage().unsafeGetStorageImpl()) {
      count(next, true); // the widened copy, gone with this instruction
      uncount(next);
    }
    return;
  }
  if (hostState.count(update.state))
    ++hostMoves;
  count(next, hostState.count(update.state) > 0);
  uncount(entry);
  entry = next;
}

void Executor::execute(const InstContext &c, const inst::Constant &constant) {
  set(constant.result, constants[c.i]);
}

void Executor::execute(const InstContext &c, const inst::Call &planned) {
  size_t i = c.i;
  torch::jit::Stack &stack = c.stack;
  const Call &call = calls[i];
  // The operands eager training has requiring grad, as leaves that do
  // (aliases, no copy); nothing is recorded.
  std::map<size_t, at::Tensor> requiringGrad;
  for (int64_t r : planned.requiresGrad) {
    auto [a, k] = call.operands[r];
    requiringGrad[r] = slots[call.argSlots[a][k]].detach().requires_grad_(true);
  }
  std::optional<at::NoGradGuard> noGrad;
  if (!requiringGrad.empty())
    noGrad.emplace();
  buildStack(call, stack, requiringGrad);
  // Written arguments are written into copies: the plan is functional.
  // A value that dies here, held by its slot and the call alone (no view
  // or state shares its storage), is written in place instead.
  std::vector<at::Tensor> written;
  for (size_t k = 0; k < planned.mutates.size(); ++k) {
    int64_t a = planned.mutates[k];
    const at::Tensor &arg = stack[a].toTensor();
    if (call.donate[k] && arg.use_count() == 2 &&
        arg.storage().use_count() == 1) {
      written.push_back(arg);
      continue;
    }
    at::Tensor copy = arg.clone();
    stack[a] = copy;
    written.push_back(copy);
  }
  auto where = [&] {
    return "instruction #" + std::to_string(i) + " (" + planned.op +
           (planned.loc.empty() ? "" : " in " + planned.loc) + ")";
  };
  try {
    if (call.guard)
      call.guard(stack, where());
    call.op->callBoxed(stack);
  } catch (const c10::Error &e) {
    throw Error(where() + ": " + firstLine(e));
  }
  std::vector<at::Tensor> results = callResults(i, planned, stack);
  checkResultsWithinStorage(results, where);
  size_t next = 0;
  for (at::Tensor &t : results)
    set(planned.results[next++],
        requiringGrad.empty() ? std::move(t) : t.detach());
  for (const at::Tensor &t : written)
    set(planned.results[next++], t);
}

/// autograd_backward: the gradients of a call by libtorch's autograd: the
/// call again, on
/// leaves that require gradients, with the generator's state it ran with
/// (then the current one back), and one backward through it. Each gradient
/// is bound contiguous, in a storage of its own, as the memory model has it.
std::vector<at::Tensor> Executor::autogradGrads(
    size_t i, const Call &call, const inst::AutogradBackward &inst,
    const std::vector<at::Tensor> &operands,
    const std::vector<at::Tensor> &resultGrads, const at::Tensor &rng,
    c10::Device device, torch::jit::Stack &stack) {
  auto where = [&] {
    return "instruction #" + std::to_string(i) + " (autograd backward of " +
           inst.op + (inst.loc.empty() ? "" : " in " + inst.loc) + ")";
  };
  std::map<size_t, at::Tensor> replace;
  std::vector<at::Tensor> leaves;
  for (int64_t w : inst.wrt) {
    at::Tensor leaf = operands[w].detach().requires_grad_(true);
    replace[w] = leaf;
    leaves.push_back(leaf);
  }
  stackOf(call, stack, [&](size_t operand, int64_t) -> const at::Tensor & {
    auto it = replace.find(operand);
    return it != replace.end() ? it->second : operands[operand];
  });
  // Written arguments are written into copies (of the leaves: the gradient
  // flows through the copy).
  for (int64_t a : inst.mutates)
    stack[a] = stack[a].toTensor().clone();

  // The generator as it was, put back after the call. A call the plan
  // records no state for draws nothing; on a GPU it is not read at all
  // (a CUDA generator's state cannot be read while a graph is captured).
  at::Tensor current = inst.rng >= 0 || !device.is_cuda()
                           ? generatorState(device)
                           : at::Tensor();
  auto restore = [&] {
    if (current.defined())
      setGeneratorState(device, current);
  };
  std::vector<at::Tensor> grads;
  try {
    if (call.guard)
      call.guard(stack, where());
    if (inst.rng >= 0)
      setGeneratorState(device, rng);
    at::AutoGradMode enable(true);
    call.op->callBoxed(stack);
    restore();
    std::vector<at::Tensor> results = callResults(i, inst, stack);
    checkResultsWithinStorage(results, where);
    std::vector<at::Tensor> outputs, gradOutputs;
    for (size_t k = 0; k < inst.resultGrads.size(); ++k) {
      int64_t r = inst.resultGrads[k].first;
      if (results[r].requires_grad()) {
        outputs.push_back(results[r]);
        gradOutputs.push_back(resultGrads[k]);
      }
    }
    if (!outputs.empty())
      grads = torch::autograd::grad(outputs, leaves, gradOutputs,
                                    /*retain_graph=*/false,
                                    /*create_graph=*/false,
                                    /*allow_unused=*/true);
  } catch (const Error &) {
    restore();
    throw;
  } catch (const c10::Error &e) {
    restore();
    throw Error(where() + ": " + firstLine(e));
  } catch (const std::exception &e) {
    restore();
    throw Error(where() + ": " + e.what());
  }
  stack.clear(); // the recomputation's graph and results
  grads.resize(leaves.size());
  // Zeros where an operand does not reach the results.
  for (size_t k = 0; k < leaves.size(); ++k)
    if (!grads[k].defined())
      grads[k] = at::zeros_like(leaves[k], at::MemoryFormat::Contiguous);
  return grads;
}

void Executor::execute(const InstContext &c,
                       const inst::AutogradBackward &inst) {
  size_t i = c.i;
  const Call &call = calls[i];
  std::vector<at::Tensor> operands, resultGrads;
  for (const auto &[a, k] : call.operands)
    operands.push_back(slots[call.argSlots[a][k]]);
  for (const auto &[r, slot] : inst.resultGrads)
    resultGrads.push_back(slots[slot]);
  std::vector<at::Tensor> grads =
      autogradGrads(i, call, inst, operands, resultGrads,
                    inst.rng >= 0 ? slots[inst.rng] : at::Tensor(), device,
                    c.stack);
  for (size_t k = 0; k < grads.size(); ++k) {
    // Taken from the vector: a strided gradient goes as its copy is made.
    bool shared = storages.count(grads[k].storage().unsafeGetStorageImpl());
    set(inst.results[k], boundGradient(std::move(grads[k]), shared).detach());
  }
}

void Executor::execute(const InstContext &c, const inst::RngState &rng) {
  set(rng.result, generatorState(device));
}

void Executor::execute(const InstContext &c,
                       const inst::SetRngState &restore) {
  try {
    setGeneratorState(device, slots[restore.state]);
  } catch (const c10::Error &e) {
    throw Error("instruction #" + std::to_string(c.i) +
                " (set_rng_state): " + firstLine(e));
  }
}

void Executor::execute(const InstContext &c, const inst::AllGather &gather) {
  futures[gather.result] = comm->allGather(slots[gather.input], gather.group);
}

void Executor::execute(const InstContext &c,
                       const inst::ReduceScatter &scatter) {
  futures[scatter.result] =
      scatter.acrossWorld
          ? comm->reduceScatterOverWorld(slots[scatter.input], scatter.mean)
          : comm->reduceScatter(slots[scatter.input], scatter.group,
                                scatter.mean);
}

void Executor::execute(const InstContext &c, const inst::AllReduce &reduce) {
  futures[reduce.result] =
      comm->allReduce(slots[reduce.input], reduce.group, reduce.mean);
}

void Executor::execute(const InstContext &c, const inst::Wait &wait) {
  size_t i = c.i;
  std::unique_ptr<Pending> pending = std::move(futures[wait.future]);
  if (!pending)
    throw Error("instruction #" + std::to_string(i) +
                " waits for a collective that was not started");
  at::Tensor t;
  auto blocked = std::chrono::steady_clock::now();
  try {
    t = pending->wait();
    waitMs += std::chrono::duration<double, std::milli>(
                  std::chrono::steady_clock::now() - blocked)
                  .count();
  } catch (const std::exception &e) {
    throw Error("instruction #" + std::to_string(i) +
                " (wait for a collective): " + firstLine(e));
  }
  if (t.sizes() != c10::IntArrayRef(wait.type.shape))
    throw Error("instruction #" + std::to_string(i) +
                " (wait): the collective returned " +
                TensorSpec{t.sizes().vec(), t.scalar_type()}.str() +
                ", the plan expects " + wait.type.str());
  // A reduced gradient, what the optimizer reads: as the plan says.
  if (wait.gradient)
    gradBytes += t.nbytes();
  set(wait.result, std::move(t));
}

void Executor::execute(const InstContext &c, const inst::LocalShard &local) {
  int64_t shard = local.type.numel();
  set(local.result, slots[local.buffer].narrow(
                        0, comm->groupRank(local.group) * shard, shard));
}

void Executor::execute(const InstContext &c, const inst::ToDevice &toDevice) {
  // CPU offload: a copy into the other memory, a separate allocation (on
  // the CPU both are host memory; the plan says which it stands for, and
  // the bytes are counted there).
  if (copier)
    set(toDevice.result, copier->toDevice(slots[toDevice.input]));
  else
    set(toDevice.result, slots[toDevice.input].to(device, /*non_blocking=*/false,
                                                  /*copy=*/true));
}

void Executor::execute(const InstContext &c, const inst::ToHost &toHost) {
  const at::Tensor &t = slots[toHost.input];
  if (!device.is_cuda()) {
    set(toHost.result, t.clone());
    return;
  }
  if (copier) {
    set(toHost.result, copier->toHost(t));
    return;
  }
  // Page-locked host memory, which the GPU copies to and from directly.
  at::Tensor host = at::empty_like(
      t, t.options().device(c10::kCPU).pinned_memory(true));
  host.copy_(t);
  set(toHost.result, std::move(host));
}

void Executor::execute(const InstContext &, const inst::Free &) {
  // The buffer's slot is released after the instruction (run()): this is
  // its last use.
}

void Executor::execute(const InstContext &c, const inst::View &view) {
  set(view.result, slots[view.buffer]
                       .narrow(0, view.offset, view.type.numel())
                       .view(view.type.shape));
}
} // namespace fsdp::runtime
