//===- fsdp-opt.cpp - the fsdp-opt compiler driver -------------------------===//
//
// Behaves like mlir-opt on `.mlir` input. A TorchScript archive (recognised by
// its content, whatever its name) is imported first; the pass pipeline then
// runs on the imported module.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Config/AccelerateConfig.h"
#include "fsdp/Dialect/ATen/Gradients.h"
#include "fsdp/Import/TorchScript/Import.h"
#include "fsdp/InitAll.h"
#include "fsdp/Target/Plan/PlanEmitter.h"
#include "fsdp/Transforms/Passes.h"
#include "fsdp/Transforms/MemoryBudget.h"
#include "fsdp/Transforms/Report.h"

#include "mlir/Bytecode/BytecodeWriter.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"


using namespace mlir;

static llvm::cl::OptionCategory importCategory("TorchScript import options");

static llvm::cl::list<std::string> inputSpecs(
    "input",
    llvm::cl::desc("Static type of a model input, NAME:DIMSxDTYPE (e.g. "
                   "x:8x3x32x32xf32; dtypes f32 f16 bf16 f64 i64 i32 i1); "
                   "repeatable; overrides specs stored in the .pt"),
    llvm::cl::value_desc("NAME:DIMSxDTYPE"), llvm::cl::cat(importCategory));

static llvm::cl::OptionCategory trainCategory(
    "Training step options (PyTorch's names and defaults)");

static llvm::cl::opt<std::string> lossFlag(
    "loss",
    llvm::cl::desc("Build the training step with this loss: cross_entropy, "
                   "mse, or none (the model returns its own scalar loss)"),
    llvm::cl::value_desc("LOSS"), llvm::cl::cat(trainCategory));
static llvm::cl::list<std::string> targetSpecs(
    "target",
    llvm::cl::desc("The loss target NAME:DIMSxDTYPE (class indices for "
                   "cross_entropy, e.g. y:8xi64); overrides a stored one"),
    llvm::cl::value_desc("NAME:DIMSxDTYPE"), llvm::cl::cat(trainCategory));
static llvm::cl::opt<std::string> optimizerFlag(
    "optimizer",
    llvm::cl::desc("The optimizer: sgd, adam or adamw (torch.optim's)"),
    llvm::cl::value_desc("NAME"), llvm::cl::cat(trainCategory));
static llvm::cl::opt<double> lrFlag("lr", llvm::cl::desc("Learning rate (1e-3)"),
                                    llvm::cl::init(1e-3),
                                    llvm::cl::cat(trainCategory));
static llvm::cl::opt<double> weightDecayFlag(
    "weight-decay",
    llvm::cl::desc("Weight decay (sgd, adam: 0, adamw: 0.01; AdamW's is "
                   "decoupled, SGD's and Adam's is L2)"),
    llvm::cl::init(-1.0), llvm::cl::cat(trainCategory));
static llvm::cl::opt<double> momentumFlag("momentum",
                                          llvm::cl::desc("SGD momentum (0)"),
                                          llvm::cl::init(0.0),
                                          llvm::cl::cat(trainCategory));
static llvm::cl::opt<bool> nesterovFlag(
    "nesterov", llvm::cl::desc("SGD with Nesterov momentum"),
    llvm::cl::init(false), llvm::cl::cat(trainCategory));
static llvm::cl::opt<double> dampeningFlag(
    "dampening", llvm::cl::desc("SGD dampening of the momentum (0)"),
    llvm::cl::init(0.0), llvm::cl::cat(trainCategory));
static llvm::cl::opt<bool> maximizeFlag(
    "maximize",
    llvm::cl::desc("Maximize the objective instead of minimizing it"),
    llvm::cl::init(false), llvm::cl::cat(trainCategory));
static llvm::cl::opt<bool> amsgradFlag(
    "amsgrad",
    llvm::cl::desc("Adam/AdamW: the AMSGrad variant (normalize by the running "
                   "maximum of the second moment)"),
    llvm::cl::init(false), llvm::cl::cat(trainCategory));
static llvm::cl::opt<double> maxGradNormFlag(
    "max-grad-norm",
    llvm::cl::desc("Clip the gradients' total 2-norm over the whole model to "
                   "this, as clip_grad_norm_ (0: no clipping); --metrics "
                   "reports grad_norm"),
    llvm::cl::init(0.0), llvm::cl::cat(trainCategory));
static llvm::cl::opt<bool> gradScalerFlag(
    "grad-scaler",
    llvm::cl::desc("Dynamic loss scaling, as ShardedGradScaler (Accelerate "
                   "uses it with fp16): the loss is scaled, gradients "
                   "unscaled and checked for inf/NaN, a step with one on any "
                   "rank skipped everywhere and the scale backed off; on by "
                   "default with fp16 mixed precision (--grad-scaler=false "
                   "turns it off); --metrics reports scale and skipped"),
    llvm::cl::init(false), llvm::cl::cat(trainCategory));
static llvm::cl::opt<double> initScaleFlag(
    "init-scale", llvm::cl::desc("GradScaler's init_scale (default 65536)"),
    llvm::cl::init(65536.0), llvm::cl::cat(trainCategory));
static llvm::cl::opt<double> growthFactorFlag(
    "growth-factor",
    llvm::cl::desc("GradScaler's growth_factor (default 2.0)"),
    llvm::cl::init(2.0), llvm::cl::cat(trainCategory));
static llvm::cl::opt<double> backoffFactorFlag(
    "backoff-factor",
    llvm::cl::desc("GradScaler's backoff_factor (default 0.5)"),
    llvm::cl::init(0.5), llvm::cl::cat(trainCategory));
static llvm::cl::opt<int64_t> growthIntervalFlag(
    "growth-interval",
    llvm::cl::desc("GradScaler's growth_interval (default 2000)"),
    llvm::cl::init(2000), llvm::cl::cat(trainCategory));
static llvm::cl::opt<int64_t> gradAccumFlag(
    "grad-accum",
    llvm::cl::desc("Gradient accumulation: each optimizer step runs the "
                   "forward and backward on this many consecutive micro-"
                   "batches of the data (each reduced as it completes) and "
                   "updates once with their sum, as (loss / K).backward() "
                   "K times then optimizer.step()"),
    llvm::cl::init(1), llvm::cl::cat(trainCategory));
static llvm::cl::list<std::string> acClassFlag(
    "ac-class",
    llvm::cl::desc("Activation checkpointing of every module of this class "
                   "(its full TorchScript name or last component): its "
                   "forward keeps only what leaves it, the backward computes "
                   "it again; repeatable"),
    llvm::cl::value_desc("NAME"), llvm::cl::cat(trainCategory));
static llvm::cl::list<std::string> acModuleFlag(
    "ac-module",
    llvm::cl::desc("Activation checkpointing of the module at this path; "
                   "repeatable"),
    llvm::cl::value_desc("PATH"), llvm::cl::cat(trainCategory));
static llvm::cl::opt<std::string> lrScheduleFlag(
    "lr-schedule",
    llvm::cl::desc("Learning-rate schedule: constant, linear or cosine, with "
                   "--warmup-steps and --total-steps (transformers' "
                   "get_*_schedule_with_warmup); --metrics reports lr"),
    llvm::cl::value_desc("NAME"), llvm::cl::cat(trainCategory));
static llvm::cl::opt<int64_t> warmupStepsFlag(
    "warmup-steps",
    llvm::cl::desc("With --lr-schedule: steps of linear warmup from 0 (0)"),
    llvm::cl::init(0), llvm::cl::cat(trainCategory));
static llvm::cl::opt<int64_t> totalStepsFlag(
    "total-steps",
    llvm::cl::desc("With --lr-schedule linear or cosine: the steps over which "
                   "the learning rate decays to 0"),
    llvm::cl::init(0), llvm::cl::cat(trainCategory));
static llvm::cl::opt<double> beta1Flag("beta1",
                                       llvm::cl::desc("Adam/AdamW beta1 (0.9)"),
                                       llvm::cl::init(0.9),
                                       llvm::cl::cat(trainCategory));
static llvm::cl::opt<double> beta2Flag("beta2",
                                       llvm::cl::desc("Adam/AdamW beta2 (0.999)"),
                                       llvm::cl::init(0.999),
                                       llvm::cl::cat(trainCategory));
static llvm::cl::opt<double> epsFlag("eps", llvm::cl::desc("Adam/AdamW eps (1e-8)"),
                                     llvm::cl::init(1e-8),
                                     llvm::cl::cat(trainCategory));

static llvm::cl::OptionCategory fsdpCategory(
    "FSDP options (PyTorch FullyShardedDataParallel's names)");

static llvm::cl::opt<int64_t> worldSizeFlag(
    "world-size", llvm::cl::desc("Number of ranks the plan runs on"),
    llvm::cl::init(1), llvm::cl::cat(fsdpCategory));
static llvm::cl::opt<std::string> shardingFlag(
    "sharding",
    llvm::cl::desc("Sharding strategy: FULL_SHARD (default), SHARD_GRAD_OP, "
                   "NO_SHARD, HYBRID_SHARD, or fairscale's OSS (optimizer "
                   "state sharded) or SHARDED_DDP (gradients too)"),
    llvm::cl::init("FULL_SHARD"), llvm::cl::cat(fsdpCategory));
static llvm::cl::opt<int64_t> shardGroupSizeFlag(
    "shard-group-size",
    llvm::cl::desc("HYBRID_SHARD: ranks per shard group (one node's); the "
                   "groups replicate each other"),
    llvm::cl::init(0), llvm::cl::cat(fsdpCategory));
static llvm::cl::opt<std::string> hybridReductionFlag(
    "hybrid-reduction",
    llvm::cl::desc("HYBRID_SHARD's gradient reduction: ordered (default: "
                   "one sum over every rank in rank order, the bits one "
                   "process gets) or two-stage (reduce-scatter in the shard "
                   "group, all-reduce across groups, as PyTorch's: less "
                   "traffic between nodes)"),
    llvm::cl::init("ordered"), llvm::cl::cat(fsdpCategory));
static llvm::cl::opt<std::string> autoWrapFlag(
    "auto-wrap",
    llvm::cl::desc("Auto-wrap policy: size (--min-num-params), class "
                   "(--wrap-class), modules (--wrap-module) or none (one "
                   "unit)"),
    llvm::cl::init("none"), llvm::cl::cat(fsdpCategory));
static llvm::cl::opt<int64_t> minNumParamsFlag(
    "min-num-params",
    llvm::cl::desc("size policy: a module with this many unwrapped "
                   "parameters becomes a unit (1e8)"),
    llvm::cl::init(100000000), llvm::cl::cat(fsdpCategory));
static llvm::cl::list<std::string> wrapClassFlag(
    "wrap-class",
    llvm::cl::desc("class policy: a module class that becomes a unit "
                   "(e.g. a transformer layer); repeatable"),
    llvm::cl::value_desc("NAME"), llvm::cl::cat(fsdpCategory));
static llvm::cl::list<std::string> wrapModuleFlag(
    "wrap-module",
    llvm::cl::desc("modules policy: the path of a module that becomes a "
                   "unit; repeatable"),
    llvm::cl::value_desc("PATH"), llvm::cl::cat(fsdpCategory));
static llvm::cl::list<std::string> ignoreModuleFlag(
    "ignore-module",
    llvm::cl::desc("A module whose parameters stay unsharded and replicated "
                   "(FSDP's ignored_modules); repeatable"),
    llvm::cl::value_desc("PATH"), llvm::cl::cat(fsdpCategory));
static llvm::cl::opt<std::string> backwardPrefetchFlag(
    "backward-prefetch",
    llvm::cl::desc("When the backward's next all-gather starts: "
                   "BACKWARD_PRE (default: before the current unit's "
                   "gradient computation), BACKWARD_POST (after it, once "
                   "the current unit is freed) or NO_PREFETCH"),
    llvm::cl::init("BACKWARD_PRE"), llvm::cl::cat(fsdpCategory));
static llvm::cl::opt<bool> forwardPrefetchFlag(
    "forward-prefetch",
    llvm::cl::desc("Start the next unit's forward all-gather before the "
                   "current unit's forward computation"),
    llvm::cl::init(false), llvm::cl::cat(fsdpCategory));
static llvm::cl::opt<bool> activationCheckpointingFlag(
    "activation-checkpointing",
    llvm::cl::desc("Activation checkpointing of every FSDP unit but the root "
                   "(Accelerate's fsdp_activation_checkpointing): a unit's "
                   "forward keeps only what leaves it, and the backward "
                   "computes it again with the unit's backward all-gather"),
    llvm::cl::init(false), llvm::cl::cat(fsdpCategory));
static llvm::cl::opt<std::string> mixedPrecisionFlag(
    "mixed-precision",
    llvm::cl::desc("Accelerate's mixed_precision: no, bf16 or fp16 (PyTorch "
                   "FSDP's MixedPrecision with that param, reduce and buffer "
                   "dtype; fp16 with the gradient scaler)"),
    llvm::cl::value_desc("no|bf16|fp16"), llvm::cl::cat(fsdpCategory));
static llvm::cl::opt<std::string> paramDtypeFlag(
    "param-dtype",
    llvm::cl::desc("MixedPrecision.param_dtype: the dtype parameters are "
                   "gathered and computed in (sharded parameters and "
                   "optimizer state stay fp32); inputs are cast to it"),
    llvm::cl::value_desc("bf16|fp16|fp32"), llvm::cl::cat(fsdpCategory));
static llvm::cl::opt<std::string> reduceDtypeFlag(
    "reduce-dtype",
    llvm::cl::desc("MixedPrecision.reduce_dtype: the dtype gradients are "
                   "reduced in (default: the param dtype)"),
    llvm::cl::value_desc("bf16|fp16|fp32"), llvm::cl::cat(fsdpCategory));
static llvm::cl::opt<std::string> bufferDtypeFlag(
    "buffer-dtype",
    llvm::cl::desc("MixedPrecision.buffer_dtype: the dtype floating-point "
                   "buffers are read and updated in (default: fp32)"),
    llvm::cl::value_desc("bf16|fp16|fp32"), llvm::cl::cat(fsdpCategory));
static llvm::cl::opt<bool> offloadParamsFlag(
    "offload-params",
    llvm::cl::desc("CPU offload (FSDP's CPUOffload(offload_params=True), "
                   "Accelerate's fsdp_offload_params): parameter shards, "
                   "gradient shards and optimizer state in host memory, the "
                   "optimizer step on the host"),
    llvm::cl::init(false), llvm::cl::cat(fsdpCategory));
static llvm::cl::opt<std::string> offloadFlag(
    "offload",
    llvm::cl::desc("CPU offload: none, params (--offload-params) or auto: "
                   "as little as makes the predicted device peak fit "
                   "--memory-budget (optimizer state of the largest units "
                   "first, then their parameters)"),
    llvm::cl::value_desc("none|params|auto"), llvm::cl::cat(fsdpCategory));
static llvm::cl::list<std::string> offloadUnitFlag(
    "offload-unit",
    llvm::cl::desc("CPU offload of this unit alone (its module path; "
                   "repeatable)"),
    llvm::cl::value_desc("PATH"), llvm::cl::cat(fsdpCategory));
static llvm::cl::list<std::string> offloadOptimUnitFlag(
    "offload-optim-unit",
    llvm::cl::desc("CPU offload of this unit's optimizer state alone (the "
                   "optimizer updates a host copy of its shard; "
                   "repeatable)"),
    llvm::cl::value_desc("PATH"), llvm::cl::cat(fsdpCategory));
static llvm::cl::opt<int64_t> limitAllGathersFlag(
    "limit-all-gathers",
    llvm::cl::desc("Most gathered buffers in flight or alive when a "
                   "prefetched all-gather starts (default 2, as FSDP1's "
                   "limit_all_gathers; 0: no limit)"),
    llvm::cl::value_desc("N"), llvm::cl::init(2),
    llvm::cl::cat(fsdpCategory));
static llvm::cl::opt<int64_t> limitReductionsFlag(
    "limit-reductions",
    llvm::cl::desc("Most gradient reductions in flight: reduction k is "
                   "waited before reduction k+N starts (default 2; 0: every "
                   "wait at the end of the step)"),
    llvm::cl::value_desc("N"), llvm::cl::init(2),
    llvm::cl::cat(fsdpCategory));
static llvm::cl::opt<std::string> memoryBudgetFlag(
    "memory-budget",
    llvm::cl::desc("With --auto-wrap budget: the most bytes a rank may hold "
                   "during a step (e.g. 40GiB, 512MiB, 1000000)"),
    llvm::cl::value_desc("SIZE"), llvm::cl::cat(fsdpCategory));
static llvm::cl::opt<std::string> configFlag(
    "config",
    llvm::cl::desc("An Accelerate config file (fsdp_config keys and "
                   "num_processes); flags override it"),
    llvm::cl::value_desc("FILE.yaml"), llvm::cl::cat(fsdpCategory));
static llvm::cl::opt<bool> printConfigFlag(
    "print-config",
    llvm::cl::desc("Print the FSDP settings (config file and flags merged) "
                   "and exit"),
    llvm::cl::init(false), llvm::cl::cat(fsdpCategory));
static llvm::cl::opt<bool> fsdpReportFlag(
    "fsdp-report",
    llvm::cl::desc("Print the FSDP units and the per-rank bytes of sharded "
                   "state against unsharded"),
    llvm::cl::init(false), llvm::cl::cat(fsdpCategory));

static llvm::cl::opt<bool> memoryReportFlag(
    "memory-report",
    llvm::cl::desc("Print the predicted peak bytes of one rank during a step: "
                   "where it occurs, what it holds, and per unit"),
    llvm::cl::init(false), llvm::cl::cat(fsdpCategory));

static llvm::cl::opt<std::string> memoryReportJSONFlag(
    "memory-report-json",
    llvm::cl::desc("Write the predicted memory as JSON to FILE: peak_bytes, "
                   "breakdown, units and the live bytes after every "
                   "instruction (timeline)"),
    llvm::cl::value_desc("FILE"), llvm::cl::cat(fsdpCategory));

/// The FSDP settings: the config file's, then the flags given.
struct FSDPSettings {
  bool enabled = false;
  std::string sharding = "FULL_SHARD";
  int64_t worldSize = 1;
  int64_t shardGroupSize = 0;
  std::string hybridReduction = "ordered";
  std::string autoWrap = "none";
  std::string autoWrapReason; // which setting chose the rule
  int64_t fsdpVersion = 1;    // an Accelerate file's fsdp_version
  int64_t minNumParams = 100000000;
  std::vector<std::string> wrapClasses, wrapModules, ignoreModules;
  std::string backwardPrefetch = "BACKWARD_PRE";
  bool forwardPrefetch = false;
  bool activationCheckpointing = false; // every unit but the root
  // Mixed precision, in MixedPrecision's terms: fp32 (none), bf16; the
  // reduce dtype "" is the param dtype (FSDP's reduce_dtype=None).
  std::string paramDtype = "fp32", reduceDtype, bufferDtype = "fp32";
  bool offloadParams = false; // CPU offload
  bool offloadAuto = false;   // --offload auto: chosen under the budget
  std::vector<std::string> offloadUnits, offloadOptimUnits;
  std::optional<fsdp::OffloadChoice> offloadChoice; // what auto chose
  int64_t limitAllGathers = 2;
  int64_t limitReductions = 2;
  int64_t memoryBudget = 0; // --auto-wrap budget
  std::string stateDictType; // the file's fsdp_state_dict_type, if any
  std::optional<fsdp::BudgetChoice> budgetChoice; // what it chose
};
static FSDPSettings fsdpSettings;

/// The plan's name (PlanSchema.h) of a MixedPrecision dtype (bf16, fp16,
/// fp32); "" for "" (the default).
static std::string planDtypeName(llvm::StringRef dtype) {
  if (dtype == "fp16")
    return std::string(fsdp::plan::info(fsdp::plan::DType::F16).name);
  if (dtype == "fp32")
    return std::string(fsdp::plan::info(fsdp::plan::DType::F32).name);
  if (dtype == "bf16")
    return std::string(fsdp::plan::info(fsdp::plan::DType::BF16).name);
  return "";
}

static bool given(const llvm::cl::Option &o) { return o.getNumOccurrences() > 0; }

/// Dynamic loss scaling: as asked, else with fp16 parameters (as
/// Accelerate creates a ShardedGradScaler for fp16).
static bool gradScalerOn() {
  if (gradScalerFlag.getNumOccurrences())
    return gradScalerFlag;
  return fsdpSettings.enabled && fsdpSettings.paramDtype == "fp16";
}


static LogicalResult resolveFSDPSettings() {
  FSDPSettings &s = fsdpSettings;
  int64_t numMachines = 0;
  auto error = [](const llvm::Twine &message) {
    llvm::errs() << "error: " << message << "\n";
    return failure();
  };
  if (given(configFlag)) {
    llvm::Expected<fsdp::AccelerateConfig> config =
        fsdp::readAccelerateConfig(configFlag);
    if (!config)
      return error(llvm::toString(config.takeError()));
    s.enabled = true;
    if (config->sharding)
      s.sharding = *config->sharding;
    if (config->autoWrap)
      s.autoWrap = *config->autoWrap;
    s.autoWrapReason = config->autoWrapReason;
    s.fsdpVersion = config->fsdpVersion;
    if (config->minNumParams)
      s.minNumParams = *config->minNumParams;
    s.wrapClasses = config->wrapClasses;
    if (config->numProcesses)
      s.worldSize = *config->numProcesses;
    s.backwardPrefetch = config->backwardPrefetch;
    s.forwardPrefetch = config->forwardPrefetch;
    s.activationCheckpointing = config->activationCheckpointing;
    s.offloadParams = config->offloadParams;
    if (!config->mixedPrecision.empty())
      s.paramDtype = s.reduceDtype = s.bufferDtype = config->mixedPrecision;
    s.limitAllGathers = config->limitAllGathers;
    s.stateDictType = config->stateDictType.value_or("");
    numMachines = config->numMachines.value_or(0);
  }
  for (const llvm::cl::Option *o : std::initializer_list<const llvm::cl::Option *>{
           &worldSizeFlag, &shardingFlag, &shardGroupSizeFlag, &autoWrapFlag,
           &minNumParamsFlag, std::addressof(wrapClassFlag),
           std::addressof(wrapModuleFlag), std::addressof(ignoreModuleFlag),
           &fsdpReportFlag, &hybridReductionFlag, &backwardPrefetchFlag, &forwardPrefetchFlag,
           &limitAllGathersFlag, &limitReductionsFlag, &activationCheckpointingFlag,
           &mixedPrecisionFlag, &paramDtypeFlag, &reduceDtypeFlag,
           &bufferDtypeFlag, &offloadParamsFlag, &offloadFlag,
           std::addressof(offloadUnitFlag),
           std::addressof(offloadOptimUnitFlag)})
    if (given(*o))
      s.enabled = true;
  if (given(shardingFlag))
    s.sharding = shardingFlag;
  if (given(worldSizeFlag))
    s.worldSize = worldSizeFlag;
  if (given(shardGroupSizeFlag))
    s.shardGroupSize = shardGroupSizeFlag;
  if (given(hybridReductionFlag))
    s.hybridReduction = hybridReductionFlag;
  if (given(autoWrapFlag)) {
    s.autoWrap = autoWrapFlag;
    s.autoWrapReason = "--auto-wrap " + s.autoWrap;
  }
  if (s.autoWrapReason.empty())
    s.autoWrapReason = s.autoWrap == "none"
                           ? "no auto-wrap policy: the root is the one unit"
                           : "--auto-wrap " + s.autoWrap;
  if (given(minNumParamsFlag))
    s.minNumParams = minNumParamsFlag;
  if (given(wrapClassFlag))
    s.wrapClasses.assign(wrapClassFlag.begin(), wrapClassFlag.end());
  s.wrapModules.assign(wrapModuleFlag.begin(), wrapModuleFlag.end());
  s.ignoreModules.assign(ignoreModuleFlag.begin(), ignoreModuleFlag.end());
  if (given(backwardPrefetchFlag))
    s.backwardPrefetch = backwardPrefetchFlag;
  if (given(forwardPrefetchFlag))
    s.forwardPrefetch = forwardPrefetchFlag;
  if (given(activationCheckpointingFlag))
    s.activationCheckpointing = activationCheckpointingFlag;
  if (given(mixedPrecisionFlag)) {
    if (mixedPrecisionFlag != "no" && mixedPrecisionFlag != "bf16" &&
        mixedPrecisionFlag != "fp16")
      return error("--mixed-precision " + mixedPrecisionFlag +
                   ": expected no, bf16 or fp16");
    std::string dtype = mixedPrecisionFlag == "no" ? std::string("fp32")
                                                   : std::string(mixedPrecisionFlag);
    s.paramDtype = s.reduceDtype = s.bufferDtype = dtype;
  }
  for (auto [flag, field] :
       {std::pair(&paramDtypeFlag, &s.paramDtype),
        std::pair(&reduceDtypeFlag, &s.reduceDtype),
        std::pair(&bufferDtypeFlag, &s.bufferDtype)}) {
    if (!given(*flag))
      continue;
    if (*flag != "bf16" && *flag != "fp16" && *flag != "fp32")
      return error("--" + flag->ArgStr + " " + *flag +
                   ": expected bf16, fp16 or fp32");
    *field = *flag;
  }
  if (given(offloadParamsFlag))
    s.offloadParams = offloadParamsFlag;
  if (given(offloadFlag)) {
    if (offloadFlag != "none" && offloadFlag != "params" &&
        offloadFlag != "auto")
      return error("--offload " + offloadFlag +
                   ": expected none, params or auto");
    if (given(offloadParamsFlag) &&
        bool(offloadParamsFlag) != (offloadFlag == "params"))
      return error("--offload-params and --offload " + offloadFlag +
                   " disagree");
    s.offloadParams = offloadFlag == "params";
    s.offloadAuto = offloadFlag == "auto";
  }
  s.offloadUnits.assign(offloadUnitFlag.begin(), offloadUnitFlag.end());
  s.offloadOptimUnits.assign(offloadOptimUnitFlag.begin(),
                             offloadOptimUnitFlag.end());
  if ((s.offloadParams || s.offloadAuto) &&
      (!s.offloadUnits.empty() || !s.offloadOptimUnits.empty()))
    return error("--offload-unit and --offload-optim-unit choose units "
                 "themselves: not with --offload-params or --offload auto");
  if (given(limitAllGathersFlag))
    s.limitAllGathers = limitAllGathersFlag;
  if (given(limitReductionsFlag))
    s.limitReductions = limitReductionsFlag;
  if (!s.enabled)
    return success();

  if (!fsdp::isBackwardPrefetch(s.backwardPrefetch))
    return error("--backward-prefetch " + s.backwardPrefetch + ": expected " +
                 fsdp::kBackwardPrefetchValues);
  if (s.limitAllGathers < 0)
    return error("--limit-all-gathers must not be negative (0: no limit), "
                 "found " +
                 llvm::Twine(s.limitAllGathers));
  if (s.limitReductions < 0)
    return error("--limit-reductions must not be negative (0: no bound), "
                 "found " +
                 llvm::Twine(s.limitReductions));

  if (!fsdp::isShardingStrategy(s.sharding))
    return error("--sharding " + s.sharding + ": expected " +
                 fsdp::kShardingStrategies);
  if ((s.offloadParams || s.offloadAuto || !s.offloadUnits.empty() ||
       !s.offloadOptimUnits.empty()) &&
      (s.sharding == "OSS" || s.sharding == "SHARDED_DDP"))
    return error("CPU offload applies to FSDP's strategies, not " +
                 s.sharding + " (its parameters are whole on every rank)");
  if (s.worldSize < 1)
    return error("--world-size must be at least 1, found " +
                 llvm::Twine(s.worldSize));
  if (s.worldSize > fsdp::kMaxWorldSize)
    return error("--world-size must be at most " + llvm::Twine(fsdp::kMaxWorldSize) +
                 " (ranks are C ints), found " + llvm::Twine(s.worldSize));
  if (s.shardGroupSize > fsdp::kMaxWorldSize)
    return error("--shard-group-size must be at most " + llvm::Twine(fsdp::kMaxWorldSize) +
                 ", found " + llvm::Twine(s.shardGroupSize));
  if (s.sharding == "HYBRID_SHARD") {
    // By default a shard group is one node's ranks.
    if (s.shardGroupSize <= 0 && numMachines > 0 &&
        s.worldSize % numMachines == 0)
      s.shardGroupSize = s.worldSize / numMachines;
    if (s.shardGroupSize <= 0)
      return error("HYBRID_SHARD needs --shard-group-size G (or a config "
                   "file's num_machines): the ranks of one node, which shard "
                   "each unit; groups of G ranks replicate it");
    if (s.worldSize % s.shardGroupSize != 0)
      return error("--shard-group-size " + llvm::Twine(s.shardGroupSize) +
                   " does not divide --world-size " +
                   llvm::Twine(s.worldSize));
    if (s.hybridReduction != "ordered" && s.hybridReduction != "two-stage")
      return error("--hybrid-reduction " + s.hybridReduction +
                   ": expected ordered or two-stage");
  } else if (s.shardGroupSize != 0) {
    return error("--shard-group-size applies to HYBRID_SHARD, not " +
                 s.sharding);
  } else if (given(hybridReductionFlag)) {
    return error("--hybrid-reduction applies to HYBRID_SHARD, not " +
                 s.sharding);
  }
  if (s.autoWrap != "size" && s.autoWrap != "class" &&
      s.autoWrap != "modules" && s.autoWrap != "none" &&
      s.autoWrap != "budget")
    return error("--auto-wrap " + s.autoWrap +
                 ": expected size, class, modules, budget or none");
  if (s.autoWrap == "budget" && s.offloadAuto)
    return error("--auto-wrap budget and --offload auto both choose under "
                 "--memory-budget: use one");
  if (given(memoryBudgetFlag) && s.autoWrap != "budget" && !s.offloadAuto)
    return error("--memory-budget applies to --auto-wrap budget or --offload "
                 "auto, not --auto-wrap " +
                 s.autoWrap);
  if (s.autoWrap == "budget" || s.offloadAuto) {
    if (!given(memoryBudgetFlag))
      return error(llvm::Twine(s.offloadAuto ? "--offload auto"
                                             : "--auto-wrap budget") +
                   " needs --memory-budget SIZE (the most bytes a rank may "
                   "hold during a step)");
    std::optional<int64_t> budget = fsdp::parseByteSize(memoryBudgetFlag);
    if (!budget || *budget <= 0)
      return error("--memory-budget " + memoryBudgetFlag +
                   ": expected a positive size in bytes, or with B, KiB, "
                   "MiB, GiB, TiB, KB, MB, GB or TB");
    s.memoryBudget = *budget;
  }
  if (given(minNumParamsFlag) && s.autoWrap != "size")
    return error("--min-num-params applies to --auto-wrap size, not " +
                 s.autoWrap);
  if (s.minNumParams < 0)
    return error("--min-num-params must not be negative");
  if (!s.wrapClasses.empty() && s.autoWrap != "class")
    return error("--wrap-class applies to --auto-wrap class, not " +
                 s.autoWrap);
  if (s.autoWrap == "class" && s.wrapClasses.empty())
    return error("--auto-wrap class needs --wrap-class NAME");
  if (!s.wrapModules.empty() && s.autoWrap != "modules")
    return error("--wrap-module applies to --auto-wrap modules, not " +
                 s.autoWrap);
  if (s.autoWrap == "modules" && s.wrapModules.empty())
    return error("--auto-wrap modules needs --wrap-module PATH");
  return success();
}

static void printFSDPSettings(llvm::raw_ostream &os) {
  const FSDPSettings &s = fsdpSettings;
  os << "sharding: " << s.sharding << "\n";
  if (s.fsdpVersion == 2)
    os << "fsdp-version: 2 (each unit a flat parameter, as FSDP1 lays it out; "
          "the arithmetic is FSDP2's)\n";
  os << "world-size: " << s.worldSize << "\n";
  if (s.shardGroupSize)
    os << "shard-group-size: " << s.shardGroupSize << "\n";
  if (s.sharding == "HYBRID_SHARD")
    os << "hybrid-reduction: " << s.hybridReduction << "\n";
  os << "auto-wrap: " << s.autoWrap << "\n";
  os << "auto-wrap-rule: " << s.autoWrapReason << "\n";
  if (s.autoWrap == "size")
    os << "min-num-params: " << s.minNumParams << "\n";
  if (s.autoWrap == "budget")
    os << "memory-budget: " << s.memoryBudget << "\n";
  if (!s.wrapClasses.empty())
    os << "wrap-class: " << llvm::join(s.wrapClasses, ",") << "\n";
  if (!s.wrapModules.empty())
    os << "wrap-module: " << llvm::join(s.wrapModules, ",") << "\n";
  if (!s.ignoreModules.empty())
    os << "ignore-module: " << llvm::join(s.ignoreModules, ",") << "\n";
  os << "backward-prefetch: " << s.backwardPrefetch << "\n";
  os << "forward-prefetch: " << (s.forwardPrefetch ? "true" : "false")
     << "\n";
  os << "activation-checkpointing: "
     << (s.activationCheckpointing ? "true (every unit but the root)" : "false")
     << "\n";
  os << "mixed-precision: param " << s.paramDtype << ", reduce "
     << (s.reduceDtype.empty() ? s.paramDtype : s.reduceDtype) << ", buffer "
     << s.bufferDtype << "\n";
  os << "grad-scaler: ";
  if (gradScalerOn())
    os << "on (init-scale " << llvm::format("%g", double(initScaleFlag))
       << ", growth-factor " << llvm::format("%g", double(growthFactorFlag))
       << ", backoff-factor " << llvm::format("%g", double(backoffFactorFlag))
       << ", growth-interval " << growthIntervalFlag << ")\n";
  else
    os << "off\n";
  os << "offload-params: " << (s.offloadParams ? "true" : "false") << "\n";
  if (s.offloadAuto)
    os << "offload: auto (memory-budget " << s.memoryBudget << ")\n";
  if (!s.offloadUnits.empty())
    os << "offload-unit: " << llvm::join(s.offloadUnits, ",") << "\n";
  if (!s.offloadOptimUnits.empty())
    os << "offload-optim-unit: " << llvm::join(s.offloadOptimUnits, ",")
       << "\n";
  os << "limit-all-gathers: " << s.limitAllGathers
     << (s.limitAllGathers == 0 ? " (no limit)" : "") << "\n";
  os << "limit-reductions: " << s.limitReductions
     << (s.limitReductions == 0 ? " (no bound)" : "") << "\n";
}

static llvm::cl::opt<bool> listGradientRules(
    "list-gradient-rules",
    llvm::cl::desc("Print the ATen overloads with a gradient rule and exit"),
    llvm::cl::init(false), llvm::cl::cat(trainCategory));

/// True if the command line asks for the training step.
static bool wantsTrainStep() { return lossFlag.getNumOccurrences() > 0; }

/// The training-step flags must make sense together; says why not.
static LogicalResult checkTrainFlags() {
  using Flags = std::initializer_list<const llvm::cl::Option *>;
  auto given = [](const llvm::cl::Option &o) {
    return o.getNumOccurrences() > 0;
  };
  auto error = [](const llvm::Twine &message) {
    llvm::errs() << "error: " << message << "\n";
    return failure();
  };
  if (!wantsTrainStep()) {
    if (fsdpSettings.enabled)
      return error("FSDP options need --loss: what is sharded is the "
                   "training step");
    for (const llvm::cl::Option *o :
         Flags{&optimizerFlag, &lrFlag, &weightDecayFlag, &momentumFlag,
               &nesterovFlag, &dampeningFlag, &maximizeFlag, &amsgradFlag,
               &lrScheduleFlag, &warmupStepsFlag, &totalStepsFlag,
               &maxGradNormFlag, &gradAccumFlag, &gradScalerFlag,
               &initScaleFlag, &growthFactorFlag, &backoffFactorFlag,
               &growthIntervalFlag, std::addressof(acClassFlag),
               std::addressof(acModuleFlag),
               &beta1Flag, &beta2Flag, &epsFlag, std::addressof(targetSpecs)})
      if (given(*o))
        return error("--" + o->ArgStr +
                     " needs --loss: the training step is built from a loss");
    return success();
  }
  if (!given(optimizerFlag))
    return error("--loss needs --optimizer sgd|adam|adamw");
  if (optimizerFlag != "sgd" && optimizerFlag != "adam" &&
      optimizerFlag != "adamw")
    return error("unknown optimizer '" + optimizerFlag +
                 "': expected sgd, adam or adamw");
  if (!gradScalerOn())
    for (const llvm::cl::Option *o :
         Flags{&initScaleFlag, &growthFactorFlag, &backoffFactorFlag,
               &growthIntervalFlag})
      if (given(*o))
        return error("--" + o->ArgStr +
                     " applies to the gradient scaler (--grad-scaler, on by "
                     "default with fp16 mixed precision)");
  if (gradAccumFlag < 1)
    return error("--grad-accum must be at least 1 (the micro-batches of one "
                 "optimizer step), not " + llvm::Twine(gradAccumFlag));
  if (!given(lrScheduleFlag))
    for (const llvm::cl::Option *o : Flags{&warmupStepsFlag, &totalStepsFlag})
      if (given(*o))
        return error("--" + o->ArgStr +
                     " needs --lr-schedule constant|linear|cosine");
  if (optimizerFlag == "sgd") {
    for (const llvm::cl::Option *o :
         Flags{&beta1Flag, &beta2Flag, &epsFlag, &amsgradFlag})
      if (given(*o))
        return error("--" + o->ArgStr +
                     " applies to --optimizer adam or adamw, not sgd");
  } else if (optimizerFlag == "adam" || optimizerFlag == "adamw") {
    for (const llvm::cl::Option *o :
         Flags{&momentumFlag, &nesterovFlag, &dampeningFlag})
      if (given(*o))
        return error("--" + o->ArgStr + " applies to --optimizer sgd, not " +
                     optimizerFlag);
  }
  return success();
}

/// The pipeline the flags describe: fsdp-train-step, or fsdp-fully-shard
/// with FSDP options.
template <typename Options>
static void setTrainOptions(Options &options) {
  options.loss = lossFlag;
  options.targets = std::vector<std::string>(targetSpecs.begin(),
                                             targetSpecs.end());
  options.optimizer = optimizerFlag;
  options.lr = lrFlag;
  options.weightDecay = weightDecayFlag;
  options.momentum = momentumFlag;
  options.nesterov = nesterovFlag;
  options.dampening = dampeningFlag;
  options.maximize = maximizeFlag;
  options.amsgrad = amsgradFlag;
  options.maxGradNorm = maxGradNormFlag;
  options.gradAccum = gradAccumFlag;
  options.acClasses = std::vector<std::string>(acClassFlag.begin(),
                                               acClassFlag.end());
  options.acModules = std::vector<std::string>(acModuleFlag.begin(),
                                               acModuleFlag.end());
  options.lrSchedule = lrScheduleFlag;
  options.warmupSteps = warmupStepsFlag;
  options.totalSteps = totalStepsFlag;
  options.beta1 = beta1Flag;
  options.beta2 = beta2Flag;
  options.eps = epsFlag;
  options.gradScaler = gradScalerOn();
  options.initScale = initScaleFlag;
  options.growthFactor = growthFactorFlag;
  options.backoffFactor = backoffFactorFlag;
  options.growthInterval = growthIntervalFlag;
}

static void setFSDPOptions(fsdp::FSDPPipelineOptions &options) {
  const FSDPSettings &s = fsdpSettings;
  setTrainOptions(options);
  options.sharding = s.sharding;
  options.worldSize = s.worldSize;
  options.shardGroupSize = s.shardGroupSize;
  options.hybridReduction = s.hybridReduction;
  // The plan's name for the reduce dtype; empty: the gradient's own.
  options.reduceDtype = planDtypeName(s.reduceDtype);
  options.offloadParams = s.offloadParams;
  const auto &units =
      s.offloadChoice ? s.offloadChoice->paramUnits : s.offloadUnits;
  const auto &optimUnits =
      s.offloadChoice ? s.offloadChoice->optimUnits : s.offloadOptimUnits;
  options.offloadUnits = units;
  options.offloadOptimUnits = optimUnits;
  options.autoWrapPolicy = s.autoWrap;
  options.minNumParams = s.minNumParams;
  options.wrapClasses = s.wrapClasses;
  options.wrapModules = s.wrapModules;
  options.ignoreModules = s.ignoreModules;
  options.backwardPrefetch = s.backwardPrefetch;
  options.forwardPrefetch = s.forwardPrefetch;
  options.activationCheckpointing = s.activationCheckpointing;
  options.limitAllGathers = s.limitAllGathers;
  options.limitReductions = s.limitReductions;
}

/// The training step's pipeline; `differentiated`: the module already has
/// its loss and backward (--auto-wrap budget ran them to choose).
static void addTrainStep(PassManager &pm, bool differentiated = false) {
  if (!fsdpSettings.enabled) {
    fsdp::TrainStepPipelineOptions options;
    setTrainOptions(options);
    fsdp::buildTrainStepPipeline(pm, options);
    return;
  }
  fsdp::FSDPPipelineOptions options;
  setFSDPOptions(options);
  if (differentiated)
    fsdp::buildShardedStepPipeline(pm, options);
  else
    fsdp::buildFSDPPipeline(pm, options);
}

/// --auto-wrap budget: differentiates `module`, then chooses size-based
/// wrapping and a backward prefetch mode whose predicted peak fits the
/// budget (fsdp/Transforms/MemoryBudget.h), and sets them.
static LogicalResult chooseUnderBudget(ModuleOp module, TimingScope &timing) {
  fsdp::FSDPPipelineOptions options;
  setFSDPOptions(options);
  PassManager pm(module.getContext(), ModuleOp::getOperationName());
  pm.enableTiming(timing);
  fsdp::buildLossAndBackwardPipeline(pm, options);
  if (failed(pm.run(module)))
    return failure();
  TimingScope choosing = timing.nest("Choose units under --memory-budget");
  FailureOr<fsdp::BudgetChoice> choice =
      fsdp::chooseWrappingUnderBudget(module, options, fsdpSettings.memoryBudget);
  if (failed(choice))
    return failure();
  FSDPSettings &s = fsdpSettings;
  s.autoWrap = "size";
  s.minNumParams = choice->minNumParams;
  s.backwardPrefetch = choice->backwardPrefetch;
  s.budgetChoice = *choice;
  return success();
}

/// --offload auto: differentiates `module`, then offloads as little as
/// makes the predicted device peak fit the budget.
static LogicalResult chooseOffload(ModuleOp module, TimingScope &timing) {
  fsdp::FSDPPipelineOptions options;
  setFSDPOptions(options);
  PassManager pm(module.getContext(), ModuleOp::getOperationName());
  pm.enableTiming(timing);
  fsdp::buildLossAndBackwardPipeline(pm, options);
  if (failed(pm.run(module)))
    return failure();
  TimingScope choosing = timing.nest("Choose CPU offload under --memory-budget");
  FailureOr<fsdp::OffloadChoice> choice = fsdp::chooseOffloadUnderBudget(
      module, options, fsdpSettings.memoryBudget);
  if (failed(choice))
    return failure();
  fsdpSettings.offloadChoice = *choice;
  return success();
}

enum class EmitKind { MLIR, Plan };
static llvm::cl::opt<EmitKind> emitKind(
    "emit", llvm::cl::desc("What to write"), llvm::cl::init(EmitKind::MLIR),
    llvm::cl::values(
        clEnumValN(EmitKind::MLIR, "mlir", "the IR after the pipeline"),
        clEnumValN(EmitKind::Plan, "plan",
                   "the plan file fsdp-run executes (docs/plan-format.md)")));

/// Imports a TorchScript file (or parses MLIR), runs the pipeline, writes the
/// result. Any error leaves no output file behind.
static LogicalResult runOnTorchScript(const std::string &inputFilename,
                                      const std::string &outputFilename,
                                      DialectRegistry &registry,
                                      const MlirOptMainConfig &config,
                                      bool isTorchScript) {
  DefaultTimingManager timingManager;
  applyDefaultTimingManagerCLOptions(timingManager);
  TimingScope timing = timingManager.getRootScope();
  fsdp::ImportOptions options;
  for (const std::string &text : inputSpecs) {
    fsdp::InputSpec spec;
    std::string error;
    if (!fsdp::parseInputSpec(text, spec, error)) {
      llvm::errs() << "error: " << error << "\n";
      return failure();
    }
    options.inputs.push_back(spec);
  }
  // Mixed precision: the importer types the step in the compute dtypes.
  if (fsdpSettings.enabled) {
    // The importer types the step in reduced precision only (fp32 is the
    // model's own).
    for (auto [from, to] : {std::pair(&fsdpSettings.paramDtype, &options.paramDtype),
                            std::pair(&fsdpSettings.bufferDtype, &options.bufferDtype)})
      if (*from != "fp32")
        *to = planDtypeName(*from);
    if (!isTorchScript &&
        (!options.paramDtype.empty() || !options.bufferDtype.empty())) {
      llvm::errs() << "error: --param-dtype and --buffer-dtype apply when "
                      "importing a TorchScript model (the importer types the "
                      "step in them); '"
                   << inputFilename << "' is MLIR\n";
      return failure();
    }
  }

  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  TimingScope importTiming = timing.nest("Import TorchScript");
  options.timing = &importTiming;
  OwningOpRef<ModuleOp> module =
      isTorchScript ? fsdp::importTorchScript(inputFilename, options, &context)
                    : parseSourceFile<ModuleOp>(inputFilename, sourceMgr,
                                                ParserConfig(&context));
  importTiming.stop();
  if (!module)
    return failure();

  bool budget = wantsTrainStep() && fsdpSettings.enabled &&
                fsdpSettings.autoWrap == "budget";
  if (budget && failed(chooseUnderBudget(*module, timing)))
    return failure();
  bool offloadAuto = wantsTrainStep() && fsdpSettings.enabled &&
                     fsdpSettings.offloadAuto;
  if (offloadAuto && failed(chooseOffload(*module, timing)))
    return failure();
  PassManager pm(&context, ModuleOp::getOperationName());
  pm.enableTiming(timing);
  if (wantsTrainStep())
    addTrainStep(pm, /*differentiated=*/budget || offloadAuto);
  if (failed(applyPassManagerCLOptions(pm)) ||
      failed(config.setupPassPipeline(pm)) || failed(pm.run(*module)))
    return failure();
  // The checkpoint kind an Accelerate file chose, for fsdp-run.
  if (!fsdpSettings.stateDictType.empty())
    (*module)->setAttr(fsdp::kStateDictTypeAttr,
                       StringAttr::get(&context, fsdpSettings.stateDictType));

  std::string error;
  std::unique_ptr<llvm::ToolOutputFile> output =
      openOutputFile(outputFilename, &error);
  if (!output) {
    llvm::errs() << "error: " << error << "\n";
    return failure();
  }
  if (fsdpReportFlag) {
    llvm::raw_ostream &os =
        outputFilename == "-" ? llvm::errs() : llvm::outs();
    fsdp::printFSDPReport(*module, os);
    const FSDPSettings &s = fsdpSettings;
    os << "units chosen by: " << s.autoWrap;
    if (s.budgetChoice)
      os << " (budget " << fsdp::formatBytes(s.memoryBudget)
         << ": min_num_params " << s.budgetChoice->minNumParams << " and "
         << s.budgetChoice->backwardPrefetch << ", " << s.budgetChoice->units
         << (s.budgetChoice->units == 1 ? " unit" : " units") << " and "
         << s.budgetChoice->collectives
         << " collectives, predicted peak "
         << fsdp::formatBytes(s.budgetChoice->peakBytes)
         << "; the first of " << s.budgetChoice->tried
         << " wrappings tried, from the fewest units, to fit)";
    else if (s.autoWrap == "size")
      os << " (min_num_params " << s.minNumParams << ")";
    else if (s.autoWrap == "class")
      os << " (" << llvm::join(s.wrapClasses, ",") << ")";
    os << ", from " << s.autoWrapReason << "\n";
    if (const auto &c = s.offloadChoice) {
      os << "cpu offload chosen by: --offload auto (budget "
         << fsdp::formatBytes(s.memoryBudget) << "): ";
      if (c->optimUnits.empty() && c->paramUnits.empty())
        os << "nothing (the predicted peak "
           << fsdp::formatBytes(c->unoffloadedPeakBytes) << " fits)";
      else {
        // Units by module path; the root's is empty.
        auto names = [](const std::vector<std::string> &units) {
          std::vector<std::string> shown;
          for (const std::string &u : units)
            shown.push_back(u.empty() ? "(root)" : u);
          return llvm::join(shown, ",");
        };
        os << "optimizer state of " << c->optimUnits.size() << " of "
           << c->units << " units [" << names(c->optimUnits)
           << "], parameters of " << c->paramUnits.size() << " ["
           << names(c->paramUnits) << "]; predicted device peak "
           << fsdp::formatBytes(c->unoffloadedPeakBytes) << " -> "
           << fsdp::formatBytes(c->peakBytes) << ", host peak "
           << fsdp::formatBytes(c->hostPeakBytes) << "; the first of "
           << c->tried << " plans tried, largest units first, to fit";
      }
      os << "\n";
    }
    fsdp::printScheduleReport(*module, os);
  }
  // The whole training step when there is one, else the forward.
  llvm::StringRef entry =
      module->lookupSymbol("train_step") ? "train_step" : "forward";
  // One prediction for the text report and the JSON.
  std::optional<fsdp::MemoryReport> memory;
  if (memoryReportFlag || !memoryReportJSONFlag.empty()) {
    FailureOr<fsdp::MemoryReport> report =
        fsdp::predictMemoryReport(*module, entry);
    if (failed(report))
      return failure();
    memory = std::move(*report);
  }
  if (memoryReportFlag) {
    llvm::raw_ostream &os =
        outputFilename == "-" ? llvm::errs() : llvm::outs();
    fsdp::printMemoryReport(*memory, os);
  }
  std::unique_ptr<llvm::ToolOutputFile> memoryJSON;
  if (!memoryReportJSONFlag.empty()) {
    memoryJSON = openOutputFile(memoryReportJSONFlag, &error);
    if (!memoryJSON) {
      llvm::errs() << "error: " << error << "\n";
      return failure();
    }
    fsdp::writeMemoryReportJSON(*memory, memoryJSON->os());
  }
  TimingScope outputTiming = timing.nest("Output");
  if (emitKind == EmitKind::Plan) {
    if (failed(fsdp::emitPlan(*module, entry, output->os())))
      return failure();
  } else if (config.shouldEmitBytecode()) {
    if (failed(writeBytecodeToFile(*module, output->os())))
      return failure();
  } else {
    module->print(output->os(), OpPrintingFlags());
    output->os() << "\n";
  }
  output->keep();
  if (memoryJSON)
    memoryJSON->keep();
  return success();
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  DialectRegistry registry;
  fsdp::registerAllDialects(registry);
  fsdp::registerAllPasses();

  auto [inputFilename, outputFilename] = registerAndParseCLIOptions(
      argc, argv, "fsdp-opt: compiles TorchScript training into sharded plans",
      registry);
  MlirOptMainConfig config = MlirOptMainConfig::createFromCLOptions();
  if (listGradientRules) {
    for (llvm::StringRef name : fsdp::aten::gradientRuleNames())
      llvm::outs() << name << "\n";
    return 0;
  }
  if (failed(resolveFSDPSettings()))
    return 1;
  if (printConfigFlag) {
    printFSDPSettings(llvm::outs());
    return 0;
  }
  if (failed(checkTrainFlags()))
    return 1;

  if (inputFilename != "-") {
    if (!llvm::sys::fs::exists(inputFilename)) {
      llvm::errs() << "error: no such file: '" << inputFilename << "'\n";
      return 1;
    }
    switch (fsdp::classifyInputFile(inputFilename)) {
    case fsdp::InputFileKind::TorchScript:
      return failed(runOnTorchScript(inputFilename, outputFilename, registry,
                                     config, /*isTorchScript=*/true));
    case fsdp::InputFileKind::OtherZip:
      llvm::errs() << "error: '" << inputFilename
                   << "' is a zip archive but not TorchScript (it has no "
                      "constants.pkl): save the model with torch.jit.save "
                      "after torch.jit.trace or torch.jit.script\n";
      return 1;
    case fsdp::InputFileKind::CorruptZip:
      llvm::errs() << "error: '" << inputFilename
                   << "' is a truncated or corrupt zip archive (no central "
                      "directory), not a readable TorchScript model\n";
      return 1;
    case fsdp::InputFileKind::Other: {
      llvm::StringRef ext = llvm::sys::path::extension(inputFilename);
      if (ext == ".pt" || ext == ".pth" || ext == ".ptl") {
        llvm::errs() << "error: '" << inputFilename
                     << "' is not a TorchScript archive (not a zip file); "
                        "save the model with torch.jit.save\n";
        return 1;
      }
      break;
    }
    }
  }
  if (!inputSpecs.empty()) {
    llvm::errs() << "error: --input applies to TorchScript input only, but '"
                 << inputFilename << "' is not a TorchScript archive\n";
    return 1;
  }

  if (emitKind == EmitKind::Plan || wantsTrainStep() || memoryReportFlag ||
      !memoryReportJSONFlag.empty())
    return failed(runOnTorchScript(inputFilename, outputFilename, registry,
                                   config, /*isTorchScript=*/false));

  std::string error;
  std::unique_ptr<llvm::MemoryBuffer> file =
      openInputFile(inputFilename, &error);
  if (!file) {
    llvm::errs() << "error: " << error << "\n";
    return 1;
  }
  std::unique_ptr<llvm::ToolOutputFile> output =
      openOutputFile(outputFilename, &error);
  if (!output) {
    llvm::errs() << "error: " << error << "\n";
    return 1;
  }
  if (failed(MlirOptMain(output->os(), std::move(file), registry, config)))
    return 1;
  output->keep();
  return 0;
}
