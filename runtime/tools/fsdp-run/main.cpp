//===- main.cpp - fsdp-run: executes a plan --------------------------------===//
//
//   fsdp-run PLAN --model M.pt --data D.pt [--steps N] [--metrics F]
//            [--save F] [--outputs F] [--memory-timeline F] [--nproc N]
//            [--checkpoint-dir DIR [--checkpoint-every N]
//             [--state-dict-type FULL_STATE_DICT|SHARDED_STATE_DICT]]
//            [--resume DIR] [--seed N]
//
// D.pt is `torch.save({name: tensor})` with one entry per plan input, each
// with a leading [steps] dimension ([steps * K] for a plan that accumulates
// K micro-batches: step s takes entries s * K .. s * K + K - 1), then the
// global batch: rank r of W takes the r-th of W equal slices of it. The ranks come from torchrun's or
// Slurm's environment, or `--nproc N` starts N local ranks.
//
//===----------------------------------------------------------------------===//

#include "fsdp/runtime/Checkpoint.h"
#include "fsdp/runtime/Communicator.h"
#include "fsdp/runtime/CountingAllocator.h"
#include "fsdp/runtime/Executor.h"

#include <algorithm>
#include <ATen/Context.h>
#include <ATen/Parallel.h>

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/unpickler.h>
#include <torch/serialize.h>

#include <arpa/inet.h>
#include <csignal>
#include <fcntl.h>
#include <libgen.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <thread>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <optional>

using namespace fsdp::runtime;

namespace {

struct Options {
  std::string plan, model, data, metrics, save, outputs, memoryTimeline;
  std::string checkpointDir, stateDictType, resume;
  int64_t checkpointEvery = 0; // 0: at the end of the run only
  int64_t steps = -1;
  int64_t threads = 0; // 0: libtorch's default
  int64_t nproc = 0;   // > 0: start this many local ranks
  std::optional<uint64_t> seed; // the generator's seed on every rank
  bool profile = false;
  bool printPlan = false; // print the plan as read, then stop
};

[[noreturn]] void usage(const std::string &why) {
  std::cerr << "fsdp-run: " << why << "\n"
            << "usage: fsdp-run PLAN --print-plan\n"
            << "       fsdp-run PLAN --model M.pt --data D.pt [--steps N] "
               "[--metrics F.jsonl] [--save F.pt] [--outputs F.pt] "
               "[--memory-timeline F.json] [--threads N] [--profile] "
               "[--nproc N] [--checkpoint-dir DIR [--checkpoint-every N] "
               "[--state-dict-type FULL_STATE_DICT|SHARDED_STATE_DICT]] "
               "[--resume DIR] [--seed N]\n";
  std::exit(2);
}

Options parseArgs(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--model") o.model = value();
    else if (a == "--data") o.data = value();
    else if (a == "--metrics") o.metrics = value();
    else if (a == "--save") o.save = value();
    else if (a == "--outputs") o.outputs = value();
    else if (a == "--memory-timeline") o.memoryTimeline = value();
    else if (a == "--profile") o.profile = true;
    else if (a == "--print-plan") o.printPlan = true;
    else if (a == "--checkpoint-dir") o.checkpointDir = value();
    else if (a == "--resume") o.resume = value();
    else if (a == "--state-dict-type") {
      o.stateDictType = value();
      if (!parseStateDictType(o.stateDictType))
        usage("--state-dict-type is FULL_STATE_DICT or SHARDED_STATE_DICT, "
              "not '" + o.stateDictType + "'");
    }
    else if (a == "--checkpoint-every") {
      std::string v = value();
      try { o.checkpointEvery = std::stoll(v); } catch (...) { usage("--checkpoint-every takes a number, not '" + v + "'"); }
      if (o.checkpointEvery < 1) usage("--checkpoint-every must be at least 1");
    }
    else if (a == "--threads") {
      std::string v = value();
      try { o.threads = std::stoll(v); } catch (...) { usage("--threads takes a number, not '" + v + "'"); }
      if (o.threads < 1) usage("--threads must be at least 1");
    }
    else if (a == "--nproc") {
      std::string v = value();
      try { o.nproc = std::stoll(v); } catch (...) { usage("--nproc takes a number, not '" + v + "'"); }
      if (o.nproc < 1) usage("--nproc must be at least 1");
    }
    else if (a == "--seed") {
      std::string v = value();
      try {
        size_t end = 0;
        if (v.empty() || v[0] == '-')
          throw std::invalid_argument(v);
        o.seed = std::stoull(v, &end);
        if (end != v.size())
          throw std::invalid_argument(v);
      } catch (...) {
        usage("--seed takes a non-negative integer, not '" + v + "'");
      }
    }
    else if (a == "--steps") {
      std::string v = value();
      try { o.steps = std::stoll(v); } catch (...) { usage("--steps takes a number, not '" + v + "'"); }
      if (o.steps < 1) usage("--steps must be at least 1");
    } else if (a == "-h" || a == "--help") usage("executes an fsdp-opt plan");
    else if (!a.empty() && a[0] == '-') usage("unknown option " + a);
    else if (o.plan.empty()) o.plan = a;
    else usage("unexpected argument " + a);
  }
  if (o.plan.empty()) usage("no plan given");
  if (o.printPlan) {
    if (argc != 3)
      usage("--print-plan takes the plan alone");
    return o;
  }
  if (o.model.empty()) usage("--model is required");
  if (o.data.empty()) usage("--data is required");
  if (o.checkpointDir.empty() &&
      (o.checkpointEvery > 0 || !o.stateDictType.empty()))
    usage(std::string(o.checkpointEvery > 0 ? "--checkpoint-every"
                                            : "--state-dict-type") +
          " needs --checkpoint-dir");
  return o;
}

/// Reads a file written by Python's torch.save (zip format: data.pkl plus one
/// record per storage).
c10::IValue readTorchSave(const std::string &path) {
  caffe2::serialize::PyTorchStreamReader reader(path);
  auto record = reader.getRecord("data.pkl");
  std::string pickle(static_cast<const char *>(std::get<0>(record).get()),
                     std::get<1>(record));
  size_t pos = 0;
  auto read = [&](char *buffer, size_t n) {
    n = std::min(n, pickle.size() - pos);
    std::memcpy(buffer, pickle.data() + pos, n);
    pos += n;
    return n;
  };
  auto readRecord = [&](const std::string &name) {
    return std::get<0>(reader.getRecord("data/" + name));
  };
  torch::jit::Unpickler unpickler(read, nullptr, nullptr, readRecord,
                                  c10::nullopt);
  return unpickler.parse_ivalue();
}

/// The data file's entries, checked against the plan's inputs: one per
/// input name (an input of every micro-batch reads the same entry), with
/// a leading dimension of steps x micro-batches.
std::map<std::string, at::Tensor> loadData(const Plan &plan,
                                           const std::string &path,
                                           int64_t &steps, int rank,
                                           int world) {
  std::ifstream probe(path, std::ios::binary);
  if (!probe)
    throw Error("cannot open data file '" + path + "'");
  probe.close();
  c10::IValue value;
  try {
    value = readTorchSave(path);
  } catch (const c10::Error &e) {
    throw Error("cannot read data file '" + path + "' (write it with "
                "torch.save({name: tensor})): " + firstLine(e));
  }
  if (!value.isGenericDict())
    throw Error("data file '" + path + "' must hold a dict name -> tensor");
  auto dict = value.toGenericDict();
  std::map<std::string, at::Tensor> data;
  int64_t available = -1;
  for (const InputEntry &input : plan.inputs) {
    if (data.count(input.name))
      continue;
    auto it = dict.find(input.name);
    if (it == dict.end() || !it->value().isTensor())
      throw Error("data file '" + path + "' has no tensor '" + input.name +
                  "', an input of the plan (" + input.type.str() + " per step)");
    at::Tensor t = it->value().toTensor();
    if (world > 1 && !input.type.shape.empty() && t.dim() >= 2) {
      // This rank's slice of the global batch.
      int64_t batch = t.size(1);
      if (batch % world != 0)
        throw Error("data '" + input.name + "' has a batch of " +
                    std::to_string(batch) + " per step, which does not split "
                    "into " + std::to_string(world) + " equal slices, one "
                    "per rank");
      t = t.narrow(1, rank * (batch / world), batch / world);
    }
    std::vector<int64_t> perStep(t.sizes().begin() + std::min<int64_t>(1, t.dim()),
                                 t.sizes().end());
    if (t.dim() != static_cast<int64_t>(input.type.shape.size()) + 1 ||
        perStep != input.type.shape || t.scalar_type() != input.type.dtype)
      throw Error("data '" + input.name + "' is " +
                  TensorSpec{it->value().toTensor().sizes().vec(),
                             t.scalar_type()}.str() +
                  ", but the plan takes [steps]x" + input.type.str() +
                  (world > 1 ? " per rank (the batch of " +
                                   std::to_string(world) + " ranks together)"
                             : std::string()));
    if (available >= 0 && t.size(0) != available)
      throw Error("data entries hold different numbers of steps (" +
                  std::to_string(available) + " and " +
                  std::to_string(t.size(0)) + " for '" + input.name + "')");
    available = t.size(0);
    data[input.name] = t.contiguous();
  }
  if (available == 0)
    throw Error("data file '" + path + "' holds 0 steps (the first dimension "
                "of each entry counts the steps)");
  const int64_t micro = plan.microBatches;
  if (micro > 1 && available >= 0) {
    // Gradient accumulation: each step takes `micro` consecutive entries.
    if (steps < 0 && available % micro != 0)
      throw Error("data file '" + path + "' holds " +
                  std::to_string(available) + " entries, which is not a "
                  "whole number of steps of " + std::to_string(micro) +
                  " micro-batches (the plan accumulates " +
                  std::to_string(micro) + "; pass --steps to use fewer)");
    if (steps >= 0 && steps * micro > available)
      throw Error("--steps " + std::to_string(steps) + " takes " +
                  std::to_string(steps * micro) + " entries (" +
                  std::to_string(micro) + " micro-batches per step), but "
                  "the data file holds " + std::to_string(available));
    available /= micro;
  }
  if (steps < 0)
    steps = available < 0 ? 1 : available;
  else if (available >= 0 && steps > available)
    throw Error("--steps " + std::to_string(steps) + " but the data file holds " +
                std::to_string(available) + " steps");
  return data;
}

/// Time per ATen op (and per kind of other instruction), summed over the
/// run, most expensive first: where a step's time goes.
void printProfile(const Plan &plan, const std::vector<double> &times,
                  int64_t steps) {
  std::map<std::string, std::pair<double, int64_t>> byOp;
  double total = 0;
  for (size_t i = 0; i < times.size(); ++i) {
    const Instruction &inst = plan.instructions[i];
    InstKind kind = inst.kind();
    std::string name = kind == InstKind::Call ? std::get<inst::Call>(inst.op).op
                       : kind == InstKind::Get ? "(get)"
                       : kind == InstKind::Update ? "(update)"
                       : kind == InstKind::Constant ? "(constant)"
                       : kind == InstKind::Wait ? "(wait)"
                       : kind == InstKind::View ? "(view)"
                       : kind == InstKind::Free ? "(free)"
                                                : "(collective start)";
    auto &[ms, count] = byOp[name];
    ms += times[i];
    count += 1;
    total += times[i];
  }
  std::vector<std::pair<std::string, std::pair<double, int64_t>>> rows(
      byOp.begin(), byOp.end());
  std::sort(rows.begin(), rows.end(), [](const auto &a, const auto &b) {
    return a.second.first > b.second.first;
  });
  std::printf("\n%-48s %8s %10s %6s\n", "op", "calls", "ms/step", "%");
  for (const auto &[name, entry] : rows)
    std::printf("%-48s %8lld %10.3f %6.1f\n", name.c_str(),
                static_cast<long long>(entry.second),
                entry.first / static_cast<double>(steps),
                total > 0 ? 100.0 * entry.first / total : 0.0);
}

/// An output file can be written: its directory exists and is writable,
/// and it is not a directory. Checked before any work, so that a run never
/// trains for nothing and fails at the end.
void checkOutputPath(const char *flag, const std::string &path) {
  if (path.empty())
    return;
  struct stat info;
  if (::stat(path.c_str(), &info) == 0) {
    if (S_ISDIR(info.st_mode))
      throw Error(std::string(flag) + " '" + path + "' is a directory");
    if (!S_ISREG(info.st_mode)) // a device or a pipe: written in place
      return;
  }
  std::string copy = path;
  std::string dir = ::dirname(copy.data());
  if (::stat(dir.c_str(), &info) != 0 || !S_ISDIR(info.st_mode))
    throw Error(std::string(flag) + " '" + path + "': directory '" + dir +
                "' does not exist");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw Error(std::string(flag) + " '" + path + "': cannot write in '" +
                dir + "': " + std::strerror(errno));
}

/// "plan 'P' was compiled for N ranks": what a world-size mismatch says.
std::string compiledFor(const Plan &plan, const std::string &path) {
  return "plan '" + path + "' was compiled for " +
         std::to_string(plan.worldSize) + " rank" +
         (plan.worldSize == 1 ? "" : "s");
}

/// The plan's executor: every call resolved and checked; an error names
/// the plan file.
Executor buildExecutor(const Plan &plan, const std::string &path,
                       Communicator *comm) {
  try {
    return Executor(plan, comm);
  } catch (const Error &e) {
    throw Error("plan '" + path + "': " + e.what());
  }
}

/// What is checked before any rank starts: FSDP_RUN_TIMEOUT and, where
/// they are written (rank 0, or the --nproc launcher), the outputs.
void checkUpFront(const Options &o, bool writesOutputs) {
  (void)collectiveTimeout();
  if (!writesOutputs)
    return;
  checkOutputPath("--metrics", o.metrics);
  checkOutputPath("--save", o.save);
  checkOutputPath("--outputs", o.outputs);
  checkOutputPath("--memory-timeline", o.memoryTimeline);
  if (!o.resume.empty())
    (void)findCheckpoint(o.resume);
}

/// A free TCP port on loopback for the local ranks' rendezvous.
int freePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr *>(&addr), len) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr *>(&addr), &len) != 0)
    throw Error(std::string("cannot find a free port: ") + std::strerror(errno));
  int port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

/// The local ranks, for the signal handler (async-signal-safe reads).
constexpr int kMaxLocalRanks = 4096;
pid_t localRankPids[kMaxLocalRanks];
volatile sig_atomic_t numLocalRanks = 0;
volatile sig_atomic_t stopSignal = 0;

/// SIGINT, SIGTERM, SIGHUP to the launcher: passed on to every rank; the
/// launcher then waits for them and ends by the same signal.
void forwardSignal(int sig) {
  int saved = errno;
  stopSignal = sig;
  // A reaped rank's entry is 0: never kill(0) (the process group) or a pid
  // the kernel may have given to another process.
  for (sig_atomic_t i = 0; i < numLocalRanks; ++i)
    if (localRankPids[i] > 0)
      ::kill(localRankPids[i], sig);
  errno = saved;
}

const char *signalName(int sig) {
  return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP";
}

/// This executable's own path, so that ranks keep its name in `ps`.
std::string selfPath() {
  std::vector<char> buffer(4096);
  ssize_t n = ::readlink("/proc/self/exe", buffer.data(), buffer.size() - 1);
  if (n <= 0)
    return "/proc/self/exe";
  return std::string(buffer.data(), static_cast<size_t>(n));
}

/// `--print-plan`: the plan's instructions as this fsdp-run read and
/// checked them, written back one per line (what a round-trip test compares
/// with the file fsdp-opt wrote).
void printPlan(const Plan &plan) {
  for (const Instruction &inst : plan.instructions)
    std::cout << instructionJson(inst).dump() << "\n";
}

/// `--nproc N`: runs this command as N local ranks (the torchrun
/// environment on loopback) and waits for them. The plan's world size and
/// the outputs are checked first. A rank that fails ends the others; the
/// launcher's status is that of the rank that failed first by itself (not
/// one that stopped because of it). Ranks die with the launcher.
int launchLocalRanks(const Options &o, int argc, char **argv) {
  if (std::getenv("RANK") || std::getenv("SLURM_PROCID"))
    throw Error("--nproc starts local ranks itself; it cannot run under a "
                "launcher (RANK or SLURM_PROCID is set)");
  int64_t nproc = o.nproc;
  if (nproc > kMaxLocalRanks)
    throw Error("--nproc " + std::to_string(nproc) + " is more than " +
                std::to_string(kMaxLocalRanks) + " local ranks");
  Plan plan = loadPlan(o.plan);
  if (plan.worldSize != nproc)
    throw Error(compiledFor(plan, o.plan) + " but --nproc starts " +
                std::to_string(nproc) + ": use --nproc " +
                std::to_string(plan.worldSize) +
                " or compile it again with --world-size " +
                std::to_string(nproc));
  // Every call resolved and checked, once, before any rank starts.
  buildExecutor(plan, o.plan, nullptr);
  checkUpFront(o, /*writesOutputs=*/true);
  std::vector<std::string> args;
  for (int i = 0; i < argc; ++i) {
    if (std::string(argv[i]) == "--nproc") {
      ++i;
      continue;
    }
    args.push_back(argv[i]);
  }
  std::string exe = selfPath();
  std::string port = std::to_string(freePort());
  pid_t launcher = ::getpid();
  // Signals the launcher was started ignoring (nohup's SIGHUP) stay
  // ignored, by it and by its ranks.
  std::vector<int> forwarded;
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    struct sigaction old {};
    ::sigaction(sig, nullptr, &old);
    if (old.sa_handler != SIG_IGN)
      forwarded.push_back(sig);
  }
  struct sigaction action {};
  action.sa_handler = forwardSignal;
  ::sigemptyset(&action.sa_mask);
  for (int sig : forwarded)
    ::sigaction(sig, &action, nullptr);
  // Signals wait while a rank is being started or reaped, so none is
  // missed and none reaches a stale pid.
  sigset_t stops, previous;
  ::sigemptyset(&stops);
  for (int sig : forwarded)
    ::sigaddset(&stops, sig);
  auto forget = [&](pid_t pid) {
    ::sigprocmask(SIG_BLOCK, &stops, &previous);
    for (sig_atomic_t i = 0; i < numLocalRanks; ++i)
      if (localRankPids[i] == pid)
        localRankPids[i] = 0;
    ::sigprocmask(SIG_SETMASK, &previous, nullptr);
  };
  std::map<pid_t, int64_t> ranks;
  auto killAll = [&](int sig) {
    for (const auto &[pid, r] : ranks)
      ::kill(pid, sig);
  };
  for (int64_t r = 0; r < nproc; ++r) {
    ::sigprocmask(SIG_BLOCK, &stops, &previous);
    pid_t pid = ::fork();
    if (pid == 0) {
      // Die with the launcher, however it ends.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != launcher)
        std::_Exit(1);
      struct sigaction plain {};
      plain.sa_handler = SIG_DFL;
      for (int sig : forwarded)
        ::sigaction(sig, &plain, nullptr);
      ::sigprocmask(SIG_SETMASK, &previous, nullptr);
      ::setenv("RANK", std::to_string(r).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(nproc).c_str(), 1);
      ::setenv("LOCAL_WORLD_SIZE", std::to_string(nproc).c_str(), 1);
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", port.c_str(), 1);
      std::vector<char *> cargs;
      for (std::string &a : args)
        cargs.push_back(a.data());
      cargs.push_back(nullptr);
      ::execv(exe.c_str(), cargs.data());
      printLineToStderr("fsdp-run: cannot start rank " + std::to_string(r) +
                        ": " + std::strerror(errno));
      std::_Exit(127);
    }
    int forkError = errno;
    if (pid > 0) {
      ranks[pid] = r;
      localRankPids[numLocalRanks] = pid;
      numLocalRanks = numLocalRanks + 1;
    }
    ::sigprocmask(SIG_SETMASK, &previous, nullptr);
    if (pid < 0 || stopSignal) {
      // The ranks already started end with it.
      killAll(pid < 0 ? SIGKILL : static_cast<int>(stopSignal));
      while (!ranks.empty()) {
        pid_t done = ::waitpid(-1, nullptr, 0);
        if (done < 0 && errno != EINTR)
          break;
        forget(done);
        ranks.erase(done);
      }
      if (pid < 0)
        throw Error("cannot start rank " + std::to_string(r) + " of " +
                    std::to_string(nproc) + ": " + std::strerror(forkError));
      break;
    }
  }
  int status = 0;
  int64_t failed = -1;
  // The first rank to fail, and the first that failed by itself.
  int64_t firstFailed = -1;
  int firstStatus = 0;
  bool escalated = false;
  auto signalled = std::chrono::steady_clock::time_point::max();
  std::optional<std::chrono::steady_clock::time_point> failedAt;
  auto describe = [](int wstatus) {
    return WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
  };
  while (!ranks.empty()) {
    int wstatus = 0;
    pid_t pid = ::waitpid(-1, &wstatus, WNOHANG);
    auto now = std::chrono::steady_clock::now();
    if (stopSignal && signalled == std::chrono::steady_clock::time_point::max())
      signalled = now;
    // A rank that ignores the signal, or outlives a failed rank by 5 s,
    // is killed.
    if (!escalated && ((failedAt && now - *failedAt > std::chrono::seconds(5)) ||
                       now - signalled > std::chrono::seconds(5))) {
      killAll(SIGKILL);
      escalated = true;
    }
    if (pid <= 0) {
      if (pid < 0 && errno != EINTR)
        break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    auto it = ranks.find(pid);
    if (it == ranks.end())
      continue;
    int64_t rank = it->second;
    ranks.erase(it);
    forget(pid);
    if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0)
      continue;
    if (stopSignal)
      continue; // the launcher's own signal ended it
    // Killed by the launcher's own escalation: not a failure of its own.
    if (escalated && WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL)
      continue;
    if (firstFailed < 0) {
      firstFailed = rank;
      firstStatus = describe(wstatus);
      failedAt = now;
    }
    bool byOther = WIFEXITED(wstatus) &&
                   WEXITSTATUS(wstatus) == kStoppedByOtherRank;
    if (failed < 0 && !byOther) {
      failed = rank;
      status = describe(wstatus);
      if (WIFSIGNALED(wstatus))
        printLineToStderr("fsdp-run: rank " + std::to_string(rank) +
                          " was killed by signal " +
                          std::to_string(WTERMSIG(wstatus)));
    }
  }
  if (stopSignal) {
    printLineToStderr(std::string("fsdp-run: stopped by ") +
                      signalName(stopSignal) + "; all " +
                      std::to_string(nproc) + " ranks stopped");
    // End by the same signal, so the caller sees which.
    ::signal(stopSignal, SIG_DFL);
    ::raise(stopSignal);
    return 128 + stopSignal;
  }
  if (failed < 0 && firstFailed >= 0) {
    failed = firstFailed;
    status = firstStatus;
  }
  if (failed >= 0)
    printLineToStderr("fsdp-run: rank " + std::to_string(failed) +
                      " failed (status " + std::to_string(status) + "); all " +
                      std::to_string(nproc) + " ranks stopped");
  return failed >= 0 ? (status ? status : 1) : 0;
}

/// One rank's run. Returns normally on success; throws on failure.
void runRank(const Options &o, const RankInfo &info,
             std::unique_ptr<Communicator> &comm) {
  Plan plan = loadPlan(o.plan);
  if (plan.worldSize != info.worldSize)
    throw Error(compiledFor(plan, o.plan) + " but runs on " +
                std::to_string(info.worldSize) +
                (plan.worldSize > 1 && !info.launched
                     ? ": start it with --nproc " +
                           std::to_string(plan.worldSize) +
                           " or a launcher (torchrun, srun)"
                     : ": compile it again with --world-size " +
                           std::to_string(info.worldSize)));
  comm = info.worldSize > 1
             ? createGlooCommunicator(info, static_cast<int>(plan.shardGroupSize))
             : createSingleRankCommunicator();
  const bool lead = info.rank == 0;
  int64_t modelBytesRead = 0;
  State state = loadState(plan, o.model, comm->groupRank(CommGroup::Shard),
                          &modelBytesRead);
  // torch.manual_seed(N) on every rank, as accelerate's set_seed: dropout
  // draws the same masks on every rank (a resumed run then takes the
  // checkpoint's generator state).
  if (o.seed)
    at::manual_seed(*o.seed);
  int64_t steps = o.steps;
  std::map<std::string, at::Tensor> data =
      loadData(plan, o.data, steps, info.rank, info.worldSize);
  // Resuming: the state after the checkpoint's step, and the steps after it
  // (--steps counts from the start of training: step k always takes entry k
  // of the data).
  int64_t firstStep = 0;
  if (!o.resume.empty()) {
    std::string checkpoint = findCheckpoint(o.resume);
    firstStep = readCheckpoint(plan, state, *comm, checkpoint);
    if (firstStep >= steps)
      throw Error("checkpoint '" + checkpoint + "' is at step " +
                  std::to_string(firstStep) + ", and the run has " +
                  std::to_string(steps) +
                  " steps: nothing is left to run (--steps counts every "
                  "step of the training, those before the checkpoint too)");
    if (lead)
      std::printf("resumed from %s at step %lld\n", checkpoint.c_str(),
                  static_cast<long long>(firstStep));
  }
  // --state-dict-type, else the plan's (an Accelerate file's
  // fsdp_state_dict_type), else a full state dict.
  StateDictType checkpointType = StateDictType::Full;
  if (!o.stateDictType.empty())
    checkpointType = *parseStateDictType(o.stateDictType);
  else if (!plan.stateDictType.empty())
    checkpointType = *parseStateDictType(plan.stateDictType);
  Executor executor = buildExecutor(plan, o.plan, comm.get());
  if (o.profile)
    executor.enableProfiling();
  std::ofstream metrics;
  if (lead && !o.metrics.empty()) {
    metrics.open(o.metrics);
    if (!metrics)
      throw Error("cannot write metrics file '" + o.metrics + "': " +
                  std::strerror(errno));
  }
  // Each line reaches the file as it is written, or the run stops.
  auto writeMetrics = [&](const nlohmann::json &line) {
    errno = 0;
    metrics << line.dump() << std::endl;
    if (!metrics)
      throw Error("cannot write metrics file '" + o.metrics + "'" +
                  (errno ? std::string(": ") + std::strerror(errno) : ""));
  };
  std::vector<at::Tensor> outputs;
  int64_t peak = 0, gradBytes = 0, allocatorPeak = 0, hostPeak = 0;
  int64_t skippedSteps = 0; // rank 0's count: every rank skips together
  AllocatorCounter &allocator = AllocatorCounter::install();
  for (int64_t step = firstStep; step < steps; ++step) {
    std::vector<at::Tensor> inputs;
    // A copy, so the step holds (and counts) its own batch only; with
    // gradient accumulation, micro-batch k of step s is entry s * K + k.
    for (const InputEntry &input : plan.inputs)
      inputs.push_back(
          data.at(input.name)[step * plan.microBatches + input.microBatch]
              .clone());
    auto start = std::chrono::steady_clock::now();
    bool hasLoss = false;
    double loss = 0.0;
    int64_t allocatedBefore = allocator.current(), stepAllocatorPeak = 0;
    allocator.resetPeak();
    try {
      outputs = executor.run(inputs, state);
      // What the allocator handed out during the step beyond what it had
      // before, plus the state and batch the step began with.
      stepAllocatorPeak =
          allocator.peak() - allocatedBefore + executor.startBytes();
      allocatorPeak = std::max(allocatorPeak, stepAllocatorPeak);
      // A scalar first output is the loss: its mean over the ranks, which
      // is the loss of the global batch.
      hasLoss = !outputs.empty() && outputs[0].dim() == 0 &&
                outputs[0].is_floating_point();
      if (hasLoss)
        loss = comm->allReduce(outputs[0].to(at::kDouble), CommGroup::World,
                               /*mean=*/true)
                   ->wait()
                   .item<double>();
    } catch (const std::exception &e) {
      throw Error("step " + std::to_string(step + 1) + "/" +
                  std::to_string(steps) + ": " + firstLine(e));
    }
    double ms = std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - start)
                    .count();
    peak = std::max(peak, executor.peakBytes());
    hostPeak = std::max(hostPeak, executor.hostPeakBytes());
    gradBytes = executor.gradientBytes();
    // A gradient scaler's step skips the update itself where the loss (and
    // so a gradient) is inf or NaN, and training goes on, as with PyTorch's.
    if (hasLoss && !std::isfinite(loss) && !plan.gradScaler.is_object())
      throw Error("step " + std::to_string(step + 1) + "/" +
                  std::to_string(steps) + ": the loss is " +
                  (std::isnan(loss) ? "nan" : loss > 0 ? "inf" : "-inf"));
    // A checkpoint every --checkpoint-every steps and after the last: every
    // rank takes part.
    auto checkpoint = [&] {
      if (o.checkpointDir.empty() ||
          !(step + 1 == steps ||
            (o.checkpointEvery > 0 && (step + 1) % o.checkpointEvery == 0)))
        return;
      std::string written;
      try {
        written = writeCheckpoint(plan, state, *comm, step + 1,
                                  o.checkpointDir, checkpointType);
      } catch (const std::exception &e) {
        throw Error("step " + std::to_string(step + 1) + "/" +
                    std::to_string(steps) + ": " + firstLine(e));
      }
      if (lead) {
        std::printf("checkpoint %s (%s)\n", written.c_str(),
                    stateDictTypeName(checkpointType));
        std::fflush(stdout);
      }
    };
    if (!lead) {
      checkpoint();
      continue;
    }
    std::printf("step %lld/%lld", static_cast<long long>(step + 1),
                static_cast<long long>(steps));
    if (hasLoss)
      std::printf("  loss %.6f", loss);
    // The plan's per-step metrics (the scheduled learning rate): rank 0's
    // value, the same on every rank.
    std::vector<std::pair<std::string, double>> stepMetrics;
    for (const auto &[name, output] : plan.metrics) {
      stepMetrics.emplace_back(name, outputs.at(output).item<double>());
      if (name == fsdp::plan::kMetricSkipped && stepMetrics.back().second != 0.0)
        ++skippedSteps;
      std::printf("  %s %.6g", name.c_str(), stepMetrics.back().second);
    }
    std::printf("  %.1f ms  peak %.2f MB%s\n", ms, executor.peakBytes() / 1e6,
                info.worldSize > 1 ? " (rank 0)" : "");
    std::fflush(stdout);
    if (metrics.is_open()) {
      nlohmann::json line{{"step", step},
                          {"step_ms", ms},
                          {"comm_wait_ms", executor.commWaitMs()},
                          {"peak_bytes", executor.peakBytes()},
                          {"allocator_peak_bytes", stepAllocatorPeak}};
      // CPU offload: host memory, counted apart.
      if (executor.hostPeakBytes())
        line["host_peak_bytes"] = executor.hostPeakBytes();
      line["loss"] = hasLoss ? nlohmann::json(loss) : nlohmann::json(nullptr);
      for (const auto &[name, value] : stepMetrics)
        line[name] = value;
      // One line per step, as it happens: others may follow the run.
      writeMetrics(line);
    }
    checkpoint();
  }
  int64_t sharded = parameterAndOptimizerBytes(plan, state) + gradBytes;
  // The summary's peak is the largest over the ranks (ranks differ where
  // their shards' padding does); every rank takes part.
  int64_t peakRank = 0;
  if (info.worldSize > 1) {
    at::Tensor peaks = at::zeros({3, info.worldSize}, at::kDouble);
    peaks[0][info.rank] = static_cast<double>(peak);
    peaks[1][info.rank] = static_cast<double>(allocatorPeak);
    peaks[2][info.rank] = static_cast<double>(hostPeak);
    at::Tensor all = comm->allReduce(peaks, CommGroup::World, /*mean=*/false)
                         ->wait();
    peakRank = all[0].argmax().item<int64_t>();
    peak = static_cast<int64_t>(all[0][peakRank].item<double>());
    allocatorPeak = static_cast<int64_t>(all[1].max().item<double>());
    hostPeak = static_cast<int64_t>(all[2].max().item<double>());
  }
  if (lead && metrics.is_open()) {
    nlohmann::json summary{{"summary", true},
                           {"world_size", info.worldSize},
                           {"sharded_state_bytes", sharded},
                           {"model_bytes_read", modelBytesRead},
                           {"peak_bytes", peak},
                           {"peak_rank", peakRank},
                           {"allocator_peak_bytes", allocatorPeak}};
    if (hostPeak)
      summary["host_peak_bytes"] = hostPeak;
    // Dynamic loss scaling: the steps whose update was skipped.
    if (std::any_of(plan.metrics.begin(), plan.metrics.end(),
                    [](const auto &m) { return m.first == fsdp::plan::kMetricSkipped; }))
      summary["skipped_steps"] = skippedSteps;
    writeMetrics(summary);
    metrics.close();
    if (!metrics)
      throw Error("cannot write metrics file '" + o.metrics + "'");
  }
  if (lead && info.worldSize > 1)
    std::printf("rank 0 holds %.2f MB of parameters, gradients and optimizer "
                "state (sharded over %lld ranks)\n",
                sharded / 1e6, static_cast<long long>(info.worldSize));
  if (o.profile && lead)
    printProfile(plan, executor.instructionTimes(), steps);
  if (lead && !o.memoryTimeline.empty()) {
    // Rank 0's live bytes in the last step, instruction by instruction.
    nlohmann::json timeline{{"rank", info.rank},
                            {"peak_bytes", executor.peakBytes()},
                            {"start_bytes", executor.startBytes()},
                            {"timeline", executor.liveAfter()},
                            {"instruction_peak", executor.liveDuring()}};
    std::string text = timeline.dump() + "\n";
    writeFileAtomically(o.memoryTimeline,
                        std::vector<char>(text.begin(), text.end()));
  }
  if (!o.save.empty()) {
    // Every rank takes part in gathering the flat parameters; rank 0 writes.
    State gathered = gatherFlatParams(plan, state, *comm);
    if (lead)
      saveState(plan, state, gathered, o.save);
  }
  if (lead && !o.outputs.empty()) {
    c10::List<at::Tensor> list;
    for (const at::Tensor &t : outputs)
      list.push_back(t);
    writeFileAtomically(o.outputs, saveForTorchLoad(list));
  }
  if (lead && (std::fflush(stdout) != 0 || std::ferror(stdout)))
    throw Error(std::string("cannot write the progress to standard output: ") +
                std::strerror(errno));
}

} // namespace

int main(int argc, char **argv) {
  Options o = parseArgs(argc, argv);
  if (o.threads > 0)
    at::set_num_threads(static_cast<int>(o.threads));
  RankInfo info;
  std::unique_ptr<Communicator> comm;
  std::string message;
  try {
    if (o.printPlan) {
      printPlan(loadPlan(o.plan));
      return 0;
    }
    if (o.nproc > 0)
      return launchLocalRanks(o, argc, argv);
    info = rankInfoFromEnvironment();
    checkUpFront(o, /*writesOutputs=*/info.rank == 0);
    runRank(o, info, comm);
    comm.reset(); // a clean end, with the other ranks
    return 0;
  } catch (const Error &e) {
    message = e.what();
  } catch (const std::exception &e) {
    message = firstLine(e);
  }
  if (info.worldSize > 1) {
    // When another rank failed first, its failure is the cause: say that.
    std::string cause =
        comm ? comm->failureOfOthers(std::chrono::milliseconds(1000)) : "";
    if (!cause.empty()) {
      printLineToStderr("fsdp-run: rank " + std::to_string(info.rank) +
                        " stops: " + cause);
      std::_Exit(kStoppedByOtherRank);
    }
    message = "rank " + std::to_string(info.rank) + ": " + message;
    if (comm)
      comm->abort(message);
    printLineToStderr("fsdp-run: error: " + message);
    // Rank 0 serves the store that carries the message: keep it up until
    // the others' watchdogs (which look every 200 ms) have read it.
    if (comm && info.rank == 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(600));
    std::fflush(stdout);
    // Pending collectives would block a normal exit.
    std::_Exit(1);
  }
  std::cerr << "fsdp-run: error: " << message << "\n";
  return 1;
}
