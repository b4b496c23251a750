//===- Compile.cpp - fsdp-opt's compilation --------------------------------===//
//
// A TorchScript archive (recognised by its content, whatever its name) is
// imported first; the pass pipeline then runs on the imported module, and
// the reports and the output are written. On MLIR input with nothing of
// fsdp-opt's own asked, this is mlir-opt.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Driver/Compile.h"
#include "fsdp/Driver/Workspaces.h"
#include "fsdp/runtime/Launcher.h"
#include "fsdp/Analysis/MemoryModel.h"
#include "fsdp/Import/Import.h"
#include "fsdp/Support/Files.h"
#include "fsdp/Target/Plan/PlanEmitter.h"
#include "fsdp/Transforms/Report.h"

#include "mlir/Bytecode/BytecodeWriter.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <unistd.h>

using namespace mlir;
using namespace fsdp;
using namespace fsdp::driver;

namespace {

/// An output file written whole or not at all. A regular file (or a new
/// one) is written to LLVM's TempFile beside it (removed on an error or a
/// signal) and renamed over it at commit, so that an error, a symlink or a
/// full disk never leaves half a file and never writes through a link; a
/// device or pipe (`/dev/null`) is written in place. A write error is
/// reported, never fatal. The input is never an output.
class OutputFile {
public:
  /// "-": standard output.
  static FailureOr<std::unique_ptr<OutputFile>>
  open(const std::string &path, const std::string &input) {
    auto file = std::unique_ptr<OutputFile>(new OutputFile(path));
    if (path == "-") {
      file->stream = std::make_unique<llvm::raw_fd_ostream>(
          STDOUT_FILENO, /*shouldClose=*/false);
      return file;
    }
    if (input != "-" && llvm::sys::fs::exists(path) &&
        llvm::sys::fs::equivalent(input, path))
      return error("the output '" + path + "' is the input '" + input +
                   "': write the result to another file");
    llvm::sys::fs::file_status status;
    bool special = !llvm::sys::fs::status(path, status) &&
                   status.type() != llvm::sys::fs::file_type::regular_file &&
                   status.type() != llvm::sys::fs::file_type::file_not_found;
    if (special && status.type() == llvm::sys::fs::file_type::directory_file)
      return error("the output '" + path + "' is a directory");
    if (special) {
      int fd = -1;
      if (std::error_code ec = llvm::sys::fs::openFileForWrite(
              path, fd, llvm::sys::fs::CD_OpenExisting))
        return error("cannot open output file '" + path + "': " +
                     ec.message());
      file->stream =
          std::make_unique<llvm::raw_fd_ostream>(fd, /*shouldClose=*/true);
      return file;
    }
    llvm::SmallString<256> model(path);
    llvm::sys::path::remove_filename(model);
    llvm::sys::path::append(
        model, "." + llvm::sys::path::filename(path).str() + ".tmp-%%%%%%");
    llvm::Expected<llvm::sys::fs::TempFile> temporary =
        llvm::sys::fs::TempFile::create(model);
    if (!temporary)
      return error("cannot open output file '" + path + "': " +
                   llvm::toString(temporary.takeError()));
    file->temporary.emplace(std::move(*temporary));
    // The TempFile closes its descriptor when kept or discarded.
    file->stream = std::make_unique<llvm::raw_fd_ostream>(
        file->temporary->FD, /*shouldClose=*/false);
    return file;
  }

  ~OutputFile() {
    if (stream)
      stream->clear_error();
    stream.reset();
    if (temporary)
      llvm::consumeError(temporary->discard());
  }

  llvm::raw_ostream &os() { return *stream; }

  /// Flushes and closes, then puts the file in place; an error names the
  /// output and says why (a full disk, a closed pipe).
  LogicalResult commit() {
    if (path != "-" && !temporary)
      stream->close();
    else
      stream->flush();
    if (std::error_code ec = stream->error()) {
      stream->clear_error();
      return error("cannot write '" + path + "': " + ec.message());
    }
    if (!temporary)
      return success();
    llvm::Error kept = temporary->keep(path);
    temporary.reset();
    if (kept)
      return error("cannot write '" + path + "': " +
                   llvm::toString(std::move(kept)));
    return success();
  }

private:
  explicit OutputFile(std::string path) : path(std::move(path)) {}
  std::string path;
  std::optional<llvm::sys::fs::TempFile> temporary;
  std::unique_ptr<llvm::raw_fd_ostream> stream;
};

/// The training step's pipeline; `differentiated`: the module already has
/// its loss and backward (a budget search ran them to choose).
void addTrainStep(const CompileOptions &o, PassManager &pm,
                  bool differentiated) {
  if (!o.fsdp.enabled) {
    TrainStepPipelineOptions options;
    toPipelineOptions(o, options);
    buildTrainStepPipeline(pm, options);
    return;
  }
  FSDPPipelineOptions options;
  toPipelineOptions(o, options);
  if (differentiated)
    buildShardedStepPipeline(pm, options);
  else
    buildFSDPPipeline(pm, options);
}

/// Appends the loss and differentiates `module`, for a search to choose on.
LogicalResult differentiate(const FSDPPipelineOptions &options,
                            ModuleOp module, TimingScope &timing) {
  PassManager pm(module.getContext(), ModuleOp::getOperationName());
  pm.enableTiming(timing);
  buildLossAndBackwardPipeline(pm, options);
  return pm.run(module);
}

/// --auto-wrap budget: differentiates `module`, then chooses size-based
/// wrapping and a backward prefetch mode whose predicted peak fits the
/// budget (fsdp/Transforms/MemoryBudget.h), and sets them.
LogicalResult chooseUnderBudget(CompileOptions &o, ModuleOp module,
                                TimingScope &timing) {
  FSDPPipelineOptions options;
  toPipelineOptions(o, options);
  if (failed(differentiate(options, module, timing)))
    return failure();
  TimingScope choosing = timing.nest("Choose units under --memory-budget");
  FailureOr<BudgetChoice> choice =
      chooseWrappingUnderBudget(module, options, o.fsdp.memoryBudget);
  if (failed(choice))
    return failure();
  FSDPSettings &s = o.fsdp;
  s.autoWrap = "size";
  s.minNumParams = choice->minNumParams;
  s.backwardPrefetch = choice->backwardPrefetch;
  s.budgetChoice = *choice;
  return success();
}

/// --offload auto: differentiates `module`, then offloads as little as
/// makes the predicted device peak fit the budget.
LogicalResult chooseOffload(CompileOptions &o, ModuleOp module,
                            TimingScope &timing) {
  FSDPPipelineOptions options;
  toPipelineOptions(o, options);
  if (failed(differentiate(options, module, timing)))
    return failure();
  TimingScope choosing =
      timing.nest("Choose CPU offload under --memory-budget");
  FailureOr<OffloadChoice> choice =
      chooseOffloadUnderBudget(module, options, o.fsdp.memoryBudget);
  if (failed(choice))
    return failure();
  o.fsdp.offloadChoice = *choice;
  return success();
}

/// --savers auto (--memory-budget alone): differentiates `module`, then
/// chooses every saver together (fsdp/Transforms/MemoryBudget.h) and sets
/// them, so that the pipeline compiles what the flags of the choice would.
LogicalResult chooseSavers(CompileOptions &o, ModuleOp module,
                           TimingScope &timing) {
  FSDPPipelineOptions options;
  toPipelineOptions(o, options);
  if (failed(differentiate(options, module, timing)))
    return failure();
  TimingScope choosing = timing.nest("Choose the savers under --memory-budget");
  FailureOr<SaverSearch> search = chooseSaversUnderBudget(
      module, options, o.fsdp.memoryBudget, o.machineRates);
  if (failed(search))
    return failure();
  const SaverChoice &c = search->chosen;
  FSDPSettings &s = o.fsdp;
  s.autoWrap = "size";
  s.autoWrapReason = "--memory-budget (--savers auto)";
  s.minNumParams = c.minNumParams;
  s.backwardPrefetch = c.backwardPrefetch;
  s.forwardPrefetch = c.forwardPrefetch;
  s.limitAllGathers = c.limitAllGathers;
  o.train.activationCheckpointing = c.checkpoint == "units";
  o.train.acClasses.clear();
  o.train.acModules.clear();
  if (!c.checkpoint.empty() && c.checkpoint != "units")
    o.train.acClasses.push_back(c.checkpoint);
  s.offloadParams = false;
  s.offloadUnits = c.offloadUnits;
  s.offloadOptimUnits = c.offloadOptimUnits;
  s.saverSearch = std::move(*search);
  return success();
}

/// How the flags ask for activation checkpointing; empty where they do not.
std::string checkpointingRequest(const TrainOptions &t) {
  SmallVector<std::string> parts;
  if (t.activationCheckpointing)
    parts.push_back("--activation-checkpointing");
  for (const std::string &c : t.acClasses)
    parts.push_back("--ac-class " + c);
  for (const std::string &m : t.acModules)
    parts.push_back("--ac-module " + (m.empty() ? std::string("''") : m));
  return llvm::join(parts, " ");
}

/// Activation checkpointing asked for: the step compiled again from
/// `plain` (the module as the pipeline found it) without it, and a warning
/// where the checkpointed step's predicted peak is not the lower one.
LogicalResult checkCheckpointing(const CompileOptions &o, ModuleOp step,
                                 ModuleOp plain, bool differentiated,
                                 TimingScope &timing) {
  TimingScope scope = timing.nest("Predict the peak without checkpointing");
  CompileOptions without = o;
  without.train.activationCheckpointing = false;
  without.train.acClasses.clear();
  without.train.acModules.clear();
  PassManager pm(plain.getContext(), ModuleOp::getOperationName());
  addTrainStep(without, pm, differentiated);
  if (failed(pm.run(plain)))
    return failure();
  auto withFunc = step.lookupSymbol<func::FuncOp>("train_step");
  auto withoutFunc = plain.lookupSymbol<func::FuncOp>("train_step");
  if (!withFunc || !withoutFunc)
    return success();
  FailureOr<MemoryPrediction> with = predictMemory(step, withFunc);
  FailureOr<MemoryPrediction> base = predictMemory(plain, withoutFunc);
  if (failed(with) || failed(base))
    return failure();
  if (with->peakBytes < base->peakBytes)
    return success();
  emitWarning(step.getLoc())
      << checkpointingRequest(o.train)
      << (with->peakBytes == base->peakBytes ? " does not lower"
                                             : " raises")
      << " the predicted peak: " << formatBytes(with->peakBytes) << " ("
      << with->peakBytes << " bytes) with it, "
      << formatBytes(base->peakBytes) << " (" << base->peakBytes
      << " bytes) without; --memory-report shows what is live at the peak";
  return success();
}

/// The import options: --input specs and, with mixed precision, the dtypes
/// the importer types the step in.
FailureOr<ImportOptions> importOptions(const CompileOptions &o,
                                       const std::string &inputFilename,
                                       bool isModel) {
  ImportOptions options;
  for (const std::string &text : o.inputs) {
    InputSpec spec;
    std::string message;
    if (!parseInputSpec(text, spec, message))
      return error(message);
    // Which of two types the input has would be a guess.
    for (const InputSpec &earlier : options.inputs)
      if (earlier.name == spec.name)
        return error("--input gives '" + spec.name + "' twice");
    options.inputs.push_back(spec);
  }
  if (!o.fsdp.enabled)
    return options;
  // The importer types the step in reduced precision only (fp32 is the
  // model's own).
  for (auto [from, to] : {std::pair(&o.fsdp.paramDtype, &options.paramDtype),
                          std::pair(&o.fsdp.bufferDtype, &options.bufferDtype)})
    if (*from != "fp32")
      *to = planDtypeName(*from);
  if (!isModel &&
      (!options.paramDtype.empty() || !options.bufferDtype.empty()))
    return error("--param-dtype and --buffer-dtype apply when importing a "
                 "model (the importer types the step in them); '" +
                 inputFilename + "' is MLIR");
  return options;
}

/// Module paths of offloaded units for the report; the root's is empty.
std::string unitNames(const std::vector<std::string> &units) {
  std::vector<std::string> shown;
  for (const std::string &u : units)
    shown.push_back(u.empty() ? "(root)" : u);
  return llvm::join(shown, ",");
}

/// One plan of the savers search: its settings, peak and step time.
std::string describeChoice(const SaverChoice &c) {
  std::string out;
  llvm::raw_string_ostream os(out);
  os << c.units << (c.units == 1 ? " unit" : " units") << " (min_num_params "
     << c.minNumParams << "), " << c.backwardPrefetch
     << (c.forwardPrefetch ? ", forward prefetch" : "")
     << ", limit_all_gathers " << c.limitAllGathers << ", checkpointing "
     << (c.checkpoint.empty()      ? std::string("none")
         : c.checkpoint == "units" ? std::string("every unit")
                                   : "every " + c.checkpoint)
     << ", offload ";
  if (c.offloadUnits.empty() && c.offloadOptimUnits.empty())
    os << "none";
  else
    os << "optimizer state of [" << unitNames(c.offloadOptimUnits)
       << "], parameters of [" << unitNames(c.offloadUnits) << "]";
  os << ": peak " << formatBytes(c.peakBytes) << ", step "
     << formatSeconds(c.stepSeconds);
  return out;
}

/// What a saver buys: the peak and step time without it, against with.
std::string tradeOff(const SaverChoice &with, const SaverChoice &without) {
  return "saves " + formatBytes(without.peakBytes - with.peakBytes) +
         " of peak, costs " +
         formatSeconds(std::max(0.0, with.stepSeconds - without.stepSeconds)) +
         " a step";
}

/// --fsdp-report's lines on what chose the units and the offload.
void printChoices(const FSDPSettings &s, llvm::raw_ostream &os) {
  if (const auto &search = s.saverSearch) {
    os << "savers chosen by: --memory-budget " << formatBytes(s.memoryBudget)
       << " (--savers auto): the fastest predicted of the "
       << search->fitting << " plans that fit, of " << search->tried
       << " compiled\n";
    os << "  chosen:    " << describeChoice(search->chosen) << "\n";
    os << "  flags:     " << saverFlags(search->chosen) << "\n";
    if (search->withoutCheckpoint)
      os << "  checkpointing " << tradeOff(search->chosen,
                                            *search->withoutCheckpoint)
         << "\n";
    if (search->withoutOffload)
      os << "  offload " << tradeOff(search->chosen, *search->withoutOffload)
         << "\n";
    if (search->runnerUp)
      os << "  runner-up: " << describeChoice(*search->runnerUp) << "\n";
    os << "  without savers (the options' own wrapping, no checkpointing or "
          "offload): peak "
       << formatBytes(search->baseline.peakBytes) << ", step "
       << formatSeconds(search->baseline.stepSeconds) << "\n";
  }
  os << "units chosen by: " << s.autoWrap;
  if (const auto &b = s.budgetChoice)
    os << " (budget " << formatBytes(s.memoryBudget) << ": min_num_params "
       << b->minNumParams << " and " << b->backwardPrefetch << ", " << b->units
       << (b->units == 1 ? " unit" : " units") << " and " << b->collectives
       << " collectives, predicted peak " << formatBytes(b->peakBytes)
       << "; the first of " << b->tried
       << " wrappings tried, from the fewest units, to fit)";
  else if (s.autoWrap == "size")
    os << " (min_num_params " << s.minNumParams << ")";
  else if (s.autoWrap == "class")
    os << " (" << llvm::join(s.wrapClasses, ",") << ")";
  os << ", from " << s.autoWrapReason << "\n";
  const auto &c = s.offloadChoice;
  if (!c)
    return;
  os << "cpu offload chosen by: --offload auto (budget "
     << formatBytes(s.memoryBudget) << "): ";
  if (c->optimUnits.empty() && c->paramUnits.empty())
    os << "nothing (the predicted peak "
       << formatBytes(c->unoffloadedPeakBytes) << " fits)";
  else
    os << "optimizer state of " << c->optimUnits.size() << " of " << c->units
       << " units [" << unitNames(c->optimUnits) << "], parameters of "
       << c->paramUnits.size() << " [" << unitNames(c->paramUnits)
       << "]; predicted device peak " << formatBytes(c->unoffloadedPeakBytes)
       << " -> " << formatBytes(c->peakBytes) << ", host peak "
       << formatBytes(c->hostPeakBytes) << "; the first of " << c->tried
       << " plans tried, largest units first, to fit";
  os << "\n";
}

FailureOr<InputFileKind> modelFileKind(const std::string &inputFilename);

/// The parameters and buffers of an imported model, by name.
llvm::MapVector<StringRef, Operation *> stateSymbols(ModuleOp module) {
  llvm::MapVector<StringRef, Operation *> symbols;
  for (Operation &op : module.getBody()->getOperations())
    if (isa<ParamOp, BufferOp>(op))
      symbols[cast<SymbolOpInterface>(op).getName()] = &op;
  return symbols;
}

std::string describeState(Operation *op) {
  std::string text;
  llvm::raw_string_ostream os(text);
  os << (isa<ParamOp>(op) ? "parameter '" : "buffer '")
     << cast<SymbolOpInterface>(op).getName() << "' ("
     << (isa<ParamOp>(op) ? cast<ParamOp>(op).getType()
                          : cast<BufferOp>(op).getType())
     << ")";
  return text;
}

/// --eval-model: the model in evaluation mode, imported as the training
/// model was; its forward becomes @eval_forward of `module`, which the
/// evaluation step is made from. The two must hold the same parameters and
/// buffers, each with one type.
LogicalResult addEvalModel(const CompileOptions &o, ModuleOp module,
                           const ImportOptions &options,
                           const std::string &inputFilename,
                           TimingScope &timing) {
  const std::string &path = o.evalModel;
  if (!o.wantsTrainStep())
    return error("--eval-model gives the evaluation step of a training "
                 "step: it needs --loss");
  FailureOr<InputFileKind> kind = modelFileKind(path);
  if (failed(kind))
    return failure();
  if (*kind != InputFileKind::TorchScript &&
      *kind != InputFileKind::ExportedProgram)
    return error("--eval-model '" + path +
                 "' is not a TorchScript or torch.export archive");
  TimingScope scope = timing.nest("Import the model in evaluation mode");
  ImportOptions evalOptions = options;
  evalOptions.timing = &scope;
  OwningOpRef<ModuleOp> eval =
      *kind == InputFileKind::TorchScript
          ? importTorchScript(path, evalOptions, module.getContext())
          : importExportedProgram(path, evalOptions, module.getContext());
  if (!eval)
    return failure();
  auto trained = stateSymbols(module), evaluated = stateSymbols(*eval);
  for (auto [name, op] : evaluated) {
    Operation *other = trained.lookup(name);
    if (!other)
      return error("--eval-model '" + path + "' holds " + describeState(op) +
                   ", which '" + inputFilename +
                   "' does not: the two must be the same model, exported "
                   "in the two modes");
    if (describeState(op) != describeState(other))
      return error("--eval-model '" + path + "' holds " + describeState(op) +
                   " where '" + inputFilename + "' holds " +
                   describeState(other));
  }
  for (auto [name, op] : trained)
    if (!evaluated.count(name))
      return error("'" + inputFilename + "' holds " + describeState(op) +
                   ", which --eval-model '" + path +
                   "' does not: the two must be the same model, exported "
                   "in the two modes");
  auto forward = (*eval).lookupSymbol<func::FuncOp>("forward");
  if (!forward)
    return error("--eval-model '" + path + "' has no forward");
  if (module.lookupSymbol(kEvalForwardName))
    return error("'" + inputFilename + "' already has an @" +
                 kEvalForwardName.str());
  forward->remove();
  forward.setSymName(kEvalForwardName);
  module.push_back(forward);
  return success();
}

/// Imports (or parses) the input and runs the budget searches and the
/// pipeline on it.
OwningOpRef<ModuleOp> buildModule(CompileOptions &o, MLIRContext &context,
                                  llvm::SourceMgr &sourceMgr,
                                  const std::string &inputFilename,
                                  const MlirOptMainConfig &config,
                                  InputFileKind kind, TimingScope &timing) {
  bool isModel = kind == InputFileKind::TorchScript ||
                 kind == InputFileKind::ExportedProgram;
  FailureOr<ImportOptions> options = importOptions(o, inputFilename, isModel);
  if (failed(options))
    return nullptr;
  TimingScope importTiming = timing.nest(
      kind == InputFileKind::ExportedProgram ? "Import torch.export program"
                                             : "Import TorchScript");
  options->timing = &importTiming;
  OwningOpRef<ModuleOp> module;
  if (kind == InputFileKind::TorchScript)
    module = importTorchScript(inputFilename, *options, &context);
  else if (kind == InputFileKind::ExportedProgram)
    module = importExportedProgram(inputFilename, *options, &context);
  else
    module = parseSourceFile<ModuleOp>(inputFilename, sourceMgr,
                                       ParserConfig(&context));
  importTiming.stop();
  if (!module)
    return nullptr;
  if (!o.evalModel.empty() &&
      (!isModel ||
       failed(addEvalModel(o, *module, *options, inputFilename, timing)))) {
    if (!isModel)
      (void)error("--eval-model applies to a model file, but '" +
                  inputFilename + "' is MLIR");
    return nullptr;
  }
  bool train = o.wantsTrainStep() && o.fsdp.enabled;
  bool budget = train && o.fsdp.autoWrap == "budget";
  if (budget && failed(chooseUnderBudget(o, *module, timing)))
    return nullptr;
  bool offloadAuto = train && o.fsdp.offloadAuto;
  if (offloadAuto && failed(chooseOffload(o, *module, timing)))
    return nullptr;
  bool savers = train && o.fsdp.saversAuto;
  if (savers && failed(chooseSavers(o, *module, timing)))
    return nullptr;
  PassManager pm(&context, ModuleOp::getOperationName());
  pm.enableTiming(timing);
  bool differentiated = budget || offloadAuto || savers;
  if (o.wantsTrainStep())
    addTrainStep(o, pm, differentiated);
  // Checkpointing asked for is checked against the same step without it
  // (the search compared them already).
  OwningOpRef<ModuleOp> plain;
  if (o.wantsTrainStep() && !savers && !checkpointingRequest(o.train).empty())
    plain = module->clone();
  if (failed(applyPassManagerCLOptions(pm)) ||
      failed(config.setupPassPipeline(pm)) || failed(pm.run(*module)))
    return nullptr;
  if (plain && failed(checkCheckpointing(o, *module, *plain, differentiated,
                                         timing)))
    return nullptr;
  // The checkpoint kind an Accelerate file chose, for fsdp-run.
  if (!o.fsdp.stateDictType.empty())
    (*module)->setAttr(kStateDictTypeAttr,
                       StringAttr::get(&context, o.fsdp.stateDictType));
  return module;
}

/// The reports on the standard streams: the FSDP report, the memory report.
/// The memory prediction is returned for the JSON file.
FailureOr<std::optional<MemoryReport>>
printReports(const CompileOptions &o, ModuleOp module, llvm::StringRef entry,
             const std::string &outputFilename) {
  llvm::raw_ostream &os = outputFilename == "-" ? llvm::errs() : llvm::outs();
  if (o.fsdpReport) {
    printFSDPReport(module, os);
    printChoices(o.fsdp, os);
    printScheduleReport(module, os);
  }
  // One prediction for the text report and the JSON.
  std::optional<MemoryReport> memory;
  if (o.memoryReport || !o.memoryReportJSON.empty()) {
    FailureOr<MemoryReport> report =
        predictMemoryReport(module, entry, o.machineRates,
                            /*operandLayouts=*/o.measureWorkspaces ||
                                o.measureKernels);
    if (failed(report))
      return failure();
    if ((o.measureWorkspaces || o.measureKernels) &&
        failed(measureWorkspaces(
            module, entry, *report,
            o.workspaceThreads > 0
                ? o.workspaceThreads
                : runtime::threadsPerRank(report->worldSize),
            kWorkspaceBudgetBytes, o.measureKernels)))
      return failure();
    memory = std::move(*report);
  }
  if (o.memoryReport)
    printMemoryReport(*memory, os);
  return memory;
}

LogicalResult writeModule(const CompileOptions &o, ModuleOp module,
                          llvm::StringRef entry,
                          const MlirOptMainConfig &config,
                          llvm::raw_ostream &os) {
  if (o.emit == EmitKind::Plan)
    return emitPlan(module, entry, os);
  if (config.shouldEmitBytecode())
    return writeBytecodeToFile(module, os);
  module.print(os, OpPrintingFlags());
  os << "\n";
  return success();
}

/// Imports a model file (or parses MLIR), runs the pipeline, writes the
/// result. Any error leaves no output file behind.
LogicalResult compileModule(CompileOptions &o, const std::string &inputFilename,
                            const std::string &outputFilename,
                            DialectRegistry &registry,
                            const MlirOptMainConfig &config,
                            InputFileKind kind) {
  DefaultTimingManager timingManager;
  applyDefaultTimingManagerCLOptions(timingManager);
  TimingScope timing = timingManager.getRootScope();
  MLIRContext context(registry);
  context.loadAllAvailableDialects();
  // A model's user gets the message, not a dump of the IR it was found in.
  if (kind != InputFileKind::Other)
    context.printOpOnDiagnostic(false);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  OwningOpRef<ModuleOp> module = buildModule(
      o, context, sourceMgr, inputFilename, config, kind, timing);
  if (!module)
    return failure();

  FailureOr<std::unique_ptr<OutputFile>> output =
      OutputFile::open(outputFilename, inputFilename);
  if (failed(output))
    return failure();
  // The whole training step when there is one, else the forward.
  llvm::StringRef entry =
      module->lookupSymbol("train_step") ? "train_step" : "forward";
  FailureOr<std::optional<MemoryReport>> memory =
      printReports(o, *module, entry, outputFilename);
  if (failed(memory))
    return failure();
  std::unique_ptr<OutputFile> memoryJSON;
  if (!o.memoryReportJSON.empty()) {
    if (outputFilename != "-" && o.memoryReportJSON == outputFilename)
      return error("--memory-report-json names the output '" +
                   outputFilename + "': write the report to another file");
    FailureOr<std::unique_ptr<OutputFile>> json =
        OutputFile::open(o.memoryReportJSON, inputFilename);
    if (failed(json))
      return failure();
    memoryJSON = std::move(*json);
    writeMemoryReportJSON(**memory, memoryJSON->os());
  }
  TimingScope outputTiming = timing.nest("Output");
  if (failed(writeModule(o, *module, entry, config, (*output)->os())) ||
      failed((*output)->commit()))
    return failure();
  if (memoryJSON && failed(memoryJSON->commit()))
    return failure();
  return success();
}

/// What the input file is, with an error for a file that cannot be a model
/// fsdp-opt reads.
FailureOr<InputFileKind> modelFileKind(const std::string &inputFilename) {
  if (inputFilename == "-")
    return InputFileKind::Other;
  if (!llvm::sys::fs::exists(inputFilename))
    return error("no such file: '" + inputFilename + "'");
  // A pipe or a device as the model would block or never end.
  if (llvm::Error err = checkInputFile(inputFilename))
    return error("cannot read '" + inputFilename +
                 "': " + llvm::toString(std::move(err)));
  switch (classifyInputFile(inputFilename)) {
  case InputFileKind::TorchScript:
    return InputFileKind::TorchScript;
  case InputFileKind::ExportedProgram:
    return InputFileKind::ExportedProgram;
  case InputFileKind::OtherZip:
    return error("'" + inputFilename +
                 "' is a zip archive but neither TorchScript (it has no "
                 "constants.pkl) nor a torch.export archive (no "
                 "archive_format): save the model with torch.export.save, "
                 "or with torch.jit.save after torch.jit.trace or "
                 "torch.jit.script");
  case InputFileKind::CorruptZip:
    return error("'" + inputFilename +
                 "' is a truncated or corrupt zip archive (no central "
                 "directory), not a readable TorchScript model");
  case InputFileKind::Other: {
    llvm::StringRef ext = llvm::sys::path::extension(inputFilename);
    if (ext == ".pt" || ext == ".pth" || ext == ".ptl")
      return error("'" + inputFilename +
                   "' is not a TorchScript archive (not a zip file); save the "
                   "model with torch.jit.save");
    return InputFileKind::Other;
  }
  }
  return InputFileKind::Other;
}

/// mlir-opt on an MLIR file.
int runMlirOpt(const std::string &inputFilename,
               const std::string &outputFilename, DialectRegistry &registry,
               const MlirOptMainConfig &config) {
  if (inputFilename != "-")
    if (llvm::Error err = checkInputFile(inputFilename))
      return failed(error("cannot read '" + inputFilename +
                          "': " + llvm::toString(std::move(err))));
  std::string message;
  std::unique_ptr<llvm::MemoryBuffer> file =
      openInputFile(inputFilename, &message);
  if (!file)
    return failed(error(message));
  FailureOr<std::unique_ptr<OutputFile>> output =
      OutputFile::open(outputFilename, inputFilename);
  if (failed(output))
    return 1;
  if (failed(MlirOptMain((*output)->os(), std::move(file), registry, config)))
    return 1;
  return failed((*output)->commit());
}

} // namespace

int fsdp::driver::compileFile(CompileOptions &o,
                              const std::string &inputFilename,
                              const std::string &outputFilename,
                              DialectRegistry &registry,
                              const MlirOptMainConfig &config) {
  FailureOr<InputFileKind> kind = modelFileKind(inputFilename);
  if (failed(kind))
    return 1;
  if (*kind != InputFileKind::Other)
    return failed(compileModule(o, inputFilename, outputFilename, registry,
                                config, *kind));
  if (!o.inputs.empty())
    return failed(error("--input applies to a model file only, but '" +
                        inputFilename + "' is not a TorchScript or "
                        "torch.export archive"));
  if (o.emit == EmitKind::Plan || o.wantsTrainStep() || o.memoryReport ||
      !o.memoryReportJSON.empty())
    return failed(compileModule(o, inputFilename, outputFilename, registry,
                                config, InputFileKind::Other));
  return runMlirOpt(inputFilename, outputFilename, registry, config);
}

int fsdp::driver::calibrate(const CompileOptions &o,
                            const std::string &outputFilename,
                            const char *argv0) {
  if (outputFilename == "-") {
    (void)error("--calibrate writes a machine file: name it with -o FILE");
    return 1;
  }
  std::string self = llvm::sys::fs::getMainExecutable(
      argv0, reinterpret_cast<void *>(&fsdp::driver::calibrate));
  llvm::SmallString<256> runner(llvm::sys::path::parent_path(self));
  llvm::sys::path::append(runner, "fsdp-run");
  if (!llvm::sys::fs::can_execute(runner)) {
    (void)error("--calibrate runs fsdp-run, which is not beside fsdp-opt (" +
                runner.str() + ")");
    return 1;
  }
  std::string ranks =
      std::to_string(o.given("world-size") ? o.fsdp.worldSize : 2);
  std::string file = outputFilename;
  llvm::SmallVector<llvm::StringRef> args = {runner, "--calibrate", file,
                                             "--nproc", ranks};
  std::string why;
  int status = llvm::sys::ExecuteAndWait(runner, args, std::nullopt, {}, 0, 0,
                                         &why);
  if (status < 0)
    (void)error("--calibrate: cannot run " + runner.str() + ": " + why);
  return status == 0 ? 0 : 1;
}
