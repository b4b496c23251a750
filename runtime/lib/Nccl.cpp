//===- Nccl.cpp - collectives between GPU ranks over NCCL's C API ---------===//
//
// One NCCL communicator per group the plan names (world; shard and replica
// split from it). They are blocking communicators (NCCL's default, and
// PyTorch's): the main thread never waits inside NCCL once they exist, and
// the watchdog, running from before their creation, aborts them from its
// own thread and ends the process. Each group's collectives run on a
// stream of its own: a start makes that stream wait on an event of the
// compute stream and enqueues the call; a wait makes the compute stream
// wait on the collective's event. The host never waits for the device on
// the step's path, and the buffers live until the plan's wait and free (the
// executor holds them), so the caching allocator never hands out memory a
// collective still reads or writes (no recordStream). docs/architecture.md
// says why this and not c10d's ProcessGroupNCCL.
//
//===----------------------------------------------------------------------===//

#include "CudaHalf.h"
#include "fsdp/runtime/Communicator.h"
#include "fsdp/runtime/Rendezvous.h"

#ifdef FSDP_RUNTIME_NCCL
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <nccl.h>
#endif

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace fsdp::runtime {

#ifdef FSDP_RUNTIME_NCCL
namespace {

using Clock = std::chrono::steady_clock;

std::string groupName(CommGroup group) { return std::string(name(group)); }

/// What NCCL sends for a contiguous tensor in a collective that only moves
/// data (an all-gather): the tensor itself, flat, where NCCL has its type;
/// otherwise (complex, bool, int16, unsigned types) its bytes.
struct Carried {
  at::Tensor data; // flat, sharing the tensor's storage
  ncclDataType_t type;
};

Carried moved(const at::Tensor &t) {
  at::Tensor flat = t.reshape({-1});
  switch (t.scalar_type()) {
  case at::kFloat:
    return {flat, ncclFloat32};
  case at::kHalf:
    return {flat, ncclFloat16};
  case at::kBFloat16:
    return {flat, ncclBfloat16};
  case at::kDouble:
    return {flat, ncclFloat64};
  case at::kInt:
    return {flat, ncclInt32};
  case at::kLong:
    return {flat, ncclInt64};
  case at::kChar:
    return {flat, ncclInt8};
  case at::kByte:
    return {flat, ncclUint8};
  default:
    return {flat.view(at::kByte), ncclUint8};
  }
}

/// What NCCL adds for a contiguous tensor, and how: complex numbers as
/// pairs of reals (as c10d does), bool's sum as the maximum of bytes (a
/// logical or, as c10d does). A type NCCL cannot add (int16, the unsigned
/// types wider than a byte; bool's mean) is an Error naming `what`
/// (fsdp-opt --backend nccl refuses such a plan before it runs).
struct Reduced {
  at::Tensor data;
  ncclDataType_t type;
  ncclRedOp_t op;
};

Reduced reduced(const at::Tensor &t, bool mean, const std::string &what) {
  ncclRedOp_t op = mean ? ncclAvg : ncclSum;
  at::ScalarType dtype = t.scalar_type();
  if (dtype == at::kComplexFloat || dtype == at::kComplexDouble)
    return {at::view_as_real(t.reshape({-1})).reshape({-1}),
            dtype == at::kComplexFloat ? ncclFloat32 : ncclFloat64, op};
  if (dtype == at::kBool && !mean)
    return {t.reshape({-1}).view(at::kByte), ncclUint8, ncclMax};
  Carried c = moved(t);
  if (dtype != at::kBool && (c.type != ncclUint8 || dtype == at::kByte))
    return {c.data, c.type, op};
  throw Error(what + ": NCCL cannot " + (mean ? "average" : "add") +
              " tensors of type " + std::string(c10::toString(dtype)));
}

/// NCCL's own words for a failure, and the communicator's last message.
std::string ncclWords(ncclResult_t result, ncclComm_t comm) {
  std::string words = ncclGetErrorString(result);
  const char *last = comm ? ncclGetLastError(comm) : nullptr;
  if (last && *last)
    words += " (" + std::string(last) + ")";
  return words;
}

/// One communicator and the stream its collectives run on.
struct Group {
  ncclComm_t comm = nullptr;
  std::optional<c10::cuda::CUDAStream> stream;
  const char *name = "world";
};

/// A collective in flight: what the watchdog looks at.
struct InFlight {
  std::shared_ptr<at::cuda::CUDAEvent> done;
  Clock::time_point started;
  std::string what;
};

class NcclPending : public Pending {
public:
  NcclPending(std::shared_ptr<at::cuda::CUDAEvent> done, at::Tensor result,
              std::vector<at::Tensor> buffers)
      : done(std::move(done)), result(std::move(result)),
        buffers(std::move(buffers)) {}
  at::Tensor wait() override {
    // The compute stream waits for the collective; the host does not.
    done->block(c10::cuda::getCurrentCUDAStream(result.device().index()));
    return result;
  }
  std::vector<at::Tensor> held() const override { return buffers; }

private:
  std::shared_ptr<at::cuda::CUDAEvent> done;
  at::Tensor result;
  std::vector<at::Tensor> buffers;
};

class Nccl : public RankedCommunicator {
public:
  Nccl(const RankInfo &info, int shardGroupSize, c10::Device device);
  ~Nccl() override;

  std::unique_ptr<Pending> allGather(const at::Tensor &shard,
                                     CommGroup group) override {
    int n = groupSize(group);
    if (n == 1)
      return gatheredAlone(shard);
    at::Tensor input = onDevice(shard).contiguous();
    // The shards one after another along the first dimension (a 0-dim
    // shard counts as one element).
    std::vector<int64_t> sizes = input.sizes().vec();
    if (sizes.empty())
      sizes.push_back(1);
    sizes[0] *= n;
    at::Tensor output = at::empty(sizes, input.options());
    std::string what = "all-gather over the " + groupName(group) + " group";
    Carried in = moved(input), out = moved(output);
    return launch(groupOf(group), what, output, {input, output},
                  [&](ncclComm_t comm, cudaStream_t stream) {
                    return ncclAllGather(in.data.data_ptr(),
                                         out.data.data_ptr(), in.data.numel(),
                                         in.type, comm, stream);
                  });
  }

  std::unique_ptr<Pending> reduceScatter(const at::Tensor &full,
                                         CommGroup group,
                                         bool mean) override {
    int n = groupSize(group);
    if (n == 1)
      return completed(full.clone());
    at::Tensor input = onDevice(full).contiguous();
    std::vector<int64_t> sizes = input.sizes().vec();
    sizes[0] /= n;
    at::Tensor output = at::empty(sizes, input.options());
    std::string what = "reduce-scatter over the " + groupName(group) + " group";
    Reduced in = reduced(input, mean, what), out = reduced(output, mean, what);
    return launch(groupOf(group), what, output, {input, output},
                  [&](ncclComm_t comm, cudaStream_t stream) {
                    return ncclReduceScatter(in.data.data_ptr(),
                                             out.data.data_ptr(),
                                             out.data.numel(), in.type, in.op,
                                             comm, stream);
                  });
  }

  std::unique_ptr<Pending> allReduce(const at::Tensor &t, CommGroup group,
                                     bool mean) override {
    if (groupSize(group) == 1)
      return completed(t.clone());
    at::Tensor input = onDevice(t).contiguous();
    at::Tensor output = at::empty_like(input);
    std::string what = "all-reduce over the " + groupName(group) + " group";
    Reduced in = reduced(input, mean, what), out = reduced(output, mean, what);
    return launch(groupOf(group), what, output, {input, output},
                  [&](ncclComm_t comm, cudaStream_t stream) {
                    return ncclAllReduce(in.data.data_ptr(),
                                         out.data.data_ptr(), in.data.numel(),
                                         in.type, in.op, comm, stream);
                  });
  }

  std::unique_ptr<Pending> reduceScatterOverWorld(const at::Tensor &full,
                                                  bool mean) override {
    if (shardSize == info.worldSize)
      return reduceScatter(full, CommGroup::Shard, mean);
    // A reduce-scatter over the shard group, then an all-reduce of the
    // shard over the replica group, in place, on the shard group's stream
    // (one event for both). Means at each stage make the world's mean.
    at::Tensor input = onDevice(full).contiguous();
    std::vector<int64_t> sizes = input.sizes().vec();
    sizes[0] /= shardSize;
    at::Tensor output = at::empty(sizes, input.options());
    std::string what = "reduce-scatter over the shard group and all-reduce "
                       "over the replicate group";
    Reduced in = reduced(input, mean, what), out = reduced(output, mean, what);
    return launch(shard, what, output, {input, output},
                  [&](ncclComm_t comm, cudaStream_t stream) {
                    ncclResult_t r = ncclReduceScatter(
                        in.data.data_ptr(), out.data.data_ptr(),
                        out.data.numel(), in.type, in.op, comm, stream);
                    if (r != ncclSuccess)
                      return r;
                    return ncclAllReduce(out.data.data_ptr(),
                                         out.data.data_ptr(), out.data.numel(),
                                         in.type, in.op, replicate.comm,
                                         stream);
                  });
  }

  void abort(const std::string &message) override {
    RankedCommunicator::abort(message);
    abortCommunicators();
  }

private:
  /// NCCL moves device memory: state kept in host memory (CPU offload),
  /// gathered for a checkpoint or --save, is copied over first.
  at::Tensor onDevice(const at::Tensor &t) const {
    return t.device() == device_ ? t : t.to(device_);
  }

  Group &groupOf(CommGroup group) {
    switch (group) {
    case CommGroup::Shard:
      return shardSize < info.worldSize ? shard : world;
    case CommGroup::Replicate:
      return shardSize < info.worldSize ? replicate : world;
    case CommGroup::World:
      break;
    }
    return world;
  }

  template <typename Call>
  std::unique_ptr<Pending> launch(Group &group, const std::string &what,
                                  at::Tensor result,
                                  std::vector<at::Tensor> buffers, Call call) {
    c10::DeviceIndex index = device_.index();
    c10::cuda::CUDAStream compute = c10::cuda::getCurrentCUDAStream(index);
    at::cuda::CUDAEvent ready;
    ready.record(compute);
    ready.block(*group.stream);
    ncclResult_t r = call(group.comm, group.stream->stream());
    if (r != ncclSuccess)
      throw Error(what + " failed: NCCL: " + ncclWords(r, group.comm));
    auto done = std::make_shared<at::cuda::CUDAEvent>();
    done->record(*group.stream);
    if (!capturing(compute)) {
      std::lock_guard<std::mutex> lock(mutex);
      inFlight.push_back({done, Clock::now(), what});
    }
    return std::make_unique<NcclPending>(done, std::move(result),
                                         std::move(buffers));
  }

  static bool capturing(const c10::cuda::CUDAStream &stream) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    return cudaStreamIsCapturing(stream.stream(), &status) == cudaSuccess &&
           status != cudaStreamCaptureStatusNone;
  }

  Group create(const char *name, ncclComm_t parent, int color, int key);
  /// The watchdog's question: an asynchronous error of a communicator, or
  /// a collective past its deadline; "" if neither.
  std::string check();
  void abortCommunicators();

  std::chrono::milliseconds timeout;
  Group world, shard, replicate;
  std::mutex mutex; // guards inFlight and the communicators' lifetime
  std::deque<InFlight> inFlight;
  bool closed = false;
};

Group Nccl::create(const char *name, ncclComm_t parent, int color, int key) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  Group g;
  g.name = name;
  ncclResult_t r;
  if (!parent) {
    // The world's unique id, from rank 0 through the store.
    ncclUniqueId id;
    const std::string key = "nccl/world-id";
    if (info.rank == 0) {
      injectedFailure("id");
      r = ncclGetUniqueId(&id);
      if (r != ncclSuccess)
        throw Error("cannot create an NCCL unique id: " + ncclWords(r, nullptr));
      const auto *bytes = reinterpret_cast<const uint8_t *>(&id);
      rendezvous.store()->set(key,
                              std::vector<uint8_t>(bytes, bytes + sizeof(id)));
    } else {
      // Blocks until rank 0 sets it; a rank that fails meanwhile tells
      // the others through the store, and their watchdogs end them.
      std::vector<uint8_t> bytes = rendezvous.store()->get(key);
      if (bytes.size() != sizeof(id))
        throw Error("rank 0's NCCL unique id has " +
                    std::to_string(bytes.size()) + " bytes, not " +
                    std::to_string(sizeof(id)));
      std::memcpy(&id, bytes.data(), sizeof(id));
    }
    injectedFailure("init");
    r = ncclCommInitRankConfig(&g.comm, info.worldSize, id, info.rank, &config);
  } else {
    injectedFailure("split");
    r = ncclCommSplit(parent, color, key, &g.comm, &config);
  }
  if (r != ncclSuccess || !g.comm) {
    std::string words = ncclWords(r, g.comm);
    if (g.comm)
      ncclCommAbort(g.comm);
    throw Error(std::string("cannot create the ") + name +
                " group's NCCL communicator: " + words);
  }
  g.stream = c10::cuda::getStreamFromPool(/*isHighPriority=*/true,
                                          device_.index());
  return g;
}

Nccl::Nccl(const RankInfo &info, int shardGroupSize, c10::Device device)
    : RankedCommunicator(info, shardGroupSize, device),
      timeout(rendezvous.timeout()) {
  c10::cuda::CUDAGuard guard(device.index());
  // Watching from the start: a rank that fails while the communicators
  // are created (a call that blocks until every rank takes part) ends
  // this one too, instead of leaving it blocked.
  rendezvous.startWatchdog([this] { return check(); },
                           [this] { abortCommunicators(); });
  auto keep = [this](Group &member, Group made) {
    std::lock_guard<std::mutex> lock(mutex);
    member = std::move(made);
  };
  std::string message;
  try {
    keep(world, create("world", nullptr, 0, 0));
    if (shardSize < info.worldSize) {
      int group = info.rank / shardSize, index = info.rank % shardSize;
      keep(shard, create("shard", world.comm, group, index));
      keep(replicate, create("replicate", world.comm, index, group));
    }
    return;
  } catch (const Error &e) {
    message = e.what();
  } catch (const std::exception &e) {
    message = "cannot create the ranks' NCCL communicators (did another "
              "rank stop?): " + firstLine(e);
  }
  // Every rank hears of it, and those blocked in NCCL's initialisation
  // (which waits for every rank) stop at once.
  abortCommunicators();
  failToConnect(message);
}

std::string Nccl::check() {
  std::lock_guard<std::mutex> lock(mutex);
  if (closed)
    return "";
  try {
    // The watchdog's thread queries this rank's device (not device 0,
    // where it would make a context of its own).
    c10::cuda::set_device(device_.index());
    for (Group *g : {&world, &shard, &replicate}) {
      ncclResult_t state = ncclSuccess;
      if (g->comm && ncclCommGetAsyncError(g->comm, &state) == ncclSuccess &&
          state != ncclSuccess && state != ncclInProgress)
        return std::string("the ") + g->name + " group's NCCL communicator "
               "failed: " + ncclWords(state, g->comm);
    }
    while (!inFlight.empty() && inFlight.front().done->query())
      inFlight.pop_front();
    if (!inFlight.empty() && Clock::now() - inFlight.front().started > timeout)
      return "the " + inFlight.front().what + " did not complete within " +
             seconds(timeout) + " (FSDP_RUN_TIMEOUT): did another rank stop?";
  } catch (const std::exception &e) {
    // A CUDA error (sticky: the device is lost to this process).
    return "the device failed: " + firstLine(e);
  }
  return "";
}

void Nccl::abortCommunicators() {
  std::lock_guard<std::mutex> lock(mutex);
  for (Group *g : {&replicate, &shard, &world})
    if (g->comm) {
      ncclCommAbort(g->comm);
      g->comm = nullptr;
    }
  closed = true;
}

Nccl::~Nccl() {
  // The watchdog's check reads what is destroyed here.
  rendezvous.stopWatchdog();
  // A clean end: every collective flushed (each was waited for), then the
  // communicators freed; one that cannot be finalized is aborted.
  std::lock_guard<std::mutex> lock(mutex);
  closed = true;
  for (Group *g : {&replicate, &shard, &world}) {
    if (!g->comm)
      continue;
    if (ncclCommFinalize(g->comm) == ncclSuccess)
      ncclCommDestroy(g->comm);
    else
      ncclCommAbort(g->comm);
    g->comm = nullptr;
  }
}

} // namespace
#endif // FSDP_RUNTIME_NCCL

namespace cuda {

std::string ncclBuiltVersion() {
#ifdef FSDP_RUNTIME_NCCL
  return std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) + "." +
         std::to_string(NCCL_PATCH);
#else
  return "";
#endif
}

std::unique_ptr<Communicator> ncclCommunicator(const RankInfo &info,
                                               int shardGroupSize,
                                               c10::Device device) {
#ifdef FSDP_RUNTIME_NCCL
  // Ranks that share a GPU (FSDP_RUN_SHARE_GPUS, a test) must look like
  // different hosts to NCCL 2.28, which refuses two ranks on one device.
  if (const char *share = std::getenv("FSDP_RUN_SHARE_GPUS");
      share && std::strcmp(share, "1") == 0 && !std::getenv("NCCL_HOSTID"))
    ::setenv("NCCL_HOSTID",
             ("fsdp-run-rank-" + std::to_string(info.rank)).c_str(), 1);
  return std::make_unique<Nccl>(info, shardGroupSize, device);
#else
  (void)info;
  (void)shardGroupSize;
  (void)device;
  throw Error("this fsdp-run was built without NCCL's headers: --backend "
              "nccl is unavailable (use --backend gloo)");
#endif
}

} // namespace cuda

} // namespace fsdp::runtime
