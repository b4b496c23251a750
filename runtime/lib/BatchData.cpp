//===- BatchData.cpp - the batches a run trains on -------------------------===//

#include "fsdp/runtime/BatchData.h"

#include <algorithm>

namespace fsdp::runtime {

namespace {

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

BatchData::BatchData(const Plan &plan, const std::string &path,
                     int64_t &steps, int rank, int world)
    : file_(ModelArchive::openData(path)) {
  int64_t available = -1;
  for (const InputEntry &input : plan.inputs) {
    if (inputs_.count(input.name))
      continue;
    const ModelArchive::Entry *entry = file_->find(input.name);
    if (!entry)
      throw Error("data file '" + path + "' has no tensor '" + input.name +
                  "', an input of the plan (" + input.type.str() + " per step)");
    const std::vector<int64_t> &sizes = entry->sizes;
    // This rank's slice of the global batch (dimension 1 of the entry).
    std::vector<int64_t> slice(sizes.begin() + std::min<size_t>(1, sizes.size()),
                               sizes.end());
    int64_t part = 0, parts = 1;
    if (world > 1 && !input.type.shape.empty() && sizes.size() >= 2) {
      int64_t batch = sizes[1];
      if (batch % world != 0)
        throw Error("data '" + input.name + "' has a batch of " +
                    std::to_string(batch) + " per step, which does not split "
                    "into " + std::to_string(world) + " equal slices, one "
                    "per rank");
      slice[0] = batch / world;
      part = rank;
      parts = world;
    }
    if (sizes.size() != input.type.shape.size() + 1 ||
        slice != input.type.shape || entry->dtype != input.type.dtype) {
      throw Error("data '" + input.name + "' is " +
                  TensorSpec{sizes, entry->dtype}.str() +
                  ", but the plan takes [steps]x" + input.type.str() +
                  (world > 1 ? " per rank (the batch of " +
                                   std::to_string(world) + " ranks together)"
                             : std::string()));
    }
    int64_t entries = sizes.empty() ? 1 : sizes[0];
    if (available >= 0 && entries != available)
      throw Error("data entries hold different numbers of steps (" +
                  std::to_string(available) + " and " +
                  std::to_string(entries) + " for '" + input.name + "')");
    available = entries;
    Input in;
    in.entry = entry;
    in.shape = slice;
    in.entryElements = entries == 0 ? 0 : entry->numel() / entries;
    in.sliceElements = in.entryElements / parts;
    in.sliceBegin = part * in.sliceElements;
    inputs_.emplace(input.name, std::move(in));
  }
  countSteps(plan, path, available, steps);
}

BatchData::~BatchData() = default;

at::Tensor BatchData::read(const std::string &name, int64_t index) {
  const Input &in = inputs_.at(name);
  int64_t begin = index * in.entryElements + in.sliceBegin;
  return file_->readFlat(*in.entry, begin, begin + in.sliceElements)
      .view(in.shape);
}

int64_t BatchData::bytesRead() const { return file_->bytesRead(); }

} // namespace fsdp::runtime
