//===- Session.h - the runtime driven step by step -------------*- C++ -*-===//
//
// One rank of a job that a caller drives one step at a time with its own
// batches: the Python module's Runtime (runtime/python/Module.cpp), where
// fsdp-run's Training (Trainer.cpp) reads the batches itself. The same
// plan, executor, communicator and state files, so the same bits.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_SESSION_H
#define FSDP_RUNTIME_SESSION_H

#include "fsdp/runtime/Checkpoint.h"
#include "fsdp/runtime/Communicator.h"
#include "fsdp/runtime/Executor.h"
#include "fsdp/runtime/Plan.h"
#include "fsdp/runtime/RunOptions.h"

#include <map>
#include <memory>
#include <optional>
#include <string>

namespace fsdp::runtime {

/// A batch by input name: this rank's part of the global batch.
using Batch = std::map<std::string, at::Tensor>;

class Session {
public:
  /// The rank of the environment's job (torchrun's or Slurm's variables;
  /// one rank without them): reads `o.plan` and this rank's shard of
  /// `o.model`, meets the other ranks (every one must load the same plan),
  /// and places the state on `o.device`'s device. `o.seed`: the generator's
  /// seed on every rank, as fsdp-run's --seed; `o.resume`: the state, step
  /// count and generator of a checkpoint (fsdp-run's --resume).
  explicit Session(const RunOptions &o);
  ~Session();
  Session(const Session &) = delete;
  Session &operator=(const Session &) = delete;

  /// One training step on `batch`, this rank's slice of the global batch
  /// (each input's type as the plan has it; with K micro-batches, the K
  /// micro-batches one after another in dimension 0): the state updated,
  /// the loss of the global batch (the mean over the ranks) returned.
  double step(const Batch &batch);
  /// The evaluation step on `batch`: the global batch's loss; the state
  /// unchanged. Throws where the plan has none, saying why.
  double evaluate(const Batch &batch);

  /// Every parameter and persistent buffer by FQN (tied weights under
  /// each name), whole, as fsdp-run --save writes them. Every rank must
  /// call it (the flat parameters are gathered).
  std::map<std::string, at::Tensor> stateDict();
  /// fsdp-run --save's file, written by rank 0; every rank must call it.
  void save(const std::string &path);

  /// A checkpoint after the steps taken, fsdp-run's format (`type`
  /// "FULL_STATE_DICT" or "SHARDED_STATE_DICT"; "": the plan's, else
  /// full) under `dir`, which this job holds from its first checkpoint;
  /// every rank must call it. Returns the checkpoint's directory.
  std::string checkpoint(const std::string &dir, const std::string &type);

  /// The learning rate: the one the next step uses where the plan keeps it
  /// as state (compiled with --lr-schedule external) or fixes it (no
  /// schedule); under a schedule the plan computes each step's, and this is
  /// the last step's (an error before the first).
  double lr() const;
  /// Sets the learning rate of the steps that follow, as a user's schedule
  /// sets `param_groups[0]["lr"]` (each rank must set the same). Throws
  /// unless the plan was compiled with --lr-schedule external.
  void setLr(double lr);
  /// Tells the other ranks that this one failed with `message`: they stop
  /// with it, as fsdp-run's ranks do.
  void fail(const std::string &message);
  /// Where another rank failed first (this one's error only followed from
  /// it), its message; else "".
  std::string failureOfOthers();

  int rank() const { return info.rank; }
  int worldSize() const { return info.worldSize; }
  /// Steps taken; the last step's time, time blocked on collectives, and
  /// peak bytes of live tensors (this rank's).
  int64_t steps() const { return stepsTaken; }
  double stepMs() const { return lastMs; }
  double commWaitMs() const;
  int64_t peakBytes() const;

private:
  std::vector<at::Tensor> inputsFor(const Plan &program, const Batch &batch,
                                    const char *what) const;
  double globalLoss(const std::vector<at::Tensor> &outputs);

  RunOptions o;
  RankInfo info;
  Plan plan;
  c10::Device device{c10::kCPU};
  std::unique_ptr<Communicator> comm;
  State state;
  std::unique_ptr<Executor> executor, evalExecutor;
  int64_t stepsTaken = 0;
  double lastMs = 0;
  // The lr metric of the last step, read when asked (not on the step's
  // path: on a GPU a read waits for the device).
  at::Tensor lastLr;
  std::optional<CheckpointDir> checkpointDir;
};

} // namespace fsdp::runtime

#endif // FSDP_RUNTIME_SESSION_H
