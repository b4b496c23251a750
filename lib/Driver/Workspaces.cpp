//===- Workspaces.cpp - fsdp-opt --measure-workspaces ---------------------===//
//
// What ATen's CPU allocator holds during a step beyond the live tensors is
// what kernels allocate for themselves: oneDNN's reordered weights and
// scratchpads, normalizations' per-channel sums, a matrix product's
// contiguous copy of an operand. How much depends on the kernel, its
// operands' sizes, strides and dtypes, the machine's instruction set and
// the thread count, so it is measured rather than derived: each distinct
// call of the step (operator, constant arguments, operands' layouts) runs
// once here, on zero-filled operands laid out as the memory model has them,
// through fsdp-run's own executor code and counted by its allocator.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Driver/Workspaces.h"
#include "fsdp/Analysis/MemoryModel.h"
#include "fsdp/Target/Plan/PlanEmitter.h"

#include "fsdp/runtime/Executor.h"
#include "fsdp/runtime/Plan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/raw_ostream.h"

#include <ATen/Parallel.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <map>
#include <thread>

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

/// What identifies a call's kernel run: the operator, its arguments with
/// the operands' slots left out, and the operands' layouts.
std::string classKey(const rt::inst::Call &call,
                     ArrayRef<MemoryPrediction::OperandLayout> operands) {
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

} // namespace

int driver::defaultWorkspaceThreads(int64_t worldSize) {
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  return static_cast<int>(
      std::max<int64_t>(1, cores / std::max<int64_t>(1, worldSize)));
}

LogicalResult driver::measureWorkspaces(ModuleOp module, StringRef entry,
                                        MemoryReport &report, int threads,
                                        int64_t budgetBytes) {
  auto func = module.lookupSymbol<func::FuncOp>(entry);
  if (!func)
    return module.emitError("no function @") << entry << " to measure";
  FailureOr<MemoryPrediction> layouts =
      predictMemory(module, func, /*operandLayouts=*/true);
  if (failed(layouts))
    return failure();
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
  if (plan->instructions.size() != n || layouts->callOperands.size() != n)
    return module.emitError("cannot measure the kernels' workspaces: the "
                            "plan has ")
           << plan->instructions.size() << " instructions, the memory model "
           << n;

  MemoryReport::Allocator a;
  a.threads = threads;
  a.workspace.assign(n, 0);
  ThreadCount count(threads);
  std::map<std::string, std::variant<int64_t, std::string>> measured;
  for (size_t i = 0; i < n; ++i) {
    const rt::Instruction &inst = plan->instructions[i];
    if (const auto *backward = inst.as<rt::inst::AutogradBackward>()) {
      a.unmeasured.push_back({static_cast<int64_t>(i), backward->op,
                              "libtorch's autograd runs it"});
      continue;
    }
    const auto *call = inst.as<rt::inst::Call>();
    if (!call)
      continue; // no kernel of its own
    ++a.measured;
    const auto &operands = layouts->callOperands[i];
    std::string key = classKey(*call, operands);
    auto found = measured.find(key);
    if (found == measured.end()) {
      std::variant<int64_t, std::string> result;
      int64_t bytes = 0;
      for (const auto &l : operands)
        bytes += extent(l) * (tensorBytes(RankedTensorType::get({1}, l.element)));
      if (bytes > budgetBytes) {
        result = "its operands hold " + std::to_string(bytes) +
                 " bytes, more than the " + std::to_string(budgetBytes) +
                 " measured";
      } else {
        try {
          std::vector<at::Tensor> tensors;
          for (const auto &l : operands)
            tensors.push_back(
                at::zeros({extent(l)}, rt::parseDtype(dtypeName(l.element)))
                    .as_strided(l.sizes, l.strides));
          result = rt::Executor::workspaceBytes(*plan, i, std::move(tensors));
          ++a.classes;
        } catch (const std::exception &e) {
          result = std::string("it failed on zeros: ") + e.what();
        }
      }
      found = measured.emplace(std::move(key), std::move(result)).first;
    }
    if (const auto *bytes = std::get_if<int64_t>(&found->second))
      a.workspace[i] = *bytes;
    else
      a.unmeasured.push_back({static_cast<int64_t>(i), call->op,
                              std::get<std::string>(found->second)});
  }

  a.peakBytes = p.startBytes;
  a.instructionPeak.resize(n);
  for (size_t i = 0; i < n; ++i) {
    a.instructionPeak[i] =
        p.instructionPeak[i] - p.constantBytes[i] + a.workspace[i];
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
  return success();
}
