//===- Plan.h - a plan as the runtime reads it ------------------*- C++ -*-===//
//
// docs/plan-format.md describes the file. The runtime reads only this.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_PLAN_H
#define FSDP_RUNTIME_PLAN_H

#include "fsdp/runtime/PlanSchema.h"

#include <c10/core/ScalarType.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <stdexcept>
#include <optional>
#include <memory>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace fsdp::runtime {

/// The plan format version this runtime reads.
inline constexpr int64_t kPlanFormatVersion = plan::kFormatVersion;

/// The most ranks a plan can be compiled for (ranks are C ints, as in
/// c10d and NCCL).
inline constexpr int64_t kMaxWorldSize = plan::kMaxWorldSize;

/// The most bytes of a plan file fsdp-run reads (a step of fsdp-opt's
/// 50,000 calls bound, with its constants, is far smaller).
inline constexpr int64_t kMaxPlanBytes = int64_t(4) << 30;

/// A user-facing error: the message says what is wrong and where.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The first line of an exception's message, without libtorch's backtrace:
/// what an Error that wraps it quotes.
std::string firstLine(const std::exception &e);
/// The first line of `text` that says something (libtorch's unpickler
/// begins some messages with an empty one).
std::string firstLine(const std::string &text);

/// `v` as an integer when it is a JSON whole number within 64 bits; nullopt
/// for anything else (`2.7`, `1e300`, `"4"`, 2^64 - 1), which files people
/// share must not have converted.
std::optional<int64_t> wholeNumber(const nlohmann::json &v);

/// Writes all `size` bytes to `fd` (again after EINTR and short writes);
/// false with errno set when a write fails.
bool writeAll(int fd, const char *data, size_t size);

struct TensorSpec {
  std::vector<int64_t> shape;
  c10::ScalarType dtype;
  std::string str() const; // e.g. "4x32xf32"
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
};

enum class StateKind { Param, Buffer, Optim, FlatParam };

/// A parameter inside a flat parameter.
struct FlatMember {
  std::string name;
  TensorSpec type;
  int64_t offset = 0;
  std::vector<std::string> aliases;
};

struct StateEntry {
  std::string name;
  StateKind kind = StateKind::Buffer;
  TensorSpec type;
  std::vector<std::string> aliases;
  std::string param; // Optim: the parameter it belongs to ("" if none)
  bool persistent = true; // false: not in state_dict (checkpoints skip it)
  // Optim: the value before the first step: zero, or (`init: "lr"`, the
  // learning rate the runner sets) the optimizer's lr.
  bool initLr = false;
  double init = 0.0;
  bool host = false; // CPU offload: lives in host memory
  // FlatParam: `type` is a rank's shard of the padded flat buffer, or the
  // whole buffer if `replicated` (OSS, SHARDED_DDP: only its gradient and
  // optimizer state are sharded).
  int64_t numel = 0, padded = 0, shards = 1;
  bool replicated = false;
  std::vector<FlatMember> members;

  /// FlatParam: the elements of one rank's shard (of its gradient and
  /// optimizer state, and of the parameters unless replicated).
  int64_t shardNumel() const { return shards > 0 ? padded / shards : 0; }

  bool isParam() const {
    return kind == StateKind::Param || kind == StateKind::FlatParam;
  }
  /// Read from the model file (parameters and buffers), rather than zero.
  bool fromModel() const { return kind != StateKind::Optim; }
};

struct InputEntry {
  std::string name;
  TensorSpec type;
  int64_t slot;
  /// Gradient accumulation: the micro-batch (0 .. micro_batches - 1) the
  /// input feeds; step s reads entry s * micro_batches + micro_batch of the
  /// data.
  int64_t microBatch = 0;
};

using plan::InstKind;

/// The ranks a collective runs over.
using plan::CommGroup;

/// The instructions, one struct per kind (docs/plan-format.md gives each
/// field's meaning); slots are indices into the step's values.
namespace inst {
/// Reads a state entry. Mixed precision: `castDtype`, the compute type when
/// it is not the state's own (the read rounds a copy to it).
struct Get {
  std::string state;
  int64_t result = -1;
  std::optional<c10::ScalarType> castDtype;
};
/// Writes a state entry (a write in `castDtype` widens to the state's).
struct Update {
  std::string state;
  int64_t value = -1;
  std::optional<c10::ScalarType> castDtype;
};
struct Constant {
  TensorSpec type;
  std::string hex; // the bytes, little-endian
  int64_t result = -1;
};
/// An ATen operator call: `results` are its schema results (a Tensor[]
/// flattened), then one per written argument (`mutates`).
struct Call {
  std::string op;      // overload name
  nlohmann::json args; // per schema argument: a slot, slots or a constant
  std::vector<int64_t> results;
  int64_t numSchemaResults = 0;
  std::vector<int64_t> mutates;
  bool listResult = false;
  std::string loc; // module path and source line, if known
  // Tensor operands (by index, as `wrt` counts them) that require grad in
  // eager training: ATen's matmul reads the flag to choose its kernel.
  std::vector<int64_t> requiresGrad;
};
/// The gradients of a call (its own fields): of the operands `wrt` (in
/// operand order), given the gradients `resultGrads` of its schema results
/// as (result, slot); `results` has one slot per wrt operand; `rng`, the
/// generator state its forward ran with, or -1.
struct AutogradBackward : Call {
  std::vector<std::pair<int64_t, int64_t>> resultGrads;
  std::vector<int64_t> wrt;
  int64_t rng = -1;
};
struct RngState {
  int64_t result = -1;
};
struct SetRngState {
  int64_t state = -1;
};
struct AllGather {
  std::string unit;
  CommGroup group = CommGroup::World;
  int64_t input = -1, result = -1; // the shard; the future
};
struct ReduceScatter {
  std::string unit;
  CommGroup group = CommGroup::World;
  bool acrossWorld = false; // the sum runs over the world in rank order
                            // (HYBRID_SHARD), scattered over `group`
  bool mean = false;        // divide by the ranks
  int64_t input = -1, result = -1;
};
struct AllReduce {
  CommGroup group = CommGroup::World;
  bool mean = false;
  int64_t input = -1, result = -1;
};
struct Wait {
  int64_t future = -1, result = -1;
  TensorSpec type;
  bool gradient = false; // the result is a parameter's reduced gradient
};
/// The rank's shard of a gathered buffer (`type`: the shard's).
struct LocalShard {
  std::string unit;
  CommGroup group = CommGroup::World;
  int64_t buffer = -1, result = -1;
  TensorSpec type;
};
/// CPU offload: a copy into device (ToDevice) or host memory (ToHost).
struct ToDevice {
  int64_t input = -1, result = -1;
};
struct ToHost {
  int64_t input = -1, result = -1;
};
/// The last use of a buffer (its slot is released after it).
struct Free {
  int64_t buffer = -1;
};
/// `type` at element `offset` of a buffer.
struct View {
  int64_t buffer = -1, result = -1, offset = 0;
  TensorSpec type;
};
} // namespace inst

struct Instruction {
  /// In InstKind's order: the variant's index is the kind.
  std::variant<inst::Get, inst::Update, inst::Constant, inst::Call,
               inst::AutogradBackward, inst::RngState, inst::SetRngState,
               inst::AllGather, inst::ReduceScatter, inst::AllReduce,
               inst::Wait, inst::LocalShard, inst::ToDevice, inst::ToHost,
               inst::Free, inst::View>
      op;
  // CPU offload: the results are in host memory (counted apart).
  bool host = false;
  std::vector<int64_t> free; // slots released after this instruction

  InstKind kind() const { return static_cast<InstKind>(op.index()); }
  template <typename T> const T *as() const { return std::get_if<T>(&op); }
  template <typename T> bool is() const {
    return std::holds_alternative<T>(op);
  }
  /// The call, for Call and AutogradBackward; else null.
  const inst::Call *call() const {
    if (const auto *c = as<inst::Call>())
      return c;
    return as<inst::AutogradBackward>();
  }
};

struct Plan {
  /// SHA-1 of the plan file's bytes, as loadPlan parsed them.
  std::string digest;
  std::string function;
  int64_t numSlots = 0;
  int64_t worldSize = 1;      // ranks the plan was compiled for
  int64_t shardGroupSize = 1; // ranks that shard a flat parameter
  std::string sharding;       // FULL_SHARD, ...; "" unsharded
  /// The device the step was compiled for: "cuda" (it computes as eager
  /// PyTorch does on a GPU) or "cpu".
  std::string device = "cpu";
  std::vector<StateEntry> state;
  std::vector<InputEntry> inputs;
  /// Micro-batches per step (gradient accumulation; 1 without): each input
  /// name appears once per micro-batch.
  int64_t microBatches = 1;
  /// The optimizer's torch.optim settings (`name`, `lr`, `betas`, ...);
  /// null in a plan without an optimizer.
  nlohmann::json optimizer;
  // GradScaler's settings (init_scale, growth_factor, backoff_factor,
  // growth_interval) where the plan scales its loss; null otherwise.
  nlohmann::json gradScaler;
  /// The checkpoints fsdp-run writes unless --state-dict-type says:
  /// "FULL_STATE_DICT", "SHARDED_STATE_DICT", or "" (full).
  std::string stateDictType;
  std::vector<int64_t> outputs;
  /// Outputs that are per-step metrics (`lr`): name and output index.
  std::vector<std::pair<std::string, int64_t>> metrics;
  std::vector<Instruction> instructions;
  /// The evaluation step (`eval`): a program over the same state (the
  /// forward and the loss, nothing updated) with its own slots, inputs,
  /// outputs and instructions; its other fields are this plan's. Null
  /// where the plan has none, and then `noEval` may say why.
  std::shared_ptr<const Plan> eval;
  std::string noEval;
};

/// Reads and checks a plan file; throws Error naming the file and the problem.
Plan loadPlan(const std::string &path);

/// Checks a plan's JSON text as loadPlan does, `path` naming it in errors.
Plan parsePlan(const std::string &bytes, const std::string &path);

/// An instruction as the plan file spells it: what loadPlan read, written
/// back (the round trip a test compares with what fsdp-opt emitted).
nlohmann::json instructionJson(const Instruction &inst);

c10::ScalarType parseDtype(const std::string &name);
std::string dtypeName(c10::ScalarType dtype);
/// libtorch's scalar type of a plan dtype, and back (none: a dtype plans
/// do not hold).
c10::ScalarType scalarType(plan::DType dtype);
std::optional<plan::DType> planDType(c10::ScalarType dtype);

} // namespace fsdp::runtime

#endif // FSDP_RUNTIME_PLAN_H
