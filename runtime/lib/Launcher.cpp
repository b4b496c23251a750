//===- Launcher.cpp - fsdp-run --nproc: local ranks ------------------------===//

#include "fsdp/runtime/Launcher.h"
#include "fsdp/runtime/Communicator.h"
#include "fsdp/runtime/Files.h"
#include "fsdp/runtime/Plan.h"
#include "fsdp/runtime/Trainer.h"

#include <arpa/inet.h>
#include <csignal>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace fsdp::runtime {

namespace {

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

/// Before any rank starts: not under a launcher, the plan compiled for
/// --nproc ranks with every call resolved, and the outputs writable.
void checkLaunch(const RunOptions &o) {
  if (std::getenv("RANK") || std::getenv("SLURM_PROCID"))
    throw Error("--nproc starts local ranks itself; it cannot run under a "
                "launcher (RANK or SLURM_PROCID is set)");
  int64_t nproc = o.nproc;
  if (nproc > kMaxLocalRanks)
    throw Error("--nproc " + std::to_string(nproc) + " is more than " +
                std::to_string(kMaxLocalRanks) + " local ranks");
  RankInfo last; // the highest local rank: is there a GPU for it?
  last.rank = last.localRank = static_cast<int>(nproc - 1);
  last.worldSize = last.localWorldSize = static_cast<int>(nproc);
  if (o.checkCommunicator || !o.calibrate.empty()) {
    if (o.shardGroupSize > 0 && nproc % o.shardGroupSize != 0)
      throw Error("--shard-group-size " + std::to_string(o.shardGroupSize) +
                  " does not divide --nproc " + std::to_string(nproc));
    checkUpFront(o, last, /*writesOutputs=*/true);
    return;
  }
  Plan plan = loadPlan(o.plan);
  if (plan.worldSize != nproc)
    throw Error(compiledFor(plan, o.plan) + " but --nproc starts " +
                std::to_string(nproc) + ": use --nproc " +
                std::to_string(plan.worldSize) +
                " or compile it again with --world-size " +
                std::to_string(nproc));
  // Every call resolved and checked, once, before any rank starts.
  buildExecutor(plan, o.plan, nullptr);
  checkUpFront(o, last, /*writesOutputs=*/true);
}

/// The ranks' command line: this one without `--nproc N`.
std::vector<std::string> rankArguments(int argc, char **argv) {
  std::vector<std::string> args;
  for (int i = 0; i < argc; ++i) {
    if (std::string(argv[i]) == "--nproc") {
      ++i;
      continue;
    }
    args.push_back(argv[i]);
  }
  return args;
}

/// A rank's exit status as a shell reports it: 128 + N for signal N.
int exitStatus(int wstatus) {
  return WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
}

/// The local ranks: started with the launcher's signals forwarded to them,
/// then waited for.
class LocalRanks {
public:
  /// Forwards SIGINT, SIGTERM and SIGHUP (those not ignored) to the ranks
  /// from now on.
  explicit LocalRanks(int64_t nproc);

  /// Starts `exe` with `args` as each rank, meeting at loopback:`port`;
  /// stops at a signal (the ranks started end with it).
  void start(const std::string &exe, std::vector<std::string> &args,
             const std::string &port);

  /// Waits for every rank; the launcher's exit status. A rank that fails
  /// ends the others; one that outlives a failure or a signal by 5 s is
  /// killed.
  int wait();

private:
  [[noreturn]] void execRank(int64_t r, const std::string &exe,
                             std::vector<std::string> &args,
                             const std::string &port);
  void stopStarted(int sig);
  void forget(pid_t pid);
  void killAll(int sig);
  void reaped(pid_t pid, int wstatus,
              std::chrono::steady_clock::time_point now);
  int outcome();

  const int64_t nproc;
  const pid_t launcher;
  std::vector<int> forwarded; // the signals passed on to the ranks
  // Signals wait while a rank is being started or reaped, so none is
  // missed and none reaches a stale pid.
  sigset_t stops, previous;
  std::map<pid_t, int64_t> ranks; // running: pid -> rank
  int status = 0;
  int64_t failed = -1;
  // The first rank to fail, and the first that failed by itself.
  int64_t firstFailed = -1;
  int firstStatus = 0;
  bool escalated = false;
  // Ranks still running when the launcher killed them after a failure.
  std::vector<int64_t> outlived;
  /// True if every rank still running is stopped (state T in /proc).
  bool allStopped() const;
  std::optional<std::chrono::steady_clock::time_point> failedAt;
};

LocalRanks::LocalRanks(int64_t nproc) : nproc(nproc), launcher(::getpid()) {
  // Signals the launcher was started ignoring (nohup's SIGHUP) stay
  // ignored, by it and by its ranks.
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
  ::sigemptyset(&stops);
  ::sigemptyset(&previous);
  for (int sig : forwarded)
    ::sigaddset(&stops, sig);
}

void LocalRanks::start(const std::string &exe, std::vector<std::string> &args,
                       const std::string &port) {
  // This job's id, which its ranks show at the rendezvous: a rank of
  // another job that reaches the same port is refused.
  std::random_device random;
  char id[40];
  std::snprintf(id, sizeof(id), "fsdp-%08x%08x", random(), random());
  ::setenv("FSDP_RUN_ID", id, 1);
  for (int64_t r = 0; r < nproc; ++r) {
    ::sigprocmask(SIG_BLOCK, &stops, &previous);
    pid_t pid = ::fork();
    if (pid == 0)
      execRank(r, exe, args, port);
    int forkError = errno;
    if (pid > 0) {
      ranks[pid] = r;
      localRankPids[numLocalRanks] = pid;
      numLocalRanks = numLocalRanks + 1;
    }
    ::sigprocmask(SIG_SETMASK, &previous, nullptr);
    if (pid < 0 || stopSignal) {
      // The ranks already started end with it.
      stopStarted(pid < 0 ? SIGKILL : static_cast<int>(stopSignal));
      if (pid < 0)
        throw Error("cannot start rank " + std::to_string(r) + " of " +
                    std::to_string(nproc) + ": " + std::strerror(forkError));
      break;
    }
  }
}

/// In the child: becomes rank `r`.
void LocalRanks::execRank(int64_t r, const std::string &exe,
                          std::vector<std::string> &args,
                          const std::string &port) {
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
  // The ranks share the machine: each takes its share of the cores this
  // process may run on (at least 1), as torchrun gives each 1, unless
  // OMP_NUM_THREADS says otherwise (--threads still wins in the rank).
  ::setenv("OMP_NUM_THREADS", std::to_string(threadsPerRank(nproc)).c_str(),
           /*overwrite=*/0);
  std::vector<char *> cargs;
  for (std::string &a : args)
    cargs.push_back(a.data());
  cargs.push_back(nullptr);
  ::execv(exe.c_str(), cargs.data());
  printLineToStderr("fsdp-run: cannot start rank " + std::to_string(r) +
                    ": " + std::strerror(errno));
  std::_Exit(127);
}

/// Sends `sig` to the ranks started so far and reaps them.
void LocalRanks::stopStarted(int sig) {
  killAll(sig);
  while (!ranks.empty()) {
    pid_t done = ::waitpid(-1, nullptr, 0);
    if (done < 0 && errno != EINTR)
      break;
    forget(done);
    ranks.erase(done);
  }
}

/// A reaped rank: the signal handler no longer signals its pid.
void LocalRanks::forget(pid_t pid) {
  ::sigprocmask(SIG_BLOCK, &stops, &previous);
  for (sig_atomic_t i = 0; i < numLocalRanks; ++i)
    if (localRankPids[i] == pid)
      localRankPids[i] = 0;
  ::sigprocmask(SIG_SETMASK, &previous, nullptr);
}

void LocalRanks::killAll(int sig) {
  for (const auto &[pid, r] : ranks)
    ::kill(pid, sig);
}

bool LocalRanks::allStopped() const {
  if (ranks.empty())
    return false;
  for (const auto &[pid, rank] : ranks) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)),
                     std::istreambuf_iterator<char>());
    // pid (comm) STATE ...: the name may hold spaces and parentheses.
    size_t close = text.rfind(')');
    if (close == std::string::npos || close + 2 >= text.size() ||
        (text[close + 2] != 'T' && text[close + 2] != 't'))
      return false;
  }
  return true;
}

int LocalRanks::wait() {
  auto signalled = std::chrono::steady_clock::time_point::max();
  while (!ranks.empty()) {
    int wstatus = 0;
    pid_t pid = ::waitpid(-1, &wstatus, WNOHANG);
    auto now = std::chrono::steady_clock::now();
    if (stopSignal && signalled == std::chrono::steady_clock::time_point::max())
      signalled = now;
    // A rank that ignores the signal, or outlives a failed rank by 5 s
    // (at once when every rank left is stopped: SIGSTOP, a debugger), is
    // killed; after a failure, the rank that did not end is named.
    if (!escalated && ((failedAt && (now - *failedAt > std::chrono::seconds(5) ||
                                     allStopped())) ||
                       now - signalled > std::chrono::seconds(5))) {
      if (failedAt && !stopSignal)
        for (const auto &[pid, rank] : ranks)
          outlived.push_back(rank);
      killAll(SIGKILL);
      escalated = true;
    }
    if (pid <= 0) {
      if (pid < 0 && errno != EINTR)
        break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      continue;
    }
    reaped(pid, wstatus, now);
  }
  return outcome();
}

/// Rank `pid` ended with `wstatus`: a failure of its own, or one caused by
/// another rank or by the launcher.
void LocalRanks::reaped(pid_t pid, int wstatus,
                        std::chrono::steady_clock::time_point now) {
  auto it = ranks.find(pid);
  if (it == ranks.end())
    return;
  int64_t rank = it->second;
  ranks.erase(it);
  forget(pid);
  if (WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0)
    return;
  if (stopSignal)
    return; // the launcher's own signal ended it
  // Killed by the launcher's own escalation: not a failure of its own.
  if (escalated && WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL)
    return;
  if (firstFailed < 0) {
    firstFailed = rank;
    firstStatus = exitStatus(wstatus);
    failedAt = now;
  }
  bool byOther = WIFEXITED(wstatus) &&
                 WEXITSTATUS(wstatus) == kStoppedByOtherRank;
  if (failed < 0 && !byOther) {
    failed = rank;
    status = exitStatus(wstatus);
    if (WIFSIGNALED(wstatus))
      printLineToStderr("fsdp-run: rank " + std::to_string(rank) +
                        " was killed by signal " +
                        std::to_string(WTERMSIG(wstatus)));
  }
}

/// Once every rank has ended: the launcher's status, and what it says.
int LocalRanks::outcome() {
  if (stopSignal) {
    printLineToStderr(std::string("fsdp-run: stopped by ") +
                      signalName(stopSignal) + "; all " +
                      std::to_string(nproc) + " ranks stopped");
    // End by the same signal, so the caller sees which.
    ::signal(stopSignal, SIG_DFL);
    ::raise(stopSignal);
    return 128 + stopSignal;
  }
  // Every rank that ended was stopped by another's report: the one that
  // never ended is the one the report names.
  if (failed < 0 && !outlived.empty()) {
    std::sort(outlived.begin(), outlived.end());
    printLineToStderr("fsdp-run: rank " + std::to_string(outlived[0]) +
                      " did not end with the others (stopped or hung) and "
                      "was killed");
    failed = outlived[0];
    status = 1;
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

} // namespace

/// The intra-op threads of each of `nproc` ranks on this machine: the cores
/// this process may run on (its affinity, as a container or taskset limits
/// it) divided among them, at least 1.
int threadsPerRank(int64_t nproc) {
  cpu_set_t set;
  CPU_ZERO(&set);
  int cores = ::sched_getaffinity(0, sizeof(set), &set) == 0
                  ? CPU_COUNT(&set)
                  : static_cast<int>(std::thread::hardware_concurrency());
  return std::max<int>(1, cores / static_cast<int>(std::max<int64_t>(nproc, 1)));
}

int launchLocalRanks(const RunOptions &o, int argc, char **argv) {
  checkLaunch(o);
  std::vector<std::string> args = rankArguments(argc, argv);
  std::string exe = selfPath();
  std::string port = std::to_string(freePort());
  LocalRanks ranks(o.nproc);
  ranks.start(exe, args, port);
  return ranks.wait();
}

} // namespace fsdp::runtime
