//===- Communicator.h - collectives between ranks ---------------*- C++ -*-===//
//
// The runtime's one interface to other ranks. The plan's collectives are
// asynchronous: a start returns a Pending, whose wait yields the tensor.
// Gloo (through libtorch's c10d) serves CPU ranks, NCCL (its C API) GPU
// ranks; one rank needs nothing. Device.h's createCommunicator chooses.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_COMMUNICATOR_H
#define FSDP_RUNTIME_COMMUNICATOR_H

#include "fsdp/runtime/Plan.h"

#include <ATen/ATen.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

namespace fsdp::runtime {

/// Where this process is among the ranks (torchrun's and Slurm's
/// environment, or what `--nproc` gives its children).
struct RankInfo {
  int rank = 0, worldSize = 1;
  int localRank = 0, localWorldSize = 1;
  std::string masterAddr = "127.0.0.1";
  int masterPort = 29500;
  bool launched = false; // set by a launcher's environment
  /// The job this rank belongs to: FSDP_RUN_ID (set by `--nproc`'s
  /// launcher), else TORCHELASTIC_RUN_ID (torchrun); empty when started by
  /// hand. Ranks of another job at the same MASTER_PORT are refused.
  std::string runId;
  /// What every rank must agree on before the first step (a digest of the
  /// plan and the run's options); compared with rank 0's at rendezvous.
  std::string fingerprint;
};

/// The exit status of a rank that stops because another rank failed: the
/// launcher blames a rank whose status is anything else.
constexpr int kStoppedByOtherRank = 3;

/// How long a rendezvous or a collective may wait: FSDP_RUN_TIMEOUT, in
/// seconds or with a unit (`90`, `90s`, `1500ms`, `10m`, `1h`); 600 s when
/// unset. Anything else is an error naming the value.
std::chrono::milliseconds collectiveTimeout();

/// Reads RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and
/// MASTER_PORT (torchrun), or SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID and
/// SLURM_NTASKS_PER_NODE (Slurm, with MASTER_ADDR/MASTER_PORT); a single
/// rank when none is set. Inconsistent values are an error.
RankInfo rankInfoFromEnvironment();

/// In a world of `worldSize` ranks cut into shard groups of `shardSize`
/// consecutive ranks: `rank`'s index in its `group`, and the group's size.
int rankInGroup(CommGroup group, int rank, int shardSize);
int sizeOfGroup(CommGroup group, int worldSize, int shardSize);

class Pending {
public:
  virtual ~Pending() = default;
  /// Blocks until the collective is complete and returns its tensor.
  virtual at::Tensor wait() = 0;
  /// The tensors the collective holds while in flight (the input it sends,
  /// the buffer it receives into), which count in memory from its start to
  /// its wait.
  virtual std::vector<at::Tensor> held() const { return {}; }
};

class Communicator {
public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int worldSize() const = 0;
  /// Where the tensors it moves live (the rank's device).
  virtual c10::Device device() const = 0;
  /// This rank's index within `group`, and the group's size.
  virtual int groupRank(CommGroup group) const = 0;
  virtual int groupSize(CommGroup group) const = 0;

  /// The shards of `group`, concatenated in rank order along the first
  /// dimension (a 0-dim shard counts as one element: the result is 1-D).
  virtual std::unique_ptr<Pending> allGather(const at::Tensor &shard,
                                             CommGroup group) = 0;
  /// This rank's shard of the sum (or mean) of `full` over `group`.
  virtual std::unique_ptr<Pending> reduceScatter(const at::Tensor &full,
                                                 CommGroup group,
                                                 bool mean) = 0;
  /// The sum (or mean) of `t` over `group`.
  virtual std::unique_ptr<Pending> allReduce(const at::Tensor &t,
                                             CommGroup group, bool mean) = 0;

  /// HYBRID_SHARD's reduction in one (a reduce_scatter `across` the
  /// world): this rank's shard (its index in its shard group) of the sum of
  /// `full` over every rank, added in world rank order, divided by the world
  /// size if `mean`. What a reduce-scatter over the shard group followed by
  /// an all-reduce over the replica group computes, with the association a
  /// single process accumulating the ranks' gradients one after another
  /// has.
  virtual std::unique_ptr<Pending> reduceScatterOverWorld(const at::Tensor &full,
                                                          bool mean) = 0;

  /// Tells every other rank that this one failed with `message`; they stop
  /// with it. The first failure reported is the one every rank hears of.
  /// Never throws.
  virtual void abort(const std::string &message) = 0;

  /// The failure another rank reported, waiting up to `patience` for one
  /// (a collective that fails because a peer is gone usually fails a
  /// moment before the peer's report arrives); "" if none. Never throws.
  virtual std::string failureOfOthers(std::chrono::milliseconds patience) = 0;
};

/// A collective that is already complete.
std::unique_ptr<Pending> completed(at::Tensor result);
/// The all-gather of `shard` over a group of one rank: a copy (1-D for a
/// 0-dim shard).
std::unique_ptr<Pending> gatheredAlone(const at::Tensor &shard);

/// A world of one rank: every collective is the identity.
std::unique_ptr<Communicator>
createSingleRankCommunicator(c10::Device device = c10::Device(c10::kCPU));

/// Joins the ranks of `info` over Gloo: rendezvous through a c10d TCPStore
/// at MASTER_ADDR:MASTER_PORT (rank 0 serves it), one process group for the
/// world and, for `shardGroupSize` < world size, one for this rank's shard
/// group (consecutive ranks) and one for its replica group (the ranks with
/// its index in the other shard groups). A watchdog ends this process when
/// another rank reports a failure or the store disappears.
std::unique_ptr<Communicator>
createGlooCommunicator(const RankInfo &info, int shardGroupSize,
                       c10::Device device = c10::Device(c10::kCPU));

/// Joins the ranks of `info` over NCCL, each on its CUDA `device`: the same
/// rendezvous, one NCCL communicator per group (world, shard, replica), and
/// collectives on streams of their own ordered against the compute stream
/// by events, with no host synchronisation. The watchdog also aborts the
/// communicators on an asynchronous NCCL error or a collective that has not
/// completed within FSDP_RUN_TIMEOUT. An Error where fsdp-run was built
/// without NCCL.
std::unique_ptr<Communicator> createNcclCommunicator(const RankInfo &info,
                                                     int shardGroupSize,
                                                     c10::Device device);

/// Writes `line` and a newline to stderr in one write(2): the ranks of one
/// run share a pipe, and a line written in pieces (as std::cerr does) can be
/// interleaved with another rank's.
void printLineToStderr(const std::string &line);

} // namespace fsdp::runtime

#endif // FSDP_RUNTIME_COMMUNICATOR_H
