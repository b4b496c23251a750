//===- ModelArchive.cpp - reads parts of a TorchScript archive ------------===//

#include "fsdp/runtime/ModelArchive.h"
#include "fsdp/runtime/Files.h"
#include "fsdp/runtime/OperatorGuards.h"
#include "fsdp/runtime/Plan.h"

#include <ATen/ATen.h>
#include <caffe2/serialize/file_adapter.h>
#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <torch/csrc/jit/api/compilation_unit.h>
#include <torch/csrc/jit/serialization/unpickler.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <set>
#include <tuple>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fsdp::runtime {

namespace {

/// The context of a storage whose values were not read: which record holds
/// them.
struct UnreadRecord {
  std::string name;
};

void deleteUnreadRecord(void *context) {
  delete static_cast<UnreadRecord *>(context);
}

uint32_t littleEndian(const unsigned char *p, int bytes) {
  uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i)
    v = (v << 8) | p[i];
  return v;
}

/// The record a storage that was not read stands for; empty when it was
/// read.
std::string unreadRecord(const at::Tensor &t) {
  auto *record =
      static_cast<UnreadRecord *>(t.storage().data_ptr().get_context());
  return record ? record->name : std::string();
}

/// A file read as it is, except byte ranges that are left unread: a read
/// that covers them leaves those bytes of its buffer as they were.
class SkippingReader : public caffe2::serialize::ReadAdapterInterface {
public:
  using Range = std::pair<uint64_t, uint64_t>; // [begin, end)
  SkippingReader(const std::string &path, std::vector<Range> skip)
      : file_(path), skip_(std::move(skip)) {
    std::sort(skip_.begin(), skip_.end());
  }
  size_t size() const override { return file_.size(); }
  size_t read(uint64_t pos, void *buf, size_t n,
              const char *what) const override {
    size_t done = 0;
    while (done < n) {
      uint64_t at = pos + done;
      // The first skipped range that ends after `at`.
      auto range = std::upper_bound(
          skip_.begin(), skip_.end(), at,
          [](uint64_t p, const Range &r) { return p < r.second; });
      if (range != skip_.end() && range->first <= at) {
        done += std::min<uint64_t>(n - done, range->second - at);
        continue;
      }
      uint64_t limit = pos + n;
      if (range != skip_.end())
        limit = std::min(limit, range->first);
      size_t want = limit - at;
      size_t got = file_.read(at, static_cast<char *>(buf) + done, want, what);
      done += got;
      if (got < want)
        break;
    }
    return done;
  }

private:
  caffe2::serialize::FileAdapter file_;
  std::vector<Range> skip_;
};

/// Reads the archive's `data.pkl`, for an Unpickler.
std::function<size_t(char *, size_t)>
pickleReader(caffe2::serialize::PyTorchStreamReader &reader) {
  auto [pickle, size] = reader.getRecord("data.pkl");
  auto data = std::make_shared<at::DataPtr>(std::move(pickle));
  return [data, size = size, pos = size_t(0)](char *into, size_t n) mutable {
    n = std::min(n, size - pos);
    std::memcpy(into, static_cast<const char *>(data->get()) + pos, n);
    pos += n;
    return n;
  };
}


} // namespace

int64_t ModelArchive::Entry::numel() const {
  int64_t n = 1;
  for (int64_t s : sizes)
    n *= s;
  return n;
}

ModelArchive::ModelArchive(const std::string &path) : path_(path) {
  open(path);
  if (!exported_ &&
      (!reader_->hasRecord("data.pkl") || !reader_->hasRecord("constants.pkl")))
    throw Error("cannot load model '" + path +
                "': not a TorchScript archive (torch.jit.save writes one) "
                "or a torch.export archive (torch.export.save)");
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0)
    throw Error("cannot load model '" + path + "': " + std::strerror(errno));
  struct stat info;
  if (::fstat(fd_, &info) != 0)
    throw Error("cannot load model '" + path + "': " + std::strerror(errno));
  try {
    checkInflation(*reader_, static_cast<uint64_t>(info.st_size), path);
  } catch (...) {
    ::close(fd_);
    throw;
  }
  if (exported_) {
    try {
      readExportIndex();
    } catch (...) {
      ::close(fd_);
      throw;
    }
    readMeta();
    return;
  }
  try {
    readPickle();
  } catch (const std::exception &) {
    // Not something this reading understands: nothing is found, and the
    // caller loads the module (which says what is wrong, if anything is).
    entries_.clear();
    skippable_.clear();
  }
  readMeta();
}

/// Where an unread tensor `t` lives: its dtype, geometry and record.
ModelArchive::Entry ModelArchive::entryOf(const at::Tensor &t) {
  Entry entry;
  entry.dtype = t.scalar_type();
  entry.sizes = t.sizes().vec();
  entry.strides = t.strides().vec();
  entry.storageOffset = t.storage_offset();
  entry.storageBytes = static_cast<int64_t>(t.storage().nbytes());
  entry.record = unreadRecord(t);
  return entry;
}

/// The zip reader of `path`, a regular file.
void ModelArchive::open(const std::string &path) {
  // A pipe or a device would block or never end.
  checkFile(path, what_ + " ");
  try {
    reader_ = std::make_unique<caffe2::serialize::PyTorchStreamReader>(path);
  } catch (const c10::Error &e) {
    std::ifstream probe(path);
    throw Error("cannot " + std::string(what_ == "model" ? "load" : "read") +
                " " + what_ + " '" + path + "': " +
                (probe ? firstLine(e) : std::strerror(errno)) +
                (what_ == "model" ? ""
                                  : " (write it with torch.save({name: "
                                    "tensor}))"));
  }
  exported_ = what_ == "model" && isExportArchive(*reader_);
}

std::unique_ptr<ModelArchive> ModelArchive::openData(const std::string &path) {
  return std::unique_ptr<ModelArchive>(new ModelArchive(path, DataFileTag{}));
}

ModelArchive::ModelArchive(const std::string &path, DataFileTag)
    : path_(path), what_("data file") {
  open(path);
  auto fail = [&](const std::string &why) {
    return Error("cannot read data file '" + path + "' (write it with "
                 "torch.save({name: tensor})): " + why);
  };
  if (!reader_->hasRecord("data.pkl"))
    throw fail("it has no data.pkl");
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat info;
  if (fd_ < 0 || ::fstat(fd_, &info) != 0) {
    std::string why = std::strerror(errno);
    if (fd_ >= 0)
      ::close(fd_);
    throw Error("cannot read data file '" + path + "': " + why);
  }
  try {
    checkInflation(*reader_, static_cast<uint64_t>(info.st_size), path);
    readDataPickle();
  } catch (const c10::Error &e) {
    ::close(fd_);
    throw fail(firstLine(e));
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

/// A data file's pickle, as readTorchSave reads it (no class resolved: a
/// pickle that names one is refused), with every storage left unread: its
/// record named in its context, its size taken from the zip's directory.
void ModelArchive::readDataPickle() {
  auto read = pickleReader(*reader_);
  auto unread = [](const std::string &key) {
    return at::DataPtr(nullptr, new UnreadRecord{"data/" + key},
                       &deleteUnreadRecord, c10::Device(c10::kCPU));
  };
  torch::jit::Unpickler unpickler(read, /*type_resolver=*/nullptr,
                                  /*obj_loader=*/nullptr, unread,
                                  c10::Device(c10::kCPU));
  unpickler.set_version(reader_->version());
  c10::IValue root = unpickler.parse_ivalue();
  if (!root.isGenericDict())
    throw Error("data file '" + path_ + "' must hold a dict name -> tensor");
  for (const auto &item : root.toGenericDict()) {
    if (!item.key().isString() || !item.value().isTensor())
      continue;
    std::string name = item.key().toStringRef();
    const at::Tensor &t = item.value().toTensor();
    if (t.layout() != at::kStrided || t.is_quantized() || t.is_conj() ||
        t.is_neg() || !t.has_storage())
      throw Error("data file '" + path_ + "': '" + name +
                  "' is not a dense tensor (save it with .contiguous())");
    Entry entry = entryOf(t);
    if (entry.storageBytes > 0) {
      // Before the first step: a record shorter than its storage (cut
      // short, or to nothing) is refused, as readTorchSave refuses it.
      int64_t held = entry.record.empty() || !reader_->hasRecord(entry.record)
                         ? 0
                         : static_cast<int64_t>(
                               reader_->getRecordSize(entry.record));
      if (held < entry.storageBytes)
        throw Error("'" + path_ + "': a tensor's storage is " +
                    std::to_string(entry.storageBytes) +
                    " bytes, but its record holds " + std::to_string(held) +
                    " (a truncated or corrupt archive)");
    }
    checkInsideStorage(entry, name);
    entries_.emplace(std::move(name), std::move(entry));
  }
}

void ModelArchive::readMeta() {
  // python/fsdp_export.py's metadata; only its `weights` matters here (the
  // compiler reads the rest).
  const char *record = "extra/fsdp_meta.json";
  if (!reader_->hasRecord(record))
    return;
  auto [data, size] = reader_->getRecord(record);
  nlohmann::json meta = nlohmann::json::parse(
      static_cast<const char *>(data.get()),
      static_cast<const char *>(data.get()) + size, nullptr,
      /*allow_exceptions=*/false);
  if (meta.is_object() && meta.contains("weights") &&
      meta["weights"].is_boolean())
    hasWeights_ = meta["weights"].get<bool>();
}

void ModelArchive::readPickle() {
  auto read = pickleReader(*reader_);
  // Classes resolve to empty types, and each object keeps the state the
  // pickle gives it (a dict attribute -> value for a module). The resolver
  // also names the types of tagged lists and dicts ("Dict[str, int]"):
  // their element types do not matter here.
  auto unit = std::make_shared<torch::jit::CompilationUnit>();
  c10::ClassTypePtr holder = c10::ClassType::create(
      c10::QualifiedName("__fsdp__.PickledObject"), unit);
  holder->addAttribute("state", c10::AnyType::get());
  auto resolve = [unit](const c10::QualifiedName &name) {
    const std::string &text = name.qualifiedName();
    if (text.rfind("Dict[", 0) == 0)
      return c10::StrongTypePtr(
          unit, c10::DictType::create(c10::AnyType::get(), c10::AnyType::get()));
    if (text.rfind("List[", 0) == 0)
      return c10::StrongTypePtr(unit, c10::ListType::create(c10::AnyType::get()));
    if (text.find_first_of("[ ,") != std::string::npos)
      throw Error("unknown type tag '" + text + "'");
    c10::ClassTypePtr type = unit->get_class(name);
    if (!type) {
      type = c10::ClassType::create(name, unit);
      unit->register_type(type);
    }
    return c10::StrongTypePtr(unit, type);
  };
  auto load = [unit, holder](const c10::StrongTypePtr &, c10::IValue state) {
    auto object =
        c10::ivalue::Object::create(c10::StrongTypePtr(unit, holder), 1);
    object->setSlot(0, std::move(state));
    return object;
  };
  // A storage is not read: its data pointer stays null and its context
  // names the record.
  auto unread = [](const std::string &key) {
    return at::DataPtr(nullptr, new UnreadRecord{"data/" + key},
                       &deleteUnreadRecord, c10::Device(c10::kCPU));
  };
  torch::jit::Unpickler unpickler(read, resolve, load, unread,
                                  c10::Device(c10::kCPU));
  unpickler.set_version(reader_->version());
  c10::IValue root = unpickler.parse_ivalue();

  // Attribute paths, as named_parameters and named_buffers spell them, of
  // the tensors held by modules (objects whose state is a dict of
  // attributes, "training" among them); each object once.
  std::set<const void *> seen;
  std::set<const c10::TensorImpl *> found;
  std::vector<std::pair<c10::IValue, std::string>> work{{root, ""}};
  while (!work.empty()) {
    auto [value, prefix] = std::move(work.back());
    work.pop_back();
    if (!value.isObject() || !seen.insert(value.internalToPointer()).second)
      continue;
    const c10::IValue &state = value.toObjectRef().getSlot(0);
    if (!state.isGenericDict())
      continue;
    c10::impl::GenericDict attributes = state.toGenericDict();
    if (!attributes.contains(c10::IValue("training")))
      continue;
    for (const auto &item : attributes) {
      if (!item.key().isString())
        continue;
      std::string name = prefix + item.key().toStringRef();
      const c10::IValue &v = item.value();
      if (v.isObject()) {
        work.emplace_back(v, name + ".");
        continue;
      }
      if (!v.isTensor())
        continue;
      const at::Tensor &t = v.toTensor();
      if (t.layout() != at::kStrided || t.is_quantized() || t.is_conj() ||
          t.is_neg())
        continue;
      Entry entry = entryOf(t);
      if (entry.record.empty() && entry.numel() != 0)
        continue;
      checkInsideStorage(entry, name);
      found.insert(t.unsafeGetTensorImpl());
      if (!entry.record.empty())
        skippable_[entry.record] = entry.storageBytes;
      entries_.emplace(name, std::move(entry));
    }
  }
  // A record that a tensor found nowhere above also views (in a list, a
  // tuple, an object with its own __getstate__) is read whatever happens.
  root.visit([&](const c10::IValue &v) {
    if (v.isTensor() && !found.count(v.toTensor().unsafeGetTensorImpl()))
      skippable_.erase(unreadRecord(v.toTensor()));
    return false;
  });
}

/// The elements of `entry` must lie inside its storage.
void ModelArchive::checkInsideStorage(const Entry &entry,
                                      const std::string &name) const {
  int64_t capacity = entry.storageBytes /
                     static_cast<int64_t>(c10::elementSize(entry.dtype));
  int64_t last = entry.storageOffset;
  bool inside = last >= 0;
  for (size_t d = 0; inside && d < entry.sizes.size(); ++d)
    if (entry.sizes[d] > 1) {
      int64_t stride = entry.strides[d];
      inside = stride >= 0 && last < capacity &&
               (stride == 0 ||
                entry.sizes[d] - 1 <= (capacity - 1 - last) / stride);
      if (inside)
        last += (entry.sizes[d] - 1) * stride;
    }
  if (entry.numel() != 0 && (!inside || last >= capacity))
    throw Error("tensor '" + name + "' lies outside its storage");
}

std::optional<at::ScalarType> exportScalarType(int64_t serde) {
  switch (serde) {
  case 1: return at::kByte;
  case 2: return at::kChar;
  case 3: return at::kShort;
  case 4: return at::kInt;
  case 5: return at::kLong;
  case 6: return at::kHalf;
  case 7: return at::kFloat;
  case 8: return at::kDouble;
  case 9: return at::kComplexHalf;
  case 10: return at::kComplexFloat;
  case 11: return at::kComplexDouble;
  case 12: return at::kBool;
  case 13: return at::kBFloat16;
  case 28: return at::kUInt16;
  default: return std::nullopt;
  }
}

bool isExportArchive(caffe2::serialize::PyTorchStreamReader &reader) {
  if (!reader.hasRecord("archive_format"))
    return false;
  auto [data, size] = reader.getRecord("archive_format");
  return std::string(static_cast<const char *>(data.get()), size) == "pt2";
}

std::string ModelArchive::readText(const std::string &name) {
  if (!reader_->hasRecord(name))
    throw Error("cannot read model '" + path_ + "': it has no record '" +
                name + "'");
  auto [data, size] = reader_->getRecord(name);
  return std::string(static_cast<const char *>(data.get()), size);
}

std::string ModelArchive::readTextIfPresent(const std::string &name) {
  return reader_->hasRecord(name) ? readText(name) : std::string();
}

/// A torch.export archive's tensors: `data/weights/model_weights_config.json`
/// and `data/constants/model_constants_config.json` name each parameter,
/// buffer and lifted constant and the record that holds its bytes.
void ModelArchive::readExportIndex() {
  auto fail = [&](const std::string &what) -> Error {
    return Error("cannot read model '" + path_ + "': " + what);
  };
  for (const char *kind : {"weights", "constants"}) {
    std::string dir = std::string("data/") + kind + "/";
    std::string config = dir + "model_" + kind + "_config.json";
    if (!reader_->hasRecord(config))
      continue;
    nlohmann::json json = nlohmann::json::parse(readText(config), nullptr,
                                                /*allow_exceptions=*/false);
    if (!json.is_object() || !json.contains("config") ||
        !json["config"].is_object())
      throw fail("'" + config + "' is not a tensor config");
    for (const auto &[name, item] : json["config"].items()) {
      std::string where = "'" + name + "' in '" + config + "'";
      if (!item.is_object() || !item.contains("path_name") ||
          !item["path_name"].is_string() || !item.contains("tensor_meta"))
        throw fail(where + " has no path_name or tensor_meta");
      if (item.value("use_pickle", false))
        continue; // a tensor subclass: not read here
      const nlohmann::json &meta = item["tensor_meta"];
      auto ints = [&](const char *field) {
        std::vector<int64_t> out;
        if (!meta.contains(field) || !meta[field].is_array())
          throw fail(where + " has no " + field);
        for (const nlohmann::json &d : meta[field]) {
          if (!d.is_object() || !d.contains("as_int") ||
              !d["as_int"].is_number_integer())
            throw fail(where + " has a symbolic " + field);
          out.push_back(d["as_int"].get<int64_t>());
        }
        return out;
      };
      Entry entry;
      std::optional<at::ScalarType> dtype;
      if (meta.contains("dtype") && meta["dtype"].is_number_integer())
        dtype = exportScalarType(meta["dtype"].get<int64_t>());
      if (!dtype)
        throw fail(where + " has a dtype this reader does not know");
      entry.dtype = *dtype;
      if (meta.contains("requires_grad") && meta["requires_grad"].is_boolean())
        entry.requiresGrad = meta["requires_grad"].get<bool>();
      entry.sizes = ints("sizes");
      entry.strides = ints("strides");
      if (entry.sizes.size() != entry.strides.size())
        throw fail(where + " has " + std::to_string(entry.sizes.size()) +
                   " sizes but " + std::to_string(entry.strides.size()) +
                   " strides");
      const nlohmann::json &offset = meta.value("storage_offset",
                                                nlohmann::json::object());
      entry.storageOffset = offset.is_object() && offset.contains("as_int") &&
                                    offset["as_int"].is_number_integer()
                                ? offset["as_int"].get<int64_t>()
                                : 0;
      entry.record = dir + item["path_name"].get<std::string>();
      if (!reader_->hasRecord(entry.record))
        throw fail(where + " names record '" + entry.record +
                   "', which the archive does not have");
      entry.storageBytes =
          static_cast<int64_t>(reader_->getRecordSize(entry.record));
      checkInsideStorage(entry, name);
      entries_.emplace(name, std::move(entry));
    }
  }
}

std::shared_ptr<caffe2::serialize::ReadAdapterInterface>
ModelArchive::readerSkippingValues() {
  std::vector<SkippingReader::Range> skip;
  skipped_.clear();
  for (const auto &[record, bytes] : skippable_) {
    // Only a record stored in place is skipped; any other is read as usual.
    // Its bytes are the storage's (PyTorch writes a local header that does
    // not say the size): a longer record has the rest read, and a shorter
    // one is a corrupt archive that the load then reports.
    Stored place = stored(record);
    if (place.offset < 0 || (place.size >= 0 && place.size < bytes))
      continue;
    skip.emplace_back(place.offset, place.offset + bytes);
    skipped_.insert(record);
  }
  return std::make_shared<SkippingReader>(path_, std::move(skip));
}

ModelArchive::~ModelArchive() {
  if (fd_ >= 0)
    ::close(fd_);
}

void checkInflation(caffe2::serialize::PyTorchStreamReader &reader,
                    uint64_t archiveBytes, const std::string &path) {
  constexpr uint64_t kMaxInflation = 16;
  for (const std::string &record : reader.getAllRecords()) {
    uint64_t size = reader.getRecordSize(record);
    if (size > kMaxInflation * std::max<uint64_t>(archiveBytes, 1 << 16))
      throw Error("'" + path + "': record '" + record + "' inflates to " +
                  std::to_string(size) + " bytes, more than " +
                  std::to_string(kMaxInflation) + " times the archive's " +
                  std::to_string(archiveBytes) + " (PyTorch stores records "
                  "uncompressed): a zip bomb or a corrupt archive");
  }
}

namespace {

/// The bytes of an archive in memory, for PyTorchStreamReader.
class MemoryAdapter : public caffe2::serialize::ReadAdapterInterface {
public:
  explicit MemoryAdapter(const std::vector<char> &bytes) : bytes(bytes) {}
  size_t size() const override { return bytes.size(); }
  size_t read(uint64_t pos, void *buf, size_t n,
              const char *what) const override {
    if (pos >= bytes.size())
      return 0;
    n = std::min<size_t>(n, bytes.size() - pos);
    std::memcpy(buf, bytes.data() + pos, n);
    return n;
  }

private:
  const std::vector<char> &bytes;
};

/// Each tensor in `value` within its storage, and each storage within the
/// record it was read from (`recordBytes`: a record's data -> its size).
void checkTensorsFit(const c10::IValue &value,
                     const std::map<const void *, size_t> &recordBytes,
                     const std::string &path) {
  std::vector<c10::IValue> work{value};
  while (!work.empty()) {
    c10::IValue v = std::move(work.back());
    work.pop_back();
    if (v.isGenericDict()) {
      for (const auto &item : v.toGenericDict()) {
        work.push_back(item.key());
        work.push_back(item.value());
      }
    } else if (v.isList()) {
      for (const c10::IValue &e : v.toListRef())
        work.push_back(e);
    } else if (v.isTuple()) {
      for (const c10::IValue &e : v.toTupleRef().elements())
        work.push_back(e);
    } else if (v.isObject()) {
      for (const c10::IValue &e : v.toObjectRef().slots())
        work.push_back(e);
    } else if (v.isTensor()) {
      const at::Tensor &t = v.toTensor();
      if (!t.defined() || t.is_sparse() || t.is_quantized() ||
          !t.has_storage())
        continue;
      const c10::Storage &storage = t.storage();
      size_t storageBytes = storage.nbytes();
      if (storageBytes > 0) {
        auto found = recordBytes.find(storage.data());
        size_t held = found == recordBytes.end() ? 0 : found->second;
        if (held < storageBytes)
          throw Error("'" + path + "': a tensor's storage is " +
                      std::to_string(storageBytes) + " bytes, but its record "
                      "holds " + std::to_string(held) +
                      " (a truncated or corrupt archive)");
      }
      if (!withinStorage(t))
        throw Error("'" + path + "': a " + std::to_string(t.numel()) +
                    "-element tensor reaches past its storage of " +
                    std::to_string(storageBytes) + " bytes (a corrupt "
                    "archive)");
    }
  }
}

} // namespace

c10::IValue readTorchSave(caffe2::serialize::PyTorchStreamReader &reader,
                          uint64_t archiveBytes, const std::string &path) {
  checkInflation(reader, archiveBytes, path);
  auto read = pickleReader(reader);
  std::map<const void *, size_t> recordBytes;
  auto readRecord = [&](const std::string &key) {
    auto [data, n] = reader.getRecord("data/" + key);
    recordBytes[data.get()] = n;
    return std::move(data);
  };
  torch::jit::Unpickler unpickler(read, /*type_resolver=*/nullptr,
                                  /*obj_loader=*/nullptr, readRecord,
                                  c10::Device(c10::kCPU));
  unpickler.set_version(reader.version());
  c10::IValue value = unpickler.parse_ivalue();
  checkTensorsFit(value, recordBytes, path);
  return value;
}

c10::IValue readTorchSave(const std::vector<char> &bytes,
                          const std::string &path) {
  caffe2::serialize::PyTorchStreamReader reader(
      std::make_shared<MemoryAdapter>(bytes));
  return readTorchSave(reader, bytes.size(), path);
}

const ModelArchive::Entry *ModelArchive::find(const std::string &name) const {
  auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second;
}

ModelArchive::Stored ModelArchive::stored(const std::string &record) {
  auto known = stored_.find(record);
  if (known != stored_.end())
    return known->second;
  int64_t data = static_cast<int64_t>(reader_->getRecordOffset(record));
  // The record's local zip header (30 bytes, its name, an extra field) ends
  // where the data begins: find it by signature and name, and take the data
  // in place only if it is stored (method 0), as PyTorchStreamWriter does.
  int64_t window = std::min<int64_t>(data, 4096);
  std::vector<unsigned char> header(window);
  if (::pread(fd_, header.data(), window, data - window) != window)
    window = 0;
  Stored result;
  for (int64_t h = window - 30; h >= 0; --h) {
    const unsigned char *p = header.data() + h;
    if (littleEndian(p, 4) != 0x04034b50)
      continue;
    int64_t nameLength = littleEndian(p + 26, 2);
    int64_t extraLength = littleEndian(p + 28, 2);
    if (h + 30 + nameLength + extraLength != window)
      continue;
    std::string name(reinterpret_cast<const char *>(p + 30), nameLength);
    if (name != record && (name.size() <= record.size() ||
                           name.compare(name.size() - record.size() - 1,
                                        std::string::npos, "/" + record) != 0))
      continue;
    if (littleEndian(p + 8, 2) == 0) {
      result.offset = data;
      uint32_t size = littleEndian(p + 22, 4);
      bool described = littleEndian(p + 6, 2) & 0x8; // sizes come later
      if (!described && size != 0xffffffffu)
        result.size = size;
    }
    break;
  }
  stored_[record] = result;
  return result;
}

void ModelArchive::readBytes(int64_t offset, void *into, int64_t n) {
  readAt(fd_, path_, offset, into, n, what_ + " ");
}

at::Tensor ModelArchive::readFlat(const Entry &entry, int64_t begin,
                                  int64_t end) {
  at::Tensor out = at::empty({end - begin}, at::TensorOptions().dtype(entry.dtype));
  if (end <= begin)
    return out;
  int64_t item = static_cast<int64_t>(c10::elementSize(entry.dtype));
  // Row-major and dense: the elements are one run of bytes. Otherwise read
  // the span of storage the tensor covers and take the elements from it.
  bool dense = true;
  int64_t expected = 1;
  for (int64_t d = static_cast<int64_t>(entry.sizes.size()) - 1; d >= 0; --d) {
    if (entry.sizes[d] != 1 && entry.strides[d] != expected)
      dense = false;
    expected *= entry.sizes[d];
  }
  int64_t first = entry.storageOffset + (dense ? begin : 0);
  int64_t count = end - begin;
  if (!dense) {
    count = 1;
    for (size_t d = 0; d < entry.sizes.size(); ++d)
      count += (entry.sizes[d] - 1) * entry.strides[d];
  }
  try {
    at::Tensor bytes = dense ? out : at::empty({count}, out.options());
    Stored place = stored(entry.record);
    if (place.offset >= 0) {
      if (place.size >= 0 && place.size < entry.storageBytes)
        throw Error("cannot read " + what_ + " '" + path_ + "': record '" +
                    entry.record + "' is shorter than its tensor");
      readBytes(place.offset + first * item, bytes.data_ptr(), count * item);
      bytesRead_ += count * item;
    } else {
      if (cachedRecord_ != entry.record) {
        cachedData_ = at::DataPtr();
        std::tie(cachedData_, cachedSize_) = reader_->getRecord(entry.record);
        cachedRecord_ = entry.record;
        bytesRead_ += cachedSize_;
      }
      if (cachedSize_ < entry.storageBytes)
        throw Error("cannot read " + what_ + " '" + path_ + "': record '" +
                    entry.record + "' is shorter than its tensor");
      std::memcpy(bytes.data_ptr(),
                  static_cast<const char *>(cachedData_.get()) + first * item,
                  count * item);
    }
    if (!dense)
      out.copy_(bytes.as_strided(entry.sizes, entry.strides)
                    .reshape({-1})
                    .narrow(0, begin, end - begin));
  } catch (const c10::Error &e) {
    throw Error("cannot read " + what_ + " '" + path_ + "': " +
                firstLine(e));
  }
  return out;
}

at::Tensor ModelArchive::read(const Entry &entry) {
  return readFlat(entry, 0, entry.numel()).view(entry.sizes);
}

} // namespace fsdp::runtime
