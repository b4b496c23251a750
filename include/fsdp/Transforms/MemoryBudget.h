//===- MemoryBudget.h - units chosen to fit a memory budget -----*- C++ -*-===//
#ifndef FSDP_TRANSFORMS_MEMORYBUDGET_H
#define FSDP_TRANSFORMS_MEMORYBUDGET_H

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

std::optional<int64_t> parseByteSize(llvm::StringRef text);

} // namespace fsdp

#endif // FSDP_TRANSFORMS_MEMORYBUDGET_H
