//===- ModelArchive.h - reads parts of a model archive ----------*- C++ -*-===//
#ifndef FSDP_RUNTIME_MODELARCHIVE_H
#define FSDP_RUNTIME_MODELARCHIVE_H

#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <c10/core/Allocator.h>

#include <map>
#include <optional>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace caffe2::serialize {
class PyTorchStreamReader;
class ReadAdapterInterface;
} // namespace caffe2::serialize

namespace fsdp::runtime {

/// Refuses an archive with a record that inflates to more than 16 times the
/// archive's `archiveBytes` (PyTorch stores its records uncompressed: such
/// a record is a zip bomb or corrupt), before anything is inflated. Throws
/// Error naming `path` and the record.
void checkInflation(caffe2::serialize::PyTorchStreamReader &reader,
                    uint64_t archiveBytes, const std::string &path);

/// What `torch.save` wrote (its `data.pkl` and records), every tensor
/// checked against the record it is read from: a record shorter than its
/// storage, or a tensor that reaches past its storage, is an Error naming
/// `path`. Data files, checkpoints and generator states are read here.
c10::IValue readTorchSave(caffe2::serialize::PyTorchStreamReader &reader,
                          uint64_t archiveBytes, const std::string &path);

/// The same, from the archive's bytes in memory.
c10::IValue readTorchSave(const std::vector<char> &bytes,
                          const std::string &path);

/// The dtype a torch.export archive's JSON names by number (torch's
/// `_export/serde/schema.py` ScalarType); none for a number it does not know.
std::optional<at::ScalarType> exportScalarType(int64_t serde);

/// True if `reader` holds a torch.export archive (`.pt2`, written by
/// torch.export.save): its `archive_format` record says "pt2".
bool isExportArchive(caffe2::serialize::PyTorchStreamReader &reader);

/// The tensors of a TorchScript archive (`torch.jit.save`) by attribute path
/// ("layers.0.weight"), found without reading their values: the module
/// pickle is read with every storage left unread, and a tensor's values are
/// read on request, only the elements asked for. A rank that keeps a shard
/// of a flat parameter reads that shard's bytes and no others.
///
/// A torch.export archive (`torch.export.save`) is read the same way: its
/// weights and constants configs name every parameter, buffer and lifted
/// constant by FQN, each in a record of its own.
///
/// Only tensors that are plain attributes of modules are found; what this
/// reading cannot make sense of (a module's own __getstate__, a quantized or
/// sparse tensor, a pickle it cannot read, a tensor outside its storage) is
/// simply not found, and the caller loads the module the usual way.
class ModelArchive {
public:
  /// Where a tensor lives in the archive.
  struct Entry {
    std::string record;   // "data/N"
    at::ScalarType dtype;
    std::vector<int64_t> sizes, strides;
    int64_t storageOffset; // in elements
    int64_t storageBytes;  // of the whole storage (record)
    // A torch.export archive's parameter saved with requires_grad=False (a
    // frozen one); true where the archive does not say.
    bool requiresGrad = true;
    int64_t numel() const;
  };

  /// Opens `path` and reads its module pickle (or a torch.export archive's
  /// configs). Throws Error naming the file when it is neither.
  explicit ModelArchive(const std::string &path);

  /// A data file: what `torch.save({name: tensor, ...})` wrote, its tensors
  /// found by their keys with no value read (the pickle is read as
  /// readTorchSave reads it: no class is resolved). Each tensor's record is
  /// checked to be as long as its storage before anything is read. Throws
  /// Error naming the file ("data file '...'") when it is not such a dict.
  static std::unique_ptr<ModelArchive> openData(const std::string &path);
  ~ModelArchive();
  ModelArchive(const ModelArchive &) = delete;
  ModelArchive &operator=(const ModelArchive &) = delete;

  /// The tensor at attribute path `name`; null when the archive has none
  /// there (for instance under an object with a custom __getstate__).
  const Entry *find(const std::string &name) const;

  /// Elements [begin, end) of the row-major flattening of `entry`, as a 1-D
  /// tensor.
  at::Tensor readFlat(const Entry &entry, int64_t begin, int64_t end);

  /// The whole tensor, with the entry's sizes.
  at::Tensor read(const Entry &entry);

  /// True for a torch.export archive.
  bool isExportedProgram() const { return exported_; }

  /// A torch.export archive's record `name` (under its own directory), as
  /// text; Error if it has none.
  std::string readText(const std::string &name);
  /// The same, empty where it has no such record.
  std::string readTextIfPresent(const std::string &name);

  /// Bytes of tensor values read so far.
  int64_t bytesRead() const { return bytesRead_; }

  /// False for an archive saved without weights (`fsdp_export.save(...,
  /// weights=False)`): every tensor is a placeholder with its shape and dtype
  /// and no values. A plan can be compiled from it, not trained.
  bool hasWeights() const { return hasWeights_; }

  /// The archive's bytes, as `torch::jit::load` reads them, except the
  /// values of the tensors found here that nothing else in the archive
  /// shares: those reads are answered without reading or writing anything,
  /// so the storages that libtorch allocates for them are never touched (not
  /// resident) and hold no meaningful values. The compiler loads the
  /// module's code and types through it, and reads the values it needs
  /// through `read` (`valuesSkipped` says which).
  std::shared_ptr<caffe2::serialize::ReadAdapterInterface> readerSkippingValues();

  /// Whether `readerSkippingValues` leaves `entry`'s values unread.
  bool valuesSkipped(const Entry &entry) const {
    return skipped_.count(entry.record) != 0;
  }

private:
  /// Where a record's bytes are in the file when it is stored uncompressed
  /// (as PyTorch writes it): offset -1 otherwise; size -1 when the local
  /// header does not say (zip64, data descriptor).
  struct Stored {
    int64_t offset = -1, size = -1;
  };
  struct DataFileTag {};
  ModelArchive(const std::string &path, DataFileTag);
  void open(const std::string &path);
  void readDataPickle();
  static Entry entryOf(const at::Tensor &t);
  Stored stored(const std::string &record);
  void readBytes(int64_t offset, void *into, int64_t n);
  void readPickle();
  void readExportIndex();
  void readMeta();
  void checkInsideStorage(const Entry &entry, const std::string &name) const;

  std::string path_;
  std::string what_ = "model"; // what the file is, for messages
  std::unique_ptr<caffe2::serialize::PyTorchStreamReader> reader_;
  int fd_ = -1;
  std::map<std::string, Entry> entries_;
  std::map<std::string, Stored> stored_;
  // The last compressed record read whole, kept for the next tensor in it.
  std::string cachedRecord_;
  at::DataPtr cachedData_;
  int64_t cachedSize_ = 0;
  int64_t bytesRead_ = 0;
  bool hasWeights_ = true;
  bool exported_ = false;
  // Records only tensors found here refer to (their values may be skipped),
  // with their bytes, and the records readerSkippingValues skips.
  std::map<std::string, int64_t> skippable_;
  std::set<std::string> skipped_;
};

} // namespace fsdp::runtime

#endif // FSDP_RUNTIME_MODELARCHIVE_H
