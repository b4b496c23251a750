//===- MemoryBudget.cpp - units chosen to fit a memory budget --------------===//

#include "fsdp/Transforms/MemoryBudget.h"
#include "fsdp/Transforms/Report.h"

#include "fsdp/Analysis/MemoryModel.h"
#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"

#include <limits>
#include <set>

using namespace mlir;
using namespace fsdp;

std::optional<int64_t> fsdp::parseByteSize(StringRef text) {
  text = text.trim();
  size_t digits = 0;
  while (digits < text.size() &&
         (llvm::isDigit(text[digits]) || text[digits] == '.'))
    ++digits;
  if (digits == 0)
    return std::nullopt;
  double value;
  if (text.take_front(digits).getAsDouble(value))
    return std::nullopt;
  StringRef unit = text.drop_front(digits).trim();
  static const std::pair<const char *, double> units[] = {
      {"", 1},        {"B", 1},          {"KiB", 1024.0},
      {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
      {"KB", 1e3},    {"MB", 1e6},       {"GB", 1e9},
      {"TB", 1e12}};
  for (auto [name, scale] : units)
    if (unit == name) {
      double bytes = value * scale;
      if (bytes < 0 || bytes > 9.2e18)
        return std::nullopt;
      return static_cast<int64_t>(bytes);
    }
  return std::nullopt;
}

/// The parameter counts of the module's subtrees (every prefix of every
/// parameter's module path), largest first: the size thresholds at which
/// size-based wrapping can change.
static SmallVector<int64_t> thresholds(ModuleOp module) {
  llvm::StringMap<int64_t> counts;
  int64_t total = 0;
  for (ParamOp param : module.getOps<ParamOp>()) {
    int64_t numel = param.getType().getNumElements();
    total += numel;
    StringRef path = param.getModulePath();
    counts[path] += numel;
    for (size_t dot = path.rfind('.'); dot != StringRef::npos;
         dot = path.rfind('.', dot - 1)) {
      counts[path.take_front(dot)] += numel;
      if (dot == 0)
        break;
    }
    if (!path.empty())
      counts[""] += numel;
  }
  std::set<int64_t, std::greater<int64_t>> distinct;
  // Above every subtree: the root alone.
  distinct.insert(total + 1);
  for (const auto &entry : counts)
    if (entry.second > 0)
      distinct.insert(entry.second);
  return SmallVector<int64_t>(distinct.begin(), distinct.end());
}

FailureOr<BudgetChoice>
fsdp::chooseWrappingUnderBudget(ModuleOp module,
                                const FSDPPipelineOptions &options,
                                int64_t budget) {
  SmallVector<std::string> modes = {options.backwardPrefetch};
  for (uint32_t k = 0; k <= getMaxEnumValForBackwardPrefetch(); ++k) {
    std::string mode = stringifyBackwardPrefetch(BackwardPrefetch(k)).str();
    if (!llvm::is_contained(modes, mode))
      modes.push_back(mode);
  }

  std::optional<BudgetChoice> smallest;
  std::set<std::vector<std::string>> seen;
  int64_t tried = 0;
  for (int64_t threshold : thresholds(module)) {
    bool newPartition = true;
    for (const std::string &mode : modes) {
      OwningOpRef<ModuleOp> copy = module.clone();
      FSDPPipelineOptions candidate;
      candidate.copyOptionValuesFrom(options);
      candidate.autoWrap = "size";
      candidate.minNumParams = threshold;
      candidate.backwardPrefetch = mode;
      PassManager pm(module.getContext(), ModuleOp::getOperationName());
      buildShardedStepPipeline(pm, candidate);
      if (failed(pm.run(*copy)))
        return failure();
      // The same units as a larger threshold gave: nothing new to try.
      std::vector<std::string> units;
      for (FlatParamOp flat : copy->getOps<FlatParamOp>())
        units.push_back(flat.getModulePath().str());
      if (mode == modes.front()) {
        newPartition = seen.insert(units).second;
        if (!newPartition)
          break;
      }
      auto step = copy->lookupSymbol<func::FuncOp>("train_step");
      if (!step)
        return module.emitError("--auto-wrap budget needs a training step "
                                "(--loss) to predict");
      FailureOr<MemoryPrediction> prediction = predictMemory(*copy, step);
      if (failed(prediction))
        return failure();
      ++tried;
      BudgetChoice choice;
      choice.minNumParams = threshold;
      choice.backwardPrefetch = mode;
      choice.peakBytes = prediction->peakBytes;
      choice.units = static_cast<int64_t>(units.size());
      step.walk([&](CollectiveStartOp) { ++choice.collectives; });
      if (!smallest || choice.peakBytes < smallest->peakBytes)
        smallest = choice;
      if (choice.peakBytes <= budget) {
        choice.tried = tried;
        return choice;
      }
    }
  }
  InFlightDiagnostic diag = module.emitError("no wrapping fits --memory-budget ")
                            << formatBytes(budget) << " (" << budget
                            << " bytes)";
  if (smallest)
    diag << ": the smallest predicted peak is "
         << formatBytes(smallest->peakBytes) << " (" << smallest->peakBytes
         << " bytes), with --min-num-params " << smallest->minNumParams
         << " (" << smallest->units
         << (smallest->units == 1 ? " unit" : " units")
         << ") and --backward-prefetch "
         << smallest->backwardPrefetch << "; " << tried
         << " wrappings tried";
  return diag;
}

FailureOr<OffloadChoice>
fsdp::chooseOffloadUnderBudget(ModuleOp module,
                               const FSDPPipelineOptions &options,
                               int64_t budget) {
  OffloadChoice choice;
  // Compiles the step offloading `optim` and `params`; the units it has,
  // largest first, in `units`.
  SmallVector<std::pair<int64_t, std::string>> units;
  auto predict = [&](ArrayRef<std::string> optim, ArrayRef<std::string> params)
      -> FailureOr<MemoryPrediction> {
    OwningOpRef<ModuleOp> copy = module.clone();
    FSDPPipelineOptions candidate;
    candidate.copyOptionValuesFrom(options);
    candidate.offloadParams = false;
    candidate.offloadOptimUnits = std::vector<std::string>(optim.begin(), optim.end());
    candidate.offloadUnits = std::vector<std::string>(params.begin(), params.end());
    PassManager pm(module.getContext(), ModuleOp::getOperationName());
    buildShardedStepPipeline(pm, candidate);
    if (failed(pm.run(*copy)))
      return failure();
    auto step = copy->lookupSymbol<func::FuncOp>("train_step");
    if (!step)
      return module.emitError("--offload auto needs a training step (--loss) "
                              "to predict");
    ++choice.tried;
    if (units.empty()) {
      for (FlatParamOp flat : copy->getOps<FlatParamOp>())
        units.push_back({flat.getPaddedNumel(), flat.getModulePath().str()});
      llvm::stable_sort(units, [](const auto &a, const auto &b) {
        return a.first > b.first;
      });
    }
    return predictMemory(*copy, step);
  };
  // The smallest device peak of any plan tried, for the error.
  int64_t smallest = std::numeric_limits<int64_t>::max();
  auto fits = [&](const MemoryPrediction &p, ArrayRef<std::string> optim,
                  ArrayRef<std::string> params) {
    smallest = std::min(smallest, p.peakBytes);
    if (p.peakBytes > budget)
      return false;
    choice.optimUnits.assign(optim.begin(), optim.end());
    choice.paramUnits.assign(params.begin(), params.end());
    choice.peakBytes = p.peakBytes;
    choice.hostPeakBytes = p.hostPeakBytes;
    return true;
  };
  FailureOr<MemoryPrediction> none = predict({}, {});
  if (failed(none))
    return failure();
  choice.units = static_cast<int64_t>(units.size());
  choice.unoffloadedPeakBytes = none->peakBytes;
  if (fits(*none, {}, {}))
    return choice;
  std::vector<std::string> names;
  for (const auto &unit : units)
    names.push_back(unit.second);
  // Optimizer state first, the largest units' first.
  for (size_t k = 1; k <= names.size(); ++k) {
    ArrayRef<std::string> optim(names.data(), k);
    FailureOr<MemoryPrediction> p = predict(optim, {});
    if (failed(p))
      return failure();
    if (fits(*p, optim, {}))
      return choice;
  }
  // Then parameters, the largest units' first.
  for (size_t k = 1; k <= names.size(); ++k) {
    ArrayRef<std::string> params(names.data(), k);
    ArrayRef<std::string> optim(names.data() + k, names.size() - k);
    FailureOr<MemoryPrediction> p = predict(optim, params);
    if (failed(p))
      return failure();
    if (fits(*p, optim, params))
      return choice;
  }
  return module.emitError("no CPU offload fits --memory-budget ")
         << formatBytes(budget) << " (" << budget
         << " bytes): the smallest predicted device peak is "
         << formatBytes(smallest) << " (" << smallest << " bytes; "
         << formatBytes(choice.unoffloadedPeakBytes)
         << " without offload, " << names.size()
         << (names.size() == 1 ? " unit" : " units") << "); "
         << choice.tried << " plans tried";
}
