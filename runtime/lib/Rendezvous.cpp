//===- Rendezvous.cpp - the ranks' store, environment and watchdog --------===//

#include "fsdp/runtime/Rendezvous.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <arpa/inet.h>
#include <dlfcn.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <cstdlib>
#include <limits>
#include <optional>
#include <stdexcept>
#include <thread>
#include <unistd.h>

//===----------------------------------------------------------------------===//
// The store's listen address
//===----------------------------------------------------------------------===//
//
// libtorch's TCPStore (1.13; 2.x before masterListenFd) has no option for
// the address its server listens on: it binds the wildcard address, so any
// host that reaches the machine could write the rendezvous keys (and stop
// the run through the abort key). While rank 0 starts its store, bind() is
// interposed: a bind to the wildcard address becomes a bind to the address
// the ranks meet at (loopback for --nproc, MASTER_ADDR under a launcher).
// Every other bind of the process passes through untouched.

namespace {
std::atomic<const sockaddr_storage *> storeListenAddress{nullptr};

bool isLoopback(const sockaddr_storage &addr) {
  if (addr.ss_family == AF_INET)
    return (ntohl(reinterpret_cast<const sockaddr_in &>(addr).sin_addr.s_addr) >>
            24) == 127;
  if (addr.ss_family == AF_INET6)
    return IN6_IS_ADDR_LOOPBACK(
        &reinterpret_cast<const sockaddr_in6 &>(addr).sin6_addr);
  return false;
}

bool isWildcard(const sockaddr *addr) {
  if (addr->sa_family == AF_INET)
    return reinterpret_cast<const sockaddr_in *>(addr)->sin_addr.s_addr ==
           htonl(INADDR_ANY);
  if (addr->sa_family == AF_INET6)
    return IN6_IS_ADDR_UNSPECIFIED(
        &reinterpret_cast<const sockaddr_in6 *>(addr)->sin6_addr);
  return false;
}
} // namespace

extern "C" int bind(int fd, const sockaddr *addr, socklen_t len) noexcept {
  using BindFn = int (*)(int, const sockaddr *, socklen_t);
  static BindFn real = reinterpret_cast<BindFn>(::dlsym(RTLD_NEXT, "bind"));
  if (!real) {
    errno = ENOSYS;
    return -1;
  }
  const sockaddr_storage *want = storeListenAddress.load();
  if (!want || !addr || !isWildcard(addr))
    return real(fd, addr, len);
  sockaddr_storage to{};
  socklen_t toLen = 0;
  if (addr->sa_family == AF_INET && want->ss_family == AF_INET) {
    auto *in = reinterpret_cast<sockaddr_in *>(&to);
    *in = *reinterpret_cast<const sockaddr_in *>(want);
    in->sin_port = reinterpret_cast<const sockaddr_in *>(addr)->sin_port;
    toLen = sizeof(sockaddr_in);
  } else if (addr->sa_family == AF_INET6) {
    auto *in6 = reinterpret_cast<sockaddr_in6 *>(&to);
    in6->sin6_family = AF_INET6;
    in6->sin6_port = reinterpret_cast<const sockaddr_in6 *>(addr)->sin6_port;
    if (want->ss_family == AF_INET6) {
      in6->sin6_addr = reinterpret_cast<const sockaddr_in6 *>(want)->sin6_addr;
    } else {
      // The IPv4 address as IPv6 sees it (::ffff:a.b.c.d) on a dual-stack
      // socket.
      in6->sin6_addr.s6_addr[10] = 0xff;
      in6->sin6_addr.s6_addr[11] = 0xff;
      std::memcpy(&in6->sin6_addr.s6_addr[12],
                  &reinterpret_cast<const sockaddr_in *>(want)->sin_addr, 4);
    }
    toLen = sizeof(sockaddr_in6);
  } else {
    errno = EADDRNOTAVAIL; // an IPv4 socket cannot listen on IPv6
    return -1;
  }
  if (real(fd, reinterpret_cast<const sockaddr *>(&to), toLen) == 0)
    return 0;
  if (errno != EADDRNOTAVAIL)
    return -1;
  // MASTER_ADDR is not an address of this machine (a NAT address, a
  // service name): the store listens on every interface, as libtorch's does.
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true))
    fsdp::runtime::printLineToStderr(
        "fsdp-run: warning: MASTER_ADDR is not an address of this machine; "
        "rank 0's store listens on every interface");
  return real(fd, addr, len);
}

namespace fsdp::runtime {

namespace {
/// While alive, the store server rank 0 starts listens on `host` only.
class StoreListensOn {
public:
  /// `spansNodes`: other machines take part, so a name that resolves to
  /// loopback here (Debian's /etc/hosts maps the host name to 127.0.1.1)
  /// cannot be where they meet: the store then listens everywhere.
  StoreListensOn(const std::string &host, bool spansNodes) {
    addrinfo hints{}, *found = nullptr;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int rc = ::getaddrinfo(host.c_str(), nullptr, &hints, &found);
    if (rc != 0 || !found)
      throw Error("cannot resolve MASTER_ADDR '" + host + "': " +
                  ::gai_strerror(rc));
    std::memcpy(&address, found->ai_addr, found->ai_addrlen);
    ::freeaddrinfo(found);
    if (spansNodes && isLoopback(address))
      return;
    storeListenAddress.store(&address);
  }
  ~StoreListensOn() { storeListenAddress.store(nullptr); }

private:
  sockaddr_storage address{};
};
} // namespace

//===----------------------------------------------------------------------===//
// Environment
//===----------------------------------------------------------------------===//

static std::optional<int> envInt(const char *name) {
  const char *value = std::getenv(name);
  if (!value || !*value)
    return std::nullopt;
  // Digits only (no sign, space or base prefix), and within an int: a
  // value cut to 32 bits would be another rank or port.
  const std::string text = value;
  bool digits = std::all_of(text.begin(), text.end(), [](unsigned char c) {
    return std::isdigit(c);
  });
  errno = 0;
  long long v = digits ? std::strtoll(value, nullptr, 10) : -1;
  if (!digits || errno == ERANGE || v > std::numeric_limits<int>::max())
    throw Error(std::string("environment variable ") + name + "='" + value +
                "' is not a non-negative integer" +
                (digits ? " of at most " +
                              std::to_string(std::numeric_limits<int>::max())
                        : ""));
  return static_cast<int>(v);
}

std::chrono::milliseconds collectiveTimeout() {
  const char *value = std::getenv("FSDP_RUN_TIMEOUT");
  if (!value || !*value)
    return std::chrono::seconds(600);
  std::string text = value;
  char *end = nullptr;
  errno = 0;
  double amount = std::strtod(text.c_str(), &end);
  std::string unit(end);
  double scale = unit.empty() || unit == "s" ? 1000.0
                 : unit == "ms"              ? 1.0
                 : unit == "m"               ? 60000.0
                 : unit == "h"               ? 3600000.0
                                             : -1.0;
  // At least a millisecond, at most a week.
  double ms = amount * scale;
  // A decimal number (strtod also reads hexadecimal, `0x10`).
  bool decimal = std::all_of(text.c_str(), static_cast<const char *>(end),
                             [](char c) {
                               return std::isdigit(static_cast<unsigned char>(c)) ||
                                      c == '.';
                             });
  if (end == text.c_str() || !decimal ||
      !std::isdigit(static_cast<unsigned char>(text[0])) ||
      errno != 0 || scale < 0 || !(ms >= 1.0) || ms > 7 * 24 * 3600e3)
    throw Error("FSDP_RUN_TIMEOUT='" + text + "' is not a duration: give "
                "seconds (600) or a number with a unit (1500ms, 90s, 10m, "
                "1h), from 1 ms to a week");
  return std::chrono::milliseconds(static_cast<int64_t>(ms));
}

RankInfo rankInfoFromEnvironment() {
  RankInfo info;
  std::optional<int> rank = envInt("RANK"), world = envInt("WORLD_SIZE");
  std::optional<int> localRank = envInt("LOCAL_RANK"),
                     localWorld = envInt("LOCAL_WORLD_SIZE");
  if (!rank && !world) {
    // Slurm (srun): one task per rank.
    rank = envInt("SLURM_PROCID");
    world = envInt("SLURM_NTASKS");
    localRank = envInt("SLURM_LOCALID");
    localWorld = envInt("SLURM_NTASKS_PER_NODE");
  }
  if (!rank && !world)
    return info;
  if (!rank || !world)
    throw Error("the launcher's environment sets one of RANK and WORLD_SIZE "
                "but not the other");
  if (*world < 1 || *rank >= *world)
    throw Error("RANK " + std::to_string(*rank) + " is not a rank of " +
                std::to_string(*world));
  info.launched = true;
  info.rank = *rank;
  info.worldSize = *world;
  info.localRank = localRank.value_or(*rank);
  info.localWorldSize = localWorld.value_or(*world);
  if (info.localWorldSize < 1 || info.localWorldSize > *world ||
      info.localRank >= info.localWorldSize)
    throw Error("local rank " + std::to_string(info.localRank) + " of " +
                std::to_string(info.localWorldSize) +
                " (LOCAL_RANK, LOCAL_WORLD_SIZE; SLURM_LOCALID, "
                "SLURM_NTASKS_PER_NODE) is not a local rank of a world of " +
                std::to_string(*world));
  if (const char *addr = std::getenv("MASTER_ADDR"); addr && *addr)
    info.masterAddr = addr;
  else if (*world > 1)
    throw Error("MASTER_ADDR is not set: the ranks meet at MASTER_ADDR:"
                "MASTER_PORT (torchrun sets both; under Slurm, export them)");
  for (const char *name : {"FSDP_RUN_ID", "TORCHELASTIC_RUN_ID"})
    if (const char *id = std::getenv(name); id && *id) {
      info.runId = id;
      break;
    }
  if (std::optional<int> port = envInt("MASTER_PORT")) {
    if (*port < 1 || *port > 65535)
      throw Error("MASTER_PORT " + std::to_string(*port) + " is not a port");
    info.masterPort = *port;
  }
  return info;
}

//===----------------------------------------------------------------------===//
// The store
//===----------------------------------------------------------------------===//

namespace {

constexpr const char *kAbortKey = "fsdp/abort";
/// How many ranks have read the abort: rank 0, whose store carries it,
/// waits for them before it exits.
constexpr const char *kAbortReadKey = "fsdp/abort_read";

/// Whether this process has counted itself in kAbortReadKey: its watchdog
/// and its main thread may both read the abort, and a rank counted twice
/// let rank 0 close its store before another rank had read why.
std::atomic<bool> abortAcknowledged{false};

/// This rank has read the abort (kAbortReadKey), counted once.
void acknowledgeAbort(c10d::Store &store) {
  if (abortAcknowledged.exchange(true))
    return;
  try {
    store.add(kAbortReadKey, 1);
  } catch (...) {
  }
}

constexpr const char *kDoneKey = "fsdp/done";
constexpr const char *kLostRankZero =
    "lost contact with rank 0 (its rendezvous store is gone)";
constexpr const char *kJoinedKey = "fsdp/joined";
/// Each rank's heartbeat, counted up by its watchdog; kFinished added when
/// the rank is done (it then beats no more).
constexpr int64_t kFinished = int64_t(1) << 40;
std::string beatKey(int rank) { return "fsdp/beat/" + std::to_string(rank); }

/// Rank 0 after an abort: keeps its store up until `others` ranks have read
/// the message, every other rank of the `worldSize` is gone, or `limit` has
/// passed. Gone: ended (a rank interrupted by Ctrl-C, whose leaving failed
/// this one's collective, reads nothing), or its heartbeat silent for
/// kSilentGone (a rank killed, or stopped: it never will read). A watchdog
/// starved of CPU may take far longer than its 200 ms period, but not that.
void holdStoreForOthers(c10d::Store &store, int64_t others, int worldSize,
                        std::chrono::milliseconds limit) {
  constexpr auto kSilentGone = std::chrono::seconds(10);
  auto deadline = std::chrono::steady_clock::now() + limit;
  std::vector<int64_t> lastBeat(worldSize, -1);
  std::vector<std::chrono::steady_clock::time_point> heardAt(
      worldSize, std::chrono::steady_clock::now());
  auto othersGone = [&] {
    auto now = std::chrono::steady_clock::now();
    bool gone = true;
    for (int r = 1; r < worldSize; ++r) {
      int64_t beat = store.add(beatKey(r), 0);
      if (beat >= kFinished)
        continue;
      if (beat != lastBeat[r]) {
        lastBeat[r] = beat;
        heardAt[r] = now;
      }
      if (now - heardAt[r] < kSilentGone)
        gone = false;
    }
    return gone;
  };
  try {
    while (store.add(kAbortReadKey, 0) < others && !othersGone() &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  } catch (...) {
  }
}

/// torchrun's agent (static rendezvous) already serves a store at
/// MASTER_ADDR:MASTER_PORT and says so: every rank is then its client.
bool usesAgentStore() {
  const char *value = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  return value && std::string(value) == "True";
}

/// Who holds the store: rank 0's job, set by rank 0 and read by every
/// other rank before it joins (the only key outside a job's prefix).
constexpr const char *kJobKey = "fsdp-run/job";

/// This run's keys: its job's own, and an agent's store outlives a restart
/// of the ranks.
std::string storePrefix(const RankInfo &info) {
  const char *restart = std::getenv("TORCHELASTIC_RESTART_COUNT");
  return "fsdp-run/" + info.runId + "/" + (restart ? restart : "0");
}

/// What a rank says of itself in the job key: its job, its fingerprint.
std::string jobRecord(const RankInfo &info) {
  return info.runId + "\n" + info.fingerprint;
}

std::string bytesToString(const std::vector<uint8_t> &bytes) {
  return std::string(bytes.begin(), bytes.end());
}

std::string runIdText(const std::string &runId) {
  return runId.empty() ? "none" : "'" + runId + "'";
}

/// This process, for a rank that finds its rank taken.
std::string processName() {
  char host[256] = {};
  ::gethostname(host, sizeof(host) - 1);
  return std::string(host) + " pid " + std::to_string(::getpid());
}

/// Waits until something accepts connections at host:port, or until the
/// deadline. libtorch 2.x's TCPStore client, after a connect that timed out,
/// sleeps a random backoff of seconds and tries once more, so a missing rank 0
/// would cost two timeouts and more, with c10d's backtraces on stderr; this
/// keeps to one deadline and leaves the store's client a server to reach.
void waitForListener(const std::string &host, int port,
                     std::chrono::steady_clock::time_point deadline) {
  using Clock = std::chrono::steady_clock;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  std::string reason = "nothing accepts connections there";
  while (true) {
    addrinfo *found = nullptr;
    int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints,
                           &found);
    if (rc != 0)
      reason = std::string("cannot resolve the address: ") + gai_strerror(rc);
    for (addrinfo *a = found; a; a = a->ai_next) {
      int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                        a->ai_protocol);
      if (fd < 0)
        continue;
      bool open = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0;
      if (!open && errno == EINPROGRESS) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - Clock::now());
        pollfd p{fd, POLLOUT, 0};
        int error = 0;
        socklen_t len = sizeof(error);
        open = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 1))) == 1 &&
               ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len) == 0 &&
               error == 0;
      }
      ::close(fd);
      if (open) {
        ::freeaddrinfo(found);
        return;
      }
    }
    if (found)
      ::freeaddrinfo(found);
    if (Clock::now() >= deadline)
      throw std::runtime_error(reason);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

/// Ends the process with an error if it is still inside a call that
/// cannot be given a deadline of its own when `deadline` passes: c10d's
/// TCPStore client, connected to a program that accepts and never answers,
/// waits in its handshake without a limit.
class DeadlineGuard {
public:
  DeadlineGuard(std::chrono::steady_clock::time_point deadline,
                std::string message)
      : thread_([this, deadline, message = std::move(message)] {
          std::unique_lock<std::mutex> lock(mutex_);
          if (done_.wait_until(lock, deadline, [this] { return finished_; }))
            return;
          printLineToStderr("fsdp-run: error: " + message);
          std::_Exit(1);
        }) {}
  ~DeadlineGuard() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      finished_ = true;
    }
    done_.notify_all();
    thread_.join();
  }

private:
  std::mutex mutex_;
  std::condition_variable done_;
  bool finished_ = false;
  std::thread thread_;
};

} // namespace

std::string seconds(std::chrono::milliseconds t) {
  double s = t.count() / 1000.0;
  char text[32];
  std::snprintf(text, sizeof(text), "%g s", s);
  return text;
}

Rendezvous::Rendezvous(const RankInfo &info)
    : info_(info), timeout_(collectiveTimeout()) {
  std::chrono::milliseconds timeout = timeout_;
  // One deadline for the whole rendezvous: reaching the store and meeting
  // every rank.
  auto deadline = std::chrono::steady_clock::now() + timeout;
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(info.masterPort);
  options.isServer = info.rank == 0 && !usesAgentStore();
  options.numWorkers = info.worldSize;
  // The ranks count themselves in below, within the same timeout.
  options.waitWorkers = false;
  options.timeout = timeout;
  try {
    std::optional<StoreListensOn> listen;
    if (options.isServer)
      listen.emplace(info.masterAddr,
                     /*spansNodes=*/info.worldSize > info.localWorldSize);
    else
      waitForListener(info.masterAddr, info.masterPort, deadline);
    // What listens there may not be rank 0's store: a program that
    // accepts and never answers would hold the store's handshake forever.
    c10::intrusive_ptr<c10d::Store> tcp;
    {
      DeadlineGuard guard(
          deadline + std::chrono::seconds(1),
          "rank " + std::to_string(info.rank) +
              ": cannot meet the other ranks at " + info.masterAddr + ":" +
              std::to_string(info.masterPort) + " within " + seconds(timeout) +
              " (FSDP_RUN_TIMEOUT): something accepts connections there but "
              "does not answer as rank 0's store; is MASTER_PORT another "
              "program's?");
      tcp = c10::make_intrusive<c10d::TCPStore>(info.masterAddr, options);
    }
    checkSameJob(tcp);
    store_ = c10::make_intrusive<c10d::PrefixStore>(storePrefix(info), tcp);
  } catch (const Error &) {
    throw;
  } catch (const std::exception &e) {
    throw Error(
        "cannot meet the other ranks at " + info.masterAddr + ":" +
        std::to_string(info.masterPort) +
        (info.rank == 0 ? ": " + firstLine(e)
                        : " within " + seconds(timeout) +
                              " (FSDP_RUN_TIMEOUT): is rank 0 running, with "
                              "the same MASTER_ADDR and MASTER_PORT? (" +
                              firstLine(e) + ")"));
  }
  // Every rank counts itself in and waits for the others.
  try {
    claimRank();
    store_->add(beatKey(info.rank), 1);
    int64_t joined = store_->add(kJoinedKey, 1);
    while (joined < info.worldSize) {
      // A rank refused at the door (a different plan) stops them all.
      if (store_->check({kAbortKey})) {
        printLineToStderr("fsdp-run: rank " + std::to_string(info.rank) +
                          " stops: " +
                          bytesToString(store_->get(kAbortKey)));
        acknowledgeAbort(*store_);
        std::_Exit(kStoppedByOtherRank);
      }
      if (std::chrono::steady_clock::now() > deadline)
        throw Error("only " + std::to_string(joined) + " of " +
                    std::to_string(info.worldSize) + " ranks met at " +
                    info.masterAddr + ":" + std::to_string(info.masterPort) +
                    " within " + seconds(timeout) +
                    " (FSDP_RUN_TIMEOUT): is every rank started?");
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      joined = store_->add(kJoinedKey, 0);
    }
  } catch (const Error &) {
    throw;
  } catch (const std::exception &e) {
    throw Error("lost the rendezvous store at " + info.masterAddr + ":" +
                std::to_string(info.masterPort) + " (did rank 0 stop?): " +
                firstLine(e));
  }
}

void Rendezvous::checkSameJob(const c10::intrusive_ptr<c10d::Store> &tcp) {
  std::string mine = jobRecord(info_);
  std::string where = info_.masterAddr + ":" + std::to_string(info_.masterPort);
  std::string held;
  if (info_.rank == 0) {
    std::vector<uint8_t> bytes(mine.begin(), mine.end());
    held = bytesToString(tcp->compareSet(kJobKey, {}, bytes));
    // A restart of the same job (torchrun's agent keeps its store).
    if (held != mine && held.substr(0, held.find('\n')) == info_.runId) {
      tcp->set(kJobKey, bytes);
      held = mine;
    }
  } else {
    // Rank 0 sets it as soon as it serves the store (or reaches the agent's).
    held = bytesToString(tcp->get(kJobKey));
  }
  if (held == mine)
    return;
  size_t newline = held.find('\n');
  std::string runId = held.substr(0, newline);
  std::string fingerprint =
      newline == std::string::npos ? "" : held.substr(newline + 1);
  if (runId != info_.runId)
    throw Error("the rendezvous at " + where + " belongs to another job (run "
                "id " + runIdText(runId) + ", this rank's " +
                runIdText(info_.runId) + "): two jobs share MASTER_PORT; give "
                "each job its own");
  std::string message =
      "its plan, --steps, --deterministic or data flags are not rank 0's "
      "(fingerprint " +
      info_.fingerprint.substr(0, 16) + ", rank 0's " +
      fingerprint.substr(0, 16) + "): every rank must be given the same plan "
      "file, --steps, --deterministic, --seed and data flags (--seq-len, "
      "--token-inputs, --data-order, --token-dtype, --eval-data, "
      "--eval-every, --eval-steps)" +
      (info_.runId.empty() ? ", or another job shares MASTER_PORT" : "");
  // Rank 0's job hears of it before its first step.
  try {
    c10d::PrefixStore store(storePrefix(info_), tcp);
    std::string told = "rank " + std::to_string(info_.rank) + ": " + message;
    std::vector<uint8_t> bytes(told.begin(), told.end());
    store.compareSet(kAbortKey, {}, bytes);
  } catch (...) {
  }
  throw Error(message);
}

void Rendezvous::claimRank() {
  std::string me = processName();
  std::vector<uint8_t> bytes(me.begin(), me.end());
  std::string holder = bytesToString(store_->compareSet(
      "fsdp/rank/" + std::to_string(info_.rank), {}, bytes));
  if (holder != me)
    throw Error("rank " + std::to_string(info_.rank) + " is already taken at " +
                info_.masterAddr + ":" + std::to_string(info_.masterPort) +
                " (by " + holder + "): two processes were given RANK=" +
                std::to_string(info_.rank) + ", or two jobs share MASTER_PORT");
}

Rendezvous::~Rendezvous() {
  // A clean end: stop watching, then rank 0 keeps the store up until every
  // rank is done with it (or the timeout passes: a rank that died after the
  // last collective).
  try {
    store_->add(beatKey(info_.rank), kFinished);
  } catch (...) {
  }
  stopWatchdog();
  if (aborted.load()) {
    // This rank reported a failure: the others stop on it and will never
    // say they are done. Rank 0 serves the store that carries the message:
    // it stays up until they have read it (their watchdogs look every
    // 200 ms), no longer.
    if (info_.rank == 0)
      holdStoreForOthers(*store_, info_.worldSize - 1, info_.worldSize,
                         std::min<std::chrono::milliseconds>(
                             timeout_, std::chrono::seconds(10)));
    return;
  }
  try {
    store_->add(kDoneKey, 1);
    auto deadline = std::chrono::steady_clock::now() + timeout_;
    if (info_.rank == 0)
      while (store_->add(kDoneKey, 0) < info_.worldSize &&
             std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
  } catch (...) {
  }
}

void Rendezvous::watch(LocalCheck check, BeforeExit beforeExit) {
  // Its own connection to the store: the main thread's may be busy.
  c10::intrusive_ptr<c10d::Store> client;
  try {
    c10d::TCPStoreOptions options;
    options.port = static_cast<std::uint16_t>(info_.masterPort);
    options.isServer = false;
    options.waitWorkers = false;
    options.timeout = timeout_;
    client = c10::make_intrusive<c10d::PrefixStore>(
        storePrefix(info_),
        c10::make_intrusive<c10d::TCPStore>(info_.masterAddr, options));
  } catch (...) {
    return;
  }
  // Rank 0 watches the others' heartbeats: a rank silent for half the
  // timeout (at least 2 s) is stopped, hung or starved, and named.
  std::chrono::milliseconds stallLimit =
      std::max<std::chrono::milliseconds>(timeout_ / 2, std::chrono::seconds(2));
  std::vector<int64_t> lastBeat(info_.worldSize, -1);
  std::vector<std::chrono::steady_clock::time_point> heardAt(
      info_.worldSize, std::chrono::steady_clock::now());
  auto lastLook = std::chrono::steady_clock::now();
  while (!stopping.load()) {
    bool failed = false;
    std::string message;
    try {
      client->add(beatKey(info_.rank), 1);
      auto now = std::chrono::steady_clock::now();
      if (info_.rank == 0 && info_.worldSize > 1 &&
          now - lastLook >= std::chrono::seconds(1)) {
        lastLook = now;
        std::vector<std::string> keys;
        for (int r = 0; r < info_.worldSize; ++r)
          keys.push_back(beatKey(r));
        std::vector<std::vector<uint8_t>> beats = client->multiGet(keys);
        for (int r = 1; r < info_.worldSize && message.empty(); ++r) {
          int64_t beat = std::stoll(bytesToString(beats[r]));
          if (beat >= kFinished)
            continue;
          if (beat != lastBeat[r]) {
            lastBeat[r] = beat;
            heardAt[r] = now;
          } else if (now - heardAt[r] > stallLimit) {
            message = "rank " + std::to_string(r) + " stopped answering: "
                      "no heartbeat for " +
                      seconds(std::chrono::duration_cast<
                              std::chrono::milliseconds>(now - heardAt[r])) +
                      " (FSDP_RUN_TIMEOUT " + seconds(timeout_) +
                      "): it is stopped, hung or starved of CPU";
          }
        }
        if (!message.empty()) {
          // Not this rank's failure: it names the one that stopped, and
          // keeps the store up until the others have read it (from before
          // any of them can have read it and left: see failureOfOthers).
          holding = true;
          abort(message);
          printLineToStderr("fsdp-run: rank 0 stops: " + message);
          if (beforeExit)
            beforeExit();
          // All but this rank and the one that stopped. Up to the whole
          // timeout, not half: a rank starved of CPU that has not read the
          // message when rank 0 leaves can only say it lost rank 0 (the
          // suite's one flaky case, under load); one that cannot read it
          // within FSDP_RUN_TIMEOUT is itself stalled.
          holdStoreForOthers(*client, info_.worldSize - 2, info_.worldSize,
                             timeout_);
          std::_Exit(kStoppedByOtherRank);
        }
      }
      if (client->check({kAbortKey})) {
        // This rank's own report (abort() stops the watchdog before it
        // writes the key) is not another rank's failure.
        if (stopping.load())
          return;
        std::vector<uint8_t> bytes = client->get(kAbortKey);
        message = std::string(bytes.begin(), bytes.end());
        // Known to the main thread before rank 0 may close its store.
        setCause(message);
        if (info_.rank == 0)
          holding = true;
        acknowledgeAbort(*client);
        failed = true;
        if (info_.rank == 0) {
          // Rank 0 serves the store that carries the message: the ranks
          // that have not read it yet must still reach it (all but this
          // one and the one that failed).
          printLineToStderr("fsdp-run: rank 0 stops: " + message);
          if (beforeExit)
            beforeExit();
          holdStoreForOthers(*client, info_.worldSize - 1, info_.worldSize,
                             timeout_);
          std::_Exit(kStoppedByOtherRank);
        }
      }
    } catch (const std::exception &e) {
      if (stopping.load())
        return;
      message = kLostRankZero;
      setCause(message);
      failed = true;
    }
    if (failed) {
      printLineToStderr("fsdp-run: rank " + std::to_string(info_.rank) +
                        " stops: " + message);
      if (beforeExit)
        beforeExit();
      std::_Exit(kStoppedByOtherRank);
    }
    if (std::string own = check ? check() : ""; !own.empty()) {
      // This rank's own failure, found while its main thread is blocked
      // (a collective that does not complete): every rank hears of it.
      own = "rank " + std::to_string(info_.rank) + ": " + own;
      if (info_.rank == 0)
        holding = true;
      abort(own);
      printLineToStderr("fsdp-run: error: " + own);
      if (beforeExit)
        beforeExit();
      // Rank 0 serves the store that carries the message: keep it up
      // until the others' watchdogs have read it.
      if (info_.rank == 0)
        holdStoreForOthers(*client, info_.worldSize - 1, info_.worldSize,
                             timeout_);
      std::_Exit(1);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}


void Rendezvous::stopWatchdog() {
  stopping = true;
  if (watchdog.joinable())
    watchdog.join();
}

void Rendezvous::startWatchdog(LocalCheck check, BeforeExit beforeExit) {
  watchdog = std::thread(
      [this, check = std::move(check), beforeExit = std::move(beforeExit)] {
        watch(check, beforeExit);
      });
}

void Rendezvous::abort(const std::string &message) {
  // This rank's own report is not news to its watchdog.
  stopping = true;
  aborted = true;
  try {
    // Only the first failure is kept: the others follow from it.
    std::vector<uint8_t> bytes(message.begin(), message.end());
    std::vector<uint8_t> held = store_->compareSet(kAbortKey, {}, bytes);
    if (held == bytes)
      // The reporter is not one of the ranks rank 0 waits to hear have
      // read it: were its main thread to count itself when its collective
      // fails, rank 0 (holding its store for the others) could leave
      // before a rank starved of CPU had read why, and that rank would
      // only say it lost rank 0.
      abortAcknowledged = true;
    else
      // Another rank's failure came first: this rank has read it.
      acknowledgeAbort(*store_);
  } catch (...) {
  }
}

void Rendezvous::setCause(const std::string &message) {
  std::lock_guard<std::mutex> lock(causeMutex);
  if (cause.empty())
    cause = message;
}

std::string Rendezvous::failureOfOthers(std::chrono::milliseconds patience) {
  // Rank 0's watchdog is keeping the store up for the ranks that have not
  // read the failure yet, and ends the process when they have (or the
  // timeout passes): this thread, woken by a collective that failed when a
  // rank that had read it left, waits for that rather than ending the
  // process (and the store) under a rank still to read it.
  if (info_.rank == 0 && holding.load()) {
    auto until = std::chrono::steady_clock::now() + timeout_ +
                 std::chrono::seconds(2);
    while (std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  auto known = [&] {
    std::lock_guard<std::mutex> lock(causeMutex);
    return cause;
  };
  auto deadline = std::chrono::steady_clock::now() + patience;
  try {
    do {
      if (std::string message = known(); !message.empty())
        return message;
      if (store_->check({kAbortKey})) {
        std::vector<uint8_t> bytes = store_->get(kAbortKey);
        acknowledgeAbort(*store_);
        return std::string(bytes.begin(), bytes.end());
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    } while (std::chrono::steady_clock::now() < deadline);
  } catch (...) {
    // Rank 0's store is gone: rank 0 has ended, after telling the others
    // why (which this rank's watchdog may have read) or not at all.
    if (std::string message = known(); !message.empty())
      return message;
    if (info_.rank != 0)
      return kLostRankZero;
  }
  return known();
}

//===----------------------------------------------------------------------===//
// Connecting the communicators
//===----------------------------------------------------------------------===//

void RankedCommunicator::failToConnect(const std::string &what) {
  rendezvous.abort("rank " + std::to_string(info.rank) + ": " + what);
  // What the watchdog's check reads is destroyed with the communicator.
  rendezvous.stopWatchdog();
  throw Error(what);
}

void RankedCommunicator::injectedFailure(const char *stage) const {
  const char *spec = std::getenv("FSDP_RUN_FAIL_COMM_INIT");
  if (!spec || !*spec)
    return;
  std::string text = spec;
  size_t colon = text.find(':');
  if (colon == std::string::npos ||
      text.substr(0, colon) != std::to_string(info.rank) ||
      text.substr(colon + 1) != stage)
    return;
  throw Error(std::string("injected failure at '") + stage +
              "' (FSDP_RUN_FAIL_COMM_INIT=" + text + ")");
}

void printLineToStderr(const std::string &line) {
  std::string text = line + "\n";
  // One write(2) where it fits: POSIX keeps it whole on a pipe.
  writeAll(STDERR_FILENO, text.data(), text.size());
}

} // namespace fsdp::runtime
