//===- Settings.cpp - fsdp-opt's options merged and checked ----------------===//
//
// The Accelerate file (--config) under the flags given, then the options
// checked together; --print-config; the pipeline's options.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Config/AccelerateConfig.h"
#include "fsdp/Driver/Options.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"

#include <cmath>
#include <limits>
#include <sstream>

using namespace mlir;
using namespace fsdp;
using namespace fsdp::driver;

LogicalResult fsdp::driver::error(const llvm::Twine &message) {
  llvm::errs() << "error: " << message << "\n";
  return failure();
}

namespace {

/// The flags that turn FSDP on: every FSDP option of StepOptions.def, and
/// these.
constexpr const char *kFSDPFlags[] = {
#define FSDP_SHARD_OPTION(TYPE, FIELD, FLAG, NAME, DEFAULT, HELP) FLAG,
#define FSDP_SHARD_LIST_OPTION(FIELD, FLAG, NAME, VALUE, HELP) FLAG,
#include "fsdp/Transforms/StepOptions.def"
    "activation-checkpointing", "fsdp-report", "mixed-precision",
    "param-dtype", "reduce-dtype", "buffer-dtype", "offload",
    "memory-budget", "savers"};

/// The training step's flags, which need --loss, in the order a missing
/// --loss names them.
constexpr const char *kTrainFlags[] = {
    "optimizer",
#define FSDP_TRAIN_OPTION(TYPE, FIELD, FLAG, NAME, DEFAULT, HELP) FLAG,
#define FSDP_TRAIN_LIST_OPTION(FIELD, FLAG, NAME, VALUE, HELP) FLAG,
#include "fsdp/Transforms/StepOptions.def"
};

/// The Accelerate file's settings, where no flag gives them; its
/// num_machines.
LogicalResult overlayConfig(CompileOptions &o, int64_t &numMachines) {
  FSDPSettings &s = o.fsdp;
  llvm::Expected<AccelerateConfig> config =
      readAccelerateConfig(o.raw.config);
  if (!config)
    return error(llvm::toString(config.takeError()));
  s.enabled = true;
  if (config->sharding && !o.given("sharding"))
    s.sharding = *config->sharding;
  if (config->autoWrap && !o.given("auto-wrap"))
    s.autoWrap = *config->autoWrap;
  s.autoWrapReason = config->autoWrapReason;
  s.fsdpVersion = config->fsdpVersion;
  if (config->minNumParams && !o.given("min-num-params"))
    s.minNumParams = *config->minNumParams;
  if (!o.given("wrap-class"))
    s.wrapClasses = config->wrapClasses;
  if (config->numProcesses && !o.given("world-size"))
    s.worldSize = *config->numProcesses;
  if (!o.given("backward-prefetch"))
    s.backwardPrefetch = config->backwardPrefetch;
  if (!o.given("forward-prefetch"))
    s.forwardPrefetch = config->forwardPrefetch;
  if (!o.given("activation-checkpointing"))
    o.train.activationCheckpointing = config->activationCheckpointing;
  if (!o.given("offload-params"))
    s.offloadParams = config->offloadParams;
  if (!config->mixedPrecision.empty())
    s.paramDtype = s.reduceDtype = s.bufferDtype = config->mixedPrecision;
  if (!o.given("limit-all-gathers"))
    s.limitAllGathers = config->limitAllGathers;
  s.stateDictType = config->stateDictType.value_or("");
  numMachines = config->numMachines.value_or(0);
  return success();
}

/// The flags that are not settings as they stand: the auto-wrap rule's
/// reason, mixed precision, the offload mode.
LogicalResult applyFlags(CompileOptions &o) {
  FSDPSettings &s = o.fsdp;
  const RawFlags &raw = o.raw;
  if (o.given("auto-wrap"))
    s.autoWrapReason = "--auto-wrap " + s.autoWrap;
  if (s.autoWrapReason.empty())
    s.autoWrapReason = s.autoWrap == "none"
                           ? "no auto-wrap policy: the root is the one unit"
                           : "--auto-wrap " + s.autoWrap;
  if (o.given("mixed-precision")) {
    if (raw.mixedPrecision != "no" && raw.mixedPrecision != "bf16" &&
        raw.mixedPrecision != "fp16")
      return error("--mixed-precision " + raw.mixedPrecision +
                   ": expected no, bf16 or fp16");
    std::string dtype =
        raw.mixedPrecision == "no" ? std::string("fp32") : raw.mixedPrecision;
    s.paramDtype = s.reduceDtype = s.bufferDtype = dtype;
  }
  for (auto [name, flag, field] :
       {std::tuple("param-dtype", &raw.paramDtype, &s.paramDtype),
        std::tuple("reduce-dtype", &raw.reduceDtype, &s.reduceDtype),
        std::tuple("buffer-dtype", &raw.bufferDtype, &s.bufferDtype)}) {
    if (!o.given(name))
      continue;
    if (*flag != "bf16" && *flag != "fp16" && *flag != "fp32")
      return error(llvm::Twine("--") + name + " " + *flag +
                   ": expected bf16, fp16 or fp32");
    *field = *flag;
  }
  if (o.given("offload")) {
    if (raw.offload != "none" && raw.offload != "params" &&
        raw.offload != "auto")
      return error("--offload " + raw.offload +
                   ": expected none, params or auto");
    if (o.given("offload-params") &&
        s.offloadParams != (raw.offload == "params"))
      return error("--offload-params and --offload " + raw.offload +
                   " disagree");
    s.offloadParams = raw.offload == "params";
    s.offloadAuto = raw.offload == "auto";
  }
  if ((s.offloadParams || s.offloadAuto) &&
      (!s.offloadUnits.empty() || !s.offloadOptimUnits.empty()))
    return error("--offload-unit and --offload-optim-unit choose units "
                 "themselves: not with --offload-params or --offload auto");
  return success();
}

LogicalResult checkSchedule(const FSDPSettings &s) {
  if (!isBackwardPrefetch(s.backwardPrefetch))
    return error("--backward-prefetch " + s.backwardPrefetch + ": expected " +
                 kBackwardPrefetchValues);
  if (s.limitAllGathers < 0)
    return error("--limit-all-gathers must not be negative (0: no limit), "
                 "found " +
                 llvm::Twine(s.limitAllGathers));
  if (s.limitReductions < 0)
    return error("--limit-reductions must not be negative (0: no bound), "
                 "found " +
                 llvm::Twine(s.limitReductions));
  return success();
}

LogicalResult checkSharding(const CompileOptions &o, FSDPSettings &s,
                            int64_t numMachines) {
  if (!isShardingStrategy(s.sharding))
    return error("--sharding " + s.sharding + ": expected " +
                 kShardingStrategies);
  if ((s.offloadParams || s.offloadAuto || !s.offloadUnits.empty() ||
       !s.offloadOptimUnits.empty()) &&
      (s.sharding == "OSS" || s.sharding == "SHARDED_DDP"))
    return error("CPU offload applies to FSDP's strategies, not " +
                 s.sharding + " (its parameters are whole on every rank)");
  if (s.worldSize < 1)
    return error("--world-size must be at least 1, found " +
                 llvm::Twine(s.worldSize));
  if (s.worldSize > kMaxWorldSize)
    return error("--world-size must be at most " +
                 llvm::Twine(kMaxWorldSize) + " (ranks are C ints), found " +
                 llvm::Twine(s.worldSize));
  if (s.shardGroupSize > kMaxWorldSize)
    return error("--shard-group-size must be at most " +
                 llvm::Twine(kMaxWorldSize) + ", found " +
                 llvm::Twine(s.shardGroupSize));
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
    if (!symbolizeHybridReduction(s.hybridReduction))
      return error("--hybrid-reduction " + s.hybridReduction +
                   ": expected ordered or two-stage");
  } else if (s.shardGroupSize != 0) {
    return error("--shard-group-size applies to HYBRID_SHARD, not " +
                 s.sharding);
  } else if (o.given("hybrid-reduction")) {
    return error("--hybrid-reduction applies to HYBRID_SHARD, not " +
                 s.sharding);
  }
  return success();
}

/// The flags --savers auto chooses the value of itself.
constexpr const char *kChosenBySavers[] = {
    "auto-wrap",          "min-num-params",    "wrap-class",
    "wrap-module",        "backward-prefetch", "forward-prefetch",
    "limit-all-gathers",  "activation-checkpointing", "ac-class",
    "ac-module",          "offload",           "offload-params",
    "offload-unit",       "offload-optim-unit"};

LogicalResult checkBudget(const CompileOptions &o, FSDPSettings &s) {
  if (s.autoWrap == "budget" && s.offloadAuto)
    return error("--auto-wrap budget and --offload auto both choose under "
                 "--memory-budget: use one");
  if (o.given("savers") && o.raw.savers != "auto" && o.raw.savers != "none")
    return error("--savers " + o.raw.savers + ": expected auto or none");
  bool single = s.autoWrap == "budget" || s.offloadAuto;
  if (o.given("savers") && o.raw.savers == "auto" && single)
    return error(llvm::Twine("--savers auto chooses every saver; ") +
                 (s.offloadAuto ? "--offload auto" : "--auto-wrap budget") +
                 " chooses one alone: use one");
  // --memory-budget alone chooses every saver, unless --savers none.
  s.saversAuto = o.given("savers") ? o.raw.savers == "auto"
                                   : o.given("memory-budget") && !single;
  if (o.given("memory-budget") && !single && !s.saversAuto)
    return error("--memory-budget with --savers none applies to --auto-wrap "
                 "budget or --offload auto, not --auto-wrap " +
                 s.autoWrap);
  if (s.saversAuto)
    for (const char *flag : kChosenBySavers)
      if (o.given(flag))
        return error(llvm::Twine("--") + flag +
                     ": --memory-budget chooses it (--savers auto); drop "
                     "it, or give --savers none with --auto-wrap budget or "
                     "--offload auto to choose one saver alone");
  if (!single && !s.saversAuto)
    return success();
  if (!o.given("memory-budget"))
    return error(llvm::Twine(s.offloadAuto   ? "--offload auto"
                             : s.saversAuto ? "--savers auto"
                                            : "--auto-wrap budget") +
                 " needs --memory-budget SIZE (the most bytes a rank may "
                 "hold during a step)");
  std::optional<int64_t> budget = parseByteSize(o.raw.memoryBudget);
  if (!budget || *budget <= 0)
    return error("--memory-budget " + o.raw.memoryBudget +
                 ": expected a positive whole number of bytes, or a size "
                 "with B, KiB, MiB, GiB, TiB, KB, MB, GB or TB");
  s.memoryBudget = *budget;
  return success();
}

LogicalResult checkWrapping(const CompileOptions &o, FSDPSettings &s) {
  // fsdp-opt's own policy, budget, chooses a size threshold.
  if (!symbolizeAutoWrapPolicy(s.autoWrap) && s.autoWrap != "budget")
    return error("--auto-wrap " + s.autoWrap +
                 ": expected size, class, modules, budget or none");
  if (failed(checkBudget(o, s)))
    return failure();
  if (o.given("min-num-params") && s.autoWrap != "size")
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

LogicalResult resolveFSDP(CompileOptions &o) {
  FSDPSettings &s = o.fsdp;
  int64_t numMachines = 0;
  if (o.given("config") && failed(overlayConfig(o, numMachines)))
    return failure();
  for (const char *flag : kFSDPFlags)
    if (o.given(flag))
      s.enabled = true;
  if (failed(applyFlags(o)))
    return failure();
  if (!s.enabled)
    return success();
  if (failed(checkSchedule(s)) || failed(checkSharding(o, s, numMachines)))
    return failure();
  return checkWrapping(o, s);
}

} // namespace

LogicalResult fsdp::driver::resolveOptions(CompileOptions &o) {
  if (failed(resolveFSDP(o)))
    return failure();
  std::string why;
  FailureOr<MachineRates> machine = loadMachine(o.machine, why);
  if (failed(machine))
    return error("--machine: " + why);
  o.machineRates = *machine;
  // Dynamic loss scaling: as asked, else with fp16 parameters (as
  // Accelerate creates a ShardedGradScaler for fp16).
  if (!o.given("grad-scaler"))
    o.train.gradScaler = o.fsdp.enabled && o.fsdp.paramDtype == "fp16";
  return success();
}

namespace {

/// `value` as C++ streams print it (1e-08, inf, nan).
std::string number(double value) {
  std::ostringstream os;
  os << value;
  return os.str();
}

/// A floating-point training flag must be a finite number (an inf or nan
/// makes no step PyTorch takes, and a plan cannot write it as JSON); other
/// flags pass.
template <typename T>
LogicalResult checkFinite(const char *, const T &) {
  return success();
}
LogicalResult checkFinite(const char *flag, double value) {
  if (std::isfinite(value))
    return success();
  return error(llvm::Twine("--") + flag + " must be a finite number, not " +
               number(value));
}

/// The first flag of `flags` given, or null.
const char *firstGiven(const CompileOptions &o,
                       std::initializer_list<const char *> flags) {
  for (const char *flag : flags)
    if (o.given(flag))
      return flag;
  return nullptr;
}

} // namespace

LogicalResult fsdp::driver::checkTrainOptions(const CompileOptions &o) {
  const TrainOptions &t = o.train;
  if (!o.wantsTrainStep()) {
    if (o.fsdp.enabled)
      return error("FSDP options need --loss: what is sharded is the "
                   "training step");
    for (const char *flag : kTrainFlags)
      if (o.given(flag))
        return error(llvm::Twine("--") + flag +
                     " needs --loss: the training step is built from a loss");
    return success();
  }
  if (!o.given("optimizer"))
    return error("--loss needs --optimizer sgd|adam|adamw");
#define FSDP_TRAIN_OPTION(TYPE, FIELD, FLAG, NAME, DEFAULT, HELP)             \
  if (failed(checkFinite(FLAG, t.FIELD)))                                      \
    return failure();
#include "fsdp/Transforms/StepOptions.def"
  // torch.optim's own checks ("Invalid learning rate", ...).
  struct Range {
    const char *flag;
    double value, min, max;
    bool maxOpen;
  };
  double inf = std::numeric_limits<double>::infinity();
  for (Range r : {Range{"lr", t.lr, 0, inf, false},
                  Range{"eps", t.eps, 0, inf, false},
                  Range{"beta1", t.beta1, 0, 1, true},
                  Range{"beta2", t.beta2, 0, 1, true},
                  Range{"momentum", t.momentum, 0, inf, false},
                  Range{"max-grad-norm", t.maxGradNorm, 0, inf, false},
                  Range{"init-scale", t.initScale, 0, inf, false}})
    if (o.given(r.flag) &&
        (r.value < r.min || (r.maxOpen ? r.value >= r.max : r.value > r.max)))
      return error(std::string("--") + r.flag + " must be at least " +
                   number(r.min) +
                   (r.max == inf ? "" : " and below " + number(r.max)) +
                   ", not " + number(r.value));
  if (o.given("weight-decay") && t.weightDecay < 0)
    return error("--weight-decay must be at least 0, not " +
                 number(t.weightDecay));
  std::optional<OptimizerKind> kind = symbolizeOptimizerKind(t.optimizer);
  if (!kind)
    return error("unknown optimizer '" + t.optimizer +
                 "': expected sgd, adam or adamw");
  if (!t.gradScaler)
    if (const char *flag = firstGiven(o, {"init-scale", "growth-factor",
                                          "backoff-factor", "growth-interval"}))
      return error(llvm::Twine("--") + flag +
                   " applies to the gradient scaler (--grad-scaler, on by "
                   "default with fp16 mixed precision)");
  if (t.gradAccum < 1)
    return error("--grad-accum must be at least 1 (the micro-batches of one "
                 "optimizer step), not " +
                 llvm::Twine(t.gradAccum));
  if (!o.given("lr-schedule"))
    if (const char *flag = firstGiven(o, {"warmup-steps", "total-steps"}))
      return error(llvm::Twine("--") + flag +
                   " needs --lr-schedule constant|linear|cosine");
  if (t.lrSchedule == "external")
    if (const char *flag = firstGiven(o, {"warmup-steps", "total-steps"}))
      return error(llvm::Twine("--") + flag +
                   " does not apply to --lr-schedule external (the runner "
                   "sets each step's rate)");
  if (kind == OptimizerKind::SGD) {
    if (const char *flag =
            firstGiven(o, {"beta1", "beta2", "eps", "amsgrad"}))
      return error(llvm::Twine("--") + flag +
                   " applies to --optimizer adam or adamw, not sgd");
  } else if (const char *flag =
                 firstGiven(o, {"momentum", "nesterov", "dampening"})) {
    return error(llvm::Twine("--") + flag + " applies to --optimizer sgd, not " +
                 t.optimizer);
  }
  return success();
}

void fsdp::driver::printSettings(const CompileOptions &o,
                                 llvm::raw_ostream &os) {
  const FSDPSettings &s = o.fsdp;
  const TrainOptions &t = o.train;
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
     << (t.activationCheckpointing ? "true (every unit but the root)"
                                   : "false")
     << "\n";
  os << "mixed-precision: param " << s.paramDtype << ", reduce "
     << (s.reduceDtype.empty() ? s.paramDtype : s.reduceDtype) << ", buffer "
     << s.bufferDtype << "\n";
  os << "grad-scaler: ";
  if (t.gradScaler)
    os << "on (init-scale " << llvm::format("%g", t.initScale)
       << ", growth-factor " << llvm::format("%g", t.growthFactor)
       << ", backoff-factor " << llvm::format("%g", t.backoffFactor)
       << ", growth-interval " << t.growthInterval << ")\n";
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

namespace {

template <typename Pipeline>
void setTrainOptions(const TrainOptions &t, Pipeline &p) {
  p.loss = t.loss;
  p.optimizer = t.optimizer;
#define FSDP_TRAIN_OPTION(TYPE, FIELD, FLAG, NAME, DEFAULT, HELP)             \
  p.FIELD = t.FIELD;
#define FSDP_TRAIN_LIST_OPTION(FIELD, FLAG, NAME, VALUE, HELP)                \
  p.FIELD = t.FIELD;
#include "fsdp/Transforms/StepOptions.def"
}

} // namespace

void fsdp::driver::toPipelineOptions(const CompileOptions &o,
                                     TrainStepPipelineOptions &p) {
  setTrainOptions(o.train, p);
}

void fsdp::driver::toPipelineOptions(const CompileOptions &o,
                                     FSDPPipelineOptions &p) {
  const FSDPSettings &s = o.fsdp;
  setTrainOptions(o.train, p);
#define FSDP_SHARD_OPTION(TYPE, FIELD, FLAG, NAME, DEFAULT, HELP)             \
  p.FIELD = s.FIELD;
#define FSDP_SHARD_LIST_OPTION(FIELD, FLAG, NAME, VALUE, HELP)                \
  p.FIELD = s.FIELD;
#include "fsdp/Transforms/StepOptions.def"
  // The plan's name for the reduce dtype; empty: the gradient's own.
  p.reduceDtype = planDtypeName(s.reduceDtype);
  // What --offload auto chose, in place of the units given.
  if (s.offloadChoice) {
    p.offloadUnits = s.offloadChoice->paramUnits;
    p.offloadOptimUnits = s.offloadChoice->optimUnits;
  }
}
