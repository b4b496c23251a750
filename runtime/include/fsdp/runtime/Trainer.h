//===- Trainer.h - one rank's training run ----------------------*- C++ -*-===//
//
// What a rank of fsdp-run does: reads the plan, its share of the model and
// of the data, runs the steps (resuming from a checkpoint, writing
// checkpoints, metrics and progress), and writes the outputs.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_TRAINER_H
#define FSDP_RUNTIME_TRAINER_H

#include "fsdp/runtime/Communicator.h"
#include "fsdp/runtime/Executor.h"
#include "fsdp/runtime/Plan.h"
#include "fsdp/runtime/RunOptions.h"

#include <memory>
#include <string>

namespace fsdp::runtime {

/// "plan 'P' was compiled for N ranks": what a world-size mismatch says.
std::string compiledFor(const Plan &plan, const std::string &path);

/// The plan's executor: every call resolved and checked; an error names
/// the plan file.
Executor buildExecutor(const Plan &plan, const std::string &path,
                       Communicator *comm);

/// What is checked before any rank starts: FSDP_RUN_TIMEOUT and, where
/// they are written (rank 0, or the --nproc launcher), the outputs.
void checkUpFront(const RunOptions &o, bool writesOutputs);

/// One rank's run. Returns normally on success; throws on failure. `comm`
/// is set to the rank's communicator as soon as it has one (so that a
/// failure can be told to the other ranks).
void runRank(const RunOptions &o, const RankInfo &info,
             std::unique_ptr<Communicator> &comm);

} // namespace fsdp::runtime

#endif // FSDP_RUNTIME_TRAINER_H
