//===- AccelerateConfig.h - Accelerate config files -------------*- C++ -*-===//
//
// Reads the YAML file that `accelerate config` writes, for
// `fsdp-opt --config FILE.yaml`. Every key the file sets is either taken over,
// accepted because it does not change the plan, or an error: an unknown key or
// an option fsdp-opt does not support yet is never silently ignored.
//
// The reader is built with exceptions (yaml-cpp throws); this header does not
// include yaml-cpp, so its users need none.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_CONFIG_ACCELERATECONFIG_H
#define FSDP_CONFIG_ACCELERATECONFIG_H

#include "fsdp/Transforms/StepDefaults.h"

#include "llvm/ADT/StringRef.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace fsdp {

/// What an Accelerate config file says about FSDP, in fsdp-opt's terms.
/// Fields the file does not set stay empty; the caller lets command-line flags
/// override them.
struct AccelerateConfig {
  /// "FULL_SHARD", "SHARD_GRAD_OP", "NO_SHARD", "HYBRID_SHARD".
  std::optional<std::string> sharding;
  std::optional<std::string> autoWrap; // "size", "class", "none"
  std::optional<int64_t> minNumParams;
  std::vector<std::string> wrapClasses; // fsdp_transformer_layer_cls_to_wrap
  std::optional<int64_t> numProcesses;  // num_processes (the world size)
  std::optional<int64_t> numMachines;   // num_machines (nodes)
  /// Which setting chose the auto-wrap rule, for --print-config and
  /// --fsdp-report ("cfg.yaml:3: fsdp_config.min_num_params: 2000 with no
  /// auto-wrap policy: size-based, as Accelerate's default auto wrap").
  std::string autoWrapReason;
  /// fsdp_version (1 or 2); 2 is compiled with FSDP1's flat parameters.
  int64_t fsdpVersion = 1;
  /// fsdp_backward_prefetch: BACKWARD_PRE, BACKWARD_POST or NO_PREFETCH.
  /// Without the key, Accelerate passes no prefetch to FSDP1
  /// (NO_PREFETCH); FSDP2 prefetches one unit in the backward
  /// (BACKWARD_PRE).
  std::string backwardPrefetch = "NO_PREFETCH";
  bool forwardPrefetch = false; // fsdp_forward_prefetch
  /// fsdp_activation_checkpointing: every unit but the root checkpointed.
  bool activationCheckpointing = false;
  /// fsdp_limit_all_gathers: FSDP1's rate limiter, 2 buffers (true, the
  /// default) or none (false: 0); FSDP2 has none (0 unless the key says).
  int64_t limitAllGathers = StepDefaults::limitAllGathers();
  /// fsdp_offload_params: CPU offload of parameters, gradients and
  /// optimizer state.
  bool offloadParams = false;
  /// mixed_precision (or the older fp16: true): "bf16" or "fp16" (param,
  /// reduce and buffer dtype), else empty.
  std::string mixedPrecision;
  /// fsdp_state_dict_type: FULL_STATE_DICT or SHARDED_STATE_DICT, the kind
  /// of fsdp-run's checkpoints (the plan carries it).
  std::optional<std::string> stateDictType;
};

/// Reads `path`. Errors (llvm::StringError, inconvertibleErrorCode) name the
/// file, the line and the key, e.g.
///   "cfg.yaml:7: mixed_precision: fp16 is not supported yet (...)"
///   "cfg.yaml:3: unknown key 'fsdp_foo' in fsdp_config"
llvm::Expected<AccelerateConfig> readAccelerateConfig(llvm::StringRef path);

} // namespace fsdp

#endif // FSDP_CONFIG_ACCELERATECONFIG_H
