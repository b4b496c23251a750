//===- MemoryBudget.cpp - units chosen to fit a memory budget --------------===//

#include "fsdp/Transforms/MemoryBudget.h"
#include "fsdp/Transforms/Report.h"

#include "fsdp/Analysis/MemoryModel.h"
#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cmath>
#include <limits>
#include <map>
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
      // A fraction of a byte (1.5) is a mistyped size, not 1.
      if (bytes < 0 || bytes > 9.2e18 || bytes != std::floor(bytes))
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

//===----------------------------------------------------------------------===//
// --savers auto: every saver chosen together
//===----------------------------------------------------------------------===//

namespace {

/// Module classes worth checkpointing: those with submodules and more than
/// one module (a model's blocks), in the order the model first has them.
SmallVector<std::string> checkpointClasses(ModuleOp module) {
  SmallVector<std::pair<std::string, std::string>> tree = moduleTree(module);
  llvm::StringMap<int> count, composite;
  SmallVector<std::string> order;
  for (auto &[path, cls] : tree) {
    if (path.empty())
      continue; // the root: checkpointing it keeps nothing
    if (count[cls]++ == 0)
      order.push_back(cls);
    if (llvm::any_of(tree, [&, &p = path](const auto &m) {
          return m.first != p && isWithinModule(m.first, p);
        }))
      ++composite[cls];
  }
  SmallVector<std::string> out;
  for (const std::string &cls : order)
    if (count[cls] > 1 && composite[cls] == count[cls])
      out.push_back(cls);
  return out;
}

/// What one candidate's plan predicts.
struct Predicted {
  int64_t peakBytes = 0;
  double stepSeconds = 0;
  /// Its units' module paths, largest first.
  SmallVector<std::pair<int64_t, std::string>> units;
};

/// Shards a copy of `module` with `options` and predicts its memory and
/// time. `quiet`: the pipeline's diagnostics are held back (a candidate it
/// refuses is only not a choice).
FailureOr<Predicted> predictPlan(ModuleOp module,
                                 const FSDPPipelineOptions &options,
                                 const MachineRates &machine, bool quiet) {
  OwningOpRef<ModuleOp> copy = module.clone();
  std::optional<ScopedDiagnosticHandler> silence;
  if (quiet)
    silence.emplace(module.getContext(),
                    [](Diagnostic &) { return success(); });
  // Verified once, at the end, not after every pass: a search compiles
  // dozens of candidates, and the verifier's walk of a large model after
  // each pass was a third of the search's time.
  PassManager pm(module.getContext(), ModuleOp::getOperationName());
  pm.enableVerifier(false);
  buildShardedStepPipeline(pm, options);
  if (failed(pm.run(*copy)) || failed(verify(*copy)))
    return failure();
  auto step = copy->lookupSymbol<func::FuncOp>("train_step");
  if (!step)
    return module.emitError("--memory-budget needs a training step "
                            "(--loss) to predict");
  FailureOr<MemoryPrediction> memory = predictMemory(*copy, step);
  if (failed(memory))
    return failure();
  FailureOr<TimePrediction> time = predictTime(*copy, step, machine);
  if (failed(time))
    return failure();
  Predicted out;
  out.peakBytes = memory->peakBytes;
  out.stepSeconds = time->stepSeconds;
  for (FlatParamOp flat : copy->getOps<FlatParamOp>())
    out.units.push_back({flat.getPaddedNumel(), flat.getModulePath().str()});
  llvm::stable_sort(out.units, [](const auto &a, const auto &b) {
    return a.first > b.first;
  });
  return out;
}

struct SaverSearcher {
  ModuleOp module;
  const FSDPPipelineOptions &options;
  const MachineRates &machine;
  std::vector<SaverChoice> tried;
  /// Each partition's units, largest first, by its threshold.
  std::map<int64_t, std::vector<std::string>> unitsOf;
  /// Progress on stderr once the search takes more than a few seconds.
  std::chrono::steady_clock::time_point started =
      std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point lastNote = started;

  void noteProgress() {
    auto now = std::chrono::steady_clock::now();
    if (now - lastNote < std::chrono::seconds(10))
      return;
    lastNote = now;
    int64_t least = std::numeric_limits<int64_t>::max();
    for (const SaverChoice &c : tried)
      least = std::min(least, c.peakBytes);
    llvm::errs() << "fsdp-opt: --memory-budget: " << tried.size()
                 << " plans compiled in "
                 << std::chrono::duration_cast<std::chrono::seconds>(
                        now - started)
                        .count()
                 << " s";
    if (!tried.empty())
      llvm::errs() << ", the smallest predicted peak so far "
                   << formatBytes(least);
    llvm::errs() << "\n";
  }

  /// Compiles and predicts `c`; its units (largest first) in `unitsOut`.
  /// `quiet`: a candidate the pipeline refuses is not an error, only not a
  /// choice.
  FailureOr<SaverChoice>
  evaluate(SaverChoice c, bool quiet,
           SmallVector<std::pair<int64_t, std::string>> *unitsOut = nullptr) {
    FSDPPipelineOptions candidate;
    candidate.copyOptionValuesFrom(options);
    candidate.autoWrap = "size";
    candidate.minNumParams = c.minNumParams;
    candidate.backwardPrefetch = c.backwardPrefetch;
    candidate.forwardPrefetch = c.forwardPrefetch;
    candidate.limitAllGathers = c.limitAllGathers;
    candidate.activationCheckpointing = c.checkpoint == "units";
    candidate.acClasses.clear();
    candidate.acModules.clear();
    if (!c.checkpoint.empty() && c.checkpoint != "units")
      candidate.acClasses = std::vector<std::string>{c.checkpoint};
    candidate.offloadParams = false;
    candidate.offloadUnits = c.offloadUnits;
    candidate.offloadOptimUnits = c.offloadOptimUnits;
    FailureOr<Predicted> p = predictPlan(module, candidate, machine, quiet);
    noteProgress();
    if (failed(p))
      return failure();
    c.units = static_cast<int64_t>(p->units.size());
    c.peakBytes = p->peakBytes;
    c.stepSeconds = p->stepSeconds;
    if (unitsOut)
      *unitsOut = std::move(p->units);
    tried.push_back(c);
    return c;
  }

  /// The unit boundaries of every threshold where they change: one choice
  /// per partition, with the options' schedule and no saver.
  FailureOr<SmallVector<SaverChoice>> partitions() {
    SmallVector<SaverChoice> out;
    std::set<std::vector<std::string>> seen;
    for (int64_t threshold : thresholds(module)) {
      SaverChoice c;
      c.minNumParams = threshold;
      c.backwardPrefetch = options.backwardPrefetch;
      c.forwardPrefetch = options.forwardPrefetch;
      c.limitAllGathers = options.limitAllGathers;
      SmallVector<std::pair<int64_t, std::string>> units;
      FailureOr<SaverChoice> e = evaluate(c, /*quiet=*/true, &units);
      if (failed(e))
        continue;
      std::vector<std::string> names;
      for (auto &u : units)
        names.push_back(u.second);
      llvm::sort(names);
      std::vector<std::string> largestFirst;
      for (auto &u : units)
        largestFirst.push_back(u.second);
      if (seen.insert(names).second) {
        out.push_back(*e);
        unitsOf[threshold] = std::move(largestFirst);
      }
      else
        tried.pop_back(); // the same plan as a larger threshold's
    }
    return out;
  }
};

/// The same units and schedule.
bool sameUnitsAndSchedule(const SaverChoice &a, const SaverChoice &b) {
  return a.minNumParams == b.minNumParams &&
         a.backwardPrefetch == b.backwardPrefetch &&
         a.forwardPrefetch == b.forwardPrefetch &&
         a.limitAllGathers == b.limitAllGathers;
}

bool offloads(const SaverChoice &c) {
  return !c.offloadUnits.empty() || !c.offloadOptimUnits.empty();
}

/// Faster first; at the same predicted time, the smaller peak.
bool better(const SaverChoice &a, const SaverChoice &b) {
  if (a.stepSeconds != b.stepSeconds)
    return a.stepSeconds < b.stepSeconds;
  return a.peakBytes < b.peakBytes;
}

} // namespace

std::string fsdp::saverFlags(const SaverChoice &c) {
  std::string out = "--auto-wrap size --min-num-params " +
                    std::to_string(c.minNumParams) + " --backward-prefetch " +
                    c.backwardPrefetch;
  if (c.forwardPrefetch)
    out += " --forward-prefetch";
  out += " --limit-all-gathers " + std::to_string(c.limitAllGathers);
  if (c.checkpoint == "units")
    out += " --activation-checkpointing";
  else if (!c.checkpoint.empty())
    out += " --ac-class " + c.checkpoint;
  auto quoted = [](const std::string &unit) {
    return unit.empty() ? std::string("''") : unit;
  };
  for (const std::string &u : c.offloadOptimUnits)
    out += " --offload-optim-unit " + quoted(u);
  // Every unit's parameters: FSDP's own flag, not one per unit (a
  // thousand-layer model's line stays readable).
  if (c.units > 0 && static_cast<int64_t>(c.offloadUnits.size()) == c.units) {
    out += " --offload-params";
    return out;
  }
  for (const std::string &u : c.offloadUnits)
    out += " --offload-unit " + quoted(u);
  return out;
}

FailureOr<SaverSearch>
fsdp::chooseSaversUnderBudget(ModuleOp module,
                              const FSDPPipelineOptions &options,
                              int64_t budget, const MachineRates &machine) {
  SaverSearcher s{module, options, machine, {}};
  SaverSearch out;

  // The options' own plan, no saver: what the choice is measured against.
  // Compiled first and not quietly: an error here is the model's.
  {
    FSDPPipelineOptions plain;
    plain.copyOptionValuesFrom(options);
    plain.activationCheckpointing = false;
    plain.acClasses.clear();
    plain.acModules.clear();
    plain.offloadParams = false;
    plain.offloadUnits.clear();
    plain.offloadOptimUnits.clear();
    FailureOr<Predicted> p = predictPlan(module, plain, machine, false);
    if (failed(p))
      return failure();
    out.baseline.backwardPrefetch = options.backwardPrefetch;
    out.baseline.forwardPrefetch = options.forwardPrefetch;
    out.baseline.limitAllGathers = options.limitAllGathers;
    out.baseline.peakBytes = p->peakBytes;
    out.baseline.stepSeconds = p->stepSeconds;
    out.baseline.units = static_cast<int64_t>(p->units.size());
  }

  FailureOr<SmallVector<SaverChoice>> parts = s.partitions();
  if (failed(parts))
    return failure();
  // The schedules: FSDP's defaults, then each mode that changes what is
  // gathered when.
  struct Schedule {
    std::string backward;
    bool forward;
    int64_t limit;
  };
  SmallVector<Schedule> schedules = {
      {options.backwardPrefetch, options.forwardPrefetch,
       options.limitAllGathers}};
  for (Schedule k : {Schedule{"BACKWARD_PRE", false, 2},
                     Schedule{"BACKWARD_PRE", true, 2},
                     Schedule{"BACKWARD_POST", false, 2},
                     Schedule{"NO_PREFETCH", false, 2},
                     Schedule{"BACKWARD_PRE", false, 1}})
    if (llvm::none_of(schedules, [&](const Schedule &h) {
          return h.backward == k.backward && h.forward == k.forward &&
                 h.limit == k.limit;
        }))
      schedules.push_back(k);
  SmallVector<std::string> checkpoints = {"", "units"};
  for (std::string &cls : checkpointClasses(module))
    checkpoints.push_back(cls);

  for (const SaverChoice &part : *parts)
    for (const Schedule &k : schedules)
      for (const std::string &cp : checkpoints) {
        bool first = k.backward == schedules[0].backward &&
                     k.forward == schedules[0].forward &&
                     k.limit == schedules[0].limit && cp.empty();
        if (first)
          continue; // partitions() compiled it
        if (cp == "units" && part.units < 2)
          continue; // the root is the only unit
        SaverChoice c = part;
        c.backwardPrefetch = k.backward;
        c.forwardPrefetch = k.forward;
        c.limitAllGathers = k.limit;
        c.checkpoint = cp;
        (void)s.evaluate(c, /*quiet=*/true);
      }

  // CPU offload beside every partition and checkpointing, with the
  // options' schedule: every unit's optimizer state, then everything
  // (FSDP's offload_params). Where copies are cheap (CPU ranks, a fast
  // host link) offload can beat more units or more recomputation.
  for (const SaverChoice &part : *parts)
    for (const std::string &cp : checkpoints) {
      if (cp == "units" && part.units < 2)
        continue;
      const std::vector<std::string> &names = s.unitsOf[part.minNumParams];
      SaverChoice c = part;
      c.checkpoint = cp;
      c.offloadOptimUnits = names;
      (void)s.evaluate(c, /*quiet=*/true);
      c.offloadOptimUnits.clear();
      c.offloadUnits = names;
      (void)s.evaluate(c, /*quiet=*/true);
    }

  auto fitting = [&] {
    SmallVector<SaverChoice> fit;
    for (const SaverChoice &c : s.tried)
      if (c.peakBytes <= budget)
        fit.push_back(c);
    llvm::stable_sort(fit, better);
    return fit;
  };
  // Nothing fits on the device alone: CPU offload on the plans with the
  // smallest peaks, the largest units' optimizer state first, then their
  // parameters, as little as fits.
  if (llvm::none_of(s.tried, [&](const SaverChoice &c) {
        return !offloads(c) && c.peakBytes <= budget;
      })) {
    SmallVector<SaverChoice> smallest;
    for (const SaverChoice &c : s.tried)
      if (!offloads(c))
        smallest.push_back(c);
    llvm::stable_sort(smallest, [](const SaverChoice &a, const SaverChoice &b) {
      return a.peakBytes < b.peakBytes;
    });
    smallest.resize(std::min<size_t>(smallest.size(), 3));
    for (const SaverChoice &base : smallest) {
      SmallVector<std::pair<int64_t, std::string>> units;
      if (failed(s.evaluate(base, /*quiet=*/true, &units)))
        continue;
      s.tried.pop_back(); // evaluated again for its units only
      std::vector<std::string> names;
      for (auto &u : units)
        names.push_back(u.second);
      // The fewest of the largest units whose offload fits, by bisection:
      // offloading more units' state never raises the device's peak, so
      // where all of them do not fit, none does (a model of N units costs
      // O(log N) compiles here, not N).
      auto fewestFitting = [&](auto makeChoice) {
        auto fits = [&](size_t k) {
          FailureOr<SaverChoice> e = s.evaluate(makeChoice(k), /*quiet=*/true);
          return succeeded(e) && e->peakBytes <= budget;
        };
        if (names.empty() || !fits(names.size()))
          return false;
        size_t low = 0, high = names.size(); // fits(high); low does not
        while (high - low > 1) {
          size_t mid = low + (high - low) / 2;
          (fits(mid) ? high : low) = mid;
        }
        return true;
      };
      bool found = fewestFitting([&](size_t k) {
        SaverChoice c = base;
        c.offloadOptimUnits.assign(names.begin(), names.begin() + k);
        return c;
      });
      if (!found)
        (void)fewestFitting([&](size_t k) {
          SaverChoice c = base;
          c.offloadUnits.assign(names.begin(), names.begin() + k);
          c.offloadOptimUnits.assign(names.begin() + k, names.end());
          return c;
        });
    }
  }
  SmallVector<SaverChoice> fit = fitting();
  out.tried = static_cast<int64_t>(s.tried.size()) + 1;

  if (fit.empty()) {
    const SaverChoice *least = nullptr;
    for (const SaverChoice &c : s.tried)
      if (!least || c.peakBytes < least->peakBytes)
        least = &c;
    InFlightDiagnostic diag =
        module.emitError("nothing fits --memory-budget ")
        << formatBytes(budget) << " (" << budget << " bytes)";
    if (least)
      diag << ": the smallest predicted peak is "
           << formatBytes(least->peakBytes) << " (" << least->peakBytes
           << " bytes), with " << saverFlags(*least);
    diag << "; " << out.tried << " plans tried";
    return diag;
  }
  out.chosen = fit.front();
  out.fitting = static_cast<int64_t>(fit.size());
  // The runner-up: the fastest plan with other units, checkpointing or
  // offload (another schedule alone is a detail of the same choice).
  for (const SaverChoice &c : llvm::drop_begin(fit))
    if (c.units != out.chosen.units ||
        c.minNumParams != out.chosen.minNumParams ||
        c.checkpoint != out.chosen.checkpoint ||
        c.offloadUnits != out.chosen.offloadUnits ||
        c.offloadOptimUnits != out.chosen.offloadOptimUnits) {
      out.runnerUp = c;
      break;
    }
  // What the chosen plan's checkpointing and offload buy.
  const SaverChoice &chosen = out.chosen;
  for (const SaverChoice &c : s.tried) {
    if (!sameUnitsAndSchedule(c, chosen))
      continue;
    if (!chosen.checkpoint.empty() && c.checkpoint.empty() &&
        c.offloadUnits == chosen.offloadUnits &&
        c.offloadOptimUnits == chosen.offloadOptimUnits)
      out.withoutCheckpoint = c;
    if (offloads(chosen) && !offloads(c) && c.checkpoint == chosen.checkpoint)
      out.withoutOffload = c;
  }
  if (!out.chosen.checkpoint.empty() && !out.withoutCheckpoint) {
    SaverChoice c = out.chosen;
    c.checkpoint.clear();
    FailureOr<SaverChoice> e = s.evaluate(c, /*quiet=*/true);
    if (succeeded(e))
      out.withoutCheckpoint = *e;
  }
  return out;
}
