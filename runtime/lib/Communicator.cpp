//===- Communicator.cpp - Gloo collectives through libtorch's c10d ---------===//

#include "fsdp/runtime/Communicator.h"

#ifdef FSDP_RUNTIME_GLOO
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#endif

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
#include <cstdlib>
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
  char *end = nullptr;
  long v = std::strtol(value, &end, 10);
  if (*end != '\0' || v < 0)
    throw Error(std::string("environment variable ") + name + "='" + value +
                "' is not a non-negative integer");
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
  if (end == text.c_str() || !std::isdigit(static_cast<unsigned char>(text[0])) ||
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
  if (const char *addr = std::getenv("MASTER_ADDR"); addr && *addr)
    info.masterAddr = addr;
  else if (*world > 1)
    throw Error("MASTER_ADDR is not set: the ranks meet at MASTER_ADDR:"
                "MASTER_PORT (torchrun sets both; under Slurm, export them)");
  if (std::optional<int> port = envInt("MASTER_PORT")) {
    if (*port < 1 || *port > 65535)
      throw Error("MASTER_PORT " + std::to_string(*port) + " is not a port");
    info.masterPort = *port;
  }
  return info;
}

//===----------------------------------------------------------------------===//
// One rank
//===----------------------------------------------------------------------===//

namespace {

class Ready : public Pending {
public:
  explicit Ready(at::Tensor t) : tensor(std::move(t)) {}
  at::Tensor wait() override { return tensor; }
  std::vector<at::Tensor> held() const override { return {tensor}; }

private:
  at::Tensor tensor;
};

class SingleRank : public Communicator {
public:
  int rank() const override { return 0; }
  int worldSize() const override { return 1; }
  int groupRank(CommGroup) const override { return 0; }
  int groupSize(CommGroup) const override { return 1; }
  std::unique_ptr<Pending> allGather(const at::Tensor &shard,
                                     CommGroup) override {
    return std::make_unique<Ready>(shard.clone());
  }
  std::unique_ptr<Pending> reduceScatter(const at::Tensor &full, CommGroup,
                                         bool) override {
    return std::make_unique<Ready>(full.clone());
  }
  std::unique_ptr<Pending> allReduce(const at::Tensor &t, CommGroup,
                                     bool) override {
    return std::make_unique<Ready>(t.clone());
  }
  std::unique_ptr<Pending> reduceScatterOverWorld(const at::Tensor &full,
                                                  bool) override {
    return std::make_unique<Ready>(full.clone());
  }
  void abort(const std::string &) override {}
  std::string failureOfOthers(std::chrono::milliseconds) override {
    return "";
  }
};

#ifdef FSDP_RUNTIME_GLOO
//===----------------------------------------------------------------------===//
// Gloo
//===----------------------------------------------------------------------===//

constexpr const char *kAbortKey = "fsdp/abort";
constexpr const char *kDoneKey = "fsdp/done";
constexpr const char *kJoinedKey = "fsdp/joined";

std::string seconds(std::chrono::milliseconds t) {
  double s = t.count() / 1000.0;
  char text[32];
  std::snprintf(text, sizeof(text), "%g s", s);
  return text;
}

/// What Gloo moves for `t`: the tensor itself, or for a dtype this Gloo may
/// not know (bf16: libtorch 1.13's Gloo has none), the same bytes as a
/// 16-bit type it knows (f16). Gathers and all-to-alls only move bytes;
/// sums are computed here, in `t`'s own type.
at::Tensor asSent(const at::Tensor &t) {
  return t.scalar_type() == at::kBFloat16 ? t.view(at::kHalf) : t;
}

/// A c10d work whose result is computed from its buffers once complete.
class GlooPending : public Pending {
public:
  GlooPending(c10::intrusive_ptr<c10d::Work> work,
              std::function<at::Tensor()> finish,
              std::vector<at::Tensor> buffers)
      : work(std::move(work)), finish(std::move(finish)),
        buffers(std::move(buffers)) {}
  std::vector<at::Tensor> held() const override { return buffers; }
  at::Tensor wait() override {
    try {
      work->wait();
    } catch (const std::exception &e) {
      throw Error("a collective failed (did another rank stop?): " +
                  firstLine(e));
    }
    return finish();
  }

private:
  c10::intrusive_ptr<c10d::Work> work;
  std::function<at::Tensor()> finish;
  std::vector<at::Tensor> buffers;
};

class Gloo : public Communicator {
public:
  Gloo(const RankInfo &info, int shardGroupSize);
  ~Gloo() override;

  int rank() const override { return info.rank; }
  int worldSize() const override { return info.worldSize; }
  int groupRank(CommGroup group) const override {
    switch (group) {
    case CommGroup::World:
      return info.rank;
    case CommGroup::Shard:
      return info.rank % shardSize;
    case CommGroup::Replicate:
      return info.rank / shardSize;
    }
    return 0;
  }
  int groupSize(CommGroup group) const override {
    switch (group) {
    case CommGroup::World:
      return info.worldSize;
    case CommGroup::Shard:
      return shardSize;
    case CommGroup::Replicate:
      return info.worldSize / shardSize;
    }
    return 1;
  }

  std::unique_ptr<Pending> allGather(const at::Tensor &shard,
                                     CommGroup group) override {
    int n = groupSize(group);
    if (n == 1)
      return std::make_unique<Ready>(shard.clone());
    // One output buffer, rank i's shard its i-th chunk: no concatenation
    // after the gather (Gloo itself receives into a buffer of its own and
    // copies into the chunks, which the runtime does not see).
    std::vector<int64_t> sizes = shard.sizes().vec();
    sizes[0] *= n;
    at::Tensor output = at::empty(sizes, shard.options());
    std::vector<std::vector<at::Tensor>> outputs{asSent(output).chunk(n)};
    std::vector<at::Tensor> inputs{asSent(shard.contiguous())};
    auto work = pg(group)->allgather(outputs, inputs);
    return std::make_unique<GlooPending>(
        work, [output]() { return output; }, std::vector<at::Tensor>{output});
  }

  std::unique_ptr<Pending> reduceScatter(const at::Tensor &full,
                                         CommGroup group,
                                         bool mean) override {
    int n = groupSize(group);
    if (n == 1)
      return std::make_unique<Ready>(full.clone());
    // All-to-all: rank r receives shard r of every rank's tensor and adds
    // them up in rank order, as data-parallel gradients accumulate in one
    // process (loss.backward() per micro-batch), so the sum is the same
    // to the last bit on every rank and run. (Gloo's own all-reduce adds
    // in ring order.)
    at::Tensor input = full.contiguous();
    at::Tensor output = at::empty_like(input);
    std::vector<int64_t> counts;
    at::Tensor sentOutput = asSent(output), sentInput = asSent(input);
    auto work =
        pg(group)->alltoall_base(sentOutput, sentInput, counts, counts);
    return std::make_unique<GlooPending>(
        work, [output, n, mean]() { return sumChunks(output, n, mean); },
        std::vector<at::Tensor>{input, output});
  }

  std::unique_ptr<Pending> reduceScatterOverWorld(const at::Tensor &full,
                                                  bool mean) override {
    if (shardSize == info.worldSize)
      return reduceScatter(full, CommGroup::Shard, mean);
    // All-to-all over the world: every rank sends rank q the shard q's
    // index in its group holds, so rank r receives its shard from every
    // rank, in rank order.
    int world = info.worldSize;
    std::vector<at::Tensor> shards = full.contiguous().chunk(shardSize);
    std::vector<at::Tensor> outgoing;
    for (int q = 0; q < world; ++q)
      outgoing.push_back(shards[q % shardSize]);
    at::Tensor input = at::cat(outgoing);
    at::Tensor output = at::empty_like(input);
    std::vector<int64_t> counts;
    at::Tensor sentOutput = asSent(output), sentInput = asSent(input);
    auto work = worldPG->alltoall_base(sentOutput, sentInput, counts, counts);
    return std::make_unique<GlooPending>(
        work, [output, world, mean]() { return sumChunks(output, world, mean); },
        std::vector<at::Tensor>{input, output});
  }

  std::unique_ptr<Pending> allReduce(const at::Tensor &t, CommGroup group,
                                     bool mean) override {
    int n = groupSize(group);
    if (n == 1)
      return std::make_unique<Ready>(t.clone());
    // A reduce-scatter in rank order, then an all-gather of the shards:
    // every rank holds the same bits.
    int64_t numel = t.numel(), padded = (numel + n - 1) / n * n;
    at::Tensor flat = t.contiguous().view({-1});
    if (padded != numel)
      flat = at::cat({flat, at::zeros({padded - numel}, flat.options())});
    std::shared_ptr<Pending> scatter(reduceScatter(flat, group, mean));
    auto shape = t.sizes().vec();
    CommGroup g = group;
    std::vector<at::Tensor> buffers = scatter->held();
    buffers.push_back(flat);
    return std::make_unique<Deferred>(
        [this, scatter, g, numel, shape]() {
          at::Tensor shard = scatter->wait();
          return allGather(shard, g)->wait().narrow(0, 0, numel).view(shape);
        },
        std::move(buffers));
  }

  void abort(const std::string &message) override {
    // This rank's own report is not news to its watchdog.
    stopping = true;
    try {
      // Only the first failure is kept: the others follow from it.
      std::vector<uint8_t> bytes(message.begin(), message.end());
      store->compareSet(kAbortKey, {}, bytes);
    } catch (...) {
    }
  }

  std::string failureOfOthers(std::chrono::milliseconds patience) override {
    auto deadline = std::chrono::steady_clock::now() + patience;
    try {
      do {
        if (store->check({kAbortKey})) {
          std::vector<uint8_t> bytes = store->get(kAbortKey);
          return std::string(bytes.begin(), bytes.end());
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      } while (std::chrono::steady_clock::now() < deadline);
    } catch (...) {
    }
    return "";
  }

private:
  /// Work that completes when `finish` runs.
  class Deferred : public Pending {
  public:
    Deferred(std::function<at::Tensor()> finish,
             std::vector<at::Tensor> buffers)
        : finish(std::move(finish)), buffers(std::move(buffers)) {}
    at::Tensor wait() override { return finish(); }
    std::vector<at::Tensor> held() const override { return buffers; }

  private:
    std::function<at::Tensor()> finish;
    std::vector<at::Tensor> buffers;
  };

  /// The sum of the `n` equal chunks of `received` (a buffer of our own),
  /// in order; for the mean each chunk is divided by `n` first, as NCCL's
  /// ncclAvg (FSDP2's ReduceOp.AVG) scales each contribution before the
  /// sum: a sum that would overflow where the mean does not cannot.
  static at::Tensor sumChunks(const at::Tensor &received, int n, bool mean) {
    if (mean)
      received.div_(n);
    std::vector<at::Tensor> chunks = received.chunk(n);
    at::Tensor sum = chunks[0].clone();
    for (int i = 1; i < n; ++i)
      sum.add_(chunks[i]);
    return sum;
  }

  c10::intrusive_ptr<c10d::ProcessGroupGloo> &pg(CommGroup group) {
    switch (group) {
    case CommGroup::Shard:
      return shardPG ? shardPG : worldPG;
    case CommGroup::Replicate:
      return replicatePG ? replicatePG : worldPG;
    case CommGroup::World:
      break;
    }
    return worldPG;
  }
  c10::intrusive_ptr<c10d::ProcessGroupGloo>
  makeGroup(const std::string &name, int rank, int size);
  void watch();

  RankInfo info;
  int shardSize;
  std::chrono::milliseconds timeout;
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> worldPG, shardPG, replicatePG;
  std::atomic<bool> stopping{false};
  std::thread watchdog;
};

/// torchrun's agent (static rendezvous) already serves a store at
/// MASTER_ADDR:MASTER_PORT and says so: every rank is then its client.
bool usesAgentStore() {
  const char *value = std::getenv("TORCHELASTIC_USE_AGENT_STORE");
  return value && std::string(value) == "True";
}

/// This run's keys: an agent's store outlives a restart of the ranks.
std::string storePrefix() {
  const char *run = std::getenv("TORCHELASTIC_RUN_ID");
  const char *restart = std::getenv("TORCHELASTIC_RESTART_COUNT");
  return std::string("fsdp-run/") + (run ? run : "") + "/" +
         (restart ? restart : "0");
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

c10::intrusive_ptr<c10d::ProcessGroupGloo>
Gloo::makeGroup(const std::string &name, int rank, int size) {
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  if (const char *iface = std::getenv("GLOO_SOCKET_IFNAME"); iface && *iface)
    options->devices.push_back(
        c10d::ProcessGroupGloo::createDeviceForInterface(iface));
  else if (info.masterAddr == "127.0.0.1" || info.masterAddr == "localhost")
    options->devices.push_back(
        c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  else
    options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  auto prefixed = c10::make_intrusive<c10d::PrefixStore>(name, store);
  return c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, rank, size,
                                                     options);
}

Gloo::Gloo(const RankInfo &info, int shardGroupSize)
    : info(info), shardSize(shardGroupSize) {
  timeout = collectiveTimeout();
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
    store = c10::make_intrusive<c10d::PrefixStore>(
        storePrefix(),
        c10::make_intrusive<c10d::TCPStore>(info.masterAddr, options));
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
    int64_t joined = store->add(kJoinedKey, 1);
    while (joined < info.worldSize) {
      if (std::chrono::steady_clock::now() > deadline)
        throw Error("only " + std::to_string(joined) + " of " +
                    std::to_string(info.worldSize) + " ranks met at " +
                    info.masterAddr + ":" + std::to_string(info.masterPort) +
                    " within " + seconds(timeout) +
                    " (FSDP_RUN_TIMEOUT): is every rank started?");
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      joined = store->add(kJoinedKey, 0);
    }
  } catch (const Error &) {
    throw;
  } catch (const std::exception &e) {
    throw Error("lost the rendezvous store at " + info.masterAddr + ":" +
                std::to_string(info.masterPort) + " (did rank 0 stop?): " +
                firstLine(e));
  }
  try {
    worldPG = makeGroup("world/", info.rank, info.worldSize);
    if (shardSize < info.worldSize) {
      int group = info.rank / shardSize, index = info.rank % shardSize;
      shardPG = makeGroup("shard" + std::to_string(group) + "/", index,
                          shardSize);
      replicatePG = makeGroup("replicate" + std::to_string(index) + "/",
                              group, info.worldSize / shardSize);
    }
  } catch (const std::exception &e) {
    throw Error("cannot connect the ranks' Gloo process groups (did another "
                "rank stop?): " + firstLine(e));
  }
  watchdog = std::thread([this] { watch(); });
}

void Gloo::watch() {
  // Its own connection to the store: the main thread's may be busy.
  c10::intrusive_ptr<c10d::Store> client;
  try {
    c10d::TCPStoreOptions options;
    options.port = static_cast<std::uint16_t>(info.masterPort);
    options.isServer = false;
    options.waitWorkers = false;
    options.timeout = timeout;
    client = c10::make_intrusive<c10d::PrefixStore>(
        storePrefix(),
        c10::make_intrusive<c10d::TCPStore>(info.masterAddr, options));
  } catch (...) {
    return;
  }
  while (!stopping.load()) {
    bool failed = false;
    std::string message;
    try {
      if (client->check({kAbortKey})) {
        std::vector<uint8_t> bytes = client->get(kAbortKey);
        message = std::string(bytes.begin(), bytes.end());
        failed = true;
      }
    } catch (const std::exception &e) {
      if (stopping.load())
        return;
      message = "lost contact with rank 0 (its rendezvous store is gone)";
      failed = true;
    }
    if (failed) {
      printLineToStderr("fsdp-run: rank " + std::to_string(info.rank) +
                        " stops: " + message);
      std::_Exit(kStoppedByOtherRank);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

Gloo::~Gloo() {
  // A clean end: stop watching, then rank 0 keeps the store up until every
  // rank is done with it (or the timeout passes: a rank that died after the
  // last collective).
  stopping = true;
  if (watchdog.joinable())
    watchdog.join();
  try {
    store->add(kDoneKey, 1);
    auto deadline = std::chrono::steady_clock::now() + timeout;
    if (info.rank == 0)
      while (store->add(kDoneKey, 0) < info.worldSize &&
             std::chrono::steady_clock::now() < deadline)
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
  } catch (...) {
  }
}

#endif // FSDP_RUNTIME_GLOO

} // namespace

std::unique_ptr<Pending> completed(at::Tensor result) {
  return std::make_unique<Ready>(std::move(result));
}

std::unique_ptr<Communicator> createSingleRankCommunicator() {
  return std::make_unique<SingleRank>();
}

std::unique_ptr<Communicator> createGlooCommunicator(const RankInfo &info,
                                                     int shardGroupSize) {
#ifdef FSDP_RUNTIME_GLOO
  return std::make_unique<Gloo>(info, shardGroupSize);
#else
  (void)shardGroupSize;
  throw Error("this fsdp-run was built without Gloo's headers: it runs "
              "single-rank plans only, not " +
              std::to_string(info.worldSize) + " ranks");
#endif
}

void printLineToStderr(const std::string &line) {
  std::string text = line + "\n";
  // One write(2) where it fits: POSIX keeps it whole on a pipe.
  writeAll(STDERR_FILENO, text.data(), text.size());
}

} // namespace fsdp::runtime
