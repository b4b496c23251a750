//===- CostModel.cpp - the time a rank spends on a step --------------------===//

#include "fsdp/Analysis/CostModel.h"

#include "fsdp/Analysis/MemoryModel.h"
#include "fsdp/Analysis/StepAnalysis.h"
#include "fsdp/Dialect/ATen/IR/ATenDialect.h"
#include "fsdp/Dialect/ATen/IR/OpTable.h"
#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"
#include "fsdp/Support/Files.h"
#include "fsdp/Support/JSON.h"
#include "fsdp/runtime/MachineSchema.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"

#include <algorithm>
#include <cmath>

using namespace mlir;
using namespace fsdp;

//===----------------------------------------------------------------------===//
// Machines
//===----------------------------------------------------------------------===//

namespace {

/// The most ranks a machine file may say one machine has.
constexpr int64_t kMaxMachineRanks = int64_t(1) << 16;

/// The rate field of each MachineSchema key, in kRateKeys' order.
double MachineRates::*const kRateFields[] = {
    &MachineRates::matmulFlopsPerSec,     &MachineRates::matmulHalfFlopsPerSec,
    &MachineRates::convFlopsPerSec,
    &MachineRates::memoryBytesPerSec,     &MachineRates::hostMemoryBytesPerSec,
    &MachineRates::opOverheadSec,
    &MachineRates::collectiveBytesPerSec, &MachineRates::collectiveLatencySec,
    &MachineRates::copyBytesPerSec,
};
static_assert(std::size(kRateFields) == std::size(machine::kRateKeys),
              "a field for every rate of the machine file");

MachineRates builtinCPU() {
  // `fsdp-opt --calibrate` on the project's 2-core Debian 12 machine (the
  // one CI runs on), 2 ranks: what each rank gets while both compute (the
  // medians of three calibrations, which vary by 2x between runs there;
  // the memory rate of two, streaming 64 MiB).
  MachineRates m;
  m.name = "cpu";
  m.ranks = 2;
  m.matmulFlopsPerSec = 2.5e10;
  m.matmulHalfFlopsPerSec = 5.0e10;
  m.convFlopsPerSec = 1.4e10;
  m.memoryBytesPerSec = 4.1e9;
  m.hostMemoryBytesPerSec = 4.1e9;
  m.opOverheadSec = 1.7e-6;
  m.collectiveBytesPerSec = 4.9e8;
  m.collectiveLatencySec = 4.4e-4;
  m.copyBytesPerSec = 6.5e9;
  m.collectiveOverlap = 0.7;
  // No skew: measured later than these rates, which the budget search's
  // tests choose by (a calibrated file has it).
  m.collectiveSkew = 0;
  return m;
}

MachineRates builtinH100() {
  // H100 SXM: 989 TFLOPS dense bf16 and 3.35 TB/s HBM3 on the datasheet;
  // float32 matrix products without TF32 at 67 TFLOPS. Kernels reach about
  // 60% and 80% of them; a launch costs about 5 us; NVLink 4 moves 450 GB/s
  // each way, of which NCCL's ring reaches about 70%; PCIe 5 copies from
  // pinned memory at about 50 GB/s. Collectives run on their own streams.
  MachineRates m;
  m.name = "h100";
  m.ranks = 1;
  m.matmulFlopsPerSec = 0.6 * 67e12;
  m.matmulHalfFlopsPerSec = 0.6 * 989e12;
  m.convFlopsPerSec = 0.5 * 67e12;
  m.memoryBytesPerSec = 0.8 * 3.35e12;
  // The host's DDR5, for the offloaded optimizer: about 30 GB/s for one
  // process's element-wise kernels.
  m.hostMemoryBytesPerSec = 30e9;
  m.opOverheadSec = 5e-6;
  m.collectiveBytesPerSec = 0.7 * 450e9;
  m.collectiveLatencySec = 2e-5;
  m.copyBytesPerSec = 50e9;
  m.collectiveOverlap = 1;
  return m;
}

} // namespace

StringRef fsdp::builtinMachineNames() { return "cpu, h100"; }

FailureOr<MachineRates> fsdp::loadMachine(StringRef nameOrFile,
                                          std::string &error) {
  if (nameOrFile == "cpu" || nameOrFile == "h100") {
    MachineRates m = nameOrFile == "cpu" ? builtinCPU() : builtinH100();
    m.source = "built-in";
    return m;
  }
  auto fail = [&](const Twine &why) {
    error = ("machine file '" + nameOrFile + "': " + why).str();
    return failure();
  };
  auto buffer = fsdp::readInputFile(nameOrFile, kMaxSettingsFileBytes);
  if (!buffer)
    return fail("cannot read it (" + llvm::toString(buffer.takeError()) +
                "); give a file `fsdp-run --calibrate` wrote, or one of " +
                builtinMachineNames());
  llvm::Expected<llvm::json::Value> json =
      fsdp::parseJSON((*buffer)->getBuffer());
  if (!json)
    return fail("not JSON: " + llvm::toString(json.takeError()));
  if (std::optional<std::string> twice =
          fsdp::duplicateJSONKey((*buffer)->getBuffer()))
    return fail("key '" + *twice + "' is given twice");
  const llvm::json::Object *object = json->getAsObject();
  if (!object)
    return fail("not a JSON object");
  std::optional<int64_t> version = object->getInteger(machine::kVersionKey);
  if (version != machine::kVersion)
    return fail(Twine("'") + machine::kVersionKey + "' is not " +
                Twine(machine::kVersion));
  MachineRates m;
  m.source = nameOrFile.str();
  std::optional<StringRef> name = object->getString(machine::kNameKey);
  if (!name || name->empty())
    return fail(Twine("'") + machine::kNameKey + "' is missing or not a "
                "non-empty string");
  m.name = name->str();
  std::optional<int64_t> ranks = object->getInteger(machine::kRanksKey);
  if (!ranks || *ranks < 1 || *ranks > kMaxMachineRanks)
    return fail(Twine("'") + machine::kRanksKey + "' is missing or not an "
                "integer from 1 to " + Twine(kMaxMachineRanks));
  m.ranks = *ranks;
  for (size_t k = 0; k < std::size(kRateFields); ++k) {
    StringRef key = machine::kRateKeys[k].key;
    std::optional<double> value = object->getNumber(key);
    // Rates per second within what any machine measures (a byte a second
    // to 10^18); times from a picosecond to an hour. Beyond them a
    // predicted time overflows or underflows.
    bool perSecond = key.ends_with("_per_s");
    double low = perSecond ? 1 : 1e-12, high = perSecond ? 1e18 : 3600;
    if (!value || !(*value >= low && *value <= high))
      return fail("'" + key + "' (" + machine::kRateKeys[k].meaning +
                  ") is missing or not a number from " +
                  (perSecond ? "1 to 1e18" : "1e-12 to 3600"));
    m.*kRateFields[k] = *value;
  }
  // The keys besides the rates: `field` from `key`, a number from `low` to
  // `high` (`range` in words); a key the file may leave out keeps the
  // field's default.
  auto number = [&](const char *key, bool required, double low, double high,
                    StringRef range, double &field) -> LogicalResult {
    if (!required && !object->get(key))
      return success();
    std::optional<double> value = object->getNumber(key);
    if (!value || !(*value >= low && *value <= high))
      return fail(Twine("'") + key + "' is " +
                  (required ? "missing or not" : "not") + " a number from " +
                  range);
    field = *value;
    return success();
  };
  if (failed(number(machine::kOverlapKey, true, 0, 1, "0 to 1",
                    m.collectiveOverlap)) ||
      failed(number(machine::kSkewKey, false, 0, 1, "0 to 1",
                    m.collectiveSkew)) ||
      failed(number(machine::kCacheKey, false, 1, 1e15, "1 to 1e15",
                    m.cacheBytes)))
    return failure();
  for (const auto &entry : *object) {
    StringRef key = entry.first;
    bool known = key == machine::kVersionKey || key == machine::kNameKey ||
                 key == machine::kRanksKey || key == machine::kOverlapKey ||
                 key == machine::kSkewKey || key == machine::kCacheKey ||
                 llvm::any_of(machine::kRateKeys, [&](const auto &rate) {
                   return key == rate.key;
                 });
    if (!known)
      return fail("unknown key '" + key + "'");
  }
  return m;
}

//===----------------------------------------------------------------------===//
// Instructions
//===----------------------------------------------------------------------===//

namespace {

int64_t numel(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type ? type.getNumElements() : 0;
}

int64_t lastDim(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type || type.getRank() == 0)
    return 1;
  return type.getShape().back();
}

bool isConvolution(aten::CallOp call) {
  StringRef name = call.getOverload();
  return name.starts_with("aten::conv") || name.starts_with("aten::_convolution");
}

/// The floating-point operations of a matrix product, convolution or
/// attention call (2 per multiply-add); 0 for any other call.
double matrixFlops(aten::CallOp call) {
  StringRef name = call.getOverload();
  name = name.take_front(name.find('.'));
  auto operands = call.getOperands();
  auto results = call.getResults();
  if (operands.empty() || results.empty())
    return 0;
  // Each result element is a K-long dot product of a row of the operand
  // `a` (K its last dimension).
  auto product = [&](unsigned a) {
    if (a >= operands.size())
      return 0.0;
    return 2.0 * numel(results[0]) * lastDim(operands[a]);
  };
  if (name == "aten::mm" || name == "aten::bmm" || name == "aten::matmul" ||
      name == "aten::linear")
    return product(0);
  if (name == "aten::addmm" || name == "aten::baddbmm" ||
      name == "aten::addbmm")
    return product(1);
  // Convolutions: each output element sums weight.numel / out_channels
  // products (input channels per group times the kernel's extent).
  auto convolution = [&](Value out, Value weight) {
    auto w = dyn_cast<RankedTensorType>(weight.getType());
    if (!w || w.getRank() == 0 || w.getShape()[0] == 0)
      return 0.0;
    return 2.0 * numel(out) * (double(w.getNumElements()) / w.getShape()[0]);
  };
  if (isConvolution(call)) {
    if (name == "aten::convolution_backward") {
      // The input's and the weight's gradient: each costs the forward's.
      if (operands.size() < 3)
        return 0;
      return 2.0 * convolution(operands[0], operands[2]);
    }
    if (operands.size() < 2)
      return 0;
    return convolution(results[0], operands[1]);
  }
  if (name.contains("scaled_dot_product")) {
    // q (..., L, E), k (..., S, E), v (..., S, Ev): q k^T and its product
    // with v. The backward computes four such products.
    if (operands.size() < 3)
      return 0;
    auto q = dyn_cast<RankedTensorType>(operands[0].getType());
    auto k = dyn_cast<RankedTensorType>(operands[1].getType());
    auto v = dyn_cast<RankedTensorType>(operands[2].getType());
    if (!q || !k || !v || q.getRank() < 2 || k.getRank() < 2 ||
        v.getRank() < 1)
      return 0;
    double s = k.getShape()[k.getRank() - 2];
    double forward = 2.0 * q.getNumElements() * s +
                     2.0 * (q.getNumElements() / q.getShape().back()) * s *
                         v.getShape().back();
    return name.contains("backward") ? 2.0 * forward : forward;
  }
  return 0;
}

bool isHalf(Value v) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  return type && (type.getElementType().isBF16() || type.getElementType().isF16());
}

double tensorBytesOf(ValueRange values) {
  double bytes = 0;
  for (Value v : values)
    if (isa<RankedTensorType>(v.getType()))
      bytes += tensorBytes(v.getType());
  return bytes;
}

struct Timeline {
  explicit Timeline(const MachineRates &m) : m(m) {}
  const MachineRates &m;
  int64_t worldSize = 1, shardGroupSize = 1;
  TimePrediction out;
  llvm::DenseSet<Value> host; // values in host memory (CPU offload)
  double now = 0;      // the computation's clock
  double comms = 0;    // the collectives' clock
  // The computation since a wait last held the ranks together (the step
  // starts just after one: the last step's loss all-reduce).
  double sinceTogether = 0;
  llvm::DenseMap<Value, double> done; // a future's completion
  // The bytes the computation has read and written so far, and where that
  // count stood when a storage (named by its root value: views share
  // their base's) was last read or written.
  double touched = 0;
  llvm::DenseMap<Value, Value> rootOf;
  llvm::DenseMap<Value, double> lastTouched;
  // Where the count stood when a collective in a group of one copied its
  // result (by its future).
  llvm::DenseMap<Value, double> copiedAt;

  Value root(Value v) const {
    auto it = rootOf.find(v);
    return it == rootOf.end() ? v : it->second;
  }

  /// Of `op`'s tensor operands' bytes, the fraction read from memory rather
  /// than the caches: those whose storage the computation last touched
  /// more than the machine's cache_bytes ago (the step's inputs, its
  /// parameters' shards and optimizer state, were last touched a step ago).
  double coldFraction(Operation *op) const {
    double all = 0, cold = 0;
    for (Value v : op->getOperands()) {
      if (!isa<RankedTensorType>(v.getType()))
        continue;
      double bytes = tensorBytes(v.getType());
      all += bytes;
      auto it = lastTouched.find(root(v));
      if (it == lastTouched.end() || touched - it->second > m.cacheBytes)
        cold += bytes;
    }
    return all > 0 ? cold / all : 0;
  }

  /// What `op` touches: its operands and results. A view's results share
  /// its operand's storage and touch nothing; so do a call's results that
  /// are an argument it writes in place (its new value, and an in-place or
  /// out= op's schema result), which count once.
  void touch(Operation *op) {
    if (op->getNumOperands() > 0 && isViewOf(op, op->getOperand(0))) {
      Value base = root(op->getOperand(0));
      for (Value r : op->getResults())
        rootOf[r] = base;
      return;
    }
    if (auto call = dyn_cast<aten::CallOp>(op); call && call.getMutates()) {
      // The storage of each argument it writes: its new value's, and an
      // in-place or out= op's schema result r returns the r-th (the last
      // one for the rest), as the memory model pairs them.
      SmallVector<int64_t> operandOf = argumentOperands(call);
      ArrayRef<int64_t> mutates = *call.getMutates();
      SmallVector<Value> written;
      for (int64_t a : mutates)
        written.push_back(a >= 0 && a < static_cast<int64_t>(operandOf.size()) &&
                                  operandOf[a] < op->getNumOperands()
                              ? root(op->getOperand(operandOf[a]))
                              : Value());
      unsigned numSchema = call.getNumSchemaResults();
      for (auto [k, base] : llvm::enumerate(written))
        if (base && numSchema + k < op->getNumResults())
          rootOf[op->getResult(numSchema + k)] = base;
      if (returnsWrittenArguments(call) && !written.empty())
        for (unsigned r = 0; r < numSchema; ++r)
          if (Value base = written[std::min<size_t>(r, written.size() - 1)])
            rootOf[op->getResult(r)] = base;
    }
    double bytes = tensorBytesOf(op->getOperands());
    for (Value r : op->getResults())
      if (isa<RankedTensorType>(r.getType()) && !rootOf.count(r))
        bytes += tensorBytes(r.getType());
    touched += bytes;
    for (Value v : op->getOperands())
      if (isa<RankedTensorType>(v.getType()))
        lastTouched[root(v)] = touched;
    for (Value r : op->getResults())
      if (isa<RankedTensorType>(r.getType()))
        lastTouched[root(r)] = touched;
  }

  /// A state read shares the storage the state holds: the step's first
  /// read of it, or what the step last wrote into it.
  llvm::DenseMap<Attribute, Value> stateStorage;
  void read(GetOp get) {
    auto [it, first] = stateStorage.try_emplace(get.getNameAttr(), get.getResult());
    if (!first)
      rootOf[get.getResult()] = it->second;
  }
  void write(UpdateOp update) {
    stateStorage[update.getNameAttr()] = root(update.getValue());
  }

  int groupSize(CommGroup group) const {
    return static_cast<int>(commGroupSize(group, worldSize, shardGroupSize));
  }

  /// Computation: `seconds` on the compute clock.
  double compute(double seconds) {
    now += seconds;
    sinceTogether += seconds;
    out.computeSeconds += seconds;
    return seconds;
  }

  /// When a collective this rank is ready for at `ready` starts: once the
  /// slowest rank joins it, later by the machine's skew the longer the
  /// ranks computed apart.
  double joined(double ready) {
    double start = std::max(ready, now + m.collectiveSkew * sinceTogether);
    out.lagSeconds += start - ready;
    return start;
  }

  double call(aten::CallOp call) {
    if (aten::hasFact(call.getOverload(), aten::OpFact::View))
      return compute(m.opOverheadSec);
    if (llvm::any_of(call.getOperands(),
                     [&](Value v) { return host.contains(v); })) {
      // On host memory: the offloaded optimizer's element-wise step.
      double bytes = tensorBytesOf(call.getOperands()) +
                     tensorBytesOf(call.getResults());
      return compute(m.opOverheadSec + bytes / m.hostMemoryBytesPerSec);
    }
    double flops = matrixFlops(call);
    double bytes = tensorBytesOf(call.getOperands()) +
                   tensorBytesOf(call.getResults());
    out.flops += flops;
    // Convolutions at their own rate; half precision faster (or slower)
    // by what it does to matrix products.
    bool half = !call.getResults().empty() && isHalf(call.getResults()[0]);
    double rate = isConvolution(call) ? m.convFlopsPerSec : m.matmulFlopsPerSec;
    if (half)
      rate *= m.matmulHalfFlopsPerSec / m.matmulFlopsPerSec;
    return compute(m.opOverheadSec +
                   std::max(flops / rate, bytes / m.memoryBytesPerSec));
  }

  /// A collective moving `moved` bytes per rank: on its own clock from when
  /// the computation starts it; the computation waits for the part that
  /// does not overlap. In a group of one rank (`any` false) nothing moves:
  /// the runtime copies its input into its result then and there, a
  /// kernel of the computation's.
  double collective(Value future, double moved, bool any, Value input) {
    double bytes = tensorBytes(input.getType());
    if (!any) {
      double seconds = compute(m.opOverheadSec + 2 * bytes / m.memoryBytesPerSec);
      done[future] = now;
      // The copy reads the input and writes the result, here.
      touched += 2 * bytes;
      lastTouched[root(input)] = touched;
      copiedAt[future] = touched;
      return seconds;
    }
    double seconds = m.collectiveLatencySec + moved / m.collectiveBytesPerSec;
    out.collectiveSeconds += seconds;
    double ready = std::max(now, comms);
    comms = joined(ready) + seconds;
    done[future] = comms;
    double blocked = (1 - m.collectiveOverlap) * seconds;
    if (blocked > 0) {
      double until = ready + blocked;
      out.exposedSeconds += until - now;
      now = until;
      // Held until the collective is done: the ranks are together again.
      if (now >= comms)
        sinceTogether = 0;
    }
    return seconds;
  }

  double start(CollectiveStartOp op) {
    Value input = op.getCollectiveInput();
    double bytes = tensorBytes(input.getType());
    Value future = op.getCollectiveFuture();
    return llvm::TypeSwitch<Operation *, double>(op.getOperation())
        .Case([&](AllGatherStartOp gather) {
          int n = groupSize(gather.getGroup());
          return collective(future, bytes * (n - 1), n > 1, input);
        })
        .Case([&](ReduceScatterStartOp scatter) {
          int n = groupSize(scatter.getGroup());
          double moved = bytes * (n - 1) / n;
          bool across = scatter.getAcross() && shardGroupSize != worldSize;
          if (across) {
            // Then an all-reduce of the shard over the replicas.
            int r = worldSize / shardGroupSize;
            moved += 2.0 * (bytes / n) * (r - 1) / r;
          }
          return collective(future, moved, n > 1 || across, input);
        })
        .Case([&](AllReduceStartOp reduce) {
          int n = groupSize(reduce.getGroup());
          return collective(future, 2.0 * bytes * (n - 1) / n, n > 1, input);
        })
        .Default([&](Operation *) { return 0.0; });
  }

  double wait(WaitOp wait) {
    // The collective wrote its result: as it received it, or when it
    // copied it (a group of one).
    auto copied = copiedAt.find(wait.getFuture());
    if (copied != copiedAt.end()) {
      lastTouched[wait.getResult()] = copied->second;
    } else {
      touched += tensorBytesOf(wait->getResults());
      lastTouched[wait.getResult()] = touched;
    }
    auto it = done.find(wait.getFuture());
    if (it != done.end() && it->second > now) {
      out.exposedSeconds += it->second - now;
      now = it->second;
      sinceTogether = 0;
    }
    return 0;
  }

  double copy(Operation *op) {
    double bytes = tensorBytesOf(op->getResults());
    return compute(m.opOverheadSec + bytes / m.copyBytesPerSec);
  }
};

} // namespace

FailureOr<TimePrediction> fsdp::predictTime(ModuleOp module,
                                            func::FuncOp step,
                                            const MachineRates &machine,
                                            ArrayRef<double> measuredSeconds,
                                            ArrayRef<double> coldSeconds) {
  if (!step.getBody().hasOneBlock())
    return step.emitOpError("must be a single block to predict its time");
  Timeline t(machine);
  if (auto w = module->getAttrOfType<IntegerAttr>(kWorldSizeAttr))
    t.worldSize = w.getInt();
  t.shardGroupSize = t.worldSize;
  if (auto g = module->getAttrOfType<IntegerAttr>(kShardGroupSizeAttr))
    t.shardGroupSize = g.getInt();
  if (t.shardGroupSize < 1 || t.worldSize % t.shardGroupSize != 0)
    return module.emitError("the shard group size ")
           << t.shardGroupSize << " does not divide the world size "
           << t.worldSize;
  Block &body = step.getBody().front();
  t.host = hostValues(body);
  Operation *terminator = body.getTerminator();
  size_t index = 0;
  for (Operation &op : body) {
    if (&op == terminator)
      break;
    size_t i = index++;
    if (i < measuredSeconds.size() && measuredSeconds[i] >= 0 &&
        isa<aten::CallOp, aten::AutogradBackwardOp>(op)) {
      // Measured on this machine: its kernel, its allocations, its
      // dispatch, all in one figure; warm, and with its operands evicted
      // from the caches, for the share of them the step finds there no
      // longer.
      ++t.out.measuredCalls;
      if (auto call = dyn_cast<aten::CallOp>(op))
        t.out.flops += matrixFlops(call);
      double seconds = measuredSeconds[i];
      if (i < coldSeconds.size() && coldSeconds[i] > seconds &&
          !(op.getNumOperands() > 0 && isViewOf(&op, op.getOperand(0)))) {
        double extra = t.coldFraction(&op) * (coldSeconds[i] - seconds);
        t.out.coldSeconds += extra;
        seconds += extra;
      }
      t.touch(&op);
      t.out.instructionSeconds.push_back(t.compute(seconds));
      continue;
    }
    if (isa<aten::CallOp, aten::AutogradBackwardOp, ViewOp, ToDeviceOp,
            ToHostOp>(op))
      t.touch(&op);
    else if (auto get = dyn_cast<GetOp>(op))
      t.read(get);
    else if (auto update = dyn_cast<UpdateOp>(op))
      t.write(update);
    double seconds =
        llvm::TypeSwitch<Operation *, double>(&op)
            .Case([&](aten::CallOp call) { return t.call(call); })
            .Case<aten::AutogradBackwardOp>([&](Operation *other) {
              // libtorch's autograd for the long tail: its bytes.
              double bytes = tensorBytesOf(other->getOperands()) +
                             tensorBytesOf(other->getResults());
              return t.compute(machine.opOverheadSec +
                               bytes / machine.memoryBytesPerSec);
            })
            .Case([&](CollectiveStartOp start) { return t.start(start); })
            .Case([&](WaitOp wait) { return t.wait(wait); })
            .Case<ToDeviceOp, ToHostOp>(
                [&](Operation *copy) { return t.copy(copy); })
            // State reads and writes, views, frees, constants and the
            // generator's state: bookkeeping, no kernel.
            .Default([](Operation *) { return 0.0; });
    t.out.instructionSeconds.push_back(seconds);
  }
  // fsdp-run's step ends when the ranks have all-reduced their losses (in
  // double precision): the computation waits for the last collectives and
  // then that one.
  if (terminator->getNumOperands() > 0 && t.worldSize > 1) {
    auto loss = dyn_cast<RankedTensorType>(terminator->getOperand(0).getType());
    if (loss && loss.getRank() == 0 && isa<FloatType>(loss.getElementType())) {
      double before = t.now;
      double seconds =
          machine.collectiveLatencySec +
          2.0 * 8 * (t.worldSize - 1) / t.worldSize / machine.collectiveBytesPerSec;
      t.now = t.joined(std::max(t.now, t.comms)) + seconds;
      t.out.lossSeconds = seconds;
      t.out.collectiveSeconds += seconds;
      t.out.exposedSeconds += t.now - before;
    }
  }
  t.out.stepSeconds = t.now;
  return t.out;
}
