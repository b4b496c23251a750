//===- Workspaces.cpp - fsdp-opt --measure-workspaces, --measure-kernels -===//
//
// What ATen's CPU allocator holds during a step beyond the live tensors is
// what kernels allocate for themselves: oneDNN's reordered weights and
// scratchpads, normalizations' per-channel sums, a matrix product's
// contiguous copy of an operand. How much depends on the kernel, its
// operands' sizes, strides and dtypes, the machine's instruction set and
// the thread count, so it is measured rather than derived: each distinct
// call of the step (operator, constant arguments, operands' layouts) runs
// once here, on operands laid out as the memory model has them (zeros, or
// floating-point ones where a kernel refuses zeros), through fsdp-run's own
// executor code and counted by its allocator.
//
// With --measure-kernels each distinct call then runs five more times,
// timed, and five after its operands were evicted from the caches, and
// the cost model takes the medians in place of what the machine's rates
// estimate for it (the cold one for operands the step touched long
// before): a kernel's time depends on its shapes,
// its instruction set's path (a transcendental element-wise function, a
// convolution's backward, a strided copy) and its allocations, which a
// few rates describe only roughly.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Driver/Workspaces.h"
#include "fsdp/Analysis/CostModel.h"
#include "fsdp/Analysis/MemoryModel.h"
#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"
#include "fsdp/Target/Plan/PlanEmitter.h"

#include "fsdp/runtime/Communicator.h"
#include "fsdp/runtime/CountingAllocator.h"
#include "fsdp/runtime/Executor.h"
#include "fsdp/runtime/Launcher.h"
#include "fsdp/runtime/MachineSchema.h"
#include "fsdp/runtime/Plan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/raw_ostream.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <functional>
#include <map>
#include <variant>
#include <vector>

using namespace mlir;
using namespace fsdp;
namespace rt = fsdp::runtime;

namespace {

/// Restores the intra-op thread count when it goes.
struct ThreadCount {
  explicit ThreadCount(int threads) : saved(at::get_num_threads()) {
    at::set_num_threads(threads);
  }
  ~ThreadCount() { at::set_num_threads(saved); }
  int saved;
};

/// What identifies a call's kernel run (or an autograd_backward's): the
/// operator, its arguments with the operands' slots left out, and the
/// operands' layouts.
std::string classKey(const rt::Instruction &inst,
                     ArrayRef<MemoryPrediction::OperandLayout> operands) {
  const rt::inst::Call &call = *inst.call();
  std::string key = call.op;
  for (const nlohmann::json &arg : call.args)
    key += "|" + ((arg.contains("t") || arg.contains("tl") ||
                   arg.contains("otl"))
                      ? std::string("T")
                      : arg.dump());
  for (const MemoryPrediction::OperandLayout &l : operands) {
    key += "|" + dtypeName(l.element) + "[";
    for (int64_t s : l.sizes)
      key += std::to_string(s) + ",";
    key += ":";
    for (int64_t s : l.strides)
      key += std::to_string(s) + ",";
    key += "]";
  }
  for (int64_t r : call.requiresGrad)
    key += "|g" + std::to_string(r);
  if (const auto *backward = inst.as<rt::inst::AutogradBackward>()) {
    key += "|backward";
    for (int64_t w : backward->wrt)
      key += "|w" + std::to_string(w);
    for (const auto &[r, slot] : backward->resultGrads)
      key += "|r" + std::to_string(r);
    key += backward->rng >= 0 ? "|rng" : "";
  }
  return key;
}

/// Elements a layout reaches in its storage.
int64_t extent(const MemoryPrediction::OperandLayout &l) {
  int64_t last = 0;
  for (auto [size, stride] : llvm::zip(l.sizes, l.strides)) {
    if (size == 0)
      return 0;
    last += (size - 1) * stride;
  }
  return last + 1;
}

/// fsdp-run's Gloo all-reduce (runtime/lib/Gloo.cpp) beyond what the plan
/// holds: at the wait, the summed shard, alive while it is gathered. (At
/// the start, the zeros that pad the input and a strided input's
/// contiguous copy are gone before the output buffer is taken, which is
/// larger.)
void stagingOfGlooAllReduces(const rt::Plan &plan,
                             SmallVectorImpl<int64_t> &workspace) {
  std::map<int64_t, int64_t> groupByFuture;
  for (size_t i = 0; i < plan.instructions.size(); ++i) {
    const rt::Instruction &inst = plan.instructions[i];
    if (const auto *reduce = inst.as<rt::inst::AllReduce>()) {
      groupByFuture[reduce->result] =
          rt::sizeOfGroup(reduce->group, static_cast<int>(plan.worldSize),
                          static_cast<int>(plan.shardGroupSize));
    } else if (const auto *wait = inst.as<rt::inst::Wait>()) {
      auto it = groupByFuture.find(wait->future);
      if (it == groupByFuture.end() || it->second <= 1)
        continue;
      int64_t n = it->second;
      int64_t padded = (wait->type.numel() + n - 1) / n * n;
      workspace[i] = padded / n *
                     static_cast<int64_t>(c10::elementSize(wait->type.dtype));
    }
  }
}

} // namespace

LogicalResult driver::measureWorkspaces(ModuleOp module, StringRef entry,
                                        MemoryReport &report, int threads,
                                        int64_t budgetBytes, bool kernels) {
  auto func = module.lookupSymbol<func::FuncOp>(entry);
  if (!func)
    return module.emitError("no function @") << entry << " to measure";
  std::string text;
  llvm::raw_string_ostream os(text);
  if (failed(emitPlan(module, entry, os)))
    return failure();
  std::optional<rt::Plan> plan;
  try {
    plan = rt::parsePlan(text, "the compiled plan");
  } catch (const std::exception &e) {
    return module.emitError("cannot measure the kernels' workspaces: ")
           << e.what();
  }
  const MemoryPrediction &p = report.prediction;
  size_t n = p.instructionPeak.size();
  if (plan->instructions.size() != n || p.callOperands.size() != n)
    return module.emitError("cannot measure the kernels' workspaces: the "
                            "plan has ")
           << plan->instructions.size() << " instructions, the memory model "
           << n;

  if (plan->device != "cpu" ||
      (module->hasAttr(kBackendAttr) &&
       cast<StringAttr>(module->getAttr(kBackendAttr)).getValue() == "nccl"))
    return module.emitError(
               kernels ? "--measure-kernels times this machine's CPU kernels "
                         "for ranks that run over Gloo: this step is compiled "
                         "for "
                       : "--measure-workspaces predicts the CPU allocator of "
                         "ranks that run over Gloo: this step is compiled for ")
           << (plan->device != "cpu" ? "--device " + plan->device
                                     : std::string("--backend nccl"));

  MemoryReport::Allocator a;
  a.threads = threads;
  a.workspace.assign(n, 0);
  ThreadCount count(threads);
  // Timed as fsdp-run runs them: with malloc keeping what a call frees.
  if (kernels)
    (void)rt::keepFreedHostMemory();
  const int timedRuns = kernels ? 5 : 0;
  // Read through before a timed run whose operands should be cold (read,
  // not written: written lines would be written back during the run).
  at::Tensor evict =
      kernels ? at::ones({static_cast<int64_t>(machine::kEvictBytes / 4)},
                         at::kFloat)
              : at::Tensor();
  // Each call is timed warm, and with its operands evicted from the caches,
  // as a step finds those it touched long before (the optimizer's state,
  // the activations saved for the backward): the cost model takes each in
  // turn by how long before (CostModel.h).
  std::function<void()> cold;
  if (kernels)
    cold = [&] { (void)evict.sum(); };
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(0);
  std::vector<double> kernelSeconds(n, -1.0), coldSeconds(n, -1.0);
  std::map<std::string, std::variant<rt::Executor::CallMeasurement, std::string>>
      measured;
  for (size_t i = 0; i < n; ++i) {
    const rt::Instruction &inst = plan->instructions[i];
    const rt::inst::Call *call = inst.call(); // autograd_backward's too
    if (!call)
      continue; // no kernel of its own
    ++a.measured;
    const auto &operands = p.callOperands[i];
    std::string key = classKey(inst, operands);
    auto found = measured.find(key);
    if (found == measured.end()) {
      std::variant<rt::Executor::CallMeasurement, std::string> result;
      int64_t bytes = 0;
      for (const auto &l : operands)
        bytes += extent(l) * elementBytes(l.element);
      if (bytes > budgetBytes) {
        result = "its operands hold " + std::to_string(bytes) +
                 " bytes, more than the " + std::to_string(budgetBytes) +
                 " measured";
      } else {
        // Zeros first; where a kernel refuses them (istft's window must
        // overlap-add to more than zero), floating-point operands of ones
        // (indices stay zeros, which every index range holds). Timed, on
        // values drawn from [0.5, 1) first: on zeros some kernels take a
        // slow path (sqrt's is 7 times slower) that training never does.
        enum class Fill { Random, Zeros, Ones };
        SmallVector<Fill, 3> fills = {Fill::Zeros, Fill::Ones};
        if (kernels)
          fills.insert(fills.begin(), Fill::Random);
        for (Fill fill : fills) {
          try {
            std::vector<at::Tensor> tensors;
            for (const auto &l : operands) {
              at::ScalarType dtype = rt::parseDtype(dtypeName(l.element));
              at::Tensor t = at::zeros({extent(l)}, dtype);
              bool real = at::isFloatingType(dtype) || at::isComplexType(dtype);
              if (real && fill == Fill::Ones)
                t.fill_(1.0);
              else if (real && fill == Fill::Random)
                t.uniform_(0.5, 1.0, generator);
              tensors.push_back(t.as_strided(l.sizes, l.strides));
            }
            result = rt::Executor::measureCall(*plan, i, std::move(tensors),
                                               timedRuns, cold);
            ++a.classes;
            break;
          } catch (const std::exception &e) {
            result = std::string(kernels ? "it failed on values from [0.5, "
                                           "1), on zeros and on ones: "
                                         : "it failed on zeros and on ones: ") +
                     e.what();
          }
        }
      }
      found = measured.emplace(std::move(key), std::move(result)).first;
    }
    if (const auto *m =
            std::get_if<rt::Executor::CallMeasurement>(&found->second)) {
      a.workspace[i] = m->workspaceBytes;
      if (kernels) {
        kernelSeconds[i] = m->seconds;
        coldSeconds[i] = m->coldSeconds;
      }
    } else
      a.unmeasured.push_back({static_cast<int64_t>(i), call->op,
                              std::get<std::string>(found->second)});
  }

  stagingOfGlooAllReduces(*plan, a.workspace);

  a.peakBytes = p.startBytes;
  a.instructionPeak.resize(n);
  for (size_t i = 0; i < n; ++i) {
    // On a CPU rank, host memory (CPU offload's) is the same allocator's:
    // what it holds beyond the step's start counts too.
    a.instructionPeak[i] = p.instructionPeak[i] - p.constantBytes[i] +
                           a.workspace[i] + p.hostInstructionPeak[i] -
                           p.hostStartBytes;
    if (a.instructionPeak[i] > a.peakBytes) {
      a.peakBytes = a.instructionPeak[i];
      a.peakInstruction = static_cast<int64_t>(i);
    }
  }
  if (a.peakInstruction >= 0) {
    const rt::Instruction &inst = plan->instructions[a.peakInstruction];
    a.peakOp = inst.call() ? inst.call()->op : "no kernel";
  }
  report.allocator = std::move(a);
  if (kernels) {
    FailureOr<TimePrediction> time =
        predictTime(module, func, report.machine, kernelSeconds, coldSeconds);
    if (failed(time))
      return failure();
    report.time = std::move(*time);
  }
  return success();
}
