//===- Gloo.cpp - collectives between CPU ranks over c10d's Gloo ----------===//

#include "fsdp/runtime/Communicator.h"
#include "fsdp/runtime/Device.h"
#include "fsdp/runtime/Plan.h"
#include "fsdp/runtime/Rendezvous.h"

#ifdef FSDP_RUNTIME_GLOO
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#endif

#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

namespace fsdp::runtime {

#ifdef FSDP_RUNTIME_GLOO
namespace {

/// What Gloo moves for `t` (at least 1-dim, its last dimension
/// contiguous): the tensor itself, or for a dtype Gloo may not know the
/// same bytes as a type it knows (bf16 as f16, which libtorch 1.13's Gloo
/// lacked; complex, bool, int16 and the wider unsigned types as bytes).
/// Gathers and the reductions' exchanges only move bytes; sums are computed
/// here, in `t`'s own type.
at::Tensor asSent(const at::Tensor &t) {
  switch (t.scalar_type()) {
  case at::kFloat:
  case at::kDouble:
  case at::kHalf:
  case at::kChar:
  case at::kByte:
  case at::kInt:
  case at::kLong:
    return t;
  case at::kBFloat16:
    return t.view(at::kHalf);
  default:
    return t.view(at::kByte);
  }
}

/// c10d works whose result is computed from its buffers once all are
/// complete.
class GlooPending : public Pending {
public:
  GlooPending(std::vector<c10::intrusive_ptr<c10d::Work>> works,
              std::function<at::Tensor()> finish,
              std::vector<at::Tensor> buffers)
      : works(std::move(works)), finish(std::move(finish)),
        buffers(std::move(buffers)) {}
  GlooPending(c10::intrusive_ptr<c10d::Work> work,
              std::function<at::Tensor()> finish,
              std::vector<at::Tensor> buffers)
      : GlooPending(std::vector<c10::intrusive_ptr<c10d::Work>>{std::move(work)},
                    std::move(finish), std::move(buffers)) {}
  std::vector<at::Tensor> held() const override { return buffers; }
  at::Tensor wait() override {
    try {
      for (auto &work : works)
        work->wait();
    } catch (const std::exception &e) {
      throw Error("a collective failed (did another rank stop?): " +
                  firstLine(e));
    }
    // Gloo's worker thread lets go of a work (and the work of its tensors)
    // only after it has woken us: wait for that too (a moment at most), so
    // that the buffers go back to the allocator when the plan frees them,
    // not whenever the worker next gets a core.
    auto until =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(20);
    for (auto &work : works)
      while (work.use_count() > 1 && std::chrono::steady_clock::now() < until)
        std::this_thread::yield();
    return finish();
  }

private:
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  std::function<at::Tensor()> finish;
  std::vector<at::Tensor> buffers;
};

class Gloo : public RankedCommunicator {
public:
  Gloo(const RankInfo &info, int shardGroupSize, c10::Device device);

  std::unique_ptr<Pending> allGather(const at::Tensor &shard,
                                     CommGroup group) override {
    int n = groupSize(group);
    if (n == 1)
      return gatheredAlone(shard);
    // One output buffer, rank i's shard its i-th chunk, received in place:
    // each rank broadcasts its chunk. (c10d's Gloo all-gather receives
    // into a buffer of the whole output and copies it into the chunks: a
    // second gathered buffer while the gather is in flight, which the
    // plan's memory would not see.) The shards one after another along
    // the first dimension (a 0-dim shard counts as one element).
    at::Tensor input = shard.dim() == 0 ? shard.reshape({1}) : shard.contiguous();
    std::vector<int64_t> sizes = input.sizes().vec();
    sizes[0] *= n;
    at::Tensor output = at::empty(sizes, input.options());
    std::vector<at::Tensor> chunks = asSent(output).chunk(n);
    chunks[groupRank(group)].copy_(asSent(input));
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    for (int root = 0; root < n; ++root) {
      std::vector<at::Tensor> sent{chunks[root]};
      c10d::BroadcastOptions options;
      options.rootRank = root;
      works.push_back(pg(group)->broadcast(sent, options));
    }
    return std::make_unique<GlooPending>(
        std::move(works), [output]() { return output; },
        std::vector<at::Tensor>{output});
  }

  std::unique_ptr<Pending> reduceScatter(const at::Tensor &full,
                                         CommGroup group,
                                         bool mean) override {
    int n = groupSize(group);
    if (n == 1)
      return completed(full.clone());
    return exchange(pg(group), full.contiguous(), n, groupRank(group), mean);
  }

  std::unique_ptr<Pending> reduceScatterOverWorld(const at::Tensor &full,
                                                  bool mean) override {
    if (shardSize == info.worldSize)
      return reduceScatter(full, CommGroup::Shard, mean);
    // Over the world: every rank sends rank q the shard q's index in its
    // group holds, so rank r receives its shard from every rank, in rank
    // order.
    int world = info.worldSize;
    std::vector<at::Tensor> shards = full.contiguous().chunk(shardSize);
    std::vector<at::Tensor> outgoing;
    for (int q = 0; q < world; ++q)
      outgoing.push_back(shards[q % shardSize]);
    return exchange(worldPG, at::cat(outgoing), world, info.rank, mean);
  }

  std::unique_ptr<Pending> allReduce(const at::Tensor &t, CommGroup group,
                                     bool mean) override {
    int n = groupSize(group);
    if (n == 1)
      return completed(t.clone());
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

  /// This rank's shard of the sum (or mean) over the `n` ranks of `group`
  /// of `input` (contiguous, n equal chunks along its first dimension):
  /// rank q's chunk goes to rank q, by point-to-point sends, so that a
  /// rank receives only the others' chunks (n-1 of them, into one buffer)
  /// and keeps its own where it is. (An all-to-all would receive a whole
  /// input's worth, its own chunk copied too: a gradient's bytes where
  /// FSDP2's reduce-scatter receives a shard.) The chunks are added in
  /// rank order, as data-parallel gradients accumulate in one process
  /// (loss.backward() per micro-batch), so the sum is the same to the last
  /// bit on every rank and run. (Gloo's own all-reduce adds in ring order.)
  std::unique_ptr<Pending>
  exchange(const c10::intrusive_ptr<c10d::ProcessGroupGloo> &group,
           const at::Tensor &input, int n, int me, bool mean) {
    if (input.dim() == 0 || input.size(0) % n != 0)
      throw Error("a reduce-scatter over " + std::to_string(n) +
                  " ranks needs a first dimension they divide; the tensor "
                  "is " + TensorSpec{input.sizes().vec(), input.scalar_type()}
                              .str());
    std::vector<int64_t> shape = input.sizes().vec();
    shape[0] /= n;
    if (input.numel() == 0) // nothing to move or add (a zero-size unit)
      return completed(at::empty(shape, input.options()));
    std::vector<int64_t> others = shape;
    others[0] *= n - 1;
    at::Tensor received = at::empty(others, input.options());
    std::vector<at::Tensor> sent = asSent(input).tensor_split(n);
    std::vector<at::Tensor> into = asSent(received).tensor_split(n - 1);
    // The same tag on every rank, as long as every rank makes the same
    // sequence of exchanges (the plan's reductions, the loss's all-reduce,
    // the runtime's own barriers and checks: the same calls everywhere).
    int tag = static_cast<int>(nextTag++ & 0x3fffffff);
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    for (int q = 0; q < n; ++q) {
      if (q == me)
        continue;
      std::vector<at::Tensor> out{sent[q]}, in{into[q < me ? q : q - 1]};
      works.push_back(group->send(out, q, tag));
      works.push_back(group->recv(in, q, tag));
    }
    at::Tensor own = input.tensor_split(n)[me];
    // The mean's divisor, held from here: a division by a number would
    // allocate the number's tensor while the sum is allocated.
    at::Tensor divisor =
        mean ? at::full({}, n,
                        input.options().dtype(divisorType(input.scalar_type(), n)))
             : at::Tensor();
    std::vector<at::Tensor> held{input, received};
    if (mean)
      held.push_back(divisor);
    return std::make_unique<GlooPending>(
        std::move(works),
        [received, own, divisor, n, me]() {
          return sumChunks(received, own, divisor, n, me);
        },
        std::move(held));
  }

  /// The type of the divisor of a mean over `n` ranks of `t`s
  /// (kDivisorInOwnTypeRanks): `t`, whose kernel divides by it without a
  /// cast, where it holds `n` exactly; float for a 16-bit type beyond
  /// (bf16 rounds 257 to 256; the kernel then casts the divisor, two bytes
  /// the memory model does not count).
  static at::ScalarType divisorType(at::ScalarType t, int n) {
    if (n <= fsdp::plan::kDivisorInOwnTypeRanks)
      return t;
    if (t == at::kBFloat16 || t == at::kHalf)
      return at::kFloat;
    if (t == at::kComplexHalf)
      return at::kComplexFloat;
    return t;
  }

  /// Rank `me`'s chunk of the sum of the ranks' inputs: the others' chunks
  /// in `received` (in rank order, a buffer of our own), `me`'s in `own`
  /// (the input's, which stays as it was). For the mean (`divisor` given:
  /// the number of ranks) each chunk is divided first, as NCCL's ncclAvg
  /// (FSDP2's ReduceOp.AVG) scales each contribution before the sum: a sum
  /// that would overflow where the mean does not cannot. Nothing is
  /// allocated but the result: rank 0's and rank 1's sums start from their
  /// own chunk (a + b is b + a to the bit), a later rank's own chunk is
  /// divided in the slot of rank 0's, which the sum has already taken.
  static at::Tensor sumChunks(const at::Tensor &received,
                              const at::Tensor &own,
                              const at::Tensor &divisor, int n, int me) {
    bool mean = divisor.defined();
    if (mean)
      received.div_(divisor);
    std::vector<at::Tensor> chunks = received.tensor_split(n - 1);
    auto other = [&](int q) { return chunks[q < me ? q : q - 1]; };
    at::Tensor sum;
    if (me <= 1) {
      sum = mean ? at::div(own, divisor) : own.clone();
      for (int q = 0; q < n; ++q)
        if (q != me)
          sum.add_(other(q));
      return sum;
    }
    sum = other(0).clone();
    for (int q = 1; q < n; ++q) {
      if (q != me) {
        sum.add_(other(q));
      } else if (mean) {
        at::Tensor scratch = other(0);
        scratch.copy_(own);
        sum.add_(scratch.div_(divisor));
      } else {
        sum.add_(own);
      }
    }
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

  c10::intrusive_ptr<c10d::ProcessGroupGloo> worldPG, shardPG, replicatePG;
  /// The next exchange's tag (point-to-point messages match by tag).
  uint32_t nextTag = 0;
};

c10::intrusive_ptr<c10d::ProcessGroupGloo>
Gloo::makeGroup(const std::string &name, int rank, int size) {
  auto options =
      c10d::ProcessGroupGloo::Options::create(rendezvous.timeout());
  if (const char *iface = std::getenv("GLOO_SOCKET_IFNAME"); iface && *iface)
    options->devices.push_back(
        c10d::ProcessGroupGloo::createDeviceForInterface(iface));
  else if (info.masterAddr == "127.0.0.1" || info.masterAddr == "localhost")
    options->devices.push_back(
        c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  else
    options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  auto prefixed = c10::make_intrusive<c10d::PrefixStore>(name, rendezvous.store());
  return c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, rank, size,
                                                     options);
}

Gloo::Gloo(const RankInfo &info, int shardGroupSize, c10::Device device)
    : RankedCommunicator(info, shardGroupSize, device) {
  // Watching from the start: a rank that cannot connect tells the others,
  // which stop at once instead of waiting for it inside Gloo's connection
  // of the full mesh until the timeout.
  rendezvous.startWatchdog();
  std::string groups = "world group's Gloo process group";
  try {
    if (info.rank == 0)
      injectedFailure("id");
    injectedFailure("init");
    worldPG = makeGroup("world/", info.rank, info.worldSize);
    if (shardSize < info.worldSize) {
      groups = "shard and replicate groups' Gloo process groups";
      injectedFailure("split");
      int group = info.rank / shardSize, index = info.rank % shardSize;
      shardPG = makeGroup("shard" + std::to_string(group) + "/", index,
                          shardSize);
      replicatePG = makeGroup("replicate" + std::to_string(index) + "/",
                              group, info.worldSize / shardSize);
    }
  } catch (const std::exception &e) {
    failToConnect("cannot connect the " + groups +
                  " (did another rank stop?): " + firstLine(e));
  }
}

} // namespace
#endif // FSDP_RUNTIME_GLOO

bool glooBuilt() {
#ifdef FSDP_RUNTIME_GLOO
  return true;
#else
  return false;
#endif
}

std::unique_ptr<Communicator> createGlooCommunicator(const RankInfo &info,
                                                     int shardGroupSize,
                                                     c10::Device device) {
#ifdef FSDP_RUNTIME_GLOO
  return std::make_unique<Gloo>(info, shardGroupSize, device);
#else
  (void)shardGroupSize;
  (void)device;
  throw Error("this fsdp-run was built without Gloo's headers: it runs "
              "single-rank plans only, not " +
              std::to_string(info.worldSize) + " ranks");
#endif
}

} // namespace fsdp::runtime
