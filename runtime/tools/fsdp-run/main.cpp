//===- main.cpp - fsdp-run: executes a plan --------------------------------===//
//
//   fsdp-run PLAN --model M.pt --data D.pt [--steps N] [--metrics F]
//            [--save F] [--outputs F]
//
// D.pt is `torch.save({name: tensor})` with one entry per plan input, each
// with a leading [steps] dimension.
//
//===----------------------------------------------------------------------===//

#include "fsdp/runtime/Executor.h"

#include <ATen/Parallel.h>

#include <caffe2/serialize/inline_container.h>
#include <torch/csrc/jit/serialization/unpickler.h>
#include <torch/serialize.h>

#include <chrono>
#include <cstring>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>

using namespace fsdp::runtime;

namespace {

struct Options {
  std::string plan, model, data, metrics, save, outputs;
  int64_t steps = -1;
  int64_t threads = 0; // 0: libtorch's default
  bool profile = false;
};

[[noreturn]] void usage(const std::string &why) {
  std::cerr << "fsdp-run: " << why << "\n"
            << "usage: fsdp-run PLAN --model M.pt --data D.pt [--steps N] "
               "[--metrics F.jsonl] [--save F.pt] [--outputs F.pt] [--threads N] "
               "[--profile]\n";
  std::exit(2);
}

Options parseArgs(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        usage(a + " needs a value");
      return argv[++i];
    };
    if (a == "--model") o.model = value();
    else if (a == "--data") o.data = value();
    else if (a == "--metrics") o.metrics = value();
    else if (a == "--save") o.save = value();
    else if (a == "--outputs") o.outputs = value();
    else if (a == "--profile") o.profile = true;
    else if (a == "--threads") {
      std::string v = value();
      try { o.threads = std::stoll(v); } catch (...) { usage("--threads takes a number, not '" + v + "'"); }
      if (o.threads < 1) usage("--threads must be at least 1");
    }
    else if (a == "--steps") {
      std::string v = value();
      try { o.steps = std::stoll(v); } catch (...) { usage("--steps takes a number, not '" + v + "'"); }
      if (o.steps < 1) usage("--steps must be at least 1");
    } else if (a == "-h" || a == "--help") usage("executes an fsdp-opt plan");
    else if (!a.empty() && a[0] == '-') usage("unknown option " + a);
    else if (o.plan.empty()) o.plan = a;
    else usage("unexpected argument " + a);
  }
  if (o.plan.empty()) usage("no plan given");
  if (o.model.empty()) usage("--model is required");
  if (o.data.empty()) usage("--data is required");
  return o;
}

/// Reads a file written by Python's torch.save (zip format: data.pkl plus one
/// record per storage). libtorch 1.13's unpickler lacks SETITEM, which Python
/// uses for a dict of one entry: such a pickle is rewritten to the equivalent
/// MARK ... SETITEMS form first.
c10::IValue readTorchSave(const std::string &path) {
  caffe2::serialize::PyTorchStreamReader reader(path);
  auto record = reader.getRecord("data.pkl");
  std::string pickle(static_cast<const char *>(std::get<0>(record).get()),
                     std::get<1>(record));
  if (pickle.size() > 5 && pickle.compare(0, 3, "\x80\x02}") == 0 &&
      pickle.compare(pickle.size() - 2, 2, "s.") == 0) {
    size_t mark = 3;
    if (pickle[mark] == 'q')
      mark += 2; // BINPUT n
    else if (pickle[mark] == 'r')
      mark += 5; // LONG_BINPUT n
    pickle.insert(mark, 1, '(');
    pickle[pickle.size() - 2] = 'u';
  }
  size_t pos = 0;
  auto read = [&](char *buffer, size_t n) {
    n = std::min(n, pickle.size() - pos);
    std::memcpy(buffer, pickle.data() + pos, n);
    pos += n;
    return n;
  };
  auto readRecord = [&](const std::string &name) {
    return std::get<0>(reader.getRecord("data/" + name));
  };
  torch::jit::Unpickler unpickler(read, nullptr, nullptr, readRecord,
                                  c10::nullopt);
  return unpickler.parse_ivalue();
}

/// The data file's entries, checked against the plan's inputs.
std::vector<at::Tensor> loadData(const Plan &plan, const std::string &path,
                                 int64_t &steps) {
  std::ifstream probe(path, std::ios::binary);
  if (!probe)
    throw Error("cannot open data file '" + path + "'");
  probe.close();
  c10::IValue value;
  try {
    value = readTorchSave(path);
  } catch (const c10::Error &e) {
    std::string msg = e.what_without_backtrace();
    throw Error("cannot read data file '" + path + "' (write it with "
                "torch.save({name: tensor})): " + msg.substr(0, msg.find('\n')));
  }
  if (!value.isGenericDict())
    throw Error("data file '" + path + "' must hold a dict name -> tensor");
  auto dict = value.toGenericDict();
  std::vector<at::Tensor> data;
  int64_t available = -1;
  for (const InputEntry &input : plan.inputs) {
    auto it = dict.find(input.name);
    if (it == dict.end() || !it->value().isTensor())
      throw Error("data file '" + path + "' has no tensor '" + input.name +
                  "', an input of the plan (" + input.type.str() + " per step)");
    at::Tensor t = it->value().toTensor();
    std::vector<int64_t> perStep(t.sizes().begin() + std::min<int64_t>(1, t.dim()),
                                 t.sizes().end());
    if (t.dim() != static_cast<int64_t>(input.type.shape.size()) + 1 ||
        perStep != input.type.shape || t.scalar_type() != input.type.dtype)
      throw Error("data '" + input.name + "' is " +
                  TensorSpec{t.sizes().vec(), t.scalar_type()}.str() +
                  ", but the plan takes [steps]x" + input.type.str());
    if (available >= 0 && t.size(0) != available)
      throw Error("data entries hold different numbers of steps (" +
                  std::to_string(available) + " and " +
                  std::to_string(t.size(0)) + " for '" + input.name + "')");
    available = t.size(0);
    data.push_back(t);
  }
  if (steps < 0)
    steps = available < 0 ? 1 : available;
  else if (available >= 0 && steps > available)
    throw Error("--steps " + std::to_string(steps) + " but the data file holds " +
                std::to_string(available) + " steps");
  return data;
}

/// Time per ATen op (and per kind of other instruction), summed over the
/// run, most expensive first: where a step's time goes.
void printProfile(const Plan &plan, const std::vector<double> &times,
                  int64_t steps) {
  std::map<std::string, std::pair<double, int64_t>> byOp;
  double total = 0;
  for (size_t i = 0; i < times.size(); ++i) {
    const Instruction &inst = plan.instructions[i];
    std::string name = inst.kind == InstKind::Call ? inst.op
                       : inst.kind == InstKind::Get ? "(get)"
                       : inst.kind == InstKind::Update ? "(update)"
                                                      : "(constant)";
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

} // namespace

int main(int argc, char **argv) {
  Options o = parseArgs(argc, argv);
  if (o.threads > 0)
    at::set_num_threads(static_cast<int>(o.threads));
  try {
    Plan plan = loadPlan(o.plan);
    State state = loadState(plan, o.model);
    int64_t steps = o.steps;
    std::vector<at::Tensor> data = loadData(plan, o.data, steps);
    Executor executor(plan);
    if (o.profile)
      executor.enableProfiling();
    std::ofstream metrics;
    if (!o.metrics.empty()) {
      metrics.open(o.metrics);
      if (!metrics)
        throw Error("cannot write metrics file '" + o.metrics + "'");
    }
    std::vector<at::Tensor> outputs;
    for (int64_t step = 0; step < steps; ++step) {
      std::vector<at::Tensor> inputs;
      // A copy, so the step holds (and counts) its own batch only.
      for (const at::Tensor &d : data)
        inputs.push_back(d[step].clone());
      auto start = std::chrono::steady_clock::now();
      try {
        outputs = executor.run(inputs, state);
      } catch (const Error &e) {
        throw Error("step " + std::to_string(step + 1) + "/" +
                    std::to_string(steps) + ": " + e.what());
      }
      double ms = std::chrono::duration<double, std::milli>(
                      std::chrono::steady_clock::now() - start)
                      .count();
      // A scalar first output is the loss.
      bool hasLoss = !outputs.empty() && outputs[0].dim() == 0 &&
                     outputs[0].is_floating_point();
      double loss = hasLoss ? outputs[0].item<double>() : 0.0;
      if (hasLoss && !std::isfinite(loss))
        throw Error("step " + std::to_string(step + 1) + "/" +
                    std::to_string(steps) + ": the loss is " +
                    (std::isnan(loss) ? "nan" : loss > 0 ? "inf" : "-inf"));
      std::printf("step %lld/%lld", static_cast<long long>(step + 1),
                  static_cast<long long>(steps));
      if (hasLoss)
        std::printf("  loss %.6f", loss);
      std::printf("  %.1f ms  peak %.2f MB\n", ms, executor.peakBytes() / 1e6);
      if (metrics.is_open()) {
        nlohmann::json line{{"step", step},
                            {"step_ms", ms},
                            {"peak_bytes", executor.peakBytes()}};
        line["loss"] = hasLoss ? nlohmann::json(loss) : nlohmann::json(nullptr);
        metrics << line.dump() << "\n";
      }
    }
    if (o.profile)
      printProfile(plan, executor.instructionTimes(), steps);
    if (!o.save.empty())
      saveState(plan, state, o.save);
    if (!o.outputs.empty()) {
      c10::List<at::Tensor> list;
      for (const at::Tensor &t : outputs)
        list.push_back(t);
      writeFileAtomically(o.outputs, torch::pickle_save(list));
    }
  } catch (const Error &e) {
    std::cerr << "fsdp-run: error: " << e.what() << "\n";
    return 1;
  } catch (const c10::Error &e) {
    std::string msg = e.what_without_backtrace();
    std::cerr << "fsdp-run: error: " << msg.substr(0, msg.find('\n')) << "\n";
    return 1;
  } catch (const std::exception &e) {
    std::cerr << "fsdp-run: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
