//===- Trainer.cpp - one rank's training run -------------------------------===//

#include "fsdp/runtime/Trainer.h"

#include <ATen/Parallel.h>
#include "fsdp/runtime/BatchData.h"
#include "fsdp/runtime/Checkpoint.h"
#include "fsdp/runtime/CountingAllocator.h"
#include "fsdp/runtime/Device.h"

#include <ATen/Context.h>
#include <c10/util/hash.h>

#include <libgen.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <future>
#include <map>
#include <optional>

namespace fsdp::runtime {

namespace {

/// This process's resident memory now (/proc/self/statm), 0 where unknown.
int64_t residentBytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  if (!(statm >> size >> resident))
    return 0;
  return resident * static_cast<int64_t>(::sysconf(_SC_PAGESIZE));
}

/// What the rank held when it started (its libraries, before the plan).
int64_t startResident = 0;

/// What --profile calls an instruction: its ATen op, or its kind.
std::string profileName(const Instruction &inst) {
  InstKind kind = inst.kind();
  return kind == InstKind::Call ? std::get<inst::Call>(inst.op).op
         : kind == InstKind::Get ? "(get)"
         : kind == InstKind::Update ? "(update)"
         : kind == InstKind::Constant ? "(constant)"
         : kind == InstKind::Wait ? "(wait)"
         : kind == InstKind::View ? "(view)"
         : kind == InstKind::Free ? "(free)"
                                  : "(collective start)";
}

/// Time per ATen op (and per kind of other instruction), summed over the
/// run, most expensive first: where a step's time goes.
void printProfile(const Plan &plan, const std::vector<double> &times,
                  int64_t steps) {
  std::map<std::string, std::pair<double, int64_t>> byOp;
  double total = 0;
  for (size_t i = 0; i < times.size(); ++i) {
    std::string name = profileName(plan.instructions[i]);
    auto &[ms, count] = byOp[name];
    ms += times[i];
    count += 1;
    total += times[i];
  }
  std::vector<std::pair<std::string, std::pair<double, int64_t>>> rows(
      byOp.begin(), byOp.end());
  std::sort(rows.begin(), rows.end(), [](const auto &a, const auto &b) {
    return a.second.first > b.second.first;
  });
  std::printf("\n%-48s %8s %10s %6s\n", "op", "calls", "ms/step", "%");
  for (const auto &[name, entry] : rows)
    std::printf("%-48s %8lld %10.3f %6.1f\n", name.c_str(),
                static_cast<long long>(entry.second),
                entry.first / static_cast<double>(steps),
                total > 0 ? 100.0 * entry.first / total : 0.0);
}

/// An output file can be written: its directory exists and is writable,
/// and it is not a directory. Checked before any work, so that a run never
/// trains for nothing and fails at the end.
void checkOutputPath(const char *flag, const std::string &path) {
  if (path.empty())
    return;
  struct stat info;
  if (::stat(path.c_str(), &info) == 0) {
    if (S_ISDIR(info.st_mode))
      throw Error(std::string(flag) + " '" + path + "' is a directory");
    if (!S_ISREG(info.st_mode)) // a device or a pipe: written in place
      return;
  }
  std::string copy = path;
  std::string dir = ::dirname(copy.data());
  if (::stat(dir.c_str(), &info) != 0 || !S_ISDIR(info.st_mode))
    throw Error(std::string(flag) + " '" + path + "': directory '" + dir +
                "' does not exist");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw Error(std::string(flag) + " '" + path + "': cannot write in '" +
                dir + "': " + std::strerror(errno));
}

/// The plan, which must have been compiled for the world this rank is in.
/// A directory fsdp-run creates if need be and writes in: what exists of
/// it must be directories, and the deepest part that exists writable.
void checkOutputDir(const char *flag, const std::string &path) {
  if (path.empty())
    return;
  std::string existing = path;
  struct stat info;
  while (::stat(existing.c_str(), &info) != 0) {
    std::string copy = existing;
    std::string parent = ::dirname(copy.data());
    if (parent == existing)
      break;
    existing = parent;
  }
  if (!S_ISDIR(info.st_mode))
    throw Error(std::string(flag) + " '" + path + "': '" + existing +
                "' is not a directory");
  if (::access(existing.c_str(), W_OK | X_OK) != 0)
    throw Error(std::string(flag) + " '" + path + "': cannot write in '" +
                existing + "': " + std::strerror(errno));
}


/// Resuming: `state` after the checkpoint's step; returns that step, the
/// first the run takes (--steps counts from the start of training: step k
/// always takes entry k of the data).
int64_t resume(const RunOptions &o, const Plan &plan, State &state,
               Communicator &comm, int64_t steps, bool lead) {
  std::string checkpoint = findCheckpoint(o.resume);
  int64_t firstStep = readCheckpoint(plan, state, comm, checkpoint);
  if (firstStep >= steps)
    throw Error("checkpoint '" + checkpoint + "' is at step " +
                std::to_string(firstStep) + ", and the run has " +
                std::to_string(steps) +
                " steps: nothing is left to run (--steps counts every "
                "step of the training, those before the checkpoint too)");
  if (lead)
    std::printf("resumed from %s at step %lld\n", checkpoint.c_str(),
                static_cast<long long>(firstStep));
  return firstStep;
}

/// The checkpoints' kind: --state-dict-type, else the plan's (an
/// Accelerate file's fsdp_state_dict_type), else a full state dict.
StateDictType checkpointTypeFor(const RunOptions &o, const Plan &plan) {
  if (!o.stateDictType.empty())
    return *parseStateDictType(o.stateDictType);
  if (!plan.stateDictType.empty())
    return *parseStateDictType(plan.stateDictType);
  return StateDictType::Full;
}

/// "step N/M: ": how an error in step `step` (0-based) of `steps` begins.
std::string stepPrefix(int64_t step, int64_t steps) {
  return "step " + std::to_string(step + 1) + "/" + std::to_string(steps) +
         ": ";
}

/// What one step measured.
struct StepResult {
  bool hasLoss = false;
  double loss = 0.0;
  double ms = 0.0;
  int64_t allocatorPeak = 0; // the allocator's peak in the step
  int64_t reservedPeak = 0;  // on a GPU: what the caching allocator held
};

/// "42s", "3m07s", "2h05m": a duration for the progress line.
std::string formatDuration(double seconds) {
  auto whole = static_cast<long long>(seconds + 0.5);
  char text[32];
  if (whole < 60)
    std::snprintf(text, sizeof text, "%llds", whole);
  else if (whole < 3600)
    std::snprintf(text, sizeof text, "%lldm%02llds", whole / 60, whole % 60);
  else
    std::snprintf(text, sizeof text, "%lldh%02lldm", whole / 3600,
                  (whole % 3600) / 60);
  return text;
}

/// Each step's batch, read on a thread of its own while the step before
/// runs: when step s takes its batch, step s + 1's read starts, so the
/// file's reads overlap the computation. On a GPU the batch is read into
/// page-locked memory, which the step copies to the device on a copy
/// stream. A read's error reaches the step that takes its batch.
class BatchReader {
public:
  BatchReader(const Plan &plan, BatchData &data, int64_t steps, bool pinned)
      : plan(plan), data(data), steps(steps), pinned(pinned) {}
  ~BatchReader() {
    if (pending.valid())
      pending.wait(); // its error, if any, is no step's any more
  }
  BatchReader(const BatchReader &) = delete;
  BatchReader &operator=(const BatchReader &) = delete;

  /// Step `step`'s inputs, in plan order, in CPU memory.
  std::vector<at::Tensor> take(int64_t step) {
    std::vector<at::Tensor> batch;
    if (pending.valid() && pendingStep == step) {
      batch = pending.get();
      // Read on the reader's thread, uncounted: the step that takes it
      // counts it.
      for (const at::Tensor &t : batch)
        AllocatorCounter::adopt(t);
    } else {
      if (pending.valid())
        pending.wait();
      pending = {};
      batch = read(step);
    }
    if (step + 1 < steps) {
      pendingStep = step + 1;
      pending = std::async(std::launch::async, [this, next = step + 1] {
        // What the read allocates is not the running step's memory.
        AllocatorCounter::UncountedScope uncounted;
        return read(next);
      });
    }
    return batch;
  }

private:
  /// With gradient accumulation, micro-batch k of step s is entry
  /// s * K + k.
  std::vector<at::Tensor> read(int64_t step) {
    std::vector<at::Tensor> batch;
    for (const InputEntry &input : plan.inputs) {
      at::Tensor t =
          data.read(input.name, step * plan.microBatches + input.microBatch);
      batch.push_back(pinned ? t.pin_memory() : t);
    }
    return batch;
  }

  const Plan &plan;
  BatchData &data;
  const int64_t steps;
  const bool pinned;
  std::future<std::vector<at::Tensor>> pending;
  int64_t pendingStep = -1;
};

/// The plan's evaluation step and its data (--eval-data): the batches one
/// evaluation reads, the same ones every time.
struct Evaluation {
  const Plan &plan;
  Executor executor;
  std::unique_ptr<BatchData> data;
  int64_t batches = 0;
};

/// The steps of one rank's run and what they share: the metrics file
/// (rank 0's), the last step's outputs, and the peaks over the run.
class Training {
public:
  /// Opens the metrics file (rank 0) and starts counting allocations.
  Training(const RunOptions &o, const RankInfo &info, const Plan &plan,
           State &state, Communicator &comm, Executor &executor,
           StateDictType checkpointType,
           std::optional<CheckpointDir> checkpointDir, int64_t steps,
           Evaluation *evaluation);

  /// Step `step` (0-based): runs it, reports it (rank 0), evaluates and
  /// writes a checkpoint where one is due.
  void step(int64_t step, BatchReader &data);

  /// After the last step: the summary (peaks over the ranks) and the
  /// outputs (--save, --outputs, --memory-timeline, --profile).
  void finish(int64_t modelBytesRead, int64_t dataBytesRead);

private:
  StepResult run(int64_t step, BatchReader &data);
  /// The plan on `inputs`: by the executor, or with --cuda-graph, after
  /// the first step, by replaying the step captured on the second.
  std::vector<at::Tensor> execute(std::vector<at::Tensor> inputs);
  void report(int64_t step, const StepResult &result);
  /// The evaluation step on every batch of the evaluation data, after step
  /// `step`: the mean of the global batches' losses, reported (rank 0).
  void evaluate(int64_t step);
  void checkpoint(int64_t step);
  void writeMetrics(const nlohmann::json &line);
  int64_t gatherPeaks();
  void writeSummary(int64_t sharded, int64_t modelBytesRead,
                    int64_t dataBytesRead, int64_t peakRank);
  void writeOutputs();

  /// The steps --profile's times sum over: those the executor ran (a
  /// resumed run's, not the steps before its checkpoint).
  int64_t profiledSteps() const {
    return std::max<int64_t>(executor.profiledRuns(), 1);
  }

  const RunOptions &o;
  const RankInfo &info;
  const Plan &plan;
  State &state;
  Communicator &comm;
  Executor &executor;
  const StateDictType checkpointType;
  const std::optional<CheckpointDir> checkpointDir; // --checkpoint-dir's
  const int64_t steps;
  const bool lead; // rank 0: reports and writes
  std::ofstream metrics;
  const c10::Device device;
  AllocatorCounter *allocator = nullptr; // on the CPU
  std::vector<at::Tensor> outputs;
  int64_t peak = 0, gradBytes = 0, allocatorPeak = 0, hostPeak = 0;
  int64_t hostStateMoves = 0;
  int64_t reservedPeak = 0;
  // --cuda-graph: the captured step, the inputs it reads, the outputs it
  // writes, and the allocator's peak while it was captured.
  std::unique_ptr<cuda::Graph> graph;
  bool warmedUp = false;
  std::vector<at::Tensor> graphInputs, graphOutputs;
  int64_t graphAllocatorPeak = 0;
  int64_t skippedSteps = 0; // rank 0's count: every rank skips together
  std::unique_ptr<cuda::Copier> copier; // the batches' copies on a GPU
  Evaluation *evaluation; // null without --eval-data
  int64_t evalPeak = 0;
  // Resident memory at the rank's start and end (the largest of the ranks').
  int64_t startRss = 0, endRss = 0;
  std::optional<double> evalLoss; // the last evaluation's
  // When this run's first step began, and its index (for the ETA).
  std::optional<std::pair<std::chrono::steady_clock::time_point, int64_t>>
      runStart;
};

Training::Training(const RunOptions &o, const RankInfo &info, const Plan &plan,
                   State &state, Communicator &comm, Executor &executor,
                   StateDictType checkpointType,
                   std::optional<CheckpointDir> checkpointDir, int64_t steps,
                   Evaluation *evaluation)
    : o(o), info(info), plan(plan), state(state), comm(comm),
      executor(executor), checkpointType(checkpointType),
      checkpointDir(std::move(checkpointDir)), steps(steps),
      lead(info.rank == 0), device(comm.device()), evaluation(evaluation) {
  if (lead && !o.metrics.empty()) {
    metrics.open(o.metrics);
    if (!metrics)
      throw Error("cannot write metrics file '" + o.metrics + "': " +
                  std::strerror(errno));
  }
  if (!device.is_cuda()) {
    allocator = &AllocatorCounter::install();
    executor.trackAllocator(*allocator);
  }
}

void Training::step(int64_t step, BatchReader &data) {
  StepResult result = run(step, data);
  if (lead)
    report(step, result);
  if (evaluation && (step + 1 == steps ||
                     (o.evalEvery > 0 && (step + 1) % o.evalEvery == 0)))
    evaluate(step);
  checkpoint(step);
}

void Training::evaluate(int64_t step) {
  Evaluation &e = *evaluation;
  if (device.is_cuda())
    cuda::synchronize(device);
  auto start = std::chrono::steady_clock::now();
  double sum = 0;
  int64_t peakNow = 0;
  try {
    for (int64_t k = 0; k < e.batches; ++k) {
      std::vector<at::Tensor> inputs;
      for (const InputEntry &input : e.plan.inputs)
        inputs.push_back(e.data->read(input.name, k).to(device));
      std::vector<at::Tensor> out = e.executor.run(std::move(inputs), state);
      // Each rank's loss is its slice's mean: their mean is the global
      // batch's, as for the training loss.
      sum += comm.allReduce(out.at(0).to(at::kDouble), CommGroup::World,
                            /*mean=*/true)
                 ->wait()
                 .item<double>();
      peakNow = std::max(peakNow, e.executor.peakBytes());
    }
  } catch (const std::exception &ex) {
    throw Error(stepPrefix(step, steps) + "evaluation: " + firstLine(ex));
  }
  double loss = sum / static_cast<double>(e.batches);
  double ms = std::chrono::duration<double, std::milli>(
                  std::chrono::steady_clock::now() - start)
                  .count();
  evalPeak = std::max(evalPeak, peakNow);
  evalLoss = loss;
  if (!lead)
    return;
  std::printf("eval after step %lld/%lld  eval_loss %.6f  (%lld batch%s)  "
              "%.1f ms  peak %.2f MB%s\n",
              static_cast<long long>(step + 1), static_cast<long long>(steps),
              loss, static_cast<long long>(e.batches),
              e.batches == 1 ? "" : "es", ms, peakNow / 1e6,
              info.worldSize > 1 ? " (rank 0)" : "");
  std::fflush(stdout);
  if (metrics.is_open())
    writeMetrics({{"step", step},
                  {"eval_loss", loss},
                  {"eval_batches", e.batches},
                  {"eval_ms", ms},
                  {"eval_peak_bytes", peakNow}});
}

StepResult Training::run(int64_t step, BatchReader &data) {
  // Read while the step before ran; the step holds (and counts) its own
  // batch only.
  std::vector<at::Tensor> inputs = data.take(step);
  if (device.is_cuda()) {
    if (!copier)
      copier = cuda::makeCopier(device);
    for (at::Tensor &t : inputs)
      t = copier->toDevice(t);
  }
  if (device.is_cuda())
    cuda::synchronize(device); // the step's time starts with its batch
  auto start = std::chrono::steady_clock::now();
  StepResult result;
  // On a CPU rank the executor reads the allocator itself, instruction by
  // instruction.
  int64_t allocatedBefore = 0;
  if (device.is_cuda()) {
    cuda::resetPeaks(device);
    allocatedBefore = cuda::memory(device).allocated;
  }
  try {
    bool replayed = graph != nullptr;
    outputs = execute(std::move(inputs));
    // What the allocator handed out during the step beyond what it had
    // before, plus the state and batch the step began with.
    if (device.is_cuda()) {
      DeviceMemory memory = cuda::memory(device);
      result.allocatorPeak =
          memory.allocatedPeak - allocatedBefore + executor.startBytes();
      // A replay allocates nothing: its memory is the captured step's.
      if (graph && !replayed)
        graphAllocatorPeak = result.allocatorPeak;
      if (replayed)
        result.allocatorPeak = graphAllocatorPeak;
      result.reservedPeak = memory.reservedPeak;
      reservedPeak = std::max(reservedPeak, result.reservedPeak);
    } else {
      result.allocatorPeak = executor.allocatorPeakBytes();
    }
    allocatorPeak = std::max(allocatorPeak, result.allocatorPeak);
    // A scalar first output is the loss: its mean over the ranks, which
    // is the loss of the global batch.
    result.hasLoss = !outputs.empty() && outputs[0].dim() == 0 &&
                     outputs[0].is_floating_point();
    if (result.hasLoss)
      result.loss = comm.allReduce(outputs[0].to(at::kDouble),
                                   CommGroup::World, /*mean=*/true)
                        ->wait()
                        .item<double>();
    if (device.is_cuda())
      cuda::synchronize(device);
  } catch (const std::exception &e) {
    throw Error(stepPrefix(step, steps) + firstLine(e));
  }
  result.ms = std::chrono::duration<double, std::milli>(
                  std::chrono::steady_clock::now() - start)
                  .count();
  peak = std::max(peak, executor.peakBytes());
  hostPeak = std::max(hostPeak, executor.hostPeakBytes());
  hostStateMoves += executor.hostStateMoves();
  gradBytes = executor.gradientBytes();
  // A gradient scaler's step skips the update itself where the loss (and
  // so a gradient) is inf or NaN, and training goes on, as with PyTorch's.
  double loss = result.loss;
  if (result.hasLoss && !std::isfinite(loss) && !plan.gradScaler.is_object())
    throw Error(stepPrefix(step, steps) + "the loss is " +
                (std::isnan(loss) ? "nan" : loss > 0 ? "inf" : "-inf"));
  return result;
}

/// Rank 0: the step's line of progress, and of the metrics file.
std::vector<at::Tensor> Training::execute(std::vector<at::Tensor> inputs) {
  if (!o.cudaGraph || !warmedUp) {
    // Without a graph, or the warm-up step (kernels and libraries load,
    // workspaces are allocated: what capture may not do).
    warmedUp = true;
    return executor.run(std::move(inputs), state);
  }
  if (graph) {
    for (size_t i = 0; i < inputs.size(); ++i)
      graphInputs[i].copy_(inputs[i]);
    graph->replay();
    return graphOutputs;
  }
  // Capture: the step reads the state's tensors and writes new ones; the
  // graph copies the new values back into the tensors it read, so each
  // replay starts from the last one's state. Nothing runs while the step
  // is captured: the replay after it computes this step.
  graphInputs = std::move(inputs);
  State read = state;
  graph = cuda::makeGraph(device);
  try {
    graph->begin();
    graphOutputs = executor.run(graphInputs, state);
    for (auto &[name, t] : state)
      if (!t.is_same(read.at(name)))
        read.at(name).copy_(t);
    graph->end();
  } catch (const std::exception &e) {
    // End the capture (CUDA refuses other work on a capturing stream),
    // and drop what was captured.
    try {
      graph->end();
    } catch (...) {
    }
    graph.reset();
    throw Error("--cuda-graph: the step cannot be captured: " + firstLine(e));
  }
  state = read;
  graph->replay();
  return graphOutputs;
}

void Training::report(int64_t step, const StepResult &result) {
  std::printf("step %lld/%lld", static_cast<long long>(step + 1),
              static_cast<long long>(steps));
  if (result.hasLoss)
    std::printf("  loss %.6f", result.loss);
  // The plan's per-step metrics (the scheduled learning rate): rank 0's
  // value, the same on every rank.
  std::vector<std::pair<std::string, double>> stepMetrics;
  for (const auto &[name, output] : plan.metrics) {
    stepMetrics.emplace_back(name, outputs.at(output).item<double>());
    if (name == fsdp::plan::kMetricSkipped && stepMetrics.back().second != 0.0)
      ++skippedSteps;
    std::printf("  %s %.6g", name.c_str(), stepMetrics.back().second);
  }
  std::printf("  %.1f ms  peak %.2f MB", result.ms, executor.peakBytes() / 1e6);
  if (device.is_cuda())
    std::printf(" (allocator %.2f MB, reserved %.2f MB)",
                result.allocatorPeak / 1e6, result.reservedPeak / 1e6);
  std::printf("%s", info.worldSize > 1 ? " (rank 0)" : "");
  // The time left at this run's pace so far (its evaluations included).
  if (!runStart)
    runStart = {std::chrono::steady_clock::now() -
                    std::chrono::microseconds(
                        static_cast<int64_t>(result.ms * 1000.0)),
                step};
  if (step + 1 < steps) {
    double elapsed = std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - runStart->first)
                         .count();
    double left = elapsed / static_cast<double>(step + 1 - runStart->second) *
                  static_cast<double>(steps - step - 1);
    std::printf("  eta %s", formatDuration(left).c_str());
  }
  std::printf("\n");
  std::fflush(stdout);
  if (!metrics.is_open())
    return;
  nlohmann::json line{{"step", step},
                      {"step_ms", result.ms},
                      {"comm_wait_ms", executor.commWaitMs()},
                      {"peak_bytes", executor.peakBytes()},
                      {"allocator_peak_bytes", result.allocatorPeak}};
  // CPU offload: host memory, counted apart.
  if (device.is_cuda())
    line["allocator_reserved_bytes"] = result.reservedPeak;
  if (executor.hostPeakBytes())
    line["host_peak_bytes"] = executor.hostPeakBytes();
  line["loss"] =
      result.hasLoss ? nlohmann::json(result.loss) : nlohmann::json(nullptr);
  for (const auto &[name, value] : stepMetrics)
    line[name] = value;
  // One line per step, as it happens: others may follow the run.
  writeMetrics(line);
}

/// A checkpoint every --checkpoint-every steps and after the last: every
/// rank takes part.
void Training::checkpoint(int64_t step) {
  if (!checkpointDir ||
      !(step + 1 == steps ||
        (o.checkpointEvery > 0 && (step + 1) % o.checkpointEvery == 0)))
    return;
  std::string written;
  try {
    written = writeCheckpoint(plan, state, comm, step + 1, *checkpointDir,
                              checkpointType);
  } catch (const std::exception &e) {
    throw Error(stepPrefix(step, steps) + firstLine(e));
  }
  if (lead) {
    std::printf("checkpoint %s (%s)\n", written.c_str(),
                stateDictTypeName(checkpointType));
    std::fflush(stdout);
  }
}

/// Each line reaches the file as it is written, or the run stops.
void Training::writeMetrics(const nlohmann::json &line) {
  errno = 0;
  metrics << line.dump() << std::endl;
  if (!metrics)
    throw Error("cannot write metrics file '" + o.metrics + "'" +
                (errno ? std::string(": ") + std::strerror(errno) : ""));
}

/// The summary's peak is the largest over the ranks (ranks differ where
/// their shards' padding does); every rank takes part. Returns the rank
/// with the largest peak.
int64_t Training::gatherPeaks() {
  startRss = startResident;
  endRss = residentBytes();
  if (info.worldSize <= 1)
    return 0;
  at::Tensor peaks = at::zeros({7, info.worldSize}, at::kDouble);
  peaks[0][info.rank] = static_cast<double>(peak);
  peaks[1][info.rank] = static_cast<double>(allocatorPeak);
  peaks[2][info.rank] = static_cast<double>(hostPeak);
  peaks[3][info.rank] = static_cast<double>(reservedPeak);
  peaks[4][info.rank] = static_cast<double>(evalPeak);
  peaks[5][info.rank] = static_cast<double>(startRss);
  peaks[6][info.rank] = static_cast<double>(endRss);
  at::Tensor all =
      comm.allReduce(peaks.to(device), CommGroup::World, /*mean=*/false)
          ->wait()
          .cpu();
  int64_t peakRank = all[0].argmax().item<int64_t>();
  peak = static_cast<int64_t>(all[0][peakRank].item<double>());
  allocatorPeak = static_cast<int64_t>(all[1].max().item<double>());
  hostPeak = static_cast<int64_t>(all[2].max().item<double>());
  reservedPeak = static_cast<int64_t>(all[3].max().item<double>());
  evalPeak = static_cast<int64_t>(all[4].max().item<double>());
  startRss = static_cast<int64_t>(all[5].max().item<double>());
  endRss = static_cast<int64_t>(all[6].max().item<double>());
  return peakRank;
}

/// Rank 0: the metrics file's last line, and the file closed.
void Training::writeSummary(int64_t sharded, int64_t modelBytesRead,
                            int64_t dataBytesRead, int64_t peakRank) {
  nlohmann::json summary{{"summary", true},
                         {"world_size", info.worldSize},
                         {"sharded_state_bytes", sharded},
                         {"model_bytes_read", modelBytesRead},
                         {"data_bytes_read", dataBytesRead},
                         {"peak_bytes", peak},
                         {"peak_rank", peakRank},
                         {"allocator_peak_bytes", allocatorPeak},
                         {"rss_start_bytes", startRss},
                         {"rss_end_bytes", endRss},
                         {"threads", at::get_num_threads()}};
  if (device.is_cuda()) {
    summary["device"] = device.str();
    summary["allocator_reserved_bytes"] = reservedPeak;
  }
  if (o.deterministic)
    summary["deterministic"] = true;
  // Evaluation: the last one's loss, the peak over every one and rank.
  if (evaluation) {
    summary["eval_loss"] =
        evalLoss ? nlohmann::json(*evalLoss) : nlohmann::json(nullptr);
    summary["eval_peak_bytes"] = evalPeak;
  }
  if (hostPeak) {
    summary["host_peak_bytes"] = hostPeak;
    // Updates of offloaded state that could not write its own buffer
    // (this rank's; 0 where every update wrote in place).
    summary["host_state_moves"] = hostStateMoves;
  }
  // Dynamic loss scaling: the steps whose update was skipped.
  if (std::any_of(plan.metrics.begin(), plan.metrics.end(), [](const auto &m) {
        return m.first == fsdp::plan::kMetricSkipped;
      }))
    summary["skipped_steps"] = skippedSteps;
  writeMetrics(summary);
  metrics.close();
  if (!metrics)
    throw Error("cannot write metrics file '" + o.metrics + "'");
}

void Training::finish(int64_t modelBytesRead, int64_t dataBytesRead) {
  int64_t sharded = parameterAndOptimizerBytes(plan, state) + gradBytes;
  int64_t peakRank = gatherPeaks();
  if (lead && metrics.is_open())
    writeSummary(sharded, modelBytesRead, dataBytesRead, peakRank);
  if (lead && info.worldSize > 1)
    std::printf("rank 0 holds %.2f MB of parameters, gradients and optimizer "
                "state (sharded over %lld ranks)\n",
                sharded / 1e6, static_cast<long long>(info.worldSize));
  if (o.profile && lead)
    printProfile(plan, executor.instructionTimes(), profiledSteps());
  writeOutputs();
  if (lead && (std::fflush(stdout) != 0 || std::ferror(stdout)))
    throw Error(std::string("cannot write the progress to standard output: ") +
                std::strerror(errno));
}

/// --memory-timeline, --profile-json and --outputs (rank 0), --save (every
/// rank gathers).
void Training::writeOutputs() {
  if (lead && !o.profileJson.empty()) {
    // Instruction by instruction, as the memory report's
    // instruction_seconds predicts them: the mean over the steps run.
    const std::vector<double> &times = executor.instructionTimes();
    int64_t ran = profiledSteps();
    nlohmann::json seconds = nlohmann::json::array(),
                   ops = nlohmann::json::array();
    for (size_t i = 0; i < times.size(); ++i) {
      seconds.push_back(times[i] / 1e3 / static_cast<double>(ran));
      ops.push_back(profileName(plan.instructions[i]));
    }
    nlohmann::json profile{{"rank", info.rank},
                           {"steps", ran},
                           {"instruction_seconds", std::move(seconds)},
                           {"ops", std::move(ops)}};
    std::string text = profile.dump() + "\n";
    writeFileAtomically(o.profileJson,
                        std::vector<char>(text.begin(), text.end()));
  }
  if (lead && !o.memoryTimeline.empty()) {
    // Rank 0's live bytes in the last step, instruction by instruction.
    nlohmann::json timeline{{"rank", info.rank},
                            {"peak_bytes", executor.peakBytes()},
                            {"start_bytes", executor.startBytes()},
                            {"timeline", executor.liveAfter()},
                            {"instruction_peak", executor.liveDuring()}};
    // On a CPU rank, what the allocator handed out during each instruction
    // (live bytes plus kernels' workspaces), on the same scale.
    if (allocator)
      timeline["allocator_instruction_peak"] = executor.allocatorDuring();
    std::string text = timeline.dump() + "\n";
    writeFileAtomically(o.memoryTimeline,
                        std::vector<char>(text.begin(), text.end()));
  }
  if (!o.save.empty()) {
    // Every rank takes part in gathering the flat parameters; rank 0 writes.
    State gathered = gatherFlatParams(plan, state, comm);
    if (lead)
      saveState(plan, state, gathered, o.save);
  }
  if (lead && !o.outputs.empty()) {
    c10::List<at::Tensor> list;
    for (const at::Tensor &t : outputs)
      list.push_back(t);
    writeFileAtomically(o.outputs, saveForTorchLoad(list));
  }
}

} // namespace

/// What the ranks must agree on: the plan, byte for byte as it was loaded
/// (its state layout included), and how many steps they take.
std::string runFingerprint(const Plan &plan, const RunOptions &o) {
  // Deterministic kernels change a step's bits: every rank runs them or
  // none.
  // What each rank reads of the data must be its part of one order: the
  // flags that choose the windows, the order and the evaluations too (not
  // the files' paths, which may differ from node to node).
  std::string data = "\nseed=" + (o.seed ? std::to_string(*o.seed) : "") +
                     "\nseq_len=" + std::to_string(o.seqLen) +
                     "\ntoken_inputs=" + o.tokenInputs +
                     "\ndata_order=" + o.dataOrder +
                     "\ntoken_dtype=" + o.tokenDtype +
                     "\neval=" + (o.evalData.empty() ? "" : "1") +
                     "\neval_every=" + std::to_string(o.evalEvery) +
                     "\neval_steps=" + std::to_string(o.evalSteps);
  return c10::sha1(plan.digest + "\nsteps=" + std::to_string(o.steps) +
                   (o.deterministic ? "\ndeterministic" : "") + data)
      .str();
}

Plan loadPlanFor(const RunOptions &o, const RankInfo &info, bool script) {
  Plan plan = loadPlan(o.plan);
  if (plan.worldSize != info.worldSize && script)
    throw Error(compiledFor(plan, o.plan) + " but runs on " +
                std::to_string(info.worldSize) + ": start the script with " +
                "torchrun --nproc-per-node " + std::to_string(plan.worldSize) +
                " (or srun), or compile the plan with --world-size " +
                std::to_string(info.worldSize));
  if (plan.worldSize != info.worldSize)
    throw Error(compiledFor(plan, o.plan) + " but runs on " +
                std::to_string(info.worldSize) +
                (plan.worldSize > 1 && !info.launched
                     ? ": start it with --nproc " +
                           std::to_string(plan.worldSize) +
                           " or a launcher (torchrun, srun)"
                     : ": compile it again with --world-size " +
                           std::to_string(info.worldSize)));
  if (!o.evalData.empty() && !plan.eval)
    throw Error(
        "--eval-data: plan '" + o.plan + "' has no evaluation step" +
        (plan.noEval.empty()
             ? std::string(" (fsdp-opt builds one beside a training step, "
                           "from --loss)")
             : ": " + plan.noEval +
                   "; compile it with --eval-model, the model exported in "
                   "evaluation mode too (fsdp_export.save(..., "
                   "eval_path=...))"));
  return plan;
}

std::string compiledFor(const Plan &plan, const std::string &path) {
  return "plan '" + path + "' was compiled for " +
         std::to_string(plan.worldSize) + " rank" +
         (plan.worldSize == 1 ? "" : "s");
}

Executor buildExecutor(const Plan &plan, const std::string &path,
                       Communicator *comm) {
  try {
    return Executor(plan, comm);
  } catch (const Error &e) {
    throw Error("plan '" + path + "': " + e.what());
  }
}

void checkUpFront(const RunOptions &o, const RankInfo &info,
                  bool writesOutputs) {
  (void)collectiveTimeout();
  c10::Device device = rankDevice(o.device, info);
  (void)runBackend(o.backend, device);
  if (o.cudaGraph && !device.is_cuda())
    throw Error("--cuda-graph captures the step on a GPU: it needs "
                "--device cuda");
  if (o.cudaGraph && info.worldSize > 1 &&
      runBackend(o.backend, device) != Backend::Nccl)
    throw Error("--cuda-graph captures the collectives too: it needs "
                "--backend nccl (Gloo's run on the host)");
  if (!writesOutputs)
    return;
  checkOutputPath("--metrics", o.metrics);
  checkOutputPath("--calibrate", o.calibrate);
  checkOutputPath("--save", o.save);
  checkOutputPath("--outputs", o.outputs);
  checkOutputPath("--memory-timeline", o.memoryTimeline);
  checkOutputPath("--profile-json", o.profileJson);
  checkOutputDir("--checkpoint-dir", o.checkpointDir);
  if (!o.resume.empty())
    (void)findCheckpoint(o.resume);
}

void runRank(const RunOptions &o, const RankInfo &info,
             std::unique_ptr<Communicator> &comm) {
  startResident = residentBytes();
  Plan plan = loadPlanFor(o, info);
  if (o.cudaGraph) {
    for (const StateEntry &e : plan.state)
      if (e.host)
        throw Error("--cuda-graph: plan '" + o.plan + "' keeps '" + e.name +
                    "' in host memory (CPU offload), and what the host "
                    "computes is not on the GPU for a graph to capture");
    // Replaying random draws (activation checkpointing's recomputation)
    // reads and sets the CUDA generator's state, which a capture forbids.
    for (size_t i = 0; i < plan.instructions.size(); ++i) {
      const Instruction &inst = plan.instructions[i];
      const auto *backward = inst.as<inst::AutogradBackward>();
      if (inst.as<inst::RngState>() || inst.as<inst::SetRngState>() ||
          (backward && backward->rng >= 0))
        throw Error("--cuda-graph: plan '" + o.plan + "' replays random "
                    "draws (instruction #" + std::to_string(i) +
                    ": dropout under activation checkpointing), which reads "
                    "the generator's state: a CUDA graph cannot capture that");
    }
  }
  c10::Device device = rankDevice(o.device, info);
  if (device.is_cuda())
    cuda::setDevice(device);
  else // before the state and the first batch are allocated: their frees count
    AllocatorCounter::install();
  if ((plan.device == "cuda") != device.is_cuda() && info.rank == 0)
    printLineToStderr(
        "fsdp-run: warning: plan '" + o.plan + "' was compiled for " +
        plan.device + " (fsdp-opt --device " + plan.device + ") and runs on " +
        device.str() + ": the step is the same, but where eager PyTorch "
        "computes differently on " + (device.is_cuda() ? "a GPU" : "the CPU") +
        " (dropout's draws, Adam's rounding order), it computes as on " +
        plan.device);
  // Every rank shows rank 0 what it runs before any of them starts.
  RankInfo shown = info;
  shown.fingerprint = runFingerprint(plan, o);
  comm = createCommunicator(runBackend(o.backend, device), shown,
                            static_cast<int>(plan.shardGroupSize), device);
  // The run holds its checkpoint directory from its start: a second run
  // writing the same one is refused before either trains.
  std::optional<CheckpointDir> checkpointDir;
  if (!o.checkpointDir.empty())
    checkpointDir = CheckpointDir::claim(o.checkpointDir, *comm);
  int64_t modelBytesRead = 0;
  State state = loadState(plan, o.model, comm->groupRank(CommGroup::Shard),
                          &modelBytesRead);
  // torch.manual_seed(N) on every rank, as accelerate's set_seed: dropout
  // draws the same masks on every rank (a resumed run then takes the
  // checkpoint's generator state).
  if (o.seed)
    at::manual_seed(*o.seed);
  int64_t steps = o.steps;
  std::unique_ptr<BatchData> data =
      BatchData::open(plan, o, steps, info.rank, info.worldSize);
  int64_t firstStep =
      o.resume.empty()
          ? 0
          : resume(o, plan, state, *comm, steps, /*lead=*/info.rank == 0);
  // Loaded (or resumed) in CPU memory: now where the plan keeps it.
  placeState(plan, state, device);
  StateDictType checkpointType = checkpointTypeFor(o, plan);
  Executor executor = buildExecutor(plan, o.plan, comm.get());
  if (o.profile)
    executor.enableProfiling();
  std::optional<Evaluation> evaluation;
  if (!o.evalData.empty()) {
    int64_t batches = o.evalSteps > 0 ? o.evalSteps : -1;
    std::unique_ptr<BatchData> evalData = BatchData::openEval(
        *plan.eval, o, batches, info.rank, info.worldSize);
    evaluation.emplace(Evaluation{*plan.eval,
                                  buildExecutor(*plan.eval, o.plan, comm.get()),
                                  std::move(evalData), batches});
  }
  Training training(o, info, plan, state, *comm, executor, checkpointType,
                    std::move(checkpointDir), steps,
                    evaluation ? &*evaluation : nullptr);
  BatchReader reader(plan, *data, steps, device.is_cuda());
  for (int64_t step = firstStep; step < steps; ++step)
    training.step(step, reader);
  training.finish(modelBytesRead, data->bytesRead());
}

} // namespace fsdp::runtime
