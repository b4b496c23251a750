//===- MemoryBudget.h - units chosen to fit a memory budget -----*- C++ -*-===//
#ifndef FSDP_TRANSFORMS_MEMORYBUDGET_H
#define FSDP_TRANSFORMS_MEMORYBUDGET_H

#include "fsdp/Analysis/CostModel.h"
#include "fsdp/Transforms/Passes.h"

#include <optional>
#include <string>
#include <vector>

namespace fsdp {

/// What `--auto-wrap budget` chose: size-based wrapping with minNumParams
/// and a backward prefetch mode, with its predicted peak and cost.
struct BudgetChoice {
  int64_t minNumParams = 0;
  std::string backwardPrefetch;
  int64_t peakBytes = 0;
  int64_t units = 0;
  int64_t collectives = 0;
  /// The wrappings compiled and predicted to choose.
  int64_t tried = 0;
};

/// Chooses unit boundaries among module boundaries (size-based wrapping's
/// thresholds, from the largest: the fewest units and collectives first),
/// and for each the backward prefetch mode (options.backwardPrefetch first,
/// then BACKWARD_PRE, BACKWARD_POST, NO_PREFETCH), so that the predicted
/// peak of a rank fits `budget` bytes: the first wrapping that fits wins.
/// `module` is a differentiated training step (after fsdp-append-loss and
/// fsdp-autodiff) and is left unchanged; each candidate is a copy sharded
/// with buildShardedStepPipeline and `options`. Fails with an error on
/// `module` naming the smallest peak reachable when nothing fits.
mlir::FailureOr<BudgetChoice>
chooseWrappingUnderBudget(mlir::ModuleOp module,
                          const FSDPPipelineOptions &options, int64_t budget);

/// Parses a byte count: a number, optionally with B, KiB, MiB, GiB, TiB
/// (powers of 1024) or KB, MB, GB, TB (powers of 1000).
/// What `--offload auto` chose: the units whose optimizer state, and those
/// whose parameters (shard, gradient and optimizer state) live on the host.
struct OffloadChoice {
  std::vector<std::string> optimUnits, paramUnits;
  int64_t units = 0; // of the step
  int64_t peakBytes = 0, hostPeakBytes = 0;
  /// The device peak with nothing offloaded.
  int64_t unoffloadedPeakBytes = 0;
  int64_t tried = 0;
};

/// CPU offload of as little as makes the predicted device peak of the
/// (differentiated) `module` fit `budget`: nothing if it fits; else the
/// optimizer state of the largest units first, one unit more at a time;
/// then, with every unit's optimizer state on the host, the largest units'
/// parameters. An error names the smallest peak reachable when even every
/// unit offloaded does not fit.
mlir::FailureOr<OffloadChoice>
chooseOffloadUnderBudget(mlir::ModuleOp module,
                         const FSDPPipelineOptions &options, int64_t budget);

/// One setting of every saver `--savers auto` chooses, with its predicted
/// peak and step time.
struct SaverChoice {
  /// Size-based wrapping's threshold, and the units it gives.
  int64_t minNumParams = 0;
  int64_t units = 0;
  /// The schedule: FSDP's backward_prefetch, forward_prefetch and
  /// limit_all_gathers.
  std::string backwardPrefetch;
  bool forwardPrefetch = false;
  int64_t limitAllGathers = 0;
  /// Activation checkpointing: "" (none), "units" (every unit but the
  /// root), or a module class whose every module is a region.
  std::string checkpoint;
  /// CPU offload: the units whose optimizer state, and those whose
  /// parameters, live on the host.
  std::vector<std::string> offloadOptimUnits, offloadUnits;
  int64_t peakBytes = 0;
  double stepSeconds = 0;
};

/// What `--memory-budget` alone (`--savers auto`) chose, and beside it what
/// its choices buy.
struct SaverSearch {
  SaverChoice chosen;
  /// The fastest plan that fits with other units, checkpointing or
  /// offload, if any.
  std::optional<SaverChoice> runnerUp;
  /// The plan the options give with no saver (their own wrapping, FSDP's
  /// schedule, no checkpointing or offload).
  SaverChoice baseline;
  /// The chosen plan without its checkpointing, and without its offload
  /// (what each saves and costs), where it has them.
  std::optional<SaverChoice> withoutCheckpoint, withoutOffload;
  /// Plans compiled and predicted, and those that fit.
  int64_t tried = 0, fitting = 0;
};

/// Chooses together the unit boundaries (size-based wrapping at every
/// threshold where the units change), the schedule (backward prefetch
/// BACKWARD_PRE, BACKWARD_POST or NO_PREFETCH; forward prefetch;
/// limit_all_gathers 2 or 1), activation checkpointing (none, every unit,
/// or every module of a class that has submodules and more than one
/// module), and CPU offload (every unit's optimizer state, or everything,
/// beside each partition and checkpointing; and where nothing fits
/// otherwise, as little as fits on the smallest-peak plans: the largest
/// units' optimizer state, then their parameters), so that the predicted peak fits `budget` with the smallest predicted step
/// time on `machine` (ties: the smaller peak). `module` is a differentiated
/// step and is left unchanged; each candidate is a copy sharded with
/// buildShardedStepPipeline. Fails with an error on `module` naming the
/// smallest peak reachable, and the choice that reaches it, when nothing
/// fits.
mlir::FailureOr<SaverSearch>
chooseSaversUnderBudget(mlir::ModuleOp module,
                        const FSDPPipelineOptions &options, int64_t budget,
                        const MachineRates &machine);

/// A choice in the flags that give it ("--auto-wrap size --min-num-params
/// N --backward-prefetch ..."): the plan compiled with them is the chosen
/// one.
std::string saverFlags(const SaverChoice &choice);

std::optional<int64_t> parseByteSize(llvm::StringRef text);

} // namespace fsdp

#endif // FSDP_TRANSFORMS_MEMORYBUDGET_H
