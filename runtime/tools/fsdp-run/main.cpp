//===- main.cpp - fsdp-run: executes a plan --------------------------------===//
//
//   fsdp-run PLAN --model M.pt --data D.pt|CORPUS.bin|CORPUS.npy
//            [--seq-len T --token-inputs IDS,TARGETS
//             [--data-order shuffle|sequential] [--token-dtype uint16|uint32]]
//            [--steps N] [--metrics F]
//            [--eval-data D [--eval-every N] [--eval-steps K]]
//            [--save F] [--outputs F] [--memory-timeline F] [--nproc N]
//            [--checkpoint-dir DIR [--checkpoint-every N]
//             [--state-dict-type FULL_STATE_DICT|SHARDED_STATE_DICT]]
//            [--resume DIR] [--seed N] [--device cuda|cpu]
//            [--backend nccl|gloo] [--cuda-graph] [--deterministic]
//   fsdp-run --version
//   fsdp-run --check-communicator [--nproc N] [--shard-group-size S]
//            [--device cuda|cpu] [--backend nccl|gloo]
//
// D.pt is `torch.save({name: tensor})` with one entry per plan input, each
// with a leading [steps] dimension ([steps * K] for a plan that accumulates
// K micro-batches: step s takes entries s * K .. s * K + K - 1), then the
// global batch: rank r of W takes the r-th of W equal slices of it. The ranks come from torchrun's or
// Slurm's environment, or `--nproc N` starts N local ranks.
//
//===----------------------------------------------------------------------===//

#include "fsdp/runtime/Checkpoint.h"
#include "fsdp/runtime/Communicator.h"
#include "fsdp/runtime/CountingAllocator.h"
#include "fsdp/runtime/Launcher.h"
#include "fsdp/runtime/Plan.h"
#include "fsdp/runtime/RunOptions.h"
#include "fsdp/runtime/Trainer.h"

#include "fsdp/runtime/Device.h"
#include "fsdp/runtime/PlanSchema.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <c10/util/Logging.h>
#include <torch/version.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

using namespace fsdp::runtime;

namespace {

[[noreturn]] void usage(const std::string &why) {
  std::cerr << "fsdp-run: " << why << "\n"
            << "usage: fsdp-run PLAN --print-plan\n"
            << "       fsdp-run PLAN --model M.pt --data D.pt [--steps N] "
               "[--metrics F.jsonl] [--save F.pt] [--outputs F.pt] "
               "[--memory-timeline F.json] [--threads N] [--profile] "
               "[--profile-json F.json] "
               "[--nproc N] [--checkpoint-dir DIR [--checkpoint-every N] "
               "[--state-dict-type FULL_STATE_DICT|SHARDED_STATE_DICT]] "
               "[--resume DIR] [--seed N] [--device cuda|cpu] "
               "[--seq-len T --token-inputs IDS,TARGETS "
               "[--data-order shuffle|sequential] [--token-dtype uint16|uint32]] "
               "[--eval-data D [--eval-every N] [--eval-steps K]] "
               "[--backend nccl|gloo] [--cuda-graph] [--deterministic]\n"
            << "       fsdp-run --check-communicator [--nproc N] "
               "[--shard-group-size S] [--device cuda|cpu] "
               "[--backend nccl|gloo]\n"
            << "       fsdp-run --calibrate FILE.json [--nproc N] "
               "[--threads N] [--device cuda|cpu] [--backend nccl|gloo]\n"
            << "       fsdp-run --version\n";
  std::exit(2);
}

/// `--version`: what this fsdp-run was built with (what scripts/gpu-check.sh
/// reads of a binary built elsewhere before it trusts it).
void printVersion() {
  cuda::loadFor("cuda");
  if (!cuda::whyNotLoaded().empty())
    printLineToStderr("fsdp-run: warning: its CUDA half did not load: " +
                      cuda::whyNotLoaded());
  std::string nccl = ncclVersion();
  std::printf("fsdp-run: plan format %lld, torch %s, CUDA %s, NCCL %s, "
              "Gloo %s\n",
              static_cast<long long>(fsdp::plan::kFormatVersion),
              TORCH_VERSION, cuda::loaded() ? "yes" : "no",
              nccl.empty() ? "no" : nccl.c_str(), glooBuilt() ? "yes" : "no");
}

/// `v` as a whole number in decimal digits (an optional leading minus), or
/// a usage error naming `flag`: "2abc", "2.9" and "" are not numbers.
int64_t integerFlag(const std::string &flag, const std::string &v) {
  size_t start = !v.empty() && v[0] == '-' ? 1 : 0;
  bool digits = v.size() > start &&
                v.find_first_not_of("0123456789", start) == std::string::npos;
  int64_t value = 0;
  if (digits) {
    try {
      size_t end = 0;
      value = std::stoll(v, &end);
      digits = end == v.size();
    } catch (...) {
      digits = false;
    }
  }
  if (!digits)
    usage(flag + " takes a whole number, not '" + v + "'");
  return value;
}

RunOptions parseArgs(int argc, char **argv) {
  RunOptions o;
  if (const char *d = std::getenv("FSDP_RUN_DETERMINISTIC"); d && *d)
    o.deterministic = std::string(d) != "0";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--model") o.model = value();
    else if (a == "--data") o.data = value();
    else if (a == "--seq-len") {
      std::string v = value();
      o.seqLen = integerFlag("--seq-len", v);
      if (o.seqLen < 1) usage("--seq-len must be at least 1");
    }
    else if (a == "--eval-data") o.evalData = value();
    else if (a == "--eval-every") {
      std::string v = value();
      o.evalEvery = integerFlag("--eval-every", v);
      if (o.evalEvery < 1) usage("--eval-every must be at least 1");
    } else if (a == "--eval-steps") {
      std::string v = value();
      o.evalSteps = integerFlag("--eval-steps", v);
      if (o.evalSteps < 1) usage("--eval-steps must be at least 1");
    }
    else if (a == "--token-inputs") o.tokenInputs = value();
    else if (a == "--data-order") o.dataOrder = value();
    else if (a == "--token-dtype") o.tokenDtype = value();
    else if (a == "--metrics") o.metrics = value();
    else if (a == "--save") o.save = value();
    else if (a == "--outputs") o.outputs = value();
    else if (a == "--memory-timeline") o.memoryTimeline = value();
    else if (a == "--profile") o.profile = true;
    else if (a == "--profile-json") {
      o.profileJson = value();
      o.profile = true;
    }
    else if (a == "--print-plan") o.printPlan = true;
    else if (a == "--cuda-graph") o.cudaGraph = true;
    else if (a == "--deterministic") o.deterministic = true;
    else if (a == "--version") {
      if (argc != 2)
        usage("--version takes no other argument");
      printVersion();
      std::exit(0);
    }
    else if (a == "--check-communicator") o.checkCommunicator = true;
    else if (a == "--calibrate") {
      o.calibrate = value();
      if (o.calibrate.empty()) usage("--calibrate takes the file to write");
    }
    else if (a == "--device") {
      o.device = value();
      if (o.device != "cpu" && o.device != "cuda")
        usage("--device is cuda or cpu, not '" + o.device + "'");
    }
    else if (a == "--backend") {
      o.backend = value();
      if (o.backend != "nccl" && o.backend != "gloo")
        usage("--backend is nccl or gloo, not '" + o.backend + "'");
    }
    else if (a == "--shard-group-size") {
      std::string v = value();
      o.shardGroupSize = integerFlag("--shard-group-size", v);
      if (o.shardGroupSize < 1) usage("--shard-group-size must be at least 1");
    }
    else if (a == "--checkpoint-dir") o.checkpointDir = value();
    else if (a == "--resume") o.resume = value();
    else if (a == "--state-dict-type") {
      o.stateDictType = value();
      if (!parseStateDictType(o.stateDictType))
        usage("--state-dict-type is FULL_STATE_DICT or SHARDED_STATE_DICT, "
              "not '" + o.stateDictType + "'");
    }
    else if (a == "--checkpoint-every") {
      std::string v = value();
      o.checkpointEvery = integerFlag("--checkpoint-every", v);
      if (o.checkpointEvery < 1) usage("--checkpoint-every must be at least 1");
    }
    else if (a == "--threads") {
      std::string v = value();
      o.threads = integerFlag("--threads", v);
      if (o.threads < 1) usage("--threads must be at least 1");
    }
    else if (a == "--nproc") {
      std::string v = value();
      o.nproc = integerFlag("--nproc", v);
      if (o.nproc < 1) usage("--nproc must be at least 1");
    }
    else if (a == "--seed") {
      std::string v = value();
      try {
        size_t end = 0;
        if (v.empty() || v[0] == '-')
          throw std::invalid_argument(v);
        o.seed = std::stoull(v, &end);
        if (end != v.size())
          throw std::invalid_argument(v);
      } catch (...) {
        usage("--seed takes a non-negative integer, not '" + v + "'");
      }
    }
    else if (a == "--steps") {
      std::string v = value();
      o.steps = integerFlag("--steps", v);
      if (o.steps < 1) usage("--steps must be at least 1");
    } else if (a == "-h" || a == "--help") usage("executes an fsdp-opt plan");
    else if (!a.empty() && a[0] == '-') usage("unknown option " + a);
    else if (o.plan.empty()) o.plan = a;
    else usage("unexpected argument " + a);
  }
  if (o.checkCommunicator && !o.calibrate.empty())
    usage("--check-communicator and --calibrate are separate runs");
  if (o.checkCommunicator || !o.calibrate.empty()) {
    if (!o.plan.empty())
      usage(std::string(o.checkCommunicator ? "--check-communicator"
                                            : "--calibrate") +
            " takes no plan");
    return o;
  }
  if (o.shardGroupSize > 0)
    usage("--shard-group-size is for --check-communicator (a plan names "
          "its own shard groups)");
  if (o.plan.empty()) usage("no plan given");
  if (o.printPlan) {
    if (argc != 3)
      usage("--print-plan takes the plan alone");
    return o;
  }
  if (o.model.empty()) usage("--model is required");
  if (o.data.empty()) usage("--data is required");
  if (o.evalData.empty() && (o.evalEvery > 0 || o.evalSteps > 0))
    usage(std::string(o.evalEvery > 0 ? "--eval-every" : "--eval-steps") +
          " needs --eval-data");
  if (o.checkpointDir.empty() &&
      (o.checkpointEvery > 0 || !o.stateDictType.empty()))
    usage(std::string(o.checkpointEvery > 0 ? "--checkpoint-every"
                                            : "--state-dict-type") +
          " needs --checkpoint-dir");
  return o;
}

/// `--print-plan`: the plan's instructions as this fsdp-run read and
/// checked them, written back one per line (what a round-trip test compares
/// with the file fsdp-opt wrote).
void printPlan(const Plan &plan) {
  for (const Instruction &inst : plan.instructions)
    std::cout << instructionJson(inst).dump() << "\n";
}

} // namespace

int main(int argc, char **argv) {
  // c10d logs a lost store connection as a warning with a C++ backtrace
  // before it throws; fsdp-run reports the cause itself, so its users see
  // errors only (TORCH_CPP_LOG_LEVEL, where set, still decides).
  if (!std::getenv("TORCH_CPP_LOG_LEVEL"))
    FLAGS_caffe2_log_level = 2; // ERROR
  RunOptions o = parseArgs(argc, argv);
  // A step allocates the sizes the last one freed: malloc keeps them.
  (void)keepFreedHostMemory();
  // CUDA, only for a GPU run (the launcher of local ranks checks the GPUs
  // before it starts them), and before anything asks ATen about it.
  if (!o.printPlan)
    cuda::loadFor(o.device);
  if (o.threads > 0)
    at::set_num_threads(static_cast<int>(o.threads));
  if (o.deterministic) {
    // As torch.use_deterministic_algorithms(True) with the workspace
    // setting cuBLAS needs for it, read when its handle is made (before
    // any CUDA work); the launcher's ranks inherit both.
    ::setenv("CUBLAS_WORKSPACE_CONFIG", ":4096:8", /*overwrite=*/0);
    ::setenv("FSDP_RUN_DETERMINISTIC", "1", 1);
    at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/false);
  }
  RankInfo info;
  std::unique_ptr<Communicator> comm;
  std::string message;
  try {
    if (o.printPlan) {
      printPlan(loadPlan(o.plan));
      return 0;
    }
    if (o.nproc > 0)
      return launchLocalRanks(o, argc, argv);
    info = rankInfoFromEnvironment();
    checkUpFront(o, info, /*writesOutputs=*/info.rank == 0);
    if (o.checkCommunicator)
      return checkCommunicator(o, info, comm);
    if (!o.calibrate.empty())
      return calibrateMachine(o, info, comm);
    runRank(o, info, comm);
    comm.reset(); // a clean end, with the other ranks
    return 0;
  } catch (const Error &e) {
    message = e.what();
  } catch (const std::exception &e) {
    message = firstLine(e);
  }
  if (info.worldSize > 1) {
    // When another rank failed first, its failure is the cause: say that.
    std::string cause =
        comm ? comm->failureOfOthers(std::chrono::milliseconds(1000)) : "";
    if (!cause.empty()) {
      printLineToStderr("fsdp-run: rank " + std::to_string(info.rank) +
                        " stops: " + cause);
      std::_Exit(kStoppedByOtherRank);
    }
    message = "rank " + std::to_string(info.rank) + ": " + message;
    if (comm)
      comm->abort(message);
    printLineToStderr("fsdp-run: error: " + message);
    // Rank 0 serves the store that carries the message: keep it up until
    // the others' watchdogs (which look every 200 ms) have read it.
    if (comm && info.rank == 0)
      std::this_thread::sleep_for(std::chrono::milliseconds(600));
    std::fflush(stdout);
    // Pending collectives would block a normal exit.
    std::_Exit(1);
  }
  std::cerr << "fsdp-run: error: " << message << "\n";
  return 1;
}
