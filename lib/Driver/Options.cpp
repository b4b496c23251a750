//===- Options.cpp - fsdp-opt's flags, bound to CompileOptions -------------===//
//
// Each flag is declared once, bound to its field of CompileOptions (the
// field's initializer is its default). resolveOptions overlays an
// Accelerate file under the flags given and checks the options together.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Driver/Options.h"
#include "fsdp/Config/AccelerateConfig.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"

#include <memory>

using namespace mlir;
using namespace fsdp;
using namespace fsdp::driver;
namespace cl = llvm::cl;

namespace {

cl::OptionCategory importCategory("TorchScript import options");
cl::OptionCategory trainCategory(
    "Training step options (PyTorch's names and defaults)");
cl::OptionCategory fsdpCategory(
    "FSDP options (PyTorch FullyShardedDataParallel's names)");

/// Owns the flags bindCommandLine registers, each bound to a field.
struct Binder {
  std::vector<std::unique_ptr<cl::Option>> flags;

  template <typename T>
  void opt(const char *name, T &field, cl::OptionCategory &category,
           const char *desc, const char *valueDesc = nullptr) {
    auto flag = std::make_unique<cl::opt<T, true>>(
        llvm::StringRef(name), cl::desc(desc), cl::location(field),
        cl::cat(category));
    if (valueDesc)
      flag->setValueStr(valueDesc);
    flags.push_back(std::move(flag));
  }

  void list(const char *name, std::vector<std::string> &field,
            cl::OptionCategory &category, const char *desc,
            const char *valueDesc) {
    auto flag = std::make_unique<
        cl::list<std::string, std::vector<std::string>>>(
        llvm::StringRef(name), cl::desc(desc), cl::location(field),
        cl::cat(category),
        cl::value_desc(valueDesc));
    flags.push_back(std::move(flag));
  }
};

Binder &binder() {
  static Binder instance;
  return instance;
}

void bindImportOptions(Binder &b, CompileOptions &o) {
  b.list("input", o.inputs, importCategory,
         "Static type of a model input, NAME:DIMSxDTYPE (e.g. "
         "x:8x3x32x32xf32; dtypes f32 f16 bf16 f64 i64 i32 i1); "
         "repeatable; overrides specs stored in the .pt",
         "NAME:DIMSxDTYPE");
  b.opt("eval-model", o.evalModel, importCategory,
        "The same model exported in evaluation mode (after model.eval(): "
        "dropout off, BatchNorm's running statistics), with the same "
        "parameters and buffers: the plan's evaluation step computes its "
        "forward. Needed only where the forward differs in evaluation mode",
        "FILE");
}

void bindStepOptions(Binder &b, TrainOptions &t, FSDPSettings &s) {
  b.opt("loss", t.loss, trainCategory,
        "Build the training step with this loss: cross_entropy, mse, or none "
        "(the model returns its own scalar loss)",
        "LOSS");
  b.opt("optimizer", t.optimizer, trainCategory,
        "The optimizer: sgd, adam or adamw (torch.optim's)", "NAME");
#define FSDP_TRAIN_OPTION(TYPE, FIELD, FLAG, NAME, DEFAULT, HELP)             \
  b.opt(FLAG, t.FIELD, trainCategory, HELP);
#define FSDP_TRAIN_LIST_OPTION(FIELD, FLAG, NAME, VALUE, HELP)                \
  b.list(FLAG, t.FIELD, trainCategory, HELP, VALUE);
#define FSDP_SHARD_OPTION(TYPE, FIELD, FLAG, NAME, DEFAULT, HELP)             \
  b.opt(FLAG, s.FIELD, fsdpCategory, HELP);
#define FSDP_SHARD_LIST_OPTION(FIELD, FLAG, NAME, VALUE, HELP)                \
  b.list(FLAG, s.FIELD, fsdpCategory, HELP, VALUE);
#include "fsdp/Transforms/StepOptions.def"
}

void bindSaverOptions(Binder &b, RawFlags &raw) {
  cl::OptionCategory &c = fsdpCategory;
  b.opt("mixed-precision", raw.mixedPrecision, c,
        "Accelerate's mixed_precision: no, bf16 or fp16 (PyTorch FSDP's "
        "MixedPrecision with that param, reduce and buffer dtype; fp16 with "
        "the gradient scaler)",
        "no|bf16|fp16");
  b.opt("param-dtype", raw.paramDtype, c,
        "MixedPrecision.param_dtype: the dtype parameters are gathered and "
        "computed in (sharded parameters and optimizer state stay fp32); "
        "inputs are cast to it",
        "bf16|fp16|fp32");
  b.opt("reduce-dtype", raw.reduceDtype, c,
        "MixedPrecision.reduce_dtype: the dtype gradients are reduced in "
        "(default: the param dtype)",
        "bf16|fp16|fp32");
  b.opt("buffer-dtype", raw.bufferDtype, c,
        "MixedPrecision.buffer_dtype: the dtype floating-point buffers are "
        "read and updated in (default: fp32)",
        "bf16|fp16|fp32");
  b.opt("offload", raw.offload, c,
        "CPU offload: none, params (--offload-params) or auto: as little as "
        "makes the predicted device peak fit --memory-budget (optimizer "
        "state of the largest units first, then their parameters)",
        "none|params|auto");
  b.opt("memory-budget", raw.memoryBudget, c,
        "The most bytes a rank may hold during a step (e.g. 40GiB, 512MiB, "
        "1000000): alone, every saver is chosen for it (--savers auto); "
        "with --auto-wrap budget or --offload auto, that saver alone",
        "SIZE");
  b.opt("savers", raw.savers, c,
        "auto: choose together the units, the prefetch schedule, activation "
        "checkpointing and CPU offload so that the predicted peak fits "
        "--memory-budget with the smallest predicted step time (--machine's "
        "rates); none (default): as the flags say",
        "auto|none");
}

void bindReportOptions(Binder &b, CompileOptions &o) {
  cl::OptionCategory &c = fsdpCategory;
  b.opt("config", o.raw.config, c,
        "An Accelerate config file (fsdp_config keys and num_processes); "
        "flags override it",
        "FILE.yaml");
  b.opt("print-config", o.printConfig, c,
        "Print the FSDP settings (config file and flags merged) and exit");
  b.opt("fsdp-report", o.fsdpReport, c,
        "Print the FSDP units and the per-rank bytes of sharded state "
        "against unsharded");
  b.opt("memory-report", o.memoryReport, c,
        "Print the predicted peak bytes of one rank during a step: where it "
        "occurs, what it holds, and per unit");
  b.opt("memory-report-json", o.memoryReportJSON, c,
        "Write the predicted memory as JSON to FILE: peak_bytes, breakdown, "
        "units and the live bytes after every instruction (timeline)",
        "FILE");
  b.opt("measure-workspaces", o.measureWorkspaces, c,
        "The memory reports also predict the peak of ATen's CPU allocator "
        "(fsdp-run's allocator_peak_bytes): each distinct ATen call of the "
        "step runs once here, on operands laid out as the step has them, to "
        "measure what its kernel allocates for itself");
  b.opt("measure-kernels", o.measureKernels, c,
        "The memory reports' step time takes each ATen call's time measured "
        "here (each distinct call run as --measure-workspaces runs it, which "
        "this implies, then timed) in place of the machine's rates");
  b.opt("workspace-threads", o.workspaceThreads, c,
        "The intra-op threads --measure-workspaces and --measure-kernels run "
        "kernels at (default: "
        "what fsdp-run --nproc gives each of --world-size ranks on this "
        "machine, its cores divided among them)",
        "N");
  b.opt("machine", o.machine, c,
        "The machine whose rates predict the step time (--memory-report): "
        "cpu, h100, or a file --calibrate wrote",
        "NAME|FILE");
  b.opt("calibrate", o.calibrate, c,
        "Measure this machine's rates (matrix products, memory, kernel "
        "overhead, collectives over --world-size local ranks, default 2) "
        "with fsdp-run and write them to the output file (-o), for "
        "--machine");
  b.opt("list-gradient-rules", o.listGradientRules, trainCategory,
        "Print the ATen overloads with a gradient rule and exit");
  b.flags.push_back(std::make_unique<cl::opt<EmitKind, true>>(
      "emit", cl::desc("What to write"), cl::location(o.emit),
      cl::values(clEnumValN(EmitKind::MLIR, "mlir", "the IR after the pipeline"),
                 clEnumValN(EmitKind::Plan, "plan",
                            "the plan file fsdp-run executes "
                            "(docs/plan-format.md)"))));
}

} // namespace

void fsdp::driver::bindCommandLine(CompileOptions &o) {
  Binder &b = binder();
  bindImportOptions(b, o);
  bindStepOptions(b, o.train, o.fsdp);
  bindSaverOptions(b, o.raw);
  bindReportOptions(b, o);
}

void fsdp::driver::recordGivenFlags(CompileOptions &o) {
  o.givenFlags.clear();
  for (const auto &flag : binder().flags)
    if (flag->getNumOccurrences() > 0)
      o.givenFlags.push_back(flag->ArgStr.str());
}

bool CompileOptions::given(llvm::StringRef name) const {
  return llvm::is_contained(givenFlags, name);
}

std::string fsdp::driver::planDtypeName(llvm::StringRef dtype) {
  if (dtype == "fp16")
    return std::string(plan::info(plan::DType::F16).name);
  if (dtype == "fp32")
    return std::string(plan::info(plan::DType::F32).name);
  if (dtype == "bf16")
    return std::string(plan::info(plan::DType::BF16).name);
  return "";
}
