//===- BatchData.cpp - the batches a run trains on -------------------------===//

#include "fsdp/runtime/BatchData.h"
#include "fsdp/runtime/Files.h"
#include "fsdp/runtime/ModelArchive.h"

#include <caffe2/serialize/inline_container.h>

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

namespace fsdp::runtime {

namespace {

/// What torch.save wrote to `path`, every tensor checked against its record.
c10::IValue readTorchSaveFile(const std::string &path) {
  caffe2::serialize::PyTorchStreamReader reader(path);
  struct stat info;
  if (::stat(path.c_str(), &info) != 0)
    throw Error("cannot read data file '" + path + "': " +
                std::strerror(errno));
  return readTorchSave(reader, static_cast<uint64_t>(info.st_size), path);
}

/// The data file's dict name -> tensor.
c10::impl::GenericDict readDataFile(const std::string &path) {
  // A pipe or a device would block or never end.
  checkFile(path, "data file ");
  c10::IValue value;
  try {
    value = readTorchSaveFile(path);
  } catch (const c10::Error &e) {
    throw Error("cannot read data file '" + path + "' (write it with "
                "torch.save({name: tensor})): " + firstLine(e));
  }
  if (!value.isGenericDict())
    throw Error("data file '" + path + "' must hold a dict name -> tensor");
  return value.toGenericDict();
}

/// The data of `input`, every step (`whole`, as the file has it): of a
/// world of `world` ranks, rank `rank`'s slice of each step's batch,
/// checked against the plan's type.
at::Tensor inputData(const at::Tensor &whole, const InputEntry &input,
                     int rank, int world) {
  at::Tensor t = whole;
  if (world > 1 && !input.type.shape.empty() && t.dim() >= 2) {
    // This rank's slice of the global batch.
    int64_t batch = t.size(1);
    if (batch % world != 0)
      throw Error("data '" + input.name + "' has a batch of " +
                  std::to_string(batch) + " per step, which does not split "
                  "into " + std::to_string(world) + " equal slices, one "
                  "per rank");
    t = t.narrow(1, rank * (batch / world), batch / world);
  }
  std::vector<int64_t> perStep(t.sizes().begin() + std::min<int64_t>(1, t.dim()),
                               t.sizes().end());
  if (t.dim() != static_cast<int64_t>(input.type.shape.size()) + 1 ||
      perStep != input.type.shape || t.scalar_type() != input.type.dtype)
    throw Error("data '" + input.name + "' is " +
                TensorSpec{whole.sizes().vec(), t.scalar_type()}.str() +
                ", but the plan takes [steps]x" + input.type.str() +
                (world > 1 ? " per rank (the batch of " +
                                 std::to_string(world) + " ranks together)"
                           : std::string()));
  return t;
}

/// The steps the run takes, given `available` entries of data (-1: the
/// plan has no inputs) and --steps (`steps`, -1 if not given): all of them
/// unless --steps says fewer.
void countSteps(const Plan &plan, const std::string &path, int64_t available,
                int64_t &steps) {
  if (available == 0)
    throw Error("data file '" + path + "' holds 0 steps (the first dimension "
                "of each entry counts the steps)");
  const int64_t micro = plan.microBatches;
  if (micro > 1 && available >= 0) {
    // Gradient accumulation: each step takes `micro` consecutive entries.
    if (steps < 0 && available % micro != 0)
      throw Error("data file '" + path + "' holds " +
                  std::to_string(available) + " entries, which is not a "
                  "whole number of steps of " + std::to_string(micro) +
                  " micro-batches (the plan accumulates " +
                  std::to_string(micro) + "; pass --steps to use fewer)");
    if (steps >= 0 && steps * micro > available)
      throw Error("--steps " + std::to_string(steps) + " takes " +
                  std::to_string(steps * micro) + " entries (" +
                  std::to_string(micro) + " micro-batches per step), but "
                  "the data file holds " + std::to_string(available));
    available /= micro;
  }
  if (steps < 0)
    steps = available < 0 ? 1 : available;
  else if (available >= 0 && steps > available)
    throw Error("--steps " + std::to_string(steps) + " but the data file holds " +
                std::to_string(available) + " steps");
}

} // namespace

std::map<std::string, at::Tensor> loadData(const Plan &plan,
                                           const std::string &path,
                                           int64_t &steps, int rank,
                                           int world) {
  c10::impl::GenericDict dict = readDataFile(path);
  std::map<std::string, at::Tensor> data;
  int64_t available = -1;
  for (const InputEntry &input : plan.inputs) {
    if (data.count(input.name))
      continue;
    auto it = dict.find(input.name);
    if (it == dict.end() || !it->value().isTensor())
      throw Error("data file '" + path + "' has no tensor '" + input.name +
                  "', an input of the plan (" + input.type.str() + " per step)");
    at::Tensor t = inputData(it->value().toTensor(), input, rank, world);
    if (available >= 0 && t.size(0) != available)
      throw Error("data entries hold different numbers of steps (" +
                  std::to_string(available) + " and " +
                  std::to_string(t.size(0)) + " for '" + input.name + "')");
    available = t.size(0);
    data[input.name] = t.contiguous();
  }
  countSteps(plan, path, available, steps);
  return data;
}

} // namespace fsdp::runtime
