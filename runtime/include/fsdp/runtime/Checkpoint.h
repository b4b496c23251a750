//===- Checkpoint.h - checkpoints of a run, and resuming from them -*- C++
//-*-===//
//
// A checkpoint is a directory DIR/step-NNNNNNNN holding what a run needs to
// continue exactly where it stopped: the parameters, buffers and optimizer
// state after step N, the step count, and the random generator's state.
// Two kinds, PyTorch FSDP's names:
//
//  - FULL_STATE_DICT: rank 0 writes `model.pt` (the model's state dict by
//    FQN, what `module.load_state_dict` takes) and `optim.pt` (the optimizer
//    state dict in torch.optim's format keyed by parameter FQN, as FSDP's
//    full optim state dict is), gathering one flat parameter at a time.
//    Resumes with a plan for any world size and strategy.
//  - SHARDED_STATE_DICT: every rank writes `rank-R.pt`, its own shards and
//    state as the plan lays them out; no gather. Resumes with a plan of the
//    same layout (world size, units, strategy).
//
// Both have `meta.json` (format, step, kind, the plan's layout and
// optimizer, and the id of the run that wrote it, which every rank file
// holds too: files of two runs never resume together). One run at a time
// writes a directory: rank 0 holds an advisory lock on DIR/.lock for the
// whole run, and a second run is refused at its start. Writes are atomic: everything goes into a hidden temporary
// directory that is renamed into place once complete, and then `latest`
// (which names the newest checkpoint) is replaced; a crash mid-write leaves
// the previous checkpoint and `latest` as they were.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_CHECKPOINT_H
#define FSDP_RUNTIME_CHECKPOINT_H

#include "fsdp/runtime/Communicator.h"
#include "fsdp/runtime/Executor.h"
#include "fsdp/runtime/Plan.h"

#include <optional>
#include <string>

namespace fsdp::runtime {

enum class StateDictType { Full, Sharded };

/// "FULL_STATE_DICT" or "SHARDED_STATE_DICT" (PyTorch's StateDictType).
std::optional<StateDictType> parseStateDictType(const std::string &name);
const char *stateDictTypeName(StateDictType type);

/// A run's hold on its checkpoint directory: rank 0 creates DIR and holds
/// an advisory lock (flock) on DIR/.lock until the process ends; the other
/// ranks hold nothing. Every rank calls it; the run id it returns, rank 0's
/// random one, is the same on every rank. Throws Error where another run
/// holds the lock, naming its process.
struct CheckpointDir {
  std::string path;
  std::string runId;
  static CheckpointDir claim(const std::string &dir, Communicator &comm);
};

/// Writes the checkpoint of `state` after `step` steps into
/// DIR/step-NNNNNNNN and points DIR/latest at it. Every rank calls it (the
/// full kind gathers over the shard groups); returns the checkpoint's
/// directory.
std::string writeCheckpoint(const Plan &plan, const State &state,
                            Communicator &comm, int64_t step,
                            const CheckpointDir &dir, StateDictType type);

/// The checkpoint `path` names: `path` itself if it is one (it holds
/// meta.json), else the one `path/latest` names. Throws Error if neither.
std::string findCheckpoint(const std::string &path);

/// Restores `state` (as loadState made it for this rank) from checkpoint
/// `path` (findCheckpoint's), and the random generator; returns the step
/// the checkpoint was written after. Throws Error naming the checkpoint and
/// what does not fit the plan (another model, optimizer or layout).
int64_t readCheckpoint(const Plan &plan, State &state, Communicator &comm,
                       const std::string &path);

} // namespace fsdp::runtime

#endif // FSDP_RUNTIME_CHECKPOINT_H
