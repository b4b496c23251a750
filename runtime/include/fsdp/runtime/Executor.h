//===- Executor.h - runs a plan on one rank ---------------------*- C++ -*-===//
#ifndef FSDP_RUNTIME_EXECUTOR_H
#define FSDP_RUNTIME_EXECUTOR_H

#include "fsdp/runtime/Communicator.h"
#include "fsdp/runtime/CountingAllocator.h"
#include "fsdp/runtime/Device.h"
#include "fsdp/runtime/OperatorGuards.h"
#include "fsdp/runtime/Plan.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/core/ivalue.h>
#include <ATen/core/stack.h>

#include <functional>
#include <map>
#include <set>
#include <optional>
#include <unordered_map>
#include <unordered_set>

namespace fsdp::runtime {

/// The parameters and buffers of the model, by canonical FQN.
using State = std::map<std::string, at::Tensor>;

/// Reads a plan's parameters and buffers from a TorchScript archive, checking
/// that each exists with the plan's shape and dtype. Of a flat parameter the
/// rank reads and keeps only its shard (`shardRank`: its index in the shard
/// group); optimizer state starts as zeros. `bytesRead`, when given, is set to
/// the bytes of tensor values read from the file.
State loadState(const Plan &plan, const std::string &modelPath,
                int shardRank = 0, int64_t *bytesRead = nullptr);

/// Moves `state` (loadState's or readCheckpoint's, in CPU memory) to where
/// the plan keeps it: the rank's `device`, or host memory for what CPU
/// offload keeps there (page-locked when `device` is a GPU).
void placeState(const Plan &plan, State &state, c10::Device device);

/// The parameters inside flat parameters, whole, gathered from the shard
/// group: every rank of the group must call it.
State gatherFlatParams(const Plan &plan, const State &state,
                       Communicator &comm);

/// Writes the parameters and persistent buffers of `state` (every FQN,
/// aliases of tied weights too; `gathered` holds the members of flat
/// parameters) as a file that Python's torch.load reads into a dict FQN ->
/// tensor, which the module's load_state_dict accepts; nothing is left
/// behind on failure. Optimizer state is not written.
/// The parameters and persistent buffers of `state` by every FQN (aliases
/// of tied weights too; `gathered` holds the members of flat parameters):
/// what saveState writes and what load_state_dict takes.
State stateDict(const Plan &plan, const State &state, const State &gathered);

void saveState(const Plan &plan, const State &state, const State &gathered,
               const std::string &path);

/// Bytes of parameters (or their shards) and optimizer state this rank holds
/// between steps.
int64_t parameterAndOptimizerBytes(const Plan &plan, const State &state);

/// Writes `bytes` to `path` through a temporary file: on failure nothing is
/// left behind and the old file, if any, is untouched.
void writeFileAtomically(const std::string &path, const std::vector<char> &bytes);

/// `value` as torch.save writes it, in the form torch.load reads by default
/// (weights_only=True, torch >= 2.6): plain lists, dicts and tuples, without
/// the TorchScript type tags and typed-list constructors torch::pickle_save
/// writes (torch.jit._pickle.restore_type_tag, build_tensorlist, ...).
std::vector<char> saveForTorchLoad(const c10::IValue &value);

/// A copy of `device`'s default generator's state (`torch.get_rng_state()`,
/// `torch.cuda.get_rng_state()`), and setting it: the plan's rng_state and
/// set_rng_state, autograd_backward's replay, and checkpoints.
at::Tensor generatorState(c10::Device device);
void setGeneratorState(c10::Device device, const at::Tensor &state);

/// Executes a plan step by step. Operator handles are resolved once, when the
/// executor is built; each slot is released after its last use.
class Executor {
public:
  /// `comm` runs the plan's collectives, and its device is where the step
  /// runs; null: a single rank on the CPU.
  explicit Executor(const Plan &plan, Communicator *comm = nullptr);

  /// Runs one step on `inputs` (in plan order), updating `state`; returns the
  /// plan's outputs. The step holds the inputs from then on, and lets each
  /// go after its last use, as the memory model has it: a caller that moves
  /// them in keeps no reference that outlives it.
  std::vector<at::Tensor> run(std::vector<at::Tensor> inputs, State &state);

  /// Peak bytes of live tensors (slots, state, and what collectives hold
  /// in flight) during the last run.
  int64_t peakBytes() const { return peak; }
  /// CPU offload: the peak bytes of live tensors in host memory (offloaded
  /// state and what the host computes), counted apart from `peakBytes`.
  int64_t hostPeakBytes() const { return hostPeak; }
  /// Bytes live when the last run began (state and batch), after each of
  /// its instructions, and the most during each (what fsdp-opt's memory
  /// model predicts instruction by instruction).
  int64_t startBytes() const { return startLive; }
  const std::vector<int64_t> &liveAfter() const { return after; }
  const std::vector<int64_t> &liveDuring() const { return during; }
  /// CPU ranks: reads `counter` (the counting allocator) around every
  /// instruction from now on, so that each run also reports what the
  /// allocator handed out, during each instruction and at its peak, on the
  /// scale of the live bytes (state and batch included).
  void trackAllocator(AllocatorCounter &counter) { allocator = &counter; }
  /// The allocator's most bytes during each instruction of the last run
  /// (empty unless tracked): the live bytes plus what kernels allocated for
  /// themselves (workspaces) and collectives' own staging.
  const std::vector<int64_t> &allocatorDuring() const { return allocDuring; }
  /// The allocator's most bytes in the last run (its start included).
  int64_t allocatorPeakBytes() const { return allocPeak; }
  /// Bytes of reduced gradients (what the optimizer reads) in the last run.
  int64_t gradientBytes() const { return gradBytes; }
  /// CPU offload: the updates of host state in the last run that took a
  /// new buffer instead of writing the state's own (pinned on a GPU),
  /// because something else still read the old value.
  int64_t hostStateMoves() const { return hostMoves; }
  /// Milliseconds the last run was blocked in waits for collectives (what
  /// the schedule did not overlap with compute).
  double commWaitMs() const { return waitMs; }

  /// What running call instruction #i of `plan` on the CPU takes.
  struct CallMeasurement {
    /// What it allocates beyond the storages of its results: its kernel's
    /// workspaces, which a rank's allocator holds on top of the live
    /// tensors while it runs.
    int64_t workspaceBytes = 0;
    /// The median time of `timedRuns` further runs, each right after the
    /// one before (its operands warm in the caches), of those that took no
    /// page fault where any did not (0 without any).
    double seconds = 0;
    /// The same of `timedRuns` runs after that, each after the operands
    /// were evicted from the caches (`seconds` where nothing evicts them).
    double coldSeconds = 0;
  };
  /// Runs call instruction #i of `plan` once on `operands` (its tensor
  /// operands in operand order, laid out as the step has them; what a
  /// kernel allocates does not depend on their values), counted by the
  /// counting allocator, which it installs; then `timedRuns` more times,
  /// timed, and where `evict` is given `timedRuns` more, each after
  /// `evict` (untimed). Throws Error if the call fails.
  static CallMeasurement
  measureCall(const Plan &plan, size_t i, std::vector<at::Tensor> operands,
              int timedRuns = 0, const std::function<void()> &evict = nullptr);

  /// Times every instruction from now on (`fsdp-run --profile`).
  void enableProfiling() { profile.assign(plan.instructions.size(), 0.0); }
  /// Milliseconds spent in each instruction over all runs (empty unless
  /// profiling).
  const std::vector<double> &instructionTimes() const { return profile; }
  /// The runs those times sum over (a resumed run's, not the steps before
  /// its checkpoint; a CUDA graph's replays do not run the instructions).
  int64_t profiledRuns() const { return profiledRunCount; }

private:
  struct Call {
    std::optional<c10::OperatorHandle> op;
    // Per schema argument: a prebuilt constant, or how to fetch tensors.
    std::vector<c10::IValue> constants;
    std::vector<int> argKind; // 0 constant, 1 tensor, 2 Tensor[], 3 Tensor?[]
    std::vector<std::vector<int64_t>> argSlots; // -1: None in a Tensor?[]
    // Per written argument: its slot dies here and no other argument reads
    // it, so it may be written in place if nothing else holds its storage.
    std::vector<bool> donate;
    // Each tensor operand, in operand order: (argument, list element).
    std::vector<std::pair<size_t, size_t>> operands;
    // Checks its index and size arguments before it runs (OperatorGuards.h).
    OperatorGuard guard = nullptr;
  };

  /// The boxed arguments of `call`; `replace` (by operand index, or empty)
  /// stands in for slots' tensors.
  void buildStack(const Call &call, torch::jit::Stack &stack,
                  const std::map<size_t, at::Tensor> &replace) const;
  /// The boxed arguments of `call`, each tensor operand from
  /// `operandTensor(operand index, slot)`.
  static void
  stackOf(const Call &call, torch::jit::Stack &stack,
          const std::function<const at::Tensor &(size_t, int64_t)> &operandTensor);
  /// The tensors a call returned: its schema results, a Tensor[] flattened.
  static std::vector<at::Tensor> callResults(size_t i, const inst::Call &inst,
                                             const torch::jit::Stack &stack);
  /// autograd_backward #i's gradients (of `inst.wrt`, in order; zeros where
  /// an operand does not reach the results), by libtorch's autograd: the
  /// call on `operands` (the wrt ones as leaves requiring grad), run with
  /// the generator state `rng` where the plan recorded one (the current
  /// state is put back), and one backward from `resultGrads` (by
  /// inst.resultGrads' order). `stack` is the stack calls reuse.
  static std::vector<at::Tensor>
  autogradGrads(size_t i, const Call &call, const inst::AutogradBackward &inst,
                const std::vector<at::Tensor> &operands,
                const std::vector<at::Tensor> &resultGrads,
                const at::Tensor &rng, c10::Device device,
                torch::jit::Stack &stack);
  /// A call as the plan has it (Call or AutogradBackward, instruction
  /// #i), resolved and checked against the operator's schema.
  static Call prepareCall(size_t i, const Instruction &inst,
                          c10::Device device);

  /// What a handler works on besides its instruction: the instruction's
  /// index, the step's state, and the stack calls reuse.
  struct InstContext {
    size_t i;
    State &state;
    torch::jit::Stack &stack;
  };
  /// Runs an instruction: one handler per kind (the inst:: structs of
  /// Plan.h), chosen by std::visit over the instruction.
  void execute(const InstContext &c, const inst::Get &get);
  void execute(const InstContext &c, const inst::Update &update);
  void execute(const InstContext &c, const inst::Constant &constant);
  void execute(const InstContext &c, const inst::Call &planned);
  void execute(const InstContext &c, const inst::AutogradBackward &inst);
  void execute(const InstContext &c, const inst::RngState &rng);
  void execute(const InstContext &c, const inst::SetRngState &restore);
  void execute(const InstContext &c, const inst::AllGather &gather);
  void execute(const InstContext &c, const inst::ReduceScatter &scatter);
  void execute(const InstContext &c, const inst::AllReduce &reduce);
  void execute(const InstContext &c, const inst::Wait &wait);
  void execute(const InstContext &c, const inst::LocalShard &local);
  void execute(const InstContext &c, const inst::ToDevice &toDevice);
  void execute(const InstContext &c, const inst::ToHost &toHost);
  void execute(const InstContext &c, const inst::Free &free);
  void execute(const InstContext &c, const inst::View &view);

  /// Memory: a storage counts once, however many slots and collectives
  /// hold it.
  void count(const at::Tensor &t, bool host = false);
  void uncount(const at::Tensor &t);
  /// `t` becomes `slot`'s value; a new storage is counted in the memory
  /// the current instruction's results are in (`resultsOnHost`).
  void set(int64_t slot, at::Tensor t);
  /// `tensors` count until `slot` (a collective's future) is released.
  void hold(int64_t slot, std::vector<at::Tensor> tensors);
  void release(int64_t slot);

  const Plan &plan;
  std::vector<Call> calls;        // by instruction index (Call ones)
  std::vector<at::Tensor> constants; // by instruction index (Constant ones)
  std::vector<at::Tensor> slots;
  std::vector<std::unique_ptr<Pending>> futures; // by slot
  std::vector<std::vector<at::Tensor>> held;     // by future slot
  Communicator *comm;
  std::unique_ptr<Communicator> single;
  c10::Device device{c10::kCPU}; // the rank's (the communicator's)
  std::unique_ptr<cuda::Copier> copier; // CPU offload on a GPU
  int64_t gradBytes = 0;
  int64_t hostMoves = 0;
  double waitMs = 0;
  // Live storages: references, bytes, and whether in host memory.
  struct Counted {
    int64_t refs = 0, bytes = 0;
    bool host = false;
  };
  std::unordered_map<const void *, Counted> storages;
  int64_t hostLive = 0, hostPeak = 0;
  bool resultsOnHost = false; // the current instruction's (CPU offload)
  std::unordered_set<std::string> hostState; // state in host memory (plan's)
  int64_t live = 0, peak = 0, startLive = 0, instructionPeak = 0;
  std::vector<int64_t> after, during;
  AllocatorCounter *allocator = nullptr;
  std::vector<int64_t> allocDuring;
  int64_t allocPeak = 0;
  std::vector<double> profile;
  int64_t profiledRunCount = 0;
};

} // namespace fsdp::runtime

#endif // FSDP_RUNTIME_EXECUTOR_H
