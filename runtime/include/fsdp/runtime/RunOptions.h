//===- RunOptions.h - what fsdp-run is asked to do --------------*- C++ -*-===//
//
// fsdp-run's command line, parsed (tools/fsdp-run/main.cpp): what the
// launcher (Launcher.h) and the rank's training loop (Trainer.h) read.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_RUNOPTIONS_H
#define FSDP_RUNTIME_RUNOPTIONS_H

#include <cstdint>
#include <optional>
#include <string>

namespace fsdp::runtime {

struct RunOptions {
  std::string plan, model, data, metrics, save, outputs, memoryTimeline;
  std::string checkpointDir, stateDictType, resume;
  std::string device;  // cpu, cuda; "": cuda when a GPU is visible
  std::string backend; // gloo, nccl; "": nccl on cuda, gloo on cpu
  int64_t checkpointEvery = 0; // 0: at the end of the run only
  int64_t steps = -1;
  int64_t threads = 0; // 0: libtorch's default
  int64_t nproc = 0;   // > 0: start this many local ranks
  std::optional<uint64_t> seed; // the generator's seed on every rank
  bool profile = false;
  // --profile-json F: rank 0's time per instruction, per step, as JSON
  std::string profileJson;
  bool printPlan = false; // print the plan as read, then stop
  bool cudaGraph = false; // capture the step after a warm-up and replay it
  // torch.use_deterministic_algorithms(True) and CUBLAS_WORKSPACE_CONFIG
  // (--deterministic, or FSDP_RUN_DETERMINISTIC=1)
  bool deterministic = false;
  // --check-communicator: every collective of every group checked, no plan
  bool checkCommunicator = false;
  int64_t shardGroupSize = 0; // its shard groups; 0: the world
  // --calibrate FILE: the machine's rates measured and written, no plan
  std::string calibrate;
  // A token corpus as --data (a .bin or .npy of token ids): --seq-len T,
  // --token-inputs IDS,TARGETS (the plan's inputs that take the windows'
  // ids and next-token targets), --data-order shuffle|sequential,
  // --token-dtype uint16|uint32 (a .bin's; uint16 by default).
  int64_t seqLen = 0;
  std::string tokenInputs, dataOrder, tokenDtype;
  // Evaluation: --eval-data (any form --data takes; a token corpus read in
  // order) run through the plan's evaluation step every --eval-every steps
  // (0: at the end only) and after the last, on its first --eval-steps
  // batches (0: all of it).
  std::string evalData;
  int64_t evalEvery = 0, evalSteps = 0;
};

} // namespace fsdp::runtime

#endif // FSDP_RUNTIME_RUNOPTIONS_H
