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
#include <string>
#include <vector>

namespace fsdp::runtime {

/// The plan format version this runtime reads.
inline constexpr int64_t kPlanFormatVersion = plan::kFormatVersion;

/// The most ranks a plan can be compiled for (ranks are C ints, as in
/// c10d and NCCL).
inline constexpr int64_t kMaxWorldSize = plan::kMaxWorldSize;

/// A user-facing error: the message says what is wrong and where.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The first line of an exception's message, without libtorch's backtrace:
/// what an Error that wraps it quotes.
std::string firstLine(const std::exception &e);

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

enum class InstKind {
  Get, Update, Constant, Call, RngState, SetRngState, AutogradBackward,
  AllGather, ReduceScatter, AllReduce, Wait, Free, View, LocalShard,
  ToDevice, ToHost
};

/// The ranks a collective runs over.
using plan::CommGroup;

struct Instruction {
  InstKind kind;
  std::string state;             // Get, Update; collectives, LocalShard: unit
  int64_t result = -1;           // Get, Constant
  int64_t value = -1;            // Update
  // Get, Update: mixed precision's compute type, when it is not the
  // state's own: a read rounds the state to it, a write widens it back.
  std::optional<c10::ScalarType> castDtype;
  // CPU offload: the results are in host memory (counted apart).
  bool host = false;
  TensorSpec type;               // Constant, Wait, View, LocalShard
  std::string hex;               // Constant
  // Call, and AutogradBackward of the call it names.
  std::string op;                // overload name
  nlohmann::json args;
  std::vector<int64_t> results;  // Call; AutogradBackward: one per wrt
  int64_t numSchemaResults = 0;
  std::vector<int64_t> mutates;
  bool listResult = false;
  std::string loc;               // module path and source line, if known
  // AutogradBackward: the gradients given, as (schema result, slot); the
  // operands (in operand order) differentiated; the generator state slot
  // (RngState: `result`), or -1.
  std::vector<std::pair<int64_t, int64_t>> resultGrads;
  std::vector<int64_t> wrt;
  int64_t rng = -1;
  int64_t input = -1;            // collectives, ToDevice, ToHost: the tensor;
                                 // Wait: the future;
                                 // Free, View, LocalShard: the buffer;
                                 // SetRngState: the state
  CommGroup group = CommGroup::World; // collectives, LocalShard
  bool acrossWorld = false;      // ReduceScatter: the sum runs over the
                                 // world in rank order (HYBRID_SHARD)
  bool mean = false;             // ReduceScatter, AllReduce: divide by ranks
  int64_t offset = 0;            // View
  std::vector<int64_t> free;     // slots released after this instruction
};

struct Plan {
  std::string function;
  int64_t numSlots = 0;
  int64_t worldSize = 1;      // ranks the plan was compiled for
  int64_t shardGroupSize = 1; // ranks that shard a flat parameter
  std::string sharding;       // FULL_SHARD, ...; "" unsharded
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
};

/// Reads and checks a plan file; throws Error naming the file and the problem.
Plan loadPlan(const std::string &path);

c10::ScalarType parseDtype(const std::string &name);
std::string dtypeName(c10::ScalarType dtype);

} // namespace fsdp::runtime

#endif // FSDP_RUNTIME_PLAN_H
