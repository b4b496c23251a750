//===- Calibrate.cpp - fsdp-run --calibrate -------------------------------===//
//
// Measures the rates the compiler's cost model predicts step times with
// (fsdp/runtime/MachineSchema.h): every rank measures at once, as the ranks
// of a run compute at once on the machine they share, and rank 0 writes the
// ranks' mean. Each figure is the median of rounds that start together
// (after an all-reduce), after a warm-up; the ranks' skew is a mean of
// rounds less their slowest tenth (what a step pays is in the rounds'
// tail, which one stall would otherwise decide).
//
//===----------------------------------------------------------------------===//

#include "fsdp/runtime/Device.h"
#include "fsdp/runtime/Executor.h"
#include "fsdp/runtime/PlanSchema.h"
#include "fsdp/runtime/MachineSchema.h"
#include "fsdp/runtime/Trainer.h"

#include <ATen/core/dispatch/Dispatcher.h>
#include <nlohmann/json.hpp>
#include <torch/script.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <unistd.h>
#include <vector>

namespace fsdp::runtime {

namespace {

/// Rounds per figure, of which the median: a shared machine's neighbours
/// move single rounds by 2x (5 rounds left the collective rate varying 2x
/// between calibrations).
constexpr int kRounds = 15;

struct Calibration {
  Communicator &comm;
  c10::Device device;

  void sync() {
    if (device.is_cuda())
      cuda::synchronize(device);
  }

  /// All ranks at the same point.
  void barrier() {
    comm.allReduce(at::zeros({1}, at::TensorOptions(device)),
                   CommGroup::World, false)
        ->wait();
    sync();
  }

  /// Seconds per call of `fn`: the median over rounds of `reps` calls.
  double perCall(int reps, const std::function<void()> &fn) {
    fn();
    sync();
    std::vector<double> rounds;
    for (int round = 0; round < kRounds; ++round) {
      barrier();
      auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < reps; ++i)
        fn();
      sync();
      rounds.push_back(std::chrono::duration<double>(
                           std::chrono::steady_clock::now() - start)
                           .count() /
                       reps);
    }
    std::sort(rounds.begin(), rounds.end());
    return rounds[rounds.size() / 2];
  }

  /// How much longer `collective` takes, per second of computation before
  /// it, after `many` calls of `work` than after one, every time from a
  /// barrier. Most rounds it takes no longer; in some a rank's work runs
  /// late (the machine's other work, the other ranks' threads on its core)
  /// and the others wait for it: a step pays those waits, so the rounds'
  /// mean counts, less the slowest tenth of rounds (where one stall would
  /// decide the figure).
  double skew(int many, const std::function<void()> &work,
              const std::function<void()> &collective) {
    constexpr int kSkewRounds = 61;
    using Clock = std::chrono::steady_clock;
    auto seconds = [](Clock::time_point from, Clock::time_point to) {
      return std::chrono::duration<double>(to - from).count();
    };
    std::vector<double> computed[2], waited[2];
    work();
    collective();
    sync();
    for (int round = 0; round < kSkewRounds; ++round) {
      for (int k = 0; k < 2; ++k) {
        barrier();
        auto start = Clock::now();
        for (int i = 0, n = k == 0 ? 1 : many; i < n; ++i)
          work();
        sync();
        auto ready = Clock::now();
        collective();
        sync();
        computed[k].push_back(seconds(start, ready));
        waited[k].push_back(seconds(ready, Clock::now()));
      }
    }
    auto meanOfMost = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      v.resize(v.size() - v.size() / 10);
      double sum = 0;
      for (double x : v)
        sum += x;
      return sum / static_cast<double>(v.size());
    };
    double longer = meanOfMost(computed[1]) - meanOfMost(computed[0]);
    double extra = meanOfMost(waited[1]) - meanOfMost(waited[0]);
    // Unclamped (the ranks' mean is clamped): noise either way averages
    // out. Where the longer computation was not longer, nothing to say.
    return longer > 0 ? extra / longer : 0.0;
  }

  /// How many bytes the ranks' kernels can touch before an operand touched
  /// earlier reads as slowly as one evicted from the caches: an add of two
  /// 128 KiB operands (a step's small element-wise kernel) timed warm, after
  /// reading 64 MiB (what fsdp-opt --measure-kernels evicts with), and after
  /// reading 256 KiB, 512 KiB, ... 32 MiB of other memory, every rank at
  /// once; the bytes at which the ranks' mean time is a quarter of the way
  /// from warm to evicted (interpolated between the two readings around
  /// it, on a log scale). The same on every rank.
  double cacheBytes() {
    const int64_t n = 32 << 10; // floats: 128 KiB
    at::Tensor x = at::rand({n}), y = at::rand({n}), out = at::empty({n});
    at::Tensor other = at::ones({static_cast<int64_t>(machine::kEvictBytes / 4)});
    int64_t offset = 0;
    auto after = [&](int64_t bytes) {
      std::vector<double> times;
      barrier();
      for (int round = 0; round < 3 * kRounds; ++round) {
        (void)at::add_out(out, x, y);
        int64_t count = bytes / 4;
        if (count > 0) {
          // A different stretch each round: none of it cached beforehand.
          if (offset + count > other.numel())
            offset = 0;
          (void)other.narrow(0, offset, count).sum();
          offset += count;
        }
        auto start = std::chrono::steady_clock::now();
        (void)at::add_out(out, x, y);
        times.push_back(std::chrono::duration<double>(
                            std::chrono::steady_clock::now() - start)
                            .count());
      }
      std::sort(times.begin(), times.end());
      return times[times.size() / 2];
    };
    // Every reading on every rank (each starts with a barrier), averaged
    // over the ranks.
    double warm = mean(after(0));
    double evicted = mean(after(machine::kEvictBytes));
    std::vector<std::pair<double, double>> readings;
    for (int64_t bytes = 256 << 10; bytes <= (32 << 20); bytes *= 2)
      readings.emplace_back(static_cast<double>(bytes), mean(after(bytes)));
    // Where the time leaves the warm level: a quarter of the way to the
    // evicted one. (Between a core's cache and memory the time often
    // rests a while at the last level's, near half-way; a quarter finds
    // the core's cache's edge, which varies less between calibrations.)
    double edge = warm + 0.25 * (evicted - warm);
    double below = 0, belowTime = warm;
    for (auto [bytes, t] : readings) {
      if (t >= edge) {
        if (below == 0)
          return bytes / 2;
        double f = (edge - belowTime) / std::max(t - belowTime, 1e-12);
        return below * std::pow(2.0, std::clamp(f, 0.0, 1.0));
      }
      below = bytes;
      belowTime = t;
    }
    return static_cast<double>(machine::kEvictBytes);
  }

  /// The mean of `value` over the ranks.
  double mean(double value) {
    at::Tensor t = at::full({1}, value, at::TensorOptions(device).dtype(at::kDouble));
    return comm.allReduce(t, CommGroup::World, true)->wait().cpu().item<double>();
  }
};

/// Seconds per instruction of a plan of `n` chained adds of 16 floats, run
/// by the executor.
double perInstruction(Calibration &c, c10::Device device, int n) {
  nlohmann::json instructions = nlohmann::json::array();
  for (int k = 0; k < n; ++k)
    instructions.push_back(
        {{"args", {{{"t", k}}, {{"t", k}}, {{"i", 1}}}},
         {"free", k == 0 ? nlohmann::json::array() : nlohmann::json{k}},
         {"kind", "call"},
         {"list_result", false},
         {"loc", "calibration"},
         {"mutates", nlohmann::json::array()},
         {"num_schema_results", 1},
         {"op", "aten::add.Tensor"},
         {"results", {k + 1}}});
  nlohmann::json plan = {
      {"format", "fsdp-plan"},
      {"version", plan::kFormatVersion},
      {"function", "forward"},
      {"num_slots", n + 1},
      {"world_size", 1},
      {"shard_group_size", 1},
      {"sharding", ""},
      {"state", nlohmann::json::array()},
      {"inputs", {{{"dtype", "f32"}, {"name", "x"}, {"shape", {16}}, {"slot", 0}}}},
      {"outputs", {n}},
      {"instructions", instructions}};
  // Checked as a plan file is, never written to disk.
  Plan loaded = parsePlan(plan.dump(), "--calibrate's microbenchmark");
  auto comm = createSingleRankCommunicator(device);
  Executor executor(loaded, comm.get());
  State state;
  std::vector<at::Tensor> inputs = {at::randn({16}, at::TensorOptions(device))};
  return c.perCall(5, [&] { (void)executor.run(inputs, state); }) / n;
}

} // namespace

int calibrateMachine(const RunOptions &o, const RankInfo &info,
                     std::unique_ptr<Communicator> &comm) {
  c10::Device device = rankDevice(o.device, info);
  if (device.is_cuda())
    cuda::setDevice(device);
  Backend backend = runBackend(o.backend, device);
  comm = createCommunicator(backend, info, info.worldSize, device);
  Calibration c{*comm, device};
  const bool lead = info.rank == 0;
  const int world = info.worldSize;
  if (lead)
    std::printf("calibrating %s on %d rank%s (%s)\n", backendName(backend),
                world, world == 1 ? "" : "s", device.str().c_str());
  auto options = at::TensorOptions(device);

  // Matrix products: 256 x 256 x 256, in float32 and bfloat16.
  const int64_t n = 256;
  const double productFlops = 2.0 * n * n * n;
  at::Tensor a = at::randn({n, n}, options), b = at::randn({n, n}, options);
  double mm = c.perCall(20, [&] { (void)at::mm(a, b); });
  at::Tensor ah = a.to(at::kBFloat16), bh = b.to(at::kBFloat16);
  double mmHalf = c.perCall(device.is_cuda() ? 20 : 4,
                            [&] { (void)at::mm(ah, bh); });

  // Convolutions: 3x3 over 16 images of 32 channels, 16 x 16, to 32.
  at::Tensor image = at::randn({16, 32, 16, 16}, options);
  at::Tensor filter = at::randn({32, 32, 3, 3}, options);
  double conv = c.perCall(5, [&] {
    (void)at::conv2d(image, filter, {}, 1, 1);
  });
  const double convFlops = 2.0 * 16 * 32 * 16 * 16 * (32 * 3 * 3);

  // A kernel's fixed cost, as fsdp-run pays it: a plan of 1000 adds of 16
  // elements, each reading the last, run by the executor.
  double overhead = perInstruction(c, device, 1000);

  // Memory: adds of 4 MiB float32 tensors (each reads 8 MiB and writes 4),
  // in turn over 8 pairs, 64 MiB: a step streams through more tensors than
  // the caches hold.
  const int64_t big = int64_t(1) << 20;
  std::vector<at::Tensor> xs, ys;
  for (int k = 0; k < 8; ++k) {
    xs.push_back(at::randn({big}, options));
    ys.push_back(at::randn({big}, options));
  }
  int turn = 0;
  double sum = c.perCall(24, [&] {
    (void)at::add(xs[turn % 8], ys[turn % 8]);
    ++turn;
  });
  const double addBytes = 3.0 * 4 * big;
  at::Tensor x = xs[0];

  // The same on host memory (the offloaded optimizer's), where the device
  // is a GPU.
  double hostSum = sum;
  if (device.is_cuda()) {
    std::vector<at::Tensor> hx, hy;
    for (int k = 0; k < 8; ++k) {
      hx.push_back(xs[k].cpu());
      hy.push_back(ys[k].cpu());
    }
    hostSum = c.perCall(24, [&] {
      (void)at::add(hx[turn % 8], hy[turn % 8]);
      ++turn;
    });
  }

  // Copies between device and host: CPU offload's.
  at::Tensor host = x.cpu();
  if (device.is_cuda())
    host = host.pin_memory();
  double copy = c.perCall(20, [&] { (void)host.to(device, false, true); });

  // Collectives: an all-gather of a small shard (its latency), and an
  // all-gather and a reduce-scatter of a 4 MiB buffer (their bandwidth);
  // then the all-gather beside products.
  double latency = 0, bandwidth = 0, overlap = 0, skew = 0;
  if (world > 1) {
    at::Tensor small = at::randn({64}, options);
    at::Tensor shard = at::randn({big / world}, options);
    double gatherSmall = c.perCall(
        20, [&] { (void)comm->allGather(small, CommGroup::World)->wait(); });
    // Between a step's collectives the ranks compute and Gloo's threads
    // sleep: each collective then pays their wake-ups too.
    double gatherAfterWork = c.perCall(20, [&] {
      (void)at::mm(a, b);
      (void)comm->allGather(small, CommGroup::World)->wait();
    }) - mm;

    double gatherBig = c.perCall(
        10, [&] { (void)comm->allGather(shard, CommGroup::World)->wait(); });
    // A step reduce-scatters what it gathers: the rate is both's, each
    // moving the same bytes (Gloo's reduce-scatter also sums and pads).
    at::Tensor full = at::randn({big / world * world}, options);
    double scatterBig = c.perCall(10, [&] {
      (void)comm->reduceScatter(full, CommGroup::World, /*mean=*/true)->wait();
    });
    double moved = 4.0 * (big / world) * (world - 1);
    // A step's collectives come after computation: their latency is that
    // one's (1.1-1.6x the back-to-back one on a 2-core machine).
    latency = std::max(gatherSmall, gatherAfterWork);
    bandwidth = 2 * moved /
                std::max(gatherBig + scatterBig - 2 * gatherSmall, 1e-9);
    // How much of it runs beside computation: products for as long as the
    // gather takes, with the gather in flight.
    int products = std::max(1, static_cast<int>(gatherBig / mm));
    double both = c.perCall(3, [&] {
      auto pending = comm->allGather(shard, CommGroup::World);
      for (int i = 0; i < products; ++i)
        (void)at::mm(a, b);
      (void)pending->wait();
    });
    double alone = products * mm;
    double hidden = alone + gatherBig - both;
    overlap = std::clamp(hidden / std::min(alone, gatherBig), 0.0, 1.0);

    // The slowest rank: the small all-gather right after one product and
    // right after about 5 ms of them, both from a barrier; per second of
    // the longer computation, how much longer the gather then takes.
    // The same number on every rank (from the ranks' mean product), so
    // that they compute alike and only their lateness differs.
    int many = std::clamp(static_cast<int>(5e-3 / std::max(c.mean(mm), 1e-9)),
                          2, 1000);
    skew = c.skew(many, [&] { (void)at::mm(a, b); },
                  [&] { (void)comm->allGather(small, CommGroup::World)->wait(); });
  }

  // How much a rank's kernels can touch before earlier operands leave the
  // caches: on a CPU, where fsdp-opt --measure-kernels times kernels.
  std::optional<double> cache;
  if (!device.is_cuda())
    cache = c.cacheBytes();

  // In MachineSchema.h's order.
  std::map<std::string, double> rates = {
      {"matmul_flops_per_s", c.mean(productFlops / mm)},
      {"matmul_half_flops_per_s", c.mean(productFlops / mmHalf)},
      {"conv_flops_per_s", c.mean(convFlops / conv)},
      {"memory_bytes_per_s", c.mean(addBytes / std::max(sum - overhead, 1e-9))},
      {"host_memory_bytes_per_s",
       c.mean(addBytes / std::max(hostSum - overhead, 1e-9))},
      {"op_overhead_s", c.mean(overhead)},
      {"collective_bytes_per_s", c.mean(bandwidth)},
      {"collective_latency_s", c.mean(latency)},
      {"copy_bytes_per_s", c.mean(4.0 * big / std::max(copy - overhead, 1e-9))},
  };
  overlap = c.mean(overlap);
  skew = std::clamp(c.mean(skew), 0.0, 1.0);
  if (world == 1) {
    // No collective to measure in a world of one rank: a plan's collectives
    // there copy their input, which the cost model counts at the memory
    // rate. The file still needs positive numbers.
    rates["collective_bytes_per_s"] = rates["memory_bytes_per_s"];
    rates["collective_latency_s"] = rates["op_overhead_s"];
    overlap = 1;
    skew = 0;
  }
  if (!lead)
    return 0;

  nlohmann::ordered_json file;
  file[machine::kVersionKey] = machine::kVersion;
  char hostname[256] = "";
  ::gethostname(hostname, sizeof hostname - 1);
  file[machine::kNameKey] =
      std::string(hostname[0] ? hostname : "machine") + " " + device.str();
  file[machine::kRanksKey] = world;
  for (const machine::RateKey &rate : machine::kRateKeys) {
    auto it = rates.find(rate.key);
    if (it == rates.end())
      throw Error(std::string("--calibrate measures no ") + rate.key);
    file[rate.key] = it->second;
    std::printf("  %-24s %12.4g  %s\n", rate.key, it->second, rate.meaning);
  }
  file[machine::kOverlapKey] = overlap;
  std::printf("  %-24s %12.4g  %s\n", machine::kOverlapKey, overlap,
              "how much of a collective runs beside the computation");
  file[machine::kSkewKey] = skew;
  std::printf("  %-24s %12.4g  %s\n", machine::kSkewKey, skew,
              "a collective's wait for the slowest rank, per second the "
              "ranks computed apart");
  if (cache) {
    file[machine::kCacheKey] = *cache;
    std::printf("  %-24s %12.4g  %s\n", machine::kCacheKey, *cache,
                "bytes a rank's kernels touch before what they touched "
                "earlier is no longer in the caches");
  }
  if (world == 1)
    std::printf("  (one rank: the collective rates are not measured; a "
                "plan's collectives in a world of one rank copy their input, "
                "at the memory rate)\n");
  // As fsdp-run writes --save: whole or not at all (a new file under an
  // unpredictable name renamed over the output), a device written in place.
  std::string text = file.dump(2) + "\n";
  writeFileAtomically(o.calibrate, std::vector<char>(text.begin(), text.end()));
  std::printf("wrote %s\n", o.calibrate.c_str());
  return 0;
}

} // namespace fsdp::runtime
