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

/// What every rank must agree on before the first step: a digest of the
/// plan and of the options that choose the step's bits and each rank's
/// data (RankInfo::fingerprint).
std::string runFingerprint(const Plan &plan, const RunOptions &o);

/// `o.plan`, checked against the world it runs in (and, with
/// --eval-data, to have an evaluation step). `script`: the rank is a
/// user's script (fsdp_opt.Runtime), which a launcher starts.
Plan loadPlanFor(const RunOptions &o, const RankInfo &info,
                 bool script = false);

/// The plan's executor: every call resolved and checked; an error names
/// the plan file.
Executor buildExecutor(const Plan &plan, const std::string &path,
                       Communicator *comm);

/// What is checked before any rank starts: FSDP_RUN_TIMEOUT, the device
/// and backend rank `info` would take (the launcher asks for its highest
/// local rank) and, where they are written (rank 0, or the --nproc
/// launcher), the outputs.
void checkUpFront(const RunOptions &o, const RankInfo &info,
                  bool writesOutputs);

/// One rank's run. Returns normally on success; throws on failure. `comm`
/// is set to the rank's communicator as soon as it has one (so that a
/// failure can be told to the other ranks).
void runRank(const RunOptions &o, const RankInfo &info,
             std::unique_ptr<Communicator> &comm);

/// `--check-communicator`: runs every collective of every group (world,
/// shard groups of --shard-group-size ranks, replica groups) in sum and
/// mean, in f32, bf16 and f16, on this rank's device over its backend, and
/// checks each result against what it must be. Prints one line per check
/// on rank 0; returns 0 when all pass, 1 otherwise (naming the first that
/// failed).
int checkCommunicator(const RunOptions &o, const RankInfo &info,
                      std::unique_ptr<Communicator> &comm);

/// `--calibrate FILE`: measures, on every rank at once, the rates of
/// MachineSchema.h (matrix products in float32 and bfloat16, element-wise
/// memory traffic, a kernel's fixed cost, host-device copies, and over more
/// than one rank the all-gather's latency, bandwidth and overlap with
/// computation); rank 0 prints them and writes the ranks' mean to FILE,
/// whole or not at all. Returns 0.
int calibrateMachine(const RunOptions &o, const RankInfo &info,
                     std::unique_ptr<Communicator> &comm);

} // namespace fsdp::runtime

#endif // FSDP_RUNTIME_TRAINER_H
