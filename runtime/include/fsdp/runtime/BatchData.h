//===- BatchData.h - the batches a run trains on ----------------*- C++ -*-===//
//
// The data file is `torch.save({name: tensor})` with one entry per plan
// input, each with a leading [steps] dimension ([steps * K] for a plan that
// accumulates K micro-batches: step s takes entries s * K .. s * K + K - 1),
// then the global batch: rank r of W takes the r-th of W equal slices of it.
// The file is read as the run goes: its index when it is opened, then each
// step's slice when the step comes.
//
// Or the data is a token corpus (a flat `.bin` of uint16 or uint32 token
// ids as nanoGPT and Megatron write them, or a 1-D `.npy`; or several of
// one dtype, a list or a glob, read in order as one): with
// `--seq-len T`, the corpus is cut into windows of T + 1 tokens (window i
// starts at token i * T), each the input ids (its first T) and next-token
// targets (its last T); each entry (step x micro-batch) takes the next
// global batch of windows in an order that `--seed` fixes, every window
// once per epoch (shuffled by default, by a keyed permutation that holds
// no table, or sequential), and rank r of W the
// r-th of W equal parts of it. A run longer than an epoch goes on in the
// next epoch's order. The order is a function of seed, epoch and entry
// alone, so a resumed run reads what the uninterrupted one reads.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_BATCHDATA_H
#define FSDP_RUNTIME_BATCHDATA_H

#include "fsdp/runtime/ModelArchive.h"
#include "fsdp/runtime/Plan.h"
#include "fsdp/runtime/RunOptions.h"

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
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
  /// The data `o` names: a `torch.save` file as above, or a token corpus
  /// (`o.data` ending in .bin or .npy; `o.seqLen`, `o.tokenInputs`,
  /// `o.dataOrder`, `o.tokenDtype`, `o.seed`). `steps` as above; a token
  /// corpus's default is one epoch.
  static std::unique_ptr<BatchData> open(const Plan &plan,
                                         const RunOptions &o, int64_t &steps,
                                         int rank, int world);
  /// The evaluation data `o` names (--eval-data, any form --data takes,
  /// with --data's token flags; a token corpus read in order from its
  /// start) for `eval`, the plan's evaluation step. `batches` (-1: all
  /// the data holds) is set to the batches one evaluation reads.
  static std::unique_ptr<BatchData> openEval(const Plan &eval,
                                             const RunOptions &o,
                                             int64_t &batches, int rank,
                                             int world);
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
  BatchData() = default;
  at::Tensor readTokens(const std::string &name, int64_t index);
  void openTokens(const Plan &plan, const RunOptions &o, int64_t &steps,
                  int rank, int world);
  /// The window at `position` of epoch `epoch`'s order.
  int64_t windowAt(int64_t epoch, int64_t position) const;

  std::unique_ptr<ModelArchive> file_;
  std::map<std::string, Input> inputs_;

  /// A token corpus: the file, its tokens' dtype and count, where they
  /// begin; the windows' length (T + 1 tokens, T apart), how many, the
  /// global batch of windows an entry takes and this rank's part of it.
  struct Tokens {
    /// One file of the corpus: where its tokens begin in it, how many,
    /// and the corpus's index of its first.
    struct Part {
      std::string path;
      int fd = -1;
      int64_t offset = 0, count = 0, first = 0;
    };
    std::vector<Part> parts;
    at::ScalarType dtype = at::kUInt16;
    int64_t count = 0;
    int64_t seqLen = 0, windows = 0, globalBatch = 0, perRank = 0, rank = 0;
    int64_t entriesPerEpoch = 0;
    int halfBits = 1; // the shuffle's Feistel halves (windowAt)
    bool shuffle = true;
    uint64_t seed = 0;
    std::string ids, targets;
    TensorSpec idsType, targetsType;
    // The last entry read (its ids and targets come from one read).
    int64_t lastIndex = -1;
    at::Tensor last; // [perRank, T + 1] tokens of the last entry
    int64_t bytesRead = 0;
  };
  std::optional<Tokens> tokens_;
};

} // namespace fsdp::runtime

#endif // FSDP_RUNTIME_BATCHDATA_H
