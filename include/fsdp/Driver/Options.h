//===- Options.h - what fsdp-opt is told ------------------------*- C++ -*-===//
//
// fsdp-opt's options, declared once: each is a field of CompileOptions with
// its default, bound to its flag by bindCommandLine (as IREE binds its
// option structs), overlaid by an Accelerate file in resolveOptions, and
// handed to the pipeline by toPipelineOptions.
//
//===----------------------------------------------------------------------===//

#ifndef FSDP_DRIVER_OPTIONS_H
#define FSDP_DRIVER_OPTIONS_H

#include "fsdp/Analysis/CostModel.h"
#include "fsdp/Transforms/MemoryBudget.h"
#include "fsdp/Transforms/Passes.h"

#include "mlir/Support/LogicalResult.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/raw_ostream.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fsdp::driver {

/// The training step's options (PyTorch's names and defaults): those of
/// StepOptions.def, and --loss and --optimizer.
struct TrainOptions {
  std::string loss; // empty: no training step
  std::string optimizer;
#define FSDP_TRAIN_OPTION(TYPE, FIELD, FLAG, NAME, DEFAULT, HELP)             \
  TYPE FIELD = DEFAULT;
#define FSDP_TRAIN_LIST_OPTION(FIELD, FLAG, NAME, VALUE, HELP)                \
  std::vector<std::string> FIELD;
#include "fsdp/Transforms/StepOptions.def"
};

/// The FSDP settings (PyTorch FullyShardedDataParallel's names): the config
/// file's, then the flags given. Those of StepOptions.def, and what
/// fsdp-opt derives.
struct FSDPSettings {
#define FSDP_SHARD_OPTION(TYPE, FIELD, FLAG, NAME, DEFAULT, HELP)             \
  TYPE FIELD = DEFAULT;
#define FSDP_SHARD_LIST_OPTION(FIELD, FLAG, NAME, VALUE, HELP)                \
  std::vector<std::string> FIELD;
#include "fsdp/Transforms/StepOptions.def"
  bool enabled = false;
  std::string autoWrapReason; // which setting chose the rule
  int64_t fsdpVersion = 1;    // an Accelerate file's fsdp_version
  // Mixed precision, in MixedPrecision's terms: fp32 (none), bf16; the
  // reduce dtype "" is the param dtype (FSDP's reduce_dtype=None).
  std::string paramDtype = "fp32", reduceDtype, bufferDtype = "fp32";
  bool offloadAuto = false; // --offload auto: chosen under the budget
  std::optional<OffloadChoice> offloadChoice; // what auto chose
  int64_t memoryBudget = 0; // --auto-wrap budget, --offload auto
  std::string stateDictType; // the file's fsdp_state_dict_type, if any
  std::optional<BudgetChoice> budgetChoice; // what it chose
  /// --savers auto (--memory-budget alone): every saver chosen together.
  bool saversAuto = false;
  std::optional<SaverSearch> saverSearch; // what it chose
};

/// Flags whose value is not a setting as is: resolveOptions reads them.
struct RawFlags {
  std::string config;
  std::string mixedPrecision;
  std::string paramDtype, reduceDtype, bufferDtype;
  std::string offload;
  std::string memoryBudget;
  std::string savers;
};

enum class EmitKind { MLIR, Plan };

/// Everything fsdp-opt is told.
struct CompileOptions {
  std::vector<std::string> inputs; // --input specs
  /// --eval-model: the model exported in evaluation mode, whose forward the
  /// evaluation step computes.
  std::string evalModel;
  TrainOptions train;
  FSDPSettings fsdp;
  RawFlags raw;
  bool printConfig = false;
  bool listGradientRules = false;
  bool fsdpReport = false;
  bool memoryReport = false;
  std::string memoryReportJSON;
  /// --measure-workspaces: the memory reports also predict the allocator's
  /// peak, with kernels' workspaces measured at --workspace-threads (0:
  /// what fsdp-run --nproc gives each rank here).
  bool measureWorkspaces = false;
  bool measureKernels = false;
  int workspaceThreads = 0;
  /// --machine: whose rates the cost model predicts the step time with;
  /// loaded by resolveOptions.
  std::string machine = "cpu";
  MachineRates machineRates;
  /// --calibrate: measure this machine's rates into the output file.
  bool calibrate = false;
  EmitKind emit = EmitKind::MLIR;

  /// Whether the command line asks for the training step.
  bool wantsTrainStep() const { return given("loss"); }
  /// Whether flag `name` (without dashes) was given on the command line.
  bool given(llvm::StringRef name) const;
  /// The flags given, by name (bindCommandLine records them).
  std::vector<std::string> givenFlags;
};

/// Registers fsdp-opt's flags, each bound to its field of `options` (which
/// must outlive command-line parsing); call before parsing. Call
/// recordGivenFlags after parsing.
void bindCommandLine(CompileOptions &options);
void recordGivenFlags(CompileOptions &options);

/// Overlays the Accelerate file (--config) under the flags given, checks
/// the FSDP and training-step options together; prints the first error.
mlir::LogicalResult resolveOptions(CompileOptions &options);

/// The training-step options must make sense together (and FSDP options
/// need a training step); prints why not.
mlir::LogicalResult checkTrainOptions(const CompileOptions &options);

/// --print-config: the FSDP settings, merged.
void printSettings(const CompileOptions &options, llvm::raw_ostream &os);

/// The pipeline's options from the resolved ones.
void toPipelineOptions(const CompileOptions &options,
                       TrainStepPipelineOptions &pipeline);
void toPipelineOptions(const CompileOptions &options,
                       FSDPPipelineOptions &pipeline);

/// Prints `error: MESSAGE` (fsdp-opt's errors about its options and
/// files) and fails.
mlir::LogicalResult error(const llvm::Twine &message);

/// The plan's name (PlanSchema.h) of a MixedPrecision dtype (bf16, fp16,
/// fp32); "" for "" (the default).
std::string planDtypeName(llvm::StringRef dtype);

} // namespace fsdp::driver

#endif // FSDP_DRIVER_OPTIONS_H
