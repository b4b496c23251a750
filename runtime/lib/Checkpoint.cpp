//===- Checkpoint.cpp - checkpoints of a run, and resuming from them
//-------===//

#include "fsdp/runtime/Checkpoint.h"
#include "fsdp/runtime/Files.h"
#include "fsdp/runtime/ModelArchive.h"

#include <torch/script.h>
#include <torch/serialize.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <mutex>
#include <sstream>
#include <random>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fsdp::runtime {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

/// Removes `path` and, for a directory, everything below it; a path that
/// is not there is no error.
void removeAll(const std::string &path) {
  std::error_code ignored;
  fs::remove_all(path, ignored);
}

constexpr const char *kFormat = "fsdp-checkpoint";
/// 2: each rank file of a sharded checkpoint says which rank of how many
/// it holds (`_rank`); version 1 (without it) is still read.
constexpr int64_t kVersion = 2;
constexpr const char *kRankKey = "_rank";
/// The key of the run id in a rank file: the id meta.json holds as "run"
/// (16 hex digits), as one int64.
constexpr const char *kRunKey = "_run";

at::Tensor runTensor(const std::string &runId) {
  return at::tensor(std::vector<int64_t>{
      static_cast<int64_t>(std::stoull(runId, nullptr, 16))});
}

std::string stepDirName(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(step));
  return name;
}

std::string rankFileName(int rank) {
  char name[32];
  std::snprintf(name, sizeof name, "rank-%05d.pt", rank);
  return name;
}

/// Where a checkpoint keeps the generator's state: the CPU's as torch's
/// get_rng_state gives it, a GPU's apart (its state is another shape; a
/// run resumed on the other kind of device starts its generator afresh).
const char *rngKey(bool cuda) { return cuda ? "_cuda_rng_state" : "_rng_state"; }
const char *rngFile(bool cuda) { return cuda ? "cuda_rng.pt" : "rng.pt"; }

/// meta.json's `key`: a whole number of at least 0 (not 2.7, not "4").
int64_t metaCount(const json &meta, const char *key, const std::string &where) {
  auto it = meta.find(key);
  std::optional<int64_t> n =
      it == meta.end() ? std::nullopt : wholeNumber(*it);
  if (!n || *n < 0)
    throw Error(where + ": meta.json's '" + key + "' is " +
                (it == meta.end() ? std::string("missing") : it->dump()) +
                ", not a whole number of at least 0");
  return *n;
}

/// Every rank waits for every other (an all-reduce of nothing).
void barrier(Communicator &comm) {
  comm.allReduce(at::zeros({1}, comm.device()), CommGroup::World,
                 /*mean=*/false)
      ->wait();
}

/// The plan's state as a checkpoint records it: what a sharded checkpoint
/// must match exactly to resume.
json layoutOf(const Plan &plan) {
  json layout = json::array();
  for (const StateEntry &e : plan.state) {
    json entry{{"name", e.name}, {"type", e.type.str()}};
    if (e.kind == StateKind::FlatParam) {
      json members = json::array();
      for (const FlatMember &m : e.members)
        members.push_back({m.name, m.offset, m.type.shape});
      entry["flat"] = {{"padded", e.padded},
                       {"shards", e.shards},
                       {"replicated", e.replicated},
                       {"members", members}};
    }
    layout.push_back(entry);
  }
  return layout;
}

const StateEntry *entryNamed(const Plan &plan, const std::string &name) {
  for (const StateEntry &e : plan.state)
    if (e.name == name)
      return &e;
  return nullptr;
}

/// The kind of an optimizer state entry (`exp_avg` of `fc.weight:exp_avg`).
std::string optimKind(const StateEntry &e) {
  return e.name.substr(e.param.size() + 1);
}

/// The optimizer's step count (updates taken).
bool isStepCount(const StateEntry &e) {
  return e.kind == StateKind::Optim && e.param.empty() &&
         e.name == plan::kStateStepCount;
}

/// The gradient scaler's scale or growth tracker.
bool isScalerState(const StateEntry &e) {
  return e.kind == StateKind::Optim && e.param.empty() &&
         (e.name == plan::kStateScale || e.name == plan::kStateGrowthTracker);
}

/// The learning rate the runner sets (`--lr-schedule external`).
bool isLrState(const StateEntry &e) {
  return e.kind == StateKind::Optim && e.param.empty() &&
         e.name == plan::kStateLr;
}

/// The learning rate the runner set, where the plan keeps one.
std::optional<double> currentLr(const Plan &plan, const State &state) {
  for (const StateEntry &e : plan.state)
    if (isLrState(e))
      return state.at(e.name).item<double>();
  return std::nullopt;
}

/// The updates the optimizer has taken: its step count where the plan keeps
/// one (a gradient scaler skips some).
std::optional<double> optimizerSteps(const Plan &plan, const State &state) {
  for (const StateEntry &e : plan.state)
    if (isStepCount(e))
      return state.at(e.name).item<double>();
  return std::nullopt;
}

c10::IValue loadPickle(const std::string &path) {
  std::vector<char> bytes = readFile(path);
  try {
    return readTorchSave(bytes, path);
  } catch (const c10::Error &e) {
    throw Error("cannot read '" + path + "': " + firstLine(e));
  }
}

void fsyncPath(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}


/// This rank's part of a flat buffer of `entry`'s layout whose members are
/// given whole by `member` (by FQN): elements [begin, begin + numel) of the
/// padded buffer.
at::Tensor
flatPart(const StateEntry &entry, int64_t begin, int64_t numel,
         at::ScalarType dtype,
         const std::function<at::Tensor(const FlatMember &)> &member) {
  at::Tensor mine = at::zeros({numel}, at::TensorOptions().dtype(dtype));
  int64_t end = begin + numel;
  for (const FlatMember &m : entry.members) {
    at::Tensor whole = member(m);
    int64_t lo = std::max(begin, m.offset);
    int64_t hi = std::min(end, m.offset + m.type.numel());
    if (lo < hi)
      mine.narrow(0, lo - begin, hi - lo)
          .copy_(whole.reshape({-1}).narrow(0, lo - m.offset, hi - lo));
  }
  return mine;
}

} // namespace

std::optional<StateDictType> parseStateDictType(const std::string &name) {
  if (name == "FULL_STATE_DICT")
    return StateDictType::Full;
  if (name == "SHARDED_STATE_DICT")
    return StateDictType::Sharded;
  return std::nullopt;
}

const char *stateDictTypeName(StateDictType type) {
  return type == StateDictType::Full ? "FULL_STATE_DICT" : "SHARDED_STATE_DICT";
}

//===----------------------------------------------------------------------===//
// Writing
//===----------------------------------------------------------------------===//

CheckpointDir CheckpointDir::claim(const std::string &path,
                                   Communicator &comm) {
  CheckpointDir claimed{path, ""};
  // Rank 0's id, on every rank: a sum where the others give 0.
  int64_t id = 0;
  if (comm.rank() == 0) {
    std::random_device random;
    id = ((int64_t(random()) << 31) ^ int64_t(random())) &
         ((int64_t(1) << 62) - 1);
    std::error_code ec;
    fs::create_directories(path, ec);
    std::string lock = (fs::path(path) / ".lock").string();
    // Held until the process ends (the descriptor is never closed): a run
    // killed outright releases it with its process.
    int fd = ::open(lock.c_str(),
                    O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK,
                    0644);
    if (fd < 0)
      throw Error("--checkpoint-dir '" + path + "': cannot open its lock '" +
                  lock + "': " + std::strerror(errno));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      std::string holder;
      char text[256] = {};
      ssize_t n = ::pread(fd, text, sizeof(text) - 1, 0);
      if (n > 0)
        holder = std::string(text, static_cast<size_t>(n));
      while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' '))
        holder.pop_back();
      ::close(fd);
      throw Error("--checkpoint-dir '" + path + "' is in use by another run" +
                  (holder.empty() ? std::string() : " (" + holder + ")") +
                  ": two runs writing one checkpoint directory would mix "
                  "their checkpoints; give this run another directory");
    }
    char host[256] = {};
    ::gethostname(host, sizeof(host) - 1);
    std::string holder = std::string(host) + " pid " +
                         std::to_string(::getpid()) + "\n";
    if (::ftruncate(fd, 0) != 0 ||
        ::pwrite(fd, holder.data(), holder.size(), 0) !=
            static_cast<ssize_t>(holder.size())) {
      // The lock holds without its note; only the message names less.
    }
  }
  at::Tensor sum = comm.allReduce(at::tensor({id}, at::TensorOptions()
                                                       .dtype(at::kLong)
                                                       .device(comm.device())),
                                  CommGroup::World, /*mean=*/false)
                       ->wait()
                       .cpu();
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx",
                static_cast<unsigned long long>(sum.item<int64_t>()));
  claimed.runId = hex;
  return claimed;
}

std::string writeCheckpoint(const Plan &plan, const State &state,
                            Communicator &comm, int64_t step,
                            const CheckpointDir &claimed, StateDictType type) {
  const std::string &dir = claimed.path;
  const bool lead = comm.rank() == 0;
  const std::string name = stepDirName(step);
  const std::string final = (fs::path(dir) / name).string();
  // Named by the run: no two runs ever share a temporary directory.
  const std::string tmp =
      (fs::path(dir) / ("." + name + "." + claimed.runId + ".tmp")).string();
  if (lead) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    // Those of any step, left by a run that was killed mid-write (this run
    // holds the directory's lock: no other is writing one).
    for (const fs::directory_entry &entry :
         fs::directory_iterator(dir, ec)) {
      std::string other = entry.path().filename().string();
      // ".step-" digits [ "." hex ] ".tmp"
      auto digits = [](char c) {
        return std::isdigit(static_cast<unsigned char>(c)) != 0;
      };
      auto hexOrDot = [](char c) {
        return std::isxdigit(static_cast<unsigned char>(c)) != 0 || c == '.';
      };
      if (other.size() >= 18 && other.rfind(".step-", 0) == 0 &&
          other.compare(other.size() - 4, 4, ".tmp") == 0 &&
          std::all_of(other.begin() + 6, other.begin() + 14, digits) &&
          std::all_of(other.begin() + 14, other.end() - 4, hexOrDot) &&
          !entry.is_symlink(ec) && entry.is_directory(ec))
        removeAll(entry.path().string());
    }
    if (!fs::create_directory(tmp, ec) || ec)
      throw Error("cannot write checkpoint '" + final + "': cannot create '" +
                  tmp + "'" + (ec ? ": " + ec.message() : std::string()));
  }
  barrier(comm);

  if (type == StateDictType::Sharded) {
    c10::impl::GenericDict mine(c10::StringType::get(), c10::TensorType::get());
    for (const StateEntry &e : plan.state)
      mine.insert(e.name, state.at(e.name));
    mine.insert(rngKey(comm.device().is_cuda()),
                generatorState(comm.device()));
    mine.insert(kRankKey, at::tensor(std::vector<int64_t>{comm.rank(),
                                                          comm.worldSize()}));
    mine.insert(kRunKey, runTensor(claimed.runId));
    writeFileAtomically((fs::path(tmp) / rankFileName(comm.rank())).string(),
              saveForTorchLoad(mine));
  } else {
    // One flat parameter (or its optimizer state) gathered at a time; rank
    // 0 keeps the members, in CPU memory, as FSDP's FullStateDictConfig(
    // offload_to_cpu=True, rank0_only=True) does.
    c10::impl::GenericDict model(c10::StringType::get(),
                                 c10::TensorType::get());
    std::map<std::string, c10::impl::GenericDict> optimState;
    std::vector<std::string> params;
    auto add = [&](const std::string &fqn,
                   const std::vector<std::string> &aliases,
                   const at::Tensor &t) {
      model.insert(fqn, t);
      for (const std::string &alias : aliases)
        model.insert(alias, t);
    };
    auto optimOf = [&](const std::string &fqn) -> c10::impl::GenericDict & {
      auto it = optimState.find(fqn);
      if (it == optimState.end())
        it = optimState
                 .emplace(fqn, c10::impl::GenericDict(c10::StringType::get(),
                                                      c10::TensorType::get()))
                 .first;
      return it->second;
    };
    for (const StateEntry &e : plan.state) {
      if (e.kind == StateKind::FlatParam) {
        at::Tensor full =
            e.replicated
                ? state.at(e.name)
                : comm.allGather(state.at(e.name), CommGroup::Shard)->wait();
        if (lead)
          for (const FlatMember &m : e.members) {
            add(m.name, m.aliases,
                full.narrow(0, m.offset, m.type.numel())
                    .view(m.type.shape)
                    .to(c10::kCPU, /*non_blocking=*/false, /*copy=*/true));
            params.push_back(m.name);
          }
      } else if (e.kind == StateKind::Param) {
        if (lead) {
          add(e.name, e.aliases, state.at(e.name));
          params.push_back(e.name);
        }
      } else if (e.kind == StateKind::Buffer) {
        if (lead && e.persistent)
          add(e.name, e.aliases, state.at(e.name));
      } else if (!isStepCount(e) && !isScalerState(e) && !isLrState(e)) {
        const StateEntry *owner = entryNamed(plan, e.param);
        std::string kind = optimKind(e);
        if (owner && owner->kind == StateKind::FlatParam) {
          at::Tensor full =
              comm.allGather(state.at(e.name), CommGroup::Shard)->wait();
          if (lead)
            for (const FlatMember &m : owner->members)
              optimOf(m.name).insert(kind,
                                     full.narrow(0, m.offset, m.type.numel())
                                         .view(m.type.shape)
                                         .to(c10::kCPU, /*non_blocking=*/false,
                                             /*copy=*/true));
        } else if (lead) {
          optimOf(e.param).insert(kind, state.at(e.name));
        }
      }
    }
    if (lead) {
      writeFileAtomically((fs::path(tmp) / "model.pt").string(),
                saveForTorchLoad(model));
      // torch.optim's state dict, keyed by FQN: Adam and AdamW keep a
      // per-parameter step count (a float tensor), SGD none.
      std::string optimizer = plan.optimizer.is_object()
                                  ? plan.optimizer.at("name").get<std::string>()
                                  : std::string();
      bool adam = optimizer == "adam" || optimizer == "adamw";
      c10::impl::GenericDict stateDict(c10::StringType::get(),
                                       c10::AnyType::get());
      const double taken =
          optimizerSteps(plan, state).value_or(static_cast<double>(step));
      for (auto &[fqn, entries] : optimState) {
        if (adam)
          entries.insert("step", at::scalar_tensor(taken, at::kFloat));
        stateDict.insert(fqn, entries);
      }
      c10::impl::GenericDict group(c10::StringType::get(), c10::AnyType::get());
      if (plan.optimizer.is_object())
        for (const auto &[key, value] : plan.optimizer.items()) {
          if (key == "name")
            continue;
          if (value.is_boolean())
            group.insert(key, value.get<bool>());
          else if (value.is_number())
            group.insert(key, value.get<double>());
          else if (value.is_array()) {
            std::vector<c10::IValue> items;
            for (const json &v : value)
              items.emplace_back(v.get<double>());
            group.insert(key, c10::ivalue::Tuple::create(std::move(items)));
          }
        }
      // The rate the runner set, as torch.optim's param group holds it.
      if (std::optional<double> lr = currentLr(plan, state))
        group.insert_or_assign("lr", *lr);
      c10::List<std::string> names;
      for (const std::string &p : params)
        names.push_back(p);
      group.insert("params", names);
      c10::List<c10::IValue> groups(c10::AnyType::get());
      groups.push_back(group);
      c10::impl::GenericDict optim(c10::StringType::get(), c10::AnyType::get());
      optim.insert("state", stateDict);
      optim.insert("param_groups", groups);
      writeFileAtomically((fs::path(tmp) / "optim.pt").string(),
                saveForTorchLoad(optim));
      writeFileAtomically(
          (fs::path(tmp) / rngFile(comm.device().is_cuda())).string(),
          saveForTorchLoad(generatorState(comm.device())));
      // GradScaler.state_dict(): the scale (the state's zero stands for the
      // initial scale) and the good steps since it last changed.
      if (plan.gradScaler.is_object()) {
        const json &settings = plan.gradScaler;
        double scale = state.at(std::string(plan::kStateScale)).item<double>();
        if (scale == 0.0)
          scale = settings.at("init_scale").get<double>();
        c10::impl::GenericDict scaler(c10::StringType::get(),
                                      c10::AnyType::get());
        scaler.insert("scale", scale);
        scaler.insert("growth_factor", settings.at("growth_factor").get<double>());
        scaler.insert("backoff_factor",
                      settings.at("backoff_factor").get<double>());
        scaler.insert("growth_interval",
                      settings.at("growth_interval").get<int64_t>());
        scaler.insert(
            "_growth_tracker",
            state.at(std::string(plan::kStateGrowthTracker)).item<int64_t>());
        writeFileAtomically((fs::path(tmp) / "scaler.pt").string(),
                            saveForTorchLoad(scaler));
      }
    }
  }
  // Every file is on disk before the checkpoint is complete.
  barrier(comm);
  if (lead) {
    json meta{{"format", kFormat},
              {"version", kVersion},
              {"step", step},
              {"state_dict_type", stateDictTypeName(type)},
              {"world_size", plan.worldSize},
              {"shard_group_size", plan.shardGroupSize},
              {"sharding", plan.sharding},
              {"micro_batches", plan.microBatches},
              {"optimizer", plan.optimizer},
              {"state", layoutOf(plan)},
              {"run", claimed.runId}};
    if (std::optional<double> taken = optimizerSteps(plan, state))
      meta["optimizer_steps"] = static_cast<int64_t>(*taken);
    if (std::optional<double> lr = currentLr(plan, state))
      meta["lr"] = *lr;
    std::string text = meta.dump(1) + "\n";
    writeFileAtomically((fs::path(tmp) / "meta.json").string(),
              std::vector<char>(text.begin(), text.end()));
    // For tests of atomicity: a crash with every file written, before the
    // checkpoint takes its place (what a kill at that moment leaves).
    if (const char *crash = std::getenv("FSDP_RUN_TEST_CRASH_IN_CHECKPOINT");
        crash && std::to_string(step) == crash)
      std::_Exit(70);
    fsyncPath(tmp);
    // A checkpoint of the same step written before (a run resumed from an
    // earlier one) is replaced.
    std::error_code ec;
    if (fs::exists(final, ec)) {
      std::string old = (fs::path(dir) / ("." + name + ".old")).string();
      removeAll(old);
      fs::rename(final, old, ec);
      if (ec)
        throw Error("cannot replace checkpoint '" + final +
                    "': " + ec.message());
      removeAll(old);
    }
    fs::rename(tmp, final, ec);
    if (ec)
      throw Error("cannot write checkpoint '" + final + "': " + ec.message());
    fsyncPath(dir);
    writeFileAtomically((fs::path(dir) / "latest").string(),
              std::vector<char>(name.begin(), name.end()));
  }
  barrier(comm);
  return final;
}

//===----------------------------------------------------------------------===//
// Reading
//===----------------------------------------------------------------------===//

std::string findCheckpoint(const std::string &path) {
  std::error_code ec;
  if (fs::exists(fs::path(path) / "meta.json", ec))
    return path;
  fs::path latest = fs::path(path) / "latest";
  if (fs::exists(fs::symlink_status(latest, ec))) {
    // One name (step-NNNNNNNN), of a directory in this one.
    std::vector<char> bytes = readFile(latest.string(), 4096);
    std::string name(bytes.begin(), bytes.end());
    while (!name.empty() && (name.back() == '\n' || name.back() == ' '))
      name.pop_back();
    bool plain = !name.empty() && name != "." && name != ".." &&
                 std::all_of(name.begin(), name.end(), [](unsigned char c) {
                   return std::isprint(c) && c != '/';
                 });
    if (!plain)
      throw Error("checkpoint directory '" + path + "': 'latest' does not "
                  "name a checkpoint in it (a name like step-00000004)");
    fs::path dir = fs::path(path) / name;
    if (!fs::exists(dir / "meta.json", ec))
      throw Error("checkpoint directory '" + path + "': latest names '" + name +
                  "', which is not a checkpoint there");
    return dir.string();
  }
  if (!fs::exists(path, ec))
    throw Error("cannot resume: '" + path + "' does not exist");
  throw Error("cannot resume: '" + path +
              "' is not a checkpoint (no "
              "meta.json) and holds none (no latest)");
}

int64_t readCheckpoint(const Plan &plan, State &state, Communicator &comm,
                       const std::string &path) {
  const std::string where = "checkpoint '" + path + "'";
  json meta;
  try {
    std::vector<char> bytes =
        readFile((fs::path(path) / "meta.json").string(), int64_t(1) << 30);
    meta = json::parse(bytes.begin(), bytes.end());
  } catch (const json::exception &e) {
    throw Error(where + ": meta.json is not valid JSON: " + e.what());
  }
  int64_t step = 0, version = 0;
  std::optional<StateDictType> type;
  try {
    if (meta.at("format") != kFormat)
      throw Error(where + " is not an fsdp-run checkpoint");
    version = metaCount(meta, "version", where);
    if (version != 1 && version != kVersion)
      throw Error(where + " has format version " + meta.at("version").dump() +
                  ", but this fsdp-run reads 1 and " +
                  std::to_string(kVersion));
    step = metaCount(meta, "step", where);
    type = parseStateDictType(meta.at("state_dict_type").get<std::string>());
  } catch (const json::exception &e) {
    throw Error(where + ": meta.json lacks or misstates a field: " + e.what());
  }
  if (!type || step < 0)
    throw Error(where + ": meta.json has an unknown state_dict_type or step");
  std::string theirs = meta.value("optimizer", json()).is_object()
                           ? meta["optimizer"].value("name", "")
                           : "";
  std::string ours =
      plan.optimizer.is_object() ? plan.optimizer.value("name", "") : "";
  if (theirs != ours)
    throw Error(where + " was written by a run with optimizer '" + theirs +
                "', but the plan runs '" + ours + "'");
  // The same optimizer with other settings (a new learning rate, say) is
  // how fine-tuning resumes; said, not refused: the plan's apply.
  if (comm.rank() == 0 && plan.optimizer.is_object() &&
      meta.value("optimizer", json()).is_object()) {
    const json &saved = meta["optimizer"];
    std::string changed;
    for (const auto &[key, value] : plan.optimizer.items()) {
      if (key == "name")
        continue;
      auto it = saved.find(key);
      if (it != saved.end() && *it == value)
        continue;
      changed += (changed.empty() ? "" : ", ") + key + " " +
                 (it == saved.end() ? std::string("unset") : it->dump()) +
                 " -> " + value.dump();
    }
    if (!changed.empty())
      printLineToStderr("fsdp-run: warning: " + where +
                        " was written with other optimizer settings than "
                        "the plan's (" + changed +
                        "): the run goes on with the plan's");
  }

  if (*type == StateDictType::Sharded) {
    if (meta.value("world_size", int64_t(-1)) != plan.worldSize ||
        meta.value("shard_group_size", int64_t(-1)) != plan.shardGroupSize)
      throw Error(where + " is sharded over " +
                  meta.value("world_size", json()).dump() +
                  " ranks (shard groups of " +
                  meta.value("shard_group_size", json()).dump() +
                  "), the plan over " + std::to_string(plan.worldSize) +
                  " (of " + std::to_string(plan.shardGroupSize) +
                  "): a SHARDED_STATE_DICT checkpoint resumes with the same "
                  "layout; write FULL_STATE_DICT to change it");
    json layout = layoutOf(plan), saved = meta.value("state", json::array());
    if (layout != saved) {
      auto describe = [](const json &entry) {
        return "'" + entry.value("name", "") + "' (" + entry.value("type", "") +
               (entry.contains("flat") ? ", a flat parameter" : "") + ")";
      };
      std::string first = "the plan has " + std::to_string(layout.size()) +
                          " entries, the checkpoint " +
                          std::to_string(saved.size());
      for (size_t i = 0; i < std::min(layout.size(), saved.size()); ++i)
        if (layout[i] != saved[i]) {
          first = "entry " + std::to_string(i + 1) + " is " +
                  describe(layout[i]) + " in the plan, " + describe(saved[i]) +
                  " in the checkpoint";
          break;
        }
      throw Error(where +
                  " holds another model or layout than the plan ("
                  "state " +
                  first +
                  "): a SHARDED_STATE_DICT "
                  "checkpoint resumes with the plan that wrote it");
    }
    std::string file = (fs::path(path) / rankFileName(comm.rank())).string();
    c10::IValue value = loadPickle(file);
    if (!value.isGenericDict())
      throw Error(where + ": '" + file + "' is not a dict of tensors");
    auto dict = value.toGenericDict();
    // The file is this rank's (files swapped or copied between ranks would
    // resume every rank with another's shard).
    auto held = dict.find(kRankKey);
    if (held == dict.end() ? version >= 2
                           : !held->value().isTensor() ||
                                 held->value().toTensor().dim() != 1 ||
                                 held->value().toTensor().numel() != 2 ||
                                 held->value().toTensor().scalar_type() !=
                                     at::kLong) {
      throw Error(where + ": '" + file + "' does not say which rank's "
                  "shard it holds ('" + kRankKey + "')");
    }
    if (held != dict.end()) {
      at::Tensor t = held->value().toTensor();
      int64_t rank = t[0].item<int64_t>(), world = t[1].item<int64_t>();
      if (rank != comm.rank() || world != comm.worldSize())
        throw Error(where + ": '" + file + "' holds the shard of rank " +
                    std::to_string(rank) + " of " + std::to_string(world) +
                    ", not of rank " + std::to_string(comm.rank()) + " of " +
                    std::to_string(comm.worldSize()) +
                    ": the checkpoint's rank files were swapped or copied");
    }
    // The file was written by the run that wrote meta.json (two runs
    // sharing a directory once left one run's rank 0 file beside the
    // other's rank 1 file). Checkpoints from before run ids have neither.
    if (meta.contains("run")) {
      const json &run = meta.at("run");
      std::string id = run.is_string() ? run.get<std::string>() : "";
      if (id.size() != 16 ||
          !std::all_of(id.begin(), id.end(), [](char c) {
            return std::isxdigit(static_cast<unsigned char>(c)) != 0;
          }))
        throw Error(where + ": meta.json's run is not a run id (16 hex digits)");
      auto written = dict.find(kRunKey);
      if (written == dict.end() || !written->value().isTensor() ||
          written->value().toTensor().numel() != 1 ||
          written->value().toTensor().scalar_type() != at::kLong ||
          !at::equal(written->value().toTensor(),
                     runTensor(id)))
        throw Error(where + ": '" + file + "' was not written by the run that "
                    "wrote its meta.json (run " + id +
                    "): the checkpoint mixes the files of two runs");
    }
    for (const StateEntry &e : plan.state) {
      auto it = dict.find(e.name);
      if (it == dict.end() || !it->value().isTensor())
        throw Error(where + ": '" + file + "' has no '" + e.name + "'");
      at::Tensor t = it->value().toTensor();
      if (t.sizes().vec() != e.type.shape || t.scalar_type() != e.type.dtype)
        throw Error(where + ": '" + e.name + "' is " +
                    TensorSpec{t.sizes().vec(), t.scalar_type()}.str() +
                    " in '" + file + "', the plan has " + e.type.str());
      state[e.name] = t.clone();
    }
    const bool cuda = comm.device().is_cuda();
    auto rng = dict.find(rngKey(cuda));
    if (rng != dict.end() && rng->value().isTensor())
      setGeneratorState(comm.device(), rng->value().toTensor());
    else if (dict.find(rngKey(!cuda)) == dict.end())
      throw Error(where + ": '" + file + "' has no generator state ('" +
                  rngKey(cuda) + "')");
    return step;
  }

  // FULL_STATE_DICT: whole tensors by FQN; each rank takes what the plan
  // gives it.
  c10::IValue modelValue = loadPickle((fs::path(path) / "model.pt").string());
  c10::IValue optimValue = loadPickle((fs::path(path) / "optim.pt").string());
  if (!modelValue.isGenericDict() || !optimValue.isGenericDict())
    throw Error(where + ": model.pt and optim.pt must hold dicts");
  auto model = modelValue.toGenericDict();
  auto optim = optimValue.toGenericDict();
  auto stateIt = optim.find("state");
  if (stateIt == optim.end() || !stateIt->value().isGenericDict())
    throw Error(where + ": optim.pt has no 'state' dict (torch.optim's "
                        "state_dict format)");
  auto optimState = stateIt->value().toGenericDict();

  auto tensorOf = [&](const std::string &fqn,
                      const std::vector<std::string> &aliases,
                      const TensorSpec &want, const char *what) {
    auto it = model.find(fqn);
    for (size_t i = 0; it == model.end() && i < aliases.size(); ++i)
      it = model.find(aliases[i]);
    if (it == model.end() || !it->value().isTensor())
      throw Error(where + " has no " + what + " '" + fqn +
                  "' (it was written for another model)");
    at::Tensor t = it->value().toTensor();
    if (t.sizes().vec() != want.shape || t.scalar_type() != want.dtype)
      throw Error(where + ": " + what + " '" + fqn + "' is " +
                  TensorSpec{t.sizes().vec(), t.scalar_type()}.str() +
                  " there, the plan has " + want.str() +
                  " (it was written for another model)");
    return t;
  };
  auto optimOf = [&](const std::string &fqn, const std::string &kind,
                     const TensorSpec &want) {
    auto it = optimState.find(fqn);
    c10::impl::GenericDict entries(c10::StringType::get(), c10::AnyType::get());
    if (it != optimState.end() && it->value().isGenericDict())
      entries = it->value().toGenericDict();
    auto k = entries.find(kind);
    if (k == entries.end() || !k->value().isTensor())
      throw Error(where + " has no optimizer state '" + kind + "' of '" + fqn +
                  "' (it was written by a run with other optimizer "
                  "settings)");
    at::Tensor t = k->value().toTensor();
    if (t.sizes().vec() != want.shape || t.scalar_type() != want.dtype)
      throw Error(where + ": optimizer state '" + kind + "' of '" + fqn +
                  "' is " + TensorSpec{t.sizes().vec(), t.scalar_type()}.str() +
                  " there, the plan has " + want.str());
    return t;
  };

  const int shardRank = comm.groupRank(CommGroup::Shard);
  for (const StateEntry &e : plan.state) {
    if (e.kind == StateKind::FlatParam) {
      int64_t numel = e.type.shape[0];
      int64_t begin = e.replicated ? 0 : shardRank * numel;
      state[e.name] =
          flatPart(e, begin, numel, e.type.dtype, [&](const FlatMember &m) {
            return tensorOf(m.name, m.aliases, m.type, "parameter");
          });
    } else if (e.kind == StateKind::Param) {
      state[e.name] = tensorOf(e.name, e.aliases, e.type, "parameter").clone();
    } else if (e.kind == StateKind::Buffer) {
      if (e.persistent) // others are not in a state dict: the model file's
        state[e.name] = tensorOf(e.name, e.aliases, e.type, "buffer").clone();
    } else if (isStepCount(e)) {
      // The optimizer's count is the updates it took (fewer than the steps
      // where a gradient scaler skipped some).
      double count = static_cast<double>(step);
      if (meta.contains("optimizer_steps"))
        count = static_cast<double>(metaCount(meta, "optimizer_steps", where));
      state[e.name] = at::full(e.type.shape, count,
                               at::TensorOptions().dtype(e.type.dtype));
    } else if (isLrState(e)) {
      // The rate the runner had set; a checkpoint without one (written
      // from a plan with a fixed rate) starts at the plan's lr.
      double lr = e.init;
      if (meta.contains("lr")) {
        if (!meta.at("lr").is_number())
          throw Error(where + ": meta.json's lr is not a number");
        lr = meta.at("lr").get<double>();
      }
      state[e.name] = at::full(e.type.shape, lr,
                               at::TensorOptions().dtype(e.type.dtype));
    } else if (isScalerState(e)) {
      // GradScaler's state_dict; without one (written by a run without a
      // scaler) the scaler starts afresh.
      double value = 0.0;
      if (fs::exists(fs::path(path) / "scaler.pt")) {
        c10::IValue scaler = loadPickle((fs::path(path) / "scaler.pt").string());
        const char *key =
            e.name == plan::kStateScale ? "scale" : "_growth_tracker";
        auto dict = scaler.isGenericDict()
                        ? scaler.toGenericDict()
                        : c10::impl::GenericDict(c10::StringType::get(),
                                                 c10::AnyType::get());
        auto it = dict.find(key);
        if (it == dict.end() || !(it->value().isDouble() || it->value().isInt()))
          throw Error(where + ": scaler.pt has no number '" + key +
                      "' (GradScaler's state_dict format)");
        value = it->value().isDouble() ? it->value().toDouble()
                                       : static_cast<double>(it->value().toInt());
      }
      state[e.name] = at::full(e.type.shape, value,
                               at::TensorOptions().dtype(e.type.dtype));
    } else {
      const StateEntry *owner = entryNamed(plan, e.param);
      std::string kind = optimKind(e);
      if (owner && owner->kind == StateKind::FlatParam) {
        int64_t numel = e.type.shape[0];
        state[e.name] =
            flatPart(*owner, shardRank * numel, numel, e.type.dtype,
                     [&](const FlatMember &m) {
                       return optimOf(m.name, kind,
                                      TensorSpec{m.type.shape, e.type.dtype});
                     });
      } else {
        state[e.name] = optimOf(e.param, kind, e.type).clone();
      }
    }
  }
  // The generator's state; one written on the other kind of device is not
  // this one's (the generator starts afresh, as docs/fsdp-run.md says).
  std::error_code ec;
  const bool cuda = comm.device().is_cuda();
  fs::path rngPath = fs::path(path) / rngFile(cuda);
  if (fs::exists(rngPath, ec)) {
    c10::IValue rng = loadPickle(rngPath.string());
    if (!rng.isTensor())
      throw Error(where + ": " + rngFile(cuda) +
                  " is not the generator's state (a tensor)");
    setGeneratorState(comm.device(), rng.toTensor());
  } else if (!fs::exists(fs::path(path) / rngFile(!cuda), ec)) {
    throw Error(where + ": " + rngFile(cuda) +
                ", the generator's state, is missing");
  }
  return step;
}

} // namespace fsdp::runtime
