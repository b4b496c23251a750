//===- BatchData.cpp - the batches a run trains on -------------------------===//

#include "fsdp/runtime/BatchData.h"
#include "fsdp/runtime/Files.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <regex>

#include <fcntl.h>
#include <glob.h>
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

bool endsWith(const std::string &text, const std::string &tail) {
  return text.size() >= tail.size() &&
         text.compare(text.size() - tail.size(), tail.size(), tail) == 0;
}

/// splitmix64: the round function of the corpus's order (a few lines that
/// any reader of the docs can reproduce in Python).
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
  readAt(fd, path, 0, head, std::min<int64_t>(size, 12), "token corpus ");
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
  readAt(fd, path, start, header.data(), length, "token corpus ");
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

/// The files `data` names: a comma-separated list, or a glob pattern
/// (`shard-*.bin`, sorted as glob sorts), or one file.
std::vector<std::string> corpusFiles(const std::string &data) {
  std::vector<std::string> files;
  if (data.find(',') != std::string::npos) {
    size_t start = 0;
    while (start <= data.size()) {
      size_t comma = data.find(',', start);
      std::string file = data.substr(start, comma == std::string::npos
                                                ? std::string::npos
                                                : comma - start);
      if (file.empty())
        throw Error("--data '" + data + "' names an empty file");
      files.push_back(file);
      if (comma == std::string::npos)
        break;
      start = comma + 1;
    }
    return files;
  }
  if (data.find_first_of("*?[") == std::string::npos)
    return {data};
  glob_t found;
  int rc = ::glob(data.c_str(), GLOB_ERR, nullptr, &found);
  if (rc == 0)
    for (size_t i = 0; i < found.gl_pathc; ++i)
      files.push_back(found.gl_pathv[i]);
  ::globfree(&found);
  if (files.empty())
    throw Error("--data '" + data + "' matches no file");
  return files;
}

/// Whether `data` is a token corpus: its files (or its pattern) end in
/// .bin or .npy.
bool isTokenCorpus(const std::string &data) {
  size_t start = 0;
  while (true) {
    size_t comma = data.find(',', start);
    std::string file = data.substr(start, comma == std::string::npos
                                              ? std::string::npos
                                              : comma - start);
    if (!endsWith(file, ".bin") && !endsWith(file, ".npy"))
      return false;
    if (comma == std::string::npos)
      return true;
    start = comma + 1;
  }
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
  bool corpus = isTokenCorpus(o.data);
  // The token flags serve a corpus given as --eval-data too.
  if (!corpus && !isTokenCorpus(o.evalData)) {
    for (auto [flag, given] :
         {std::pair<const char *, bool>{"--seq-len", o.seqLen > 0},
          {"--token-inputs", !o.tokenInputs.empty()},
          {"--data-order", !o.dataOrder.empty()},
          {"--token-dtype", !o.tokenDtype.empty()}})
      if (given)
        throw Error(std::string(flag) + " is for a token corpus (--data "
                    "ending in .bin or .npy), not '" + o.data + "'");
  }
  if (!corpus)
    return std::make_unique<BatchData>(plan, o.data, steps, rank, world);
  std::unique_ptr<BatchData> data(new BatchData());
  data->openTokens(plan, o, steps, rank, world);
  return data;
}

std::unique_ptr<BatchData> BatchData::openEval(const Plan &eval,
                                               const RunOptions &o,
                                               int64_t &batches, int rank,
                                               int world) {
  RunOptions e = o;
  e.data = o.evalData;
  if (isTokenCorpus(e.data)) {
    e.dataOrder = "sequential";
  } else {
    e.evalData.clear();
    e.seqLen = 0;
    e.tokenInputs.clear();
    e.dataOrder.clear();
    e.tokenDtype.clear();
  }
  try {
    return open(eval, e, batches, rank, world);
  } catch (const Error &error) {
    // The count of batches is --eval-steps here.
    std::string why = error.what();
    if (why.rfind("--steps ", 0) == 0)
      why = "--eval-steps " + why.substr(8);
    throw Error("--eval-data: " + why);
  }
}

BatchData::~BatchData() {
  if (tokens_)
    for (const Tokens::Part &part : tokens_->parts)
      if (part.fd >= 0)
        ::close(part.fd);
}

void BatchData::openTokens(const Plan &plan, const RunOptions &o,
                           int64_t &steps, int rank, int world) {
  Tokens &t = tokens_.emplace();
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

  // The files, read in order as one corpus: each a regular one, all of
  // one dtype.
  std::vector<std::string> files = corpusFiles(path);
  for (const std::string &file : files) {
    checkFile(file, "token corpus ");
    Tokens::Part &part = t.parts.emplace_back();
    part.path = file;
    part.first = t.count;
    part.fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    struct stat info;
    if (part.fd < 0 || ::fstat(part.fd, &info) != 0)
      throw Error("cannot read token corpus '" + file + "': " +
                  std::strerror(errno));
    int64_t size = info.st_size;
    at::ScalarType dtype;
    if (endsWith(file, ".npy")) {
      if (!o.tokenDtype.empty())
        throw Error("--token-dtype is for a .bin corpus: '" + file +
                    "' says its own dtype");
      readNpyHeader(part.fd, file, size, dtype, part.count, part.offset);
    } else {
      if (o.tokenDtype.empty() || o.tokenDtype == "uint16")
        dtype = at::kUInt16;
      else if (o.tokenDtype == "uint32")
        dtype = at::kUInt32;
      else
        throw Error("--token-dtype is uint16 or uint32, not '" +
                    o.tokenDtype + "'");
      int64_t item = static_cast<int64_t>(c10::elementSize(dtype));
      if (size % item != 0)
        throw Error("token corpus '" + file + "' is " + std::to_string(size) +
                    " bytes, not a whole number of " + c10::toString(dtype) +
                    " tokens (--token-dtype)");
      part.count = size / item;
    }
    if (&part != &t.parts.front() && dtype != t.dtype)
      throw Error("token corpus '" + file + "' holds " +
                  c10::toString(dtype) + " tokens, but '" +
                  t.parts.front().path + "' holds " + c10::toString(t.dtype) +
                  ": one corpus has one dtype");
    t.dtype = dtype;
    t.count += part.count;
  }
  t.windows = t.count > 1 ? (t.count - 1) / t.seqLen : 0;
  t.entriesPerEpoch = t.windows / t.globalBatch;
  // The shuffle's Feistel halves: the smallest even width >= 2 that
  // covers the windows, split in two.
  int bits = 2;
  while (bits < 63 && (int64_t(1) << bits) < t.windows)
    ++bits;
  t.halfBits = (bits + (bits & 1)) / 2;
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

int64_t BatchData::windowAt(int64_t epoch, int64_t position) const {
  const Tokens &t = *tokens_;
  if (!t.shuffle)
    return position;
  // A bijection of [0, 2^bits) (a 4-round Feistel network on two halves
  // of `bits` bits, each round's function splitmix64 of the key, the round
  // and the right half), walked until it lands in [0, windows): a shuffle
  // of the epoch's windows that holds no table, whatever the corpus's size.
  const int half = t.halfBits;
  const uint64_t mask = (uint64_t(1) << half) - 1;
  const uint64_t key = t.seed ^ (static_cast<uint64_t>(epoch) *
                                 0xD1B54A32D192ED03ull);
  uint64_t x = static_cast<uint64_t>(position);
  do {
    uint64_t left = x >> half, right = x & mask;
    for (uint64_t round = 0; round < 4; ++round) {
      uint64_t state = key ^ (round << 56) ^ right;
      uint64_t next = left ^ (splitmix64(state) & mask);
      left = right;
      right = next;
    }
    x = (left << half) | right;
  } while (x >= static_cast<uint64_t>(t.windows));
  return static_cast<int64_t>(x);
}

at::Tensor BatchData::readTokens(const std::string &name, int64_t index) {
  Tokens &t = *tokens_;
  if (t.lastIndex != index) {
    int64_t epoch = index / t.entriesPerEpoch;
    int64_t entry = index % t.entriesPerEpoch;
    int64_t item = static_cast<int64_t>(c10::elementSize(t.dtype));
    at::Tensor windows = at::empty({t.perRank, t.seqLen + 1},
                                   at::TensorOptions().dtype(t.dtype));
    char *into = static_cast<char *>(windows.data_ptr());
    for (int64_t i = 0; i < t.perRank; ++i) {
      int64_t window = windowAt(
          epoch, entry * t.globalBatch + t.rank * t.perRank + i);
      // Tokens [window * T, window * T + T + 1) of the corpus, from the
      // files that hold them.
      int64_t token = window * t.seqLen, left = t.seqLen + 1;
      char *out = into + i * (t.seqLen + 1) * item;
      auto part = std::upper_bound(
          t.parts.begin(), t.parts.end(), token,
          [](int64_t v, const Tokens::Part &p) { return v < p.first; });
      --part;
      while (left > 0) {
        int64_t at = token - part->first;
        int64_t n = std::min(left, part->count - at);
        readAt(part->fd, part->path, part->offset + at * item, out, n * item,
               "token corpus ");
        t.bytesRead += n * item;
        out += n * item;
        token += n;
        left -= n;
        ++part;
      }
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
