//===- CommCheck.cpp - fsdp-run --check-communicator ----------------------===//
//
// The backend conformance check: every collective the plans use, on every
// group, in sum and mean, in f32, bf16 and f16, against the result computed
// here from what every rank must have sent. The same check runs over Gloo
// on CPU ranks and over NCCL on GPU ranks.
//
//===----------------------------------------------------------------------===//

#include "fsdp/runtime/Device.h"
#include "fsdp/runtime/Trainer.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace fsdp::runtime {

namespace {

/// What rank `r` sends in a check: small integers (exact in every dtype
/// checked, and so are their sums), different on every rank and element.
at::Tensor inputOf(int r, int salt, at::IntArrayRef shape,
                   at::ScalarType dtype) {
  int64_t numel = 1;
  for (int64_t d : shape)
    numel *= d;
  at::Tensor i = at::arange(numel, at::kDouble);
  return ((i * 7 + r * 3 + salt) % 11 - 5).view(shape).to(dtype);
}

/// The ranks of `group` that this rank's group holds, in group order.
std::vector<int> membersOf(CommGroup group, int rank, int world, int shard) {
  std::vector<int> members;
  switch (group) {
  case CommGroup::World:
    for (int r = 0; r < world; ++r)
      members.push_back(r);
    break;
  case CommGroup::Shard:
    for (int k = 0; k < shard; ++k)
      members.push_back(rank / shard * shard + k);
    break;
  case CommGroup::Replicate:
    for (int r = rank % shard; r < world; r += shard)
      members.push_back(r);
    break;
  }
  return members;
}

/// Whether `got` is `want` (computed in f64) as the dtype holds it: sums
/// of the inputs are exact; a mean may round once per contribution.
bool matches(const at::Tensor &got, const at::Tensor &want, int contributions) {
  if (got.sizes() != want.sizes() || got.scalar_type() == at::kDouble)
    return false;
  double eps = got.scalar_type() == at::kFloat      ? 1.2e-7
               : got.scalar_type() == at::kBFloat16 ? 7.9e-3
                                                    : 9.8e-4;
  at::Tensor diff = (got.cpu().to(at::kDouble) - want).abs();
  at::Tensor bound = want.abs().clamp_min(1.0) * eps * (contributions + 1);
  return diff.le(bound).all().item<bool>();
}

} // namespace

int checkCommunicator(const RunOptions &o, const RankInfo &info,
                      std::unique_ptr<Communicator> &comm) {
  c10::Device device = rankDevice(o.device, info);
  if (device.is_cuda())
    cuda::setDevice(device);
  Backend backend = runBackend(o.backend, device);
  const int world = info.worldSize;
  const int shard = o.shardGroupSize > 0 ? static_cast<int>(o.shardGroupSize)
                                         : world;
  if (world % shard != 0)
    throw Error("--shard-group-size " + std::to_string(shard) +
                " does not divide the world size " + std::to_string(world));
  comm = createCommunicator(backend, info, shard, device);
  const int rank = info.rank;
  // FSDP_RUN_CHECK_PERTURB=R: rank R sends one element off by one, and
  // every check it takes part in must say so (the check's own test).
  const char *perturb = std::getenv("FSDP_RUN_CHECK_PERTURB");
  const bool perturbed = perturb && *perturb && std::atoi(perturb) == rank;
  auto sent = [&](int salt, at::IntArrayRef shape, at::ScalarType dtype) {
    at::Tensor t = inputOf(rank, salt, shape, dtype);
    if (perturbed && dtype == at::kBool)
      t.view({-1})[0].logical_not_();
    else if (perturbed)
      t.view({-1})[0].add_(1);
    return t.to(device);
  };
  const bool lead = rank == 0;
  if (lead)
    std::printf("checking %s on %d rank%s (%s), shard groups of %d\n",
                backendName(backend), world, world == 1 ? "" : "s",
                device.str().c_str(), shard);

  int checks = 0;
  std::string firstFailure;
  auto report = [&](const std::string &name, bool ok) {
    ++checks;
    if (!ok && firstFailure.empty())
      firstFailure = name;
    if (lead)
      std::printf("  %-46s %s\n", name.c_str(), ok ? "ok" : "MISMATCH");
  };
  auto onDevice = [&](const at::Tensor &t) { return t.to(device); };

  int salt = 0;
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf})
    for (CommGroup group :
         {CommGroup::World, CommGroup::Shard, CommGroup::Replicate}) {
      std::vector<int> members = membersOf(group, rank, world, shard);
      const int n = static_cast<int>(members.size());
      const int index = comm->groupRank(group);
      std::string where = std::string(name(group)) + " " + dtypeName(dtype);
      if (comm->groupSize(group) != n || members[index] != rank) {
        report(where + ": group of " + std::to_string(n) + " ranks", false);
        continue;
      }
      ++salt;
      // all-gather: the shards in group order.
      {
        std::vector<at::Tensor> parts;
        for (int m : members)
          parts.push_back(inputOf(m, salt, {4, 3}, dtype).to(at::kDouble));
        at::Tensor got =
            comm->allGather(sent(salt, {4, 3}, dtype), group)
                ->wait();
        report("all_gather " + where, matches(got, at::cat(parts), 0));
      }
      for (bool mean : {false, true}) {
        std::string op = mean ? " mean" : " sum";
        // reduce-scatter: this rank's chunk of the sum over the group.
        {
          at::Tensor want = at::zeros({7}, at::kDouble);
          for (int m : members) {
            at::Tensor x =
                inputOf(m, salt, {7 * n}, dtype).to(at::kDouble).chunk(n)[index];
            want += mean ? x / n : x;
          }
          at::Tensor got = comm->reduceScatter(
                                   sent(salt, {7 * n}, dtype),
                                   group, mean)
                               ->wait();
          report("reduce_scatter " + where + op, matches(got, want, n));
        }
        // all-reduce: the sum over the group, whole.
        {
          at::Tensor want = at::zeros({5, 3}, at::kDouble);
          for (int m : members) {
            at::Tensor x = inputOf(m, salt + 1, {5, 3}, dtype).to(at::kDouble);
            want += mean ? x / n : x;
          }
          at::Tensor got =
              comm->allReduce(sent(salt + 1, {5, 3}, dtype),
                              group, mean)
                  ->wait();
          report("all_reduce " + where + op, matches(got, want, n));
        }
      }
    }
  // HYBRID_SHARD's reduction: this rank's shard (by its index in its shard
  // group) of the sum over the whole world.
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16, at::kHalf})
    for (bool mean : {false, true}) {
      ++salt;
      int index = comm->groupRank(CommGroup::Shard);
      at::Tensor want = at::zeros({6, 2}, at::kDouble);
      for (int r = 0; r < world; ++r) {
        at::Tensor x = inputOf(r, salt, {6 * shard, 2}, dtype)
                           .to(at::kDouble)
                           .chunk(shard)[index];
        want += mean ? x / world : x;
      }
      at::Tensor got =
          comm->reduceScatterOverWorld(
                  sent(salt, {6 * shard, 2}, dtype), mean)
              ->wait();
      report(std::string("reduce_scatter across world ") + dtypeName(dtype) +
                 (mean ? " mean" : " sum"),
             matches(got, want, world));
    }

  // The other dtypes a plan may move: gathers of any dtype (NCCL moves
  // what it has no type for as bytes), sums of complex numbers (as pairs
  // of reals), bytes and 64-bit integers, and a 0-dim tensor's gather.
  {
    ++salt;
    std::vector<int> members = membersOf(CommGroup::World, rank, world, shard);
    const int n = world;
    auto gathered = [&](at::ScalarType dtype, at::IntArrayRef shape) {
      std::vector<at::Tensor> parts;
      for (int m : members)
        parts.push_back(inputOf(m, salt, shape, dtype).reshape(
            shape.empty() ? at::IntArrayRef{1} : shape));
      at::Tensor got =
          comm->allGather(sent(salt, shape, dtype), CommGroup::World)->wait();
      return got.cpu().equal(at::cat(parts));
    };
    for (at::ScalarType dtype : {at::kShort, at::kBool, at::kByte, at::kLong})
      report(std::string("all_gather world ") + dtypeName(dtype),
             gathered(dtype, {4, 3}));
    report("all_gather world 0-dim f32", gathered(at::kFloat, {}));
    // Complex: real and imaginary parts from different salts.
    auto complexOf = [&](int r, int s, at::IntArrayRef shape) {
      return at::complex(inputOf(r, s, shape, at::kFloat),
                         inputOf(r, s + 1, shape, at::kFloat));
    };
    auto sentComplex = [&](int s, at::IntArrayRef shape) {
      at::Tensor t = complexOf(rank, s, shape);
      if (perturbed)
        at::view_as_real(t).view({-1})[0].add_(1);
      return t.to(device);
    };
    {
      std::vector<at::Tensor> parts;
      for (int m : members)
        parts.push_back(complexOf(m, salt, {4, 3}));
      at::Tensor got =
          comm->allGather(sentComplex(salt, {4, 3}), CommGroup::World)->wait();
      report("all_gather world c64", got.cpu().equal(at::cat(parts)));
    }
    for (bool mean : {false, true}) {
      at::Tensor want = at::zeros({5, 3}, at::kComplexDouble);
      for (int m : members) {
        at::Tensor x = complexOf(m, salt, {5, 3}).to(at::kComplexDouble);
        want += mean ? x / n : x;
      }
      at::Tensor got = comm->allReduce(sentComplex(salt, {5, 3}),
                                       CommGroup::World, mean)
                           ->wait();
      report(std::string("all_reduce world c64") + (mean ? " mean" : " sum"),
             got.scalar_type() == at::kComplexFloat &&
                 matches(at::view_as_real(got.cpu()),
                         at::view_as_real(want), n));
    }
    {
      int index = comm->groupRank(CommGroup::World);
      at::Tensor want = at::zeros({7}, at::kComplexDouble);
      for (int m : members)
        want += complexOf(m, salt, {7 * n}).to(at::kComplexDouble).chunk(n)[index];
      at::Tensor got = comm->reduceScatter(sentComplex(salt, {7 * n}),
                                           CommGroup::World, false)
                           ->wait();
      report("reduce_scatter world c64 sum",
             got.scalar_type() == at::kComplexFloat &&
                 matches(at::view_as_real(got.cpu()),
                         at::view_as_real(want), n));
    }
    for (at::ScalarType dtype : {at::kByte, at::kLong}) {
      // Bytes wrap around as torch's uint8 addition does.
      at::Tensor want = at::zeros({5, 3}, dtype);
      for (int m : members)
        want += inputOf(m, salt, {5, 3}, dtype);
      at::Tensor got =
          comm->allReduce(sent(salt, {5, 3}, dtype), CommGroup::World, false)
              ->wait();
      report(std::string("all_reduce world ") + dtypeName(dtype) + " sum",
             got.cpu().equal(want));
    }
  }

  // Empty tensors (a unit whose parameters have no elements): every
  // collective completes with an empty result of the right shape.
  for (CommGroup group :
       {CommGroup::World, CommGroup::Shard, CommGroup::Replicate}) {
    at::Tensor none = at::empty({0, 3}, at::TensorOptions().device(device));
    std::string where = std::string(name(group)) + " empty";
    at::Tensor gathered = comm->allGather(none, group)->wait();
    report("all_gather " + where, gathered.sizes() == at::IntArrayRef{0, 3});
    at::Tensor scattered = comm->reduceScatter(none, group, true)->wait();
    report("reduce_scatter " + where, scattered.sizes() == at::IntArrayRef{0, 3});
    at::Tensor reduced = comm->allReduce(none, group, false)->wait();
    report("all_reduce " + where, reduced.sizes() == at::IntArrayRef{0, 3});
  }
  {
    at::Tensor none = at::empty({0}, at::TensorOptions().device(device));
    report("reduce_scatter across world empty",
           comm->reduceScatterOverWorld(none, false)->wait().numel() == 0);
  }

  // Every rank's verdict, over the same communicator.
  at::Tensor failed = at::zeros({world}, at::kFloat);
  failed[rank] = firstFailure.empty() ? 0.0 : 1.0;
  at::Tensor all =
      comm->allReduce(onDevice(failed), CommGroup::World, false)->wait().cpu();
  if (!firstFailure.empty())
    printLineToStderr("fsdp-run: rank " + std::to_string(rank) + ": " +
                      firstFailure + " does not match what the ranks sent");
  int failedRanks = static_cast<int>(all.sum().item<float>());
  if (lead) {
    if (failedRanks == 0)
      std::printf("%d checks on every rank: all match\n", checks);
    else
      std::printf("%d of %d ranks saw a mismatch\n", failedRanks, world);
    std::fflush(stdout);
  }
  if (device.is_cuda())
    cuda::synchronize(device);
  comm.reset();
  return failedRanks == 0 ? 0 : 1;
}

} // namespace fsdp::runtime
