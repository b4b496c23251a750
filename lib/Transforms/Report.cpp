//===- Report.cpp - what a sharded step holds per rank ---------------------===//

#include "fsdp/Transforms/Report.h"
#include "fsdp/Analysis/MemoryModel.h"
#include "fsdp/Analysis/StepAnalysis.h"
#include "fsdp/Transforms/Passes.h"
#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/JSON.h"

using namespace mlir;
using namespace fsdp;


std::string fsdp::formatBytes(int64_t bytes) {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (bytes >= (int64_t(1) << 30))
    os << llvm::format("%.2f GiB", bytes / double(int64_t(1) << 30));
  else if (bytes >= (1 << 20))
    os << llvm::format("%.2f MiB", bytes / double(1 << 20));
  else if (bytes >= (1 << 10))
    os << llvm::format("%.2f KiB", bytes / double(1 << 10));
  else
    os << bytes << " B";
  return text;
}

std::string fsdp::formatSeconds(double seconds) {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (seconds >= 1)
    os << llvm::format("%.2f s", seconds);
  else if (seconds >= 1e-3)
    os << llvm::format("%.2f ms", seconds * 1e3);
  else
    os << llvm::format("%.0f us", seconds * 1e6);
  return text;
}

void fsdp::printFSDPReport(ModuleOp module, raw_ostream &os) {
  auto world = module->getAttrOfType<IntegerAttr>(kWorldSizeAttr);
  auto group = module->getAttrOfType<IntegerAttr>(kShardGroupSizeAttr);
  auto sharding = module->getAttrOfType<ShardingStrategyAttr>(kShardingAttr);
  if (!world || !group || !sharding) {
    os << "fsdp report: the module is not sharded (no fsdp-shard)\n";
    return;
  }
  StringRef strategy = stringifyShardingStrategy(sharding.getValue());
  os << "FSDP plan: " << strategy << ", " << world.getInt()
     << " ranks, shard groups of " << group.getInt() << "\n";

  // Optimizer state per parameter or flat parameter.
  llvm::DenseMap<StringAttr, int64_t> optimBytes;
  int64_t sharedOptim = 0;
  for (OptimStateOp state : module.getOps<OptimStateOp>()) {
    if (auto param = state.getParamAttr())
      optimBytes[param.getAttr()] += tensorBytes(state.getType());
    else
      sharedOptim += tensorBytes(state.getType());
  }
  // A gradient exists where the optimizer keeps state or updates: count a
  // gradient for every flat parameter and every updated parameter.
  llvm::DenseSet<StringAttr> updated;
  module.walk([&](UpdateOp update) { updated.insert(update.getNameAttr().getAttr()); });
  // A flat gradient a rank receives whole and takes its shard of (OSS's
  // all-reduce) is held whole.
  llvm::DenseSet<StringAttr> wholeGrads;
  module.walk([&](LocalShardOp local) {
    if (local.getBuffer().getDefiningOp<WaitOp>())
      wholeGrads.insert(local.getUnitAttr().getAttr());
  });

  os << llvm::format("%-4s %-32s %8s %12s %12s %12s\n", "unit", "module",
                     "params", "numel", "padded", "shard");
  int64_t shardedParams = 0, shardedGrads = 0, shardedOptim = sharedOptim;
  int64_t fullParams = 0, fullGrads = 0, fullOptim = sharedOptim;
  llvm::DenseSet<StringAttr> members;
  int64_t wholeUnits = 0;
  int index = 0;
  for (FlatParamOp flat : module.getOps<FlatParamOp>()) {
    for (Attribute ref : flat.getParams())
      members.insert(cast<FlatSymbolRefAttr>(ref).getAttr());
    std::string path = flat.getModulePath().empty()
                           ? "(root)"
                           : flat.getModulePath().str();
    os << llvm::format("%-4d %-32s %8zu %12lld %12lld %12lld\n", index++,
                       path.c_str(), flat.getParams().size(),
                       (long long)flat.getNumel(),
                       (long long)flat.getPaddedNumel(),
                       (long long)flat.getShardNumel());
    int64_t shard = tensorBytes(flat.getShardType());
    int64_t elem = shard / std::max<int64_t>(1, flat.getShardNumel());
    int64_t full = int64_t(flat.getNumel()) * elem;
    int64_t optim = optimBytes.lookup(flat.getSymNameAttr());
    int64_t perElement = flat.getShardNumel() ? optim / shard : 0;
    shardedParams += tensorBytes(flat.getStateType());
    wholeUnits += flat.getReplicated();
    shardedGrads += wholeGrads.contains(flat.getSymNameAttr())
                        ? tensorBytes(flat.getFullType())
                        : shard;
    shardedOptim += optim;
    fullParams += full;
    fullGrads += full;
    fullOptim += perElement * full;
  }
  int64_t replicated = 0;
  for (ParamOp param : module.getOps<ParamOp>()) {
    if (members.contains(param.getSymNameAttr()))
      continue;
    int64_t bytes = tensorBytes(param.getType());
    replicated += bytes;
    shardedParams += bytes;
    fullParams += bytes;
    if (updated.contains(param.getSymNameAttr())) {
      shardedGrads += bytes;
      fullGrads += bytes;
    }
    int64_t optim = optimBytes.lookup(param.getSymNameAttr());
    shardedOptim += optim;
    fullOptim += optim;
  }
  if (replicated)
    os << "not sharded (ignored or never updated): " << formatBytes(replicated)
       << " of parameters on every rank\n";
  if (wholeUnits)
    os << "parameters whole on every rank (" << strategy
       << "): only " << (wholeGrads.empty() ? "gradients and " : "")
       << "optimizer state sharded\n";
  os << llvm::format("%-20s %16s %16s\n", "per rank", "sharded", "unsharded");
  auto row = [&](const char *what, int64_t sharded, int64_t full) {
    os << llvm::format("%-20s %16s %16s\n", what, formatBytes(sharded).c_str(),
                       formatBytes(full).c_str());
  };
  row("parameters", shardedParams, fullParams);
  row("gradients", shardedGrads, fullGrads);
  row("optimizer state", shardedOptim, fullOptim);
  row("total", shardedParams + shardedGrads + shardedOptim,
      fullParams + fullGrads + fullOptim);
  printValuesRead(module, os);
}

void fsdp::printValuesRead(ModuleOp module, raw_ostream &os) {
  auto read = module->getAttrOfType<ArrayAttr>(kValuesReadAttr);
  if (!read)
    return;
  int64_t total = 0;
  std::string names;
  for (Attribute pair : read) {
    auto parts = cast<ArrayAttr>(pair);
    total += cast<IntegerAttr>(parts[1]).getInt();
    names += (names.empty() ? "" : ", ") +
             cast<StringAttr>(parts[0]).getValue().str();
  }
  os << "tensor values read at compile time: ";
  if (read.empty())
    os << "none (parameters and buffers are never read)\n";
  else
    os << read.size() << " module tensor(s) used as constants, "
       << formatBytes(total) << " (" << names << ")\n";
}

void fsdp::printScheduleReport(ModuleOp module, raw_ostream &os) {
  auto func = module.lookupSymbol<func::FuncOp>("train_step");
  if (!func || func.getBody().empty())
    return;
  Block &body = func.getBody().front();
  StepOrder order(body);
  SmallVector<Gather> gathers = collectGathers(order);
  int64_t forward = 0, backward = 0, forwardEarly = 0, backwardEarly = 0;
  for (Gather &g : gathers) {
    bool early = g.start->getNextNode() != g.wait.getOperation();
    if (g.phase == Phase::Forward) {
      ++forward;
      forwardEarly += early;
    } else {
      ++backward;
      backwardEarly += early;
    }
  }
  // Gathered buffers count from their start to their free; reductions from
  // their start to their wait.
  llvm::DenseSet<Operation *> gatherStarts, frees;
  for (Gather &g : gathers) {
    gatherStarts.insert(g.start);
    if (g.free)
      frees.insert(g.free);
  }
  llvm::DenseSet<Value> reductions;
  int64_t buffers = 0, maxBuffers = 0, inFlight = 0, maxInFlight = 0;
  for (Operation &op : body) {
    if (gatherStarts.contains(&op))
      maxBuffers = std::max(maxBuffers, ++buffers);
    if (frees.contains(&op))
      --buffers;
    if (auto collective = dyn_cast<CollectiveStartOp>(op);
        collective && collective.isReduction()) {
      reductions.insert(collective.getCollectiveFuture());
      maxInFlight = std::max(maxInFlight, ++inFlight);
    }
    if (auto wait = dyn_cast<WaitOp>(op);
        wait && reductions.contains(wait.getFuture()))
      --inFlight;
  }
  os << "schedule: all-gathers prefetched " << forwardEarly << "/" << forward
     << " forward, " << backwardEarly << "/" << backward
     << " backward; most gathered buffers alive at once " << maxBuffers
     << "; most reductions in flight " << maxInFlight << "\n";
}

//===----------------------------------------------------------------------===//
// Memory
//===----------------------------------------------------------------------===//

FailureOr<MemoryReport>
fsdp::predictMemoryReport(ModuleOp module, StringRef entry,
                          const MachineRates &machine, bool operandLayouts) {
  auto func = module.lookupSymbol<func::FuncOp>(entry);
  if (!func)
    return module.emitError("no function @") << entry << " to predict";
  FailureOr<MemoryPrediction> prediction =
      predictMemory(module, func, operandLayouts);
  if (failed(prediction))
    return failure();
  FailureOr<TimePrediction> time = predictTime(module, func, machine);
  if (failed(time))
    return failure();
  MemoryReport report;
  report.prediction = std::move(*prediction);
  report.machine = machine;
  report.time = std::move(*time);
  if (auto world = module->getAttrOfType<IntegerAttr>(kWorldSizeAttr))
    report.worldSize = world.getInt();
  if (Operation *op = report.prediction.peakOp) {
    if (auto call = dyn_cast<aten::CallOp>(op)) {
      report.peakOp = call.getOverload().str();
      report.peakModule = describeModule(call);
    } else {
      report.peakOp = op->getName().getStringRef().str();
    }
    StepOrder order(func.getBody().front());
    report.peakPhase =
        phaseName(order.phase(op)).str();
  } else {
    report.peakPhase = "before the step";
  }
  for (FlatParamOp flat : module.getOps<FlatParamOp>())
    report.unitModules[flat.getSymName()] = flat.getModulePath().str();
  if (auto eval = module.lookupSymbol<func::FuncOp>(kEvalStepName);
      eval && entry == "train_step") {
    FailureOr<MemoryPrediction> evalPrediction = predictMemory(module, eval);
    if (failed(evalPrediction))
      return failure();
    report.evalPeakBytes = evalPrediction->peakBytes;
    report.evalPeakInstruction = evalPrediction->peakInstruction;
  }
  return report;
}

void fsdp::printMemoryReport(const MemoryReport &report, raw_ostream &os) {
  const MemoryPrediction &p = report.prediction;
  os << "memory: one rank of " << report.worldSize << ", one step (bytes of live tensor storages, as fsdp-run counts them)\n";
  os << "peak " << formatBytes(p.peakBytes) << " (" << p.peakBytes
     << " bytes) during instruction #" << p.peakInstruction << " ("
     << report.peakOp;
  if (!report.peakModule.empty())
    os << " in module " << report.peakModule;
  os << ", " << report.peakPhase << ")\n";
  for (size_t c = 0; c < kNumMemoryCategories; ++c)
    os << llvm::format("  %-22s", memoryCategoryName(MemoryCategory(c)).str().c_str())
       << formatBytes(p.breakdown[c]) << "\n";
  os << "before the step (state and batch): " << formatBytes(p.startBytes)
     << "\n";
  if (const auto &a = report.allocator) {
    os << "allocator peak " << formatBytes(a->peakBytes) << " ("
       << a->peakBytes << " bytes) ";
    if (a->peakInstruction < 0)
      os << "before the step";
    else
      os << "during instruction #" << a->peakInstruction << " (" << a->peakOp
         << ")";
    int64_t largest = 0, at = -1;
    for (auto [i, w] : llvm::enumerate(a->workspace))
      if (w > largest)
        largest = w, at = static_cast<int64_t>(i);
    os << ": live tensors less constants, plus kernels' workspaces measured "
          "on this CPU at "
       << a->threads << (a->threads == 1 ? " thread" : " threads") << " ("
       << a->measured << " calls, " << a->classes << " run";
    if (at >= 0)
      os << "; the largest " << formatBytes(largest) << " at #" << at;
    os << ")\n";
    if (!a->unmeasured.empty()) {
      const auto &first = a->unmeasured.front();
      os << "  not measured: " << a->unmeasured.size()
         << (a->unmeasured.size() == 1 ? " instruction" : " instructions")
         << ", the first #" << first.instruction << " (" << first.op
         << "): " << first.why << "\n";
    }
  }
  if (report.evalPeakBytes)
    os << "evaluation step: peak " << formatBytes(*report.evalPeakBytes)
       << " (" << *report.evalPeakBytes << " bytes) during its instruction #"
       << report.evalPeakInstruction << "\n";
  if (p.hostPeakBytes)
    os << "host memory (CPU offload): peak " << formatBytes(p.hostPeakBytes)
       << " (" << p.hostPeakBytes << " bytes)\n";
  if (!p.units.empty()) {
    os << "peak while a unit's parameters are gathered:\n";
    // With gradient accumulation each micro-batch gathers again: say which.
    bool accumulates = llvm::any_of(p.units, [](const auto &u) {
      return u.microBatch > 0;
    });
    for (const MemoryPrediction::Unit &u : p.units) {
      std::string path = report.unitModules.lookup(u.unit);
      os << "  " << (path.empty() ? "(root)" : path) << " "
         << phaseName(u.phase) << " ";
      if (accumulates)
        os << "(micro-batch " << u.microBatch + 1 << ") ";
      os
         << formatBytes(u.peakBytes) << " (instructions #" << u.start << "-#"
         << u.end << ")\n";
    }
  }
  const TimePrediction &t = report.time;
  os << "step time: " << formatSeconds(t.stepSeconds) << " predicted on "
     << report.machine.name << " (" << report.machine.source << ", "
     << report.machine.ranks << (report.machine.ranks == 1 ? " rank" : " ranks")
     << " sharing it): computation " << formatSeconds(t.computeSeconds)
     << ", collectives " << formatSeconds(t.collectiveSeconds);
  // The time not overlapped then includes the waits for the slowest rank.
  if (t.lagSeconds > 0)
    os << " starting " << formatSeconds(t.lagSeconds)
       << " later for the slowest rank; " << formatSeconds(t.exposedSeconds)
       << " not overlapped or waiting for it; ";
  else
    os << " of which " << formatSeconds(t.exposedSeconds)
       << " not overlapped; ";
  os << llvm::format("%.3f", t.flops / 1e9) << " GFLOP";
  if (t.measuredCalls > 0) {
    os << "; " << t.measuredCalls << " calls timed here";
    if (t.coldSeconds > 0)
      os << " (" << formatSeconds(t.coldSeconds)
         << " of their time reading operands no longer in the caches)";
  }
  os << "\n";
}

void fsdp::writeMemoryReportJSON(const MemoryReport &report,
                                 raw_ostream &os) {
  const MemoryPrediction &p = report.prediction;
  llvm::json::Object breakdown;
  for (size_t c = 0; c < kNumMemoryCategories; ++c)
    breakdown[memoryCategoryName(MemoryCategory(c))] = p.breakdown[c];
  llvm::json::Array units;
  for (const MemoryPrediction::Unit &u : p.units)
    units.push_back(llvm::json::Object{
        {"unit", u.unit},
        {"module", report.unitModules.lookup(u.unit)},
        {"phase", phaseName(u.phase)},
        {"micro_batch", u.microBatch},
        {"first_instruction", u.start},
        {"last_instruction", u.end},
        {"peak_bytes", u.peakBytes}});
  llvm::json::Object root{
      {"world_size", report.worldSize},
      {"peak_bytes", p.peakBytes},
      {"peak_instruction", p.peakInstruction},
      {"peak_op", report.peakOp},
      {"peak_module", report.peakModule},
      {"peak_phase", report.peakPhase},
      {"start_bytes", p.startBytes},
      {"host_peak_bytes", p.hostPeakBytes},
      {"eval_peak_bytes", report.evalPeakBytes
                              ? llvm::json::Value(*report.evalPeakBytes)
                              : llvm::json::Value(nullptr)},
      {"breakdown", std::move(breakdown)},
      {"units", std::move(units)},
      {"timeline", llvm::json::Array(p.timeline)},
      {"instruction_peak", llvm::json::Array(p.instructionPeak)},
      {"constant_bytes", llvm::json::Array(p.constantBytes)},
      {"host_instruction_peak", llvm::json::Array(p.hostInstructionPeak)},
      {"machine", report.machine.name},
      {"step_seconds", report.time.stepSeconds},
      {"compute_seconds", report.time.computeSeconds},
      {"collective_seconds", report.time.collectiveSeconds},
      {"exposed_seconds", report.time.exposedSeconds},
      {"flops", report.time.flops},
      {"loss_seconds", report.time.lossSeconds},
      {"lag_seconds", report.time.lagSeconds},
      {"measured_calls", report.time.measuredCalls},
      {"cold_seconds", report.time.coldSeconds},
      {"instruction_seconds", llvm::json::Array(report.time.instructionSeconds)}};
  if (const auto &a = report.allocator) {
    llvm::json::Array unmeasured;
    for (const auto &u : a->unmeasured)
      unmeasured.push_back(llvm::json::Object{
          {"instruction", u.instruction}, {"op", u.op}, {"why", u.why}});
    root["allocator_peak_bytes"] = a->peakBytes;
    root["allocator_peak_instruction"] = a->peakInstruction;
    root["allocator_instruction_peak"] = llvm::json::Array(a->instructionPeak);
    root["workspace_bytes"] = llvm::json::Array(a->workspace);
    root["workspace_threads"] = a->threads;
    root["workspace_unmeasured"] = std::move(unmeasured);
  }
  os << llvm::json::Value(std::move(root)) << "\n";
}
