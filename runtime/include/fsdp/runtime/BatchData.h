//===- BatchData.h - the batches a run trains on ----------------*- C++ -*-===//
//
// The data file is `torch.save({name: tensor})` with one entry per plan
// input, each with a leading [steps] dimension ([steps * K] for a plan that
// accumulates K micro-batches: step s takes entries s * K .. s * K + K - 1),
// then the global batch: rank r of W takes the r-th of W equal slices of it.
// The file is read as the run goes: its index when it is opened, then each
// step's slice when the step comes.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_BATCHDATA_H
#define FSDP_RUNTIME_BATCHDATA_H

#include "fsdp/runtime/ModelArchive.h"
#include "fsdp/runtime/Plan.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace fsdp::runtime {

/// The data file, read as the run goes: opening it reads its index (the
/// pickle, every tensor's shape, dtype and record) and checks it against
/// the plan's inputs, and each step reads from the file this rank's slice
/// of its own entries, no more. A rank's memory does not grow with the
/// file: it holds one step's batch at a time.
class BatchData {
public:
  /// Opens the data file and checks its entries against the plan's
  /// inputs: one per input name (an input of every micro-batch reads the
  /// same entry), with a leading dimension of steps x micro-batches; of a
  /// world of `world` ranks, rank `rank` reads the rank-th slice of each
  /// batch. `steps` (-1: as many as the file holds) is set to the steps
  /// the run takes. Throws Error naming the file and the entry.
  BatchData(const Plan &plan, const std::string &path, int64_t &steps,
            int rank, int world);
  ~BatchData();
  BatchData(const BatchData &) = delete;
  BatchData &operator=(const BatchData &) = delete;

  /// Entry `index` (step * micro-batches + micro-batch) of input `name`:
  /// this rank's slice, in a tensor of its own read from the file now.
  at::Tensor read(const std::string &name, int64_t index);

  /// Bytes of data read from the file so far.
  int64_t bytesRead() const;

private:
  /// Where an input's slice of each entry lies in the row-major
  /// flattening of the file's tensor.
  struct Input {
    const ModelArchive::Entry *entry; // the file's tensor
    std::vector<int64_t> shape; // of one entry's slice
    int64_t entryElements = 0;  // of a whole entry (every rank's)
    int64_t sliceBegin = 0, sliceElements = 0;
  };
  std::unique_ptr<ModelArchive> file_;
  std::map<std::string, Input> inputs_;
};

} // namespace fsdp::runtime

#endif // FSDP_RUNTIME_BATCHDATA_H
