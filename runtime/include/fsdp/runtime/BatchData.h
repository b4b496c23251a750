//===- BatchData.h - the batches a run trains on ----------------*- C++ -*-===//
//
// The data file is `torch.save({name: tensor})` with one entry per plan
// input, each with a leading [steps] dimension ([steps * K] for a plan that
// accumulates K micro-batches: step s takes entries s * K .. s * K + K - 1),
// then the global batch: rank r of W takes the r-th of W equal slices of it.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_BATCHDATA_H
#define FSDP_RUNTIME_BATCHDATA_H

#include "fsdp/runtime/Plan.h"

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>

#include <cstdint>
#include <map>
#include <string>

namespace fsdp::runtime {

/// The data file's entries, checked against the plan's inputs: one per
/// input name (an input of every micro-batch reads the same entry), with
/// a leading dimension of steps x micro-batches; of a world of `world`
/// ranks, rank `rank`'s slice of each batch. `steps` (-1: as many as the
/// file holds) is set to the steps the run takes.
std::map<std::string, at::Tensor> loadData(const Plan &plan,
                                           const std::string &path,
                                           int64_t &steps, int rank,
                                           int world);

} // namespace fsdp::runtime

#endif // FSDP_RUNTIME_BATCHDATA_H
