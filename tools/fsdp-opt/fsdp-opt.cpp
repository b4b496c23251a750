//===- fsdp-opt.cpp - the fsdp-opt compiler driver -------------------------===//
//
// Behaves like mlir-opt on `.mlir` input. A TorchScript archive (recognised by
// its content, whatever its name) is imported first; the pass pipeline then
// runs on the imported module.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Dialect/ATen/Gradients.h"
#include "fsdp/Import/TorchScript/Import.h"
#include "fsdp/InitAll.h"
#include "fsdp/Target/Plan/PlanEmitter.h"
#include "fsdp/Transforms/Passes.h"

#include "mlir/Bytecode/BytecodeWriter.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"
#include "llvm/Support/CommandLine.h"
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
    "optimizer", llvm::cl::desc("The optimizer: sgd or adamw"),
    llvm::cl::value_desc("NAME"), llvm::cl::cat(trainCategory));
static llvm::cl::opt<double> lrFlag("lr", llvm::cl::desc("Learning rate (1e-3)"),
                                    llvm::cl::init(1e-3),
                                    llvm::cl::cat(trainCategory));
static llvm::cl::opt<double> weightDecayFlag(
    "weight-decay",
    llvm::cl::desc("Weight decay (sgd: 0, adamw: 0.01; AdamW's is decoupled)"),
    llvm::cl::init(-1.0), llvm::cl::cat(trainCategory));
static llvm::cl::opt<double> momentumFlag("momentum",
                                          llvm::cl::desc("SGD momentum (0)"),
                                          llvm::cl::init(0.0),
                                          llvm::cl::cat(trainCategory));
static llvm::cl::opt<bool> nesterovFlag(
    "nesterov", llvm::cl::desc("SGD with Nesterov momentum"),
    llvm::cl::init(false), llvm::cl::cat(trainCategory));
static llvm::cl::opt<double> beta1Flag("beta1",
                                       llvm::cl::desc("AdamW beta1 (0.9)"),
                                       llvm::cl::init(0.9),
                                       llvm::cl::cat(trainCategory));
static llvm::cl::opt<double> beta2Flag("beta2",
                                       llvm::cl::desc("AdamW beta2 (0.999)"),
                                       llvm::cl::init(0.999),
                                       llvm::cl::cat(trainCategory));
static llvm::cl::opt<double> epsFlag("eps", llvm::cl::desc("AdamW eps (1e-8)"),
                                     llvm::cl::init(1e-8),
                                     llvm::cl::cat(trainCategory));

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
    for (const llvm::cl::Option *o :
         Flags{&optimizerFlag, &lrFlag, &weightDecayFlag, &momentumFlag,
               &nesterovFlag, &beta1Flag, &beta2Flag, &epsFlag,
               std::addressof(targetSpecs)})
      if (given(*o))
        return error("--" + o->ArgStr +
                     " needs --loss: the training step is built from a loss");
    return success();
  }
  if (!given(optimizerFlag))
    return error("--loss needs --optimizer sgd|adamw");
  if (optimizerFlag == "sgd") {
    for (const llvm::cl::Option *o : Flags{&beta1Flag, &beta2Flag, &epsFlag})
      if (given(*o))
        return error("--" + o->ArgStr + " applies to --optimizer adamw, not sgd");
  } else if (optimizerFlag == "adamw") {
    for (const llvm::cl::Option *o : Flags{&momentumFlag, &nesterovFlag})
      if (given(*o))
        return error("--" + o->ArgStr + " applies to --optimizer sgd, not adamw");
  }
  return success();
}

/// The fsdp-train-step pipeline the flags describe.
static void addTrainStep(PassManager &pm) {
  fsdp::TrainStepPipelineOptions options;
  options.loss = lossFlag;
  options.targets = std::vector<std::string>(targetSpecs.begin(),
                                             targetSpecs.end());
  options.optimizer = optimizerFlag;
  options.lr = lrFlag;
  options.weightDecay = weightDecayFlag;
  options.momentum = momentumFlag;
  options.nesterov = nesterovFlag;
  options.beta1 = beta1Flag;
  options.beta2 = beta2Flag;
  options.eps = epsFlag;
  fsdp::buildTrainStepPipeline(pm, options);
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

  PassManager pm(&context, ModuleOp::getOperationName());
  pm.enableTiming(timing);
  if (wantsTrainStep())
    addTrainStep(pm);
  if (failed(applyPassManagerCLOptions(pm)) ||
      failed(config.setupPassPipeline(pm)) || failed(pm.run(*module)))
    return failure();

  std::string error;
  std::unique_ptr<llvm::ToolOutputFile> output =
      openOutputFile(outputFilename, &error);
  if (!output) {
    llvm::errs() << "error: " << error << "\n";
    return failure();
  }
  TimingScope outputTiming = timing.nest("Output");
  if (emitKind == EmitKind::Plan) {
    // The whole training step when there is one, else the forward.
    llvm::StringRef entry =
        module->lookupSymbol("train_step") ? "train_step" : "forward";
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

  if (emitKind == EmitKind::Plan || wantsTrainStep())
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
