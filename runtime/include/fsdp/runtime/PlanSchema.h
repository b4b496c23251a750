//===- PlanSchema.h - the plan format's constants, owned by the runtime ----===//
//
// What the compiler writes and the runtime reads, spelled once: the format
// version, the world-size bound, the element types and the collective groups
// with their names in the file (docs/plan-format.md). The runtime owns the
// format; the compiler's emitter includes this header. It depends on the
// standard library only, so the compiler needs no libtorch for it.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_PLANSCHEMA_H
#define FSDP_RUNTIME_PLANSCHEMA_H

#include <cstdint>
#include <iterator>
#include <optional>
#include <string_view>

namespace fsdp::plan {

/// The plan format version: what the compiler writes and the runtime reads.
inline constexpr int64_t kFormatVersion = 12;

/// The most ranks a plan can be compiled for and run on (ranks are C ints,
/// as in c10d and NCCL).
inline constexpr int64_t kMaxWorldSize = 2147483647;

/// The element types a plan's tensors have.
enum class DType { F32, F64, F16, BF16, I64, I32, I16, I8, UI8, I1, C64, C128 };

struct DTypeInfo {
  DType dtype;
  std::string_view name; // in the plan file
  int64_t bytes;         // per element
};

inline constexpr DTypeInfo kDTypes[] = {
    {DType::F32, "f32", 4}, {DType::F64, "f64", 8}, {DType::F16, "f16", 2},
    {DType::BF16, "bf16", 2}, {DType::I64, "i64", 8}, {DType::I32, "i32", 4},
    {DType::I16, "i16", 2}, {DType::I8, "i8", 1},    {DType::UI8, "ui8", 1},
    {DType::I1, "i1", 1},
    // Complex values: pairs of f32 (f64), the real part first.
    {DType::C64, "c64", 8},   {DType::C128, "c128", 16}};

inline constexpr const DTypeInfo &info(DType dtype) {
  for (const DTypeInfo &i : kDTypes)
    if (i.dtype == dtype)
      return i;
  return kDTypes[0]; // unreachable: every DType is in the table
}

inline std::optional<DType> parseDType(std::string_view name) {
  for (const DTypeInfo &i : kDTypes)
    if (i.name == name)
      return i.dtype;
  return std::nullopt;
}

/// Gloo's mean over a group divides by a one-element tensor of the group's
/// size, held from the reduction's start: in the reduced type up to this
/// many ranks (which a 16-bit type holds exactly), and beyond it in float
/// for a 16-bit type (complex float for complex half). The runtime makes
/// it so; the memory model counts its bytes.
inline constexpr int kDivisorInOwnTypeRanks = 256;

/// The ranks a collective runs over: all of them, the rank's shard group
/// (consecutive ranks that shard a flat parameter), or its replica group
/// (the ranks at its index in the other shard groups).
enum class CommGroup { World, Shard, Replicate };

inline constexpr std::string_view name(CommGroup group) {
  switch (group) {
  case CommGroup::World:
    return "world";
  case CommGroup::Shard:
    return "shard";
  case CommGroup::Replicate:
    return "replicate";
  }
  return "";
}

inline std::optional<CommGroup> parseCommGroup(std::string_view text) {
  for (CommGroup g : {CommGroup::World, CommGroup::Shard, CommGroup::Replicate})
    if (name(g) == text)
      return g;
  return std::nullopt;
}

/// The kinds of instruction a plan holds, with their names in the file
/// (each instruction's "kind").
enum class InstKind {
  Get, Update, Constant, Call, AutogradBackward, RngState, SetRngState,
  AllGather, ReduceScatter, AllReduce, Wait, LocalShard, ToDevice, ToHost,
  Free, View
};

inline constexpr std::string_view kInstKindNames[] = {
    "get",          "update",     "constant",       "call",
    "autograd_backward", "rng_state", "set_rng_state", "all_gather",
    "reduce_scatter", "all_reduce", "wait",          "local_shard",
    "to_device",    "to_host",    "free",           "view"};

inline constexpr std::string_view name(InstKind kind) {
  return kInstKindNames[static_cast<int>(kind)];
}

inline std::optional<InstKind> parseInstKind(std::string_view text) {
  for (int k = 0; k < static_cast<int>(std::size(kInstKindNames)); ++k)
    if (kInstKindNames[k] == text)
      return static_cast<InstKind>(k);
  return std::nullopt;
}

/// The per-step metrics a plan may name among its outputs (its `metrics`),
/// which fsdp-run reports under these names.
inline constexpr std::string_view kMetricLr = "lr";
inline constexpr std::string_view kMetricGradNorm = "grad_norm";
/// Dynamic loss scaling: the scale the step used, and 1 where it skipped
/// the optimizer's update (an inf/NaN gradient on some rank), else 0.
inline constexpr std::string_view kMetricScale = "scale";
inline constexpr std::string_view kMetricSkipped = "skipped";

inline constexpr bool isMetric(std::string_view name) {
  return name == kMetricLr || name == kMetricGradNorm ||
         name == kMetricScale || name == kMetricSkipped;
}

/// Optimizer state that belongs to no parameter (`optim_state` without
/// `param`): the optimizer's step count (updates taken, which a
/// learning-rate schedule follows), and the gradient scaler's scale (f32;
/// zero stands for its initial scale) and growth tracker (i32).
inline constexpr std::string_view kStateStepCount = "optim:step";
/// The learning rate the runner sets between steps (`--lr-schedule
/// external`): f64, starting at the optimizer's `lr` (`init: "lr"`).
inline constexpr std::string_view kStateLr = "optim:lr";
inline constexpr std::string_view kStateScale = "scaler:scale";
inline constexpr std::string_view kStateGrowthTracker = "scaler:growth_tracker";

} // namespace fsdp::plan

#endif // FSDP_RUNTIME_PLANSCHEMA_H
