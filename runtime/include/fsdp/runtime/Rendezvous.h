//===- Rendezvous.h - where the ranks meet and hear of failures -*- C++ -*-===//
//
// What every multi-rank communicator shares, whatever moves its tensors:
// the c10d TCPStore the ranks meet at, the count of ranks that joined, the
// first failure any rank reports, and a watchdog that ends this process
// when another rank fails or the store disappears.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_RENDEZVOUS_H
#define FSDP_RUNTIME_RENDEZVOUS_H

#include "fsdp/runtime/Communicator.h"

#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <string>
#include <mutex>
#include <thread>

namespace fsdp::runtime {

class Rendezvous {
public:
  /// Meets the ranks of `info` through a c10d TCPStore at
  /// MASTER_ADDR:MASTER_PORT (rank 0 serves it, unless torchrun's agent
  /// does): every rank counts itself in and waits for the others, all
  /// within one FSDP_RUN_TIMEOUT. Throws an Error saying who is missing.
  explicit Rendezvous(const RankInfo &info);
  /// A clean end: stops the watchdog; rank 0 keeps the store up until
  /// every rank is done with it (or the timeout passes).
  ~Rendezvous();

  /// This run's keys (a prefix of its own: an agent's store outlives a
  /// restart of the ranks).
  const c10::intrusive_ptr<c10d::Store> &store() const { return store_; }
  std::chrono::milliseconds timeout() const { return timeout_; }
  const RankInfo &info() const { return info_; }

  /// What the watchdog asks a communicator between its looks at the store:
  /// a failure of this rank's own (a collective past its deadline, an
  /// asynchronous error), or "".
  using LocalCheck = std::function<std::string()>;
  /// What runs before the watchdog ends the process (aborting a
  /// communicator whose kernels would otherwise hang the device).
  using BeforeExit = std::function<void()>;
  /// Starts the watchdog: every 200 ms it looks for another rank's failure
  /// (then this rank stops with that message, status kStoppedByOtherRank)
  /// and asks `check` (a failure found there is reported to every rank and
  /// this one exits with status 1).
  void startWatchdog(LocalCheck check = {}, BeforeExit beforeExit = {});
  /// Stops the watchdog (before what its check reads is destroyed).
  void stopWatchdog();

  /// Tells every other rank that this one failed with `message`. Only the
  /// first failure reported is kept. Never throws. A rendezvous that
  /// reported a failure ends without waiting for the others (they stop on
  /// the message): rank 0 only keeps its store up until they have read it.
  void abort(const std::string &message);
  /// The failure another rank reported, waiting up to `patience`; "" if
  /// none. What this rank's watchdog has already read counts (rank 0 may
  /// have closed its store since), and a store that is gone is rank 0's
  /// end: "lost contact with rank 0". Never throws.
  std::string failureOfOthers(std::chrono::milliseconds patience);

private:
  /// Refuses a store held by another job, or a plan that is not rank 0's
  /// (then rank 0's job hears why).
  void checkSameJob(const c10::intrusive_ptr<c10d::Store> &tcp);
  /// Claims this rank's number: a second process with it is refused.
  void claimRank();
  void watch(LocalCheck check, BeforeExit beforeExit);

  RankInfo info_;
  std::chrono::milliseconds timeout_;
  c10::intrusive_ptr<c10d::Store> store_;
  std::atomic<bool> stopping{false};
  std::atomic<bool> aborted{false};
  // Rank 0's watchdog keeps the store up until the others have read a
  // failure (then it ends the process): the main thread must not end it
  // first.
  std::atomic<bool> holding{false};
  /// Another rank's failure as this rank's watchdog read it (or the loss
  /// of rank 0's store), for failureOfOthers on the main thread.
  std::mutex causeMutex;
  std::string cause;
  void setCause(const std::string &message);
  std::thread watchdog;
};

/// What Gloo's and NCCL's communicators share: the rendezvous (first, so
/// that it outlives what a subclass builds on it), where this rank stands,
/// its groups (shard groups of `shardSize` consecutive ranks) and device,
/// and failures told through the store.
class RankedCommunicator : public Communicator {
public:
  RankedCommunicator(const RankInfo &info, int shardSize, c10::Device device)
      : rendezvous(info), info(info), shardSize(shardSize), device_(device) {}

  int rank() const override { return info.rank; }
  int worldSize() const override { return info.worldSize; }
  c10::Device device() const override { return device_; }
  int groupRank(CommGroup group) const override {
    return rankInGroup(group, info.rank, shardSize);
  }
  int groupSize(CommGroup group) const override {
    return sizeOfGroup(group, info.worldSize, shardSize);
  }
  void abort(const std::string &message) override {
    rendezvous.abort(message);
  }
  std::string failureOfOthers(std::chrono::milliseconds patience) override {
    return rendezvous.failureOfOthers(patience);
  }

protected:
  /// This rank could not make its communicators (`what` says which and
  /// why): every rank hears of it at once, through the store, and stops,
  /// instead of waiting for this one until FSDP_RUN_TIMEOUT. Throws an
  /// Error with `what`. Start the watchdog before making them, so that
  /// this rank also stops when another one reports such a failure.
  [[noreturn]] void failToConnect(const std::string &what);
  /// The tests' way to make connecting fail on one rank at one `stage`
  /// ("id": rank 0 makes the world's id, "init": the world group, "split":
  /// the shard and replicate groups), read from
  /// FSDP_RUN_FAIL_COMM_INIT=RANK:STAGE; throws an Error naming it.
  void injectedFailure(const char *stage) const;

  Rendezvous rendezvous;
  const RankInfo info;
  const int shardSize;
  const c10::Device device_;
};

/// "12.5 s": how a timeout is quoted in messages.
std::string seconds(std::chrono::milliseconds t);

} // namespace fsdp::runtime

#endif // FSDP_RUNTIME_RENDEZVOUS_H
