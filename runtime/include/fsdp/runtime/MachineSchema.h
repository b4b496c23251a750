//===- MachineSchema.h - the machine file's keys ----------------*- C++ -*-===//
//
// The rates of a machine, as `fsdp-run --calibrate FILE` measures them and
// the compiler's cost model (fsdp/Analysis/CostModel.h) reads them: one JSON
// object of these keys, each a positive number but `machine` (its name),
// `ranks` (how many ranks shared the machine while it was measured) and
// the two fractions from 0 to 1 (overlap, and skew); skew and the cache's
// bytes a file may leave out. The runtime writes the file; both sides
// include this header (standard library only), so the names cannot drift
// apart.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_MACHINESCHEMA_H
#define FSDP_RUNTIME_MACHINESCHEMA_H

namespace fsdp::machine {

inline constexpr int kVersion = 1;
inline constexpr const char *kVersionKey = "fsdp_machine_version";
inline constexpr const char *kNameKey = "machine";
inline constexpr const char *kRanksKey = "ranks";

/// The rates, in the order the file lists them. Each rate key's value is
/// per second (or seconds, for the two overheads).
struct RateKey {
  const char *key;
  const char *meaning;
};
inline constexpr RateKey kRateKeys[] = {
    {"matmul_flops_per_s", "float32 matrix products (mm, bmm, linear, "
                           "attention), floating-point operations"},
    {"matmul_half_flops_per_s", "bfloat16 and float16 matrix products"},
    {"conv_flops_per_s", "float32 convolutions (their own kernels: on a CPU "
                         "about half the matrix products' rate)"},
    {"memory_bytes_per_s", "bytes an element-wise kernel reads and writes"},
    {"host_memory_bytes_per_s", "bytes an element-wise kernel on host "
                                "memory reads and writes (the optimizer "
                                "step of offloaded units)"},
    {"op_overhead_s", "the fixed cost of one kernel call (a boxed call "
                      "through the dispatcher, as fsdp-run makes it)"},
    {"collective_bytes_per_s", "bytes a rank sends and receives in a "
                               "collective"},
    {"collective_latency_s", "the fixed cost of one collective"},
    {"copy_bytes_per_s", "bytes copied between device and host memory (CPU "
                         "offload)"},
};

/// How much of a collective runs beside the computation, from 0 (the ranks'
/// compute waits for it whole: CPU ranks whose cores also run Gloo) to 1 (on
/// streams of its own: NCCL).
inline constexpr const char *kOverlapKey = "collective_overlap";

/// How long a collective waits for the slowest rank, per second the ranks
/// computed since they last waited together: their kernels run late by
/// different amounts (the machine's other work, the other ranks' and
/// Gloo's threads taking a core), and a collective completes only when the
/// last rank has joined it. From 0 to 1. A file without it (written before
/// fsdp-run measured it) predicts no such wait.
inline constexpr const char *kSkewKey = "collective_skew";

/// How many bytes a rank's kernels can read and write before what they
/// touched earlier has left the caches (its time then the time measured
/// with its operands evicted, below): on a CPU, a core's cache and its
/// share of the last level, less what the other ranks and the machine's
/// other work take. A file without it (written before fsdp-run measured
/// it) takes kDefaultCacheBytes.
inline constexpr const char *kCacheKey = "cache_bytes";
inline constexpr double kDefaultCacheBytes = 2.0 * (1 << 20);

/// What evicts a kernel's operands from the caches before it is timed
/// cold, both in `fsdp-opt --measure-kernels` and in the calibration of
/// cache_bytes: reading this many bytes of other memory.
inline constexpr long long kEvictBytes = 64ll << 20;

} // namespace fsdp::machine

#endif // FSDP_RUNTIME_MACHINESCHEMA_H
