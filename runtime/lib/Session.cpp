//===- Session.cpp - the runtime driven step by step ------------------------===//

#include "fsdp/runtime/Session.h"

#include "fsdp/runtime/Device.h"
#include "fsdp/runtime/Trainer.h"

#include <algorithm>
#include <chrono>

namespace fsdp::runtime {

Session::Session(const RunOptions &options) : o(options) {
  (void)collectiveTimeout();
  info = rankInfoFromEnvironment();
  plan = loadPlanFor(o, info, /*script=*/true);
  device = rankDevice(o.device, info);
  if (device.is_cuda())
    cuda::setDevice(device);
  RankInfo shown = info;
  shown.fingerprint = runFingerprint(plan, o);
  comm = createCommunicator(runBackend(o.backend, device), shown,
                            static_cast<int>(plan.shardGroupSize), device);
  state = loadState(plan, o.model, comm->groupRank(CommGroup::Shard));
  if (o.seed)
    at::manual_seed(*o.seed);
  if (!o.resume.empty())
    stepsTaken = readCheckpoint(plan, state, *comm, findCheckpoint(o.resume));
  placeState(plan, state, device);
  executor =
      std::make_unique<Executor>(buildExecutor(plan, o.plan, comm.get()));
  if (plan.eval)
    evalExecutor = std::make_unique<Executor>(
        buildExecutor(*plan.eval, o.plan, comm.get()));
}

Session::~Session() = default;

std::vector<at::Tensor> Session::inputsFor(const Plan &program,
                                           const Batch &batch,
                                           const char *what) const {
  for (const auto &[name, t] : batch)
    if (std::none_of(program.inputs.begin(), program.inputs.end(),
                     [&](const InputEntry &in) { return in.name == name; }))
      throw Error(std::string(what) + ": the batch has '" + name +
                  "', which is no input of plan '" + o.plan + "'");
  std::vector<at::Tensor> inputs;
  for (const InputEntry &in : program.inputs) {
    auto it = batch.find(in.name);
    if (it == batch.end())
      throw Error(std::string(what) + ": the batch has no '" + in.name +
                  "' (plan '" + o.plan + "' takes " + in.type.str() + ")");
    at::Tensor t = it->second;
    // With K micro-batches, the rank's batch holds them one after another.
    int64_t k = program.microBatches;
    std::vector<int64_t> want = in.type.shape;
    std::vector<int64_t> whole = want;
    if (k > 1 && !whole.empty())
      whole[0] *= k;
    if (t.scalar_type() != in.type.dtype || t.sizes().vec() != whole) {
      TensorSpec given{t.sizes().vec(), t.scalar_type()};
      TensorSpec taken{whole, in.type.dtype};
      throw Error(std::string(what) + ": '" + in.name + "' is " +
                  given.str() + " but plan '" + o.plan + "' takes " +
                  taken.str() + " (this rank's part of the global batch)");
    }
    if (k > 1)
      t = t.narrow(0, in.microBatch * want[0], want[0]);
    inputs.push_back(t.contiguous().to(device));
  }
  return inputs;
}

double Session::globalLoss(const std::vector<at::Tensor> &outputs) {
  // The mean of the ranks' losses, each its slice's: the global batch's,
  // as fsdp-run reports it.
  if (outputs.empty() || outputs[0].dim() != 0 ||
      !outputs[0].is_floating_point())
    throw Error("plan '" + o.plan + "' returns no loss");
  return comm->allReduce(outputs[0].to(at::kDouble), CommGroup::World,
                         /*mean=*/true)
      ->wait()
      .item<double>();
}

double Session::step(const Batch &batch) {
  std::vector<at::Tensor> inputs = inputsFor(plan, batch, "step");
  if (device.is_cuda())
    cuda::synchronize(device);
  auto start = std::chrono::steady_clock::now();
  std::vector<at::Tensor> outputs = executor->run(std::move(inputs), state);
  double loss = globalLoss(outputs);
  for (const auto &[name, index] : plan.metrics)
    if (name == plan::kMetricLr && index < (int64_t)outputs.size())
      lastLr = outputs[index];
  if (device.is_cuda())
    cuda::synchronize(device);
  lastMs = std::chrono::duration<double, std::milli>(
               std::chrono::steady_clock::now() - start)
               .count();
  ++stepsTaken;
  return loss;
}

double Session::evaluate(const Batch &batch) {
  if (!evalExecutor)
    throw Error("evaluate: plan '" + o.plan + "' has no evaluation step" +
                (plan.noEval.empty() ? std::string()
                                     : ": " + plan.noEval +
                                           "; compile it with --eval-model"));
  return globalLoss(evalExecutor->run(inputsFor(*plan.eval, batch, "evaluate"),
                                      state));
}

std::map<std::string, at::Tensor> Session::stateDict() {
  std::map<std::string, at::Tensor> out;
  for (const auto &[name, t] :
       runtime::stateDict(plan, state, gatherFlatParams(plan, state, *comm)))
    out[name] = t.cpu();
  return out;
}

void Session::save(const std::string &path) {
  State gathered = gatherFlatParams(plan, state, *comm);
  if (info.rank == 0)
    saveState(plan, state, gathered, path);
}

std::string Session::checkpoint(const std::string &dir,
                                const std::string &type) {
  std::optional<StateDictType> kind = parseStateDictType(
      !type.empty() ? type
      : !plan.stateDictType.empty() ? plan.stateDictType
                                    : std::string("FULL_STATE_DICT"));
  if (!kind)
    throw Error("checkpoint: the state dict type is FULL_STATE_DICT or "
                "SHARDED_STATE_DICT, not '" + type + "'");
  if (checkpointDir && checkpointDir->path != dir)
    throw Error("checkpoint: this job writes its checkpoints to '" +
                checkpointDir->path + "', not '" + dir + "'");
  if (!checkpointDir)
    checkpointDir = CheckpointDir::claim(dir, *comm);
  return writeCheckpoint(plan, state, *comm, stepsTaken, *checkpointDir,
                         *kind);
}

/// Whether the plan computes each step's learning rate (a schedule, or the
/// state the runner sets): it reports it as the metric `lr`.
static bool reportsLr(const Plan &plan) {
  return std::any_of(plan.metrics.begin(), plan.metrics.end(),
                     [](const auto &m) { return m.first == plan::kMetricLr; });
}

double Session::lr() const {
  if (state.count(std::string(plan::kStateLr)))
    return state.at(std::string(plan::kStateLr)).item<double>();
  if (reportsLr(plan)) {
    if (!lastLr.defined())
      throw Error("lr: plan '" + o.plan + "' computes each step's learning "
                  "rate from its schedule; read it after a step");
    return lastLr.item<double>();
  }
  if (plan.optimizer.is_object() && plan.optimizer.contains("lr") &&
      plan.optimizer.at("lr").is_number())
    return plan.optimizer.at("lr").get<double>();
  throw Error("lr: plan '" + o.plan + "' has no optimizer");
}

void Session::setLr(double lr) {
  auto it = state.find(std::string(plan::kStateLr));
  if (it == state.end())
    throw Error("lr: plan '" + o.plan + "' " +
                (reportsLr(plan)
                     ? "computes each step's learning rate from its schedule"
                     : "has its learning rate fixed at compile time") +
                "; compile it with --lr-schedule external to set it between "
                "steps");
  if (!(lr >= 0.0))
    throw Error("lr: invalid learning rate " + std::to_string(lr));
  it->second.fill_(lr);
}

void Session::fail(const std::string &message) {
  if (comm && info.worldSize > 1)
    comm->abort("rank " + std::to_string(info.rank) + ": " + message);
}

std::string Session::failureOfOthers() {
  if (!comm || info.worldSize <= 1)
    return "";
  return comm->failureOfOthers(std::chrono::milliseconds(1000));
}

double Session::commWaitMs() const { return executor->commWaitMs(); }
int64_t Session::peakBytes() const { return executor->peakBytes(); }

} // namespace fsdp::runtime
