//===- BatchData.cpp - the batches a run trains on -------------------------===//

#include "fsdp/runtime/BatchData.h"
#include "fsdp/runtime/Files.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <regex>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

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

/// Reads `n` bytes at `offset` of `fd` into `into`; Error naming `path`.
void readAt(int fd, const std::string &path, int64_t offset, void *into,
            int64_t n) {
  char *out = static_cast<char *>(into);
  while (n > 0) {
    ssize_t got = ::pread(fd, out, n, offset);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      throw Error("cannot read token corpus '" + path + "': " +
                  (got < 0 ? std::strerror(errno) : "the file ends early"));
    out += got;
    offset += got;
    n -= got;
  }
}

bool endsWith(const std::string &text, const std::string &tail) {
  return text.size() >= tail.size() &&
         text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

/// splitmix64: the generator of the corpus's order (a few lines that any
/// reader of the docs can reproduce in Python).
uint64_t splitmix64(uint64_t &state) {
  state += 0x9E3779B97F4A7C15ull;
  uint64_t z = state;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// A .npy file's header: its dtype and element count, and where the data
/// begins. Only 1-D, C-order arrays of uint16, uint32, int32 or int64.
void readNpyHeader(int fd, const std::string &path, int64_t size,
                   at::ScalarType &dtype, int64_t &count, int64_t &offset) {
  auto fail = [&](const std::string &why) {
    return Error("token corpus '" + path + "' is not a 1-D .npy of token "
                 "ids (numpy.save of a uint16, uint32, int32 or int64 "
                 "array): " + why);
  };
  unsigned char head[12];
  if (size < 10)
    throw fail("it is too short");
  readAt(fd, path, 0, head, std::min<int64_t>(size, 12));
  if (std::memcmp(head, "\x93NUMPY", 6) != 0)
    throw fail("it does not begin with the .npy magic");
  int major = head[6];
  int64_t length = 0, start = 0;
  if (major == 1) {
    length = head[8] | (head[9] << 8);
    start = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12)
      throw fail("it is too short");
    length = int64_t(head[8]) | (int64_t(head[9]) << 8) |
             (int64_t(head[10]) << 16) | (int64_t(head[11]) << 24);
    start = 12;
  } else {
    throw fail("format version " + std::to_string(major));
  }
  if (length > (1 << 20) || start + length > size)
    throw fail("its header is " + std::to_string(length) + " bytes");
  std::string header(length, '\0');
  readAt(fd, path, start, header.data(), length);
  std::smatch m;
  if (!std::regex_search(header, m, std::regex("'descr':\\s*'([<>|=]?)([uif])(\\d+)'")))
    throw fail("its header names no dtype");
  std::string order = m[1], kind = m[2], bytes = m[3];
  if (order == ">")
    throw fail("it is big-endian");
  if (kind == "u" && bytes == "2")
    dtype = at::kUInt16;
  else if (kind == "u" && bytes == "4")
    dtype = at::kUInt32;
  else if (kind == "i" && bytes == "4")
    dtype = at::kInt;
  else if (kind == "i" && bytes == "8")
    dtype = at::kLong;
  else
    throw fail("dtype " + kind + bytes);
  if (std::regex_search(header, std::regex("'fortran_order':\\s*True")))
    throw fail("it is in Fortran order");
  if (!std::regex_search(header, m, std::regex("'shape':\\s*\\((\\d+),?\\)")))
    throw fail("its shape is not one dimension");
  std::string digits = m[1];
  if (digits.size() > 18)
    throw fail("its shape is " + digits);
  count = std::stoll(digits);
  offset = start + length;
  int64_t item = static_cast<int64_t>(c10::elementSize(dtype));
  if (count > (size - offset) / item)
    throw fail("it holds " + std::to_string((size - offset) / item) +
               " tokens, not the " + digits + " its header says");
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

at::Tensor BatchData::read(const std::string &name, int64_t index) {
  if (tokens_)
    return readTokens(name, index);
  const Input &in = inputs_.at(name);
  int64_t begin = index * in.entryElements + in.sliceBegin;
  return file_->readFlat(*in.entry, begin, begin + in.sliceElements)
      .view(in.shape);
}

int64_t BatchData::bytesRead() const {
  return tokens_ ? tokens_->bytesRead : file_->bytesRead();
}

std::unique_ptr<BatchData> BatchData::open(const Plan &plan,
                                           const RunOptions &o,
                                           int64_t &steps, int rank,
                                           int world) {
  bool corpus = endsWith(o.data, ".bin") || endsWith(o.data, ".npy");
  if (!corpus) {
    for (auto [flag, given] :
         {std::pair<const char *, bool>{"--seq-len", o.seqLen > 0},
          {"--token-inputs", !o.tokenInputs.empty()},
          {"--data-order", !o.dataOrder.empty()},
          {"--token-dtype", !o.tokenDtype.empty()}})
      if (given)
        throw Error(std::string(flag) + " is for a token corpus (--data "
                    "ending in .bin or .npy), not '" + o.data + "'");
    return std::make_unique<BatchData>(plan, o.data, steps, rank, world);
  }
  std::unique_ptr<BatchData> data(new BatchData());
  data->openTokens(plan, o, steps, rank, world);
  return data;
}

BatchData::~BatchData() {
  if (tokens_ && tokens_->fd >= 0)
    ::close(tokens_->fd);
}

void BatchData::openTokens(const Plan &plan, const RunOptions &o,
                           int64_t &steps, int rank, int world) {
  Tokens &t = tokens_.emplace();
  t.path = o.data;
  const std::string &path = o.data;
  if (o.seqLen < 1)
    throw Error("token corpus '" + path + "' needs --seq-len T (the "
                "length of each sequence the model reads)");
  size_t comma = o.tokenInputs.find(',');
  if (comma == std::string::npos || comma == 0 ||
      comma + 1 == o.tokenInputs.size() ||
      o.tokenInputs.find(',', comma + 1) != std::string::npos)
    throw Error("token corpus '" + path + "' needs --token-inputs IDS,TARGETS "
                "(the plan's inputs that take the input ids and the "
                "next-token targets), not '" + o.tokenInputs + "'");
  t.ids = o.tokenInputs.substr(0, comma);
  t.targets = o.tokenInputs.substr(comma + 1);
  if (t.ids == t.targets)
    throw Error("--token-inputs names '" + t.ids + "' twice");
  if (!o.dataOrder.empty() && o.dataOrder != "shuffle" &&
      o.dataOrder != "sequential")
    throw Error("--data-order is shuffle or sequential, not '" +
                o.dataOrder + "'");
  t.shuffle = o.dataOrder != "sequential";
  t.seed = o.seed.value_or(0);
  t.seqLen = o.seqLen;

  // The plan's inputs: the ids [b, T] and the targets [b, T] or [b * T],
  // integers; nothing else.
  bool sawIds = false, sawTargets = false;
  for (const InputEntry &input : plan.inputs) {
    if (input.name == t.ids) {
      sawIds = true;
      t.idsType = input.type;
    } else if (input.name == t.targets) {
      sawTargets = true;
      t.targetsType = input.type;
    } else {
      throw Error("the plan takes input '" + input.name + "' (" +
                  input.type.str() + "), which a token corpus does not "
                  "give (--token-inputs " + o.tokenInputs + ")");
    }
  }
  auto integral = [](const TensorSpec &type) {
    return type.dtype == at::kLong || type.dtype == at::kInt;
  };
  if (!sawIds || !sawTargets)
    throw Error("--token-inputs " + o.tokenInputs + ": the plan has no input '" +
                (sawIds ? t.targets : t.ids) + "'");
  const TensorSpec &ids = t.idsType, &targets = t.targetsType;
  if (ids.shape.size() != 2 || ids.shape[1] != t.seqLen || !integral(ids))
    throw Error("input '" + t.ids + "' of the plan is " + ids.str() +
                ", but token ids of --seq-len " + std::to_string(t.seqLen) +
                " are [batch]x" + std::to_string(t.seqLen) + " of int64 or "
                "int32 (compile the model for that input)");
  int64_t batch = ids.shape[0];
  bool flat = targets.shape.size() == 1 &&
              targets.shape[0] == batch * t.seqLen;
  bool square = targets.shape == ids.shape;
  if ((!flat && !square) || !integral(targets))
    throw Error("input '" + t.targets + "' of the plan is " + targets.str() +
                ", but the targets of " + ids.str() + " ids are " +
                std::to_string(batch) + "x" + std::to_string(t.seqLen) +
                " or " + std::to_string(batch * t.seqLen) +
                " of int64 or int32");
  t.perRank = batch;
  t.globalBatch = batch * world;
  t.rank = rank;

  // The file: a regular one, its tokens' dtype and count.
  checkFile(path, "token corpus ");
  t.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  struct stat info;
  if (t.fd < 0 || ::fstat(t.fd, &info) != 0)
    throw Error("cannot read token corpus '" + path + "': " +
                std::strerror(errno));
  int64_t size = info.st_size;
  if (endsWith(path, ".npy")) {
    if (!o.tokenDtype.empty())
      throw Error("--token-dtype is for a .bin corpus: '" + path +
                  "' says its own dtype");
    readNpyHeader(t.fd, path, size, t.dtype, t.count, t.offset);
  } else {
    if (o.tokenDtype.empty() || o.tokenDtype == "uint16")
      t.dtype = at::kUInt16;
    else if (o.tokenDtype == "uint32")
      t.dtype = at::kUInt32;
    else
      throw Error("--token-dtype is uint16 or uint32, not '" + o.tokenDtype +
                  "'");
    int64_t item = static_cast<int64_t>(c10::elementSize(t.dtype));
    if (size % item != 0)
      throw Error("token corpus '" + path + "' is " + std::to_string(size) +
                  " bytes, not a whole number of " +
                  c10::toString(t.dtype) + " tokens (--token-dtype)");
    t.count = size / item;
  }
  t.windows = t.count > 1 ? (t.count - 1) / t.seqLen : 0;
  t.entriesPerEpoch = t.windows / t.globalBatch;
  if (t.entriesPerEpoch == 0)
    throw Error("token corpus '" + path + "' holds " +
                std::to_string(t.count) + " tokens: " +
                std::to_string(t.windows) + " windows of " +
                std::to_string(t.seqLen + 1) + " tokens, fewer than one "
                "global batch of " + std::to_string(t.globalBatch) +
                " (" + std::to_string(batch) + " a rank)");
  // One epoch by default; --steps may take more (each epoch its own order).
  const int64_t micro = plan.microBatches;
  if (steps < 0)
    steps = std::max<int64_t>(1, t.entriesPerEpoch / micro);
}

const std::vector<int64_t> &BatchData::orderOf(int64_t epoch) {
  Tokens &t = *tokens_;
  if (t.epoch == epoch)
    return t.order;
  t.order.resize(t.windows);
  for (int64_t i = 0; i < t.windows; ++i)
    t.order[i] = i;
  if (t.shuffle) {
    // Fisher-Yates from the last element down, each draw splitmix64's
    // next value modulo i + 1, from state seed ^ (epoch * golden ratio).
    uint64_t state = t.seed ^ (static_cast<uint64_t>(epoch) *
                               0xD1B54A32D192ED03ull);
    for (int64_t i = t.windows - 1; i > 0; --i) {
      int64_t j = static_cast<int64_t>(splitmix64(state) %
                                       static_cast<uint64_t>(i + 1));
      std::swap(t.order[i], t.order[j]);
    }
  }
  t.epoch = epoch;
  return t.order;
}

at::Tensor BatchData::readTokens(const std::string &name, int64_t index) {
  Tokens &t = *tokens_;
  if (t.lastIndex != index) {
    int64_t epoch = index / t.entriesPerEpoch;
    int64_t entry = index % t.entriesPerEpoch;
    const std::vector<int64_t> &order = orderOf(epoch);
    int64_t item = static_cast<int64_t>(c10::elementSize(t.dtype));
    at::Tensor windows = at::empty({t.perRank, t.seqLen + 1},
                                   at::TensorOptions().dtype(t.dtype));
    char *into = static_cast<char *>(windows.data_ptr());
    for (int64_t i = 0; i < t.perRank; ++i) {
      int64_t window =
          order[entry * t.globalBatch + t.rank * t.perRank + i];
      int64_t n = (t.seqLen + 1) * item;
      readAt(t.fd, t.path, t.offset + window * t.seqLen * item, into + i * n,
             n);
      t.bytesRead += n;
    }
    t.last = windows.to(at::kLong);
    t.lastIndex = index;
  }
  bool ids = name == t.ids;
  const TensorSpec &type = ids ? t.idsType : t.targetsType;
  // A tensor of its own, exactly the input's size (the step counts it).
  at::Tensor out = at::empty(type.shape, at::TensorOptions().dtype(type.dtype));
  out.view({t.perRank, t.seqLen})
      .copy_(t.last.narrow(1, ids ? 0 : 1, t.seqLen));
  return out;
}

} // namespace fsdp::runtime
