//===- AccelerateConfig.cpp - Hugging Face Accelerate config files --------===//
//
// The keys are Accelerate's own: the fields of `ClusterConfig` (and the two
// older keys `BaseConfig.process_config` still converts), and the
// `fsdp_config` keys `accelerate config` writes and `accelerate launch` reads.
// Values are read as PyYAML reads them: a quoted scalar is a string, never a
// number or a boolean, and `null` (or nothing) leaves a key unset.
//
//===----------------------------------------------------------------------===//

#include "fsdp/Config/AccelerateConfig.h"
#include "fsdp/Dialect/FSDP/IR/FSDPDialect.h"
#include "fsdp/Support/Files.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/MemoryBuffer.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

using namespace fsdp;

namespace {

/// One `key: value` pair of a map, with the name errors give it
/// (`num_processes`, `fsdp_config.fsdp_offload_params`).
struct Entry {
  YAML::Node key;
  YAML::Node value;
  std::string name;

  llvm::StringRef keyName() const { return key.Scalar(); }
};

/// Whether a scalar was written plain (`2`, `true`) rather than quoted: only
/// plain scalars are numbers or booleans.
bool isPlain(const YAML::Node &node) {
  return node.IsScalar() && node.Tag() == "?";
}

/// What a node is, for "expected ..., found ..." messages.
std::string describe(const YAML::Node &node) {
  switch (node.Type()) {
  case YAML::NodeType::Scalar:
    if (isPlain(node))
      return "'" + node.Scalar() + "'";
    return "the string \"" + node.Scalar() + "\"";
  case YAML::NodeType::Sequence:
    return "a list";
  case YAML::NodeType::Map:
    return "a map";
  case YAML::NodeType::Null:
  case YAML::NodeType::Undefined:
    break;
  }
  return "nothing";
}

/// YAML 1.1's booleans, as PyYAML (and so Accelerate) reads them.
std::optional<bool> parseBool(const YAML::Node &node) {
  if (!isPlain(node))
    return std::nullopt;
  llvm::StringRef text = node.Scalar();
  if (llvm::is_contained(
          {"true", "True", "TRUE", "yes", "Yes", "YES", "on", "On", "ON"},
          text))
    return true;
  if (llvm::is_contained(
          {"false", "False", "FALSE", "no", "No", "NO", "off", "Off", "OFF"},
          text))
    return false;
  return std::nullopt;
}

/// A decimal integer; `allowQuoted` for the keys Accelerate also accepts as
/// digit strings.
std::optional<int64_t> parseInt(const YAML::Node &node,
                                bool allowQuoted = false) {
  if (!node.IsScalar() || (!allowQuoted && !isPlain(node)))
    return std::nullopt;
  llvm::StringRef text = node.Scalar();
  text.consume_front("+");
  int64_t value;
  if (text.empty() || text.getAsInteger(10, value))
    return std::nullopt;
  return value;
}

/// An fsdp_config key as today's Accelerate spells it: its early releases
/// wrote them without the `fsdp_` prefix.
std::string canonicalFsdpKey(llvm::StringRef key) {
  return key.starts_with("fsdp_") ? key.str() : ("fsdp_" + key).str();
}

/// The (1-based) line an entry's key is on.
std::string lineOf(const Entry &entry) {
  return std::to_string(entry.key.Mark().line + 1);
}

class Reader {
public:
  explicit Reader(llvm::StringRef path) : path(path.str()) {}

  llvm::Error read(llvm::StringRef text, AccelerateConfig &config);

private:
  /// "PATH:LINE: message", or "PATH: message" where there is no line.
  llvm::Error error(const YAML::Mark &mark, const llvm::Twine &message) const;
  /// "PATH:LINE: NAME: message", at the key's line.
  llvm::Error error(const Entry &entry, const llvm::Twine &message) const;
  llvm::Error notSupported(const Entry &entry, const llvm::Twine &value,
                           const llvm::Twine &why) const;

  /// The pairs of `map`, keys checked to be names and not repeated.
  llvm::Error entriesOf(const YAML::Node &map, llvm::StringRef section,
                        llvm::SmallVectorImpl<Entry> &entries) const;

  llvm::Error readBool(const Entry &entry, bool &value) const;
  llvm::Error readInt(const Entry &entry, int64_t min, int64_t &value) const;
  llvm::Error readScalar(const Entry &entry, std::string &value) const;
  llvm::Error readList(const Entry &entry) const;
  /// A boolean that may only be false; `why` says why true is not supported.
  /// One of `values` (in the order an error lists them), of which only
  /// `supported` works; `why` says why the others do not.
  llvm::Error readChoice(const Entry &entry,
                         llvm::ArrayRef<llvm::StringRef> values,
                         llvm::StringRef supported,
                         const llvm::Twine &why) const;
  /// A section such as deepspeed_config: fine while it turns nothing on.
  llvm::Error readUnsupportedSection(const Entry &entry,
                                     const llvm::Twine &why) const;

  llvm::Error readTopLevel(const YAML::Node &root, AccelerateConfig &config);
  llvm::Error readTopEntry(const Entry &entry, AccelerateConfig &config);
  llvm::Error readFsdpConfig(const Entry &section, AccelerateConfig &config);
  /// What readFsdpConfig needs after reading every key.
  struct FsdpState {
    const Entry *sharding = nullptr, *policy = nullptr,
                *minNumParams = nullptr, *reshardAfterForward = nullptr,
                *backwardPrefetch = nullptr, *limitAllGathers = nullptr;
  };
  llvm::Error readFsdpEntry(const Entry &entry, AccelerateConfig &config,
                            FsdpState &state);
  /// "PATH:LINE: NAME", where an entry was set.
  std::string where(const Entry &entry) const;
  llvm::Error readWrapClasses(const Entry &entry,
                              std::vector<std::string> &classes) const;

  std::string path;
};

} // namespace

llvm::Error Reader::error(const YAML::Mark &mark,
                          const llvm::Twine &message) const {
  std::string where = path;
  if (!mark.is_null())
    where += ":" + std::to_string(mark.line + 1);
  return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                 (where + ": " + message).str());
}

llvm::Error Reader::error(const Entry &entry,
                          const llvm::Twine &message) const {
  return error(entry.key.Mark(), entry.name + ": " + message);
}

llvm::Error Reader::notSupported(const Entry &entry, const llvm::Twine &value,
                                 const llvm::Twine &why) const {
  return error(entry, value + " is not supported yet (" + why + ")");
}

llvm::Error Reader::entriesOf(const YAML::Node &map, llvm::StringRef section,
                              llvm::SmallVectorImpl<Entry> &entries) const {
  std::string in = section.empty() ? "" : (" in " + section).str();
  llvm::StringMap<int> firstLine;
  for (auto it = map.begin(); it != map.end(); ++it) {
    // Copies: `it->first` belongs to a proxy that dies with the statement.
    YAML::Node key = it->first;
    YAML::Node value = it->second;
    if (!key.IsScalar())
      return error(key.Mark(),
                   "expected a key name" + in + ", found " + describe(key));
    auto [seen, inserted] =
        firstLine.try_emplace(key.Scalar(), key.Mark().line);
    if (!inserted)
      return error(key.Mark(), "duplicate key '" + key.Scalar() + "'" + in +
                                   " (first set on line " +
                                   std::to_string(seen->second + 1) + ")");
    std::string name =
        section.empty() ? key.Scalar() : (section + "." + key.Scalar()).str();
    entries.push_back({key, value, name});
  }
  return llvm::Error::success();
}

llvm::Error Reader::readBool(const Entry &entry, bool &value) const {
  std::optional<bool> parsed = parseBool(entry.value);
  if (!parsed)
    return error(entry,
                 "expected true or false, found " + describe(entry.value));
  value = *parsed;
  return llvm::Error::success();
}

llvm::Error Reader::readInt(const Entry &entry, int64_t min,
                            int64_t &value) const {
  std::optional<int64_t> parsed = parseInt(entry.value);
  std::string expected = min == 0   ? "a non-negative integer"
                         : min == 1 ? "a positive integer"
                                    : "an integer";
  if (!parsed || *parsed < min)
    return error(entry,
                 "expected " + expected + ", found " + describe(entry.value));
  value = *parsed;
  return llvm::Error::success();
}

llvm::Error Reader::readScalar(const Entry &entry, std::string &value) const {
  if (!entry.value.IsScalar())
    return error(entry, "expected a string, found " + describe(entry.value));
  value = entry.value.Scalar();
  return llvm::Error::success();
}

llvm::Error Reader::readList(const Entry &entry) const {
  if (!entry.value.IsSequence())
    return error(entry, "expected a list, found " + describe(entry.value));
  return llvm::Error::success();
}

llvm::Error Reader::readChoice(const Entry &entry,
                               llvm::ArrayRef<llvm::StringRef> values,
                               llvm::StringRef supported,
                               const llvm::Twine &why) const {
  std::string value;
  if (llvm::Error err = readScalar(entry, value))
    return err;
  if (value == supported)
    return llvm::Error::success();
  if (llvm::is_contained(values, value))
    return notSupported(entry, value, why);
  std::string expected;
  for (size_t i = 0; i < values.size(); ++i)
    expected += (i == 0 ? "" : i + 1 == values.size() ? " or " : ", ") +
                values[i].str();
  return error(entry,
               "expected " + expected + ", found " + describe(entry.value));
}

llvm::Error Reader::readUnsupportedSection(const Entry &entry,
                                           const llvm::Twine &why) const {
  if (!entry.value.IsMap())
    return error(entry, "expected a map, found " + describe(entry.value));
  llvm::SmallVector<Entry> entries;
  if (llvm::Error err = entriesOf(entry.value, entry.name, entries))
    return err;
  // `accelerate config` writes `ipex_config: {use_xpu: false}` and the like
  // for plain runs; a setting that is off asks for nothing.
  for (const Entry &setting : entries) {
    if (setting.value.IsNull() || parseBool(setting.value) == false)
      continue;
    return error(setting, why);
  }
  return llvm::Error::success();
}

llvm::Error Reader::read(llvm::StringRef text, AccelerateConfig &config) {
  std::vector<YAML::Node> documents;
  try {
    documents = YAML::LoadAll(text.str());
  } catch (const YAML::DeepRecursion &e) {
    // yaml-cpp's message for it is "bad file".
    return error(e.mark, "nested " + std::to_string(e.depth()) +
                             " deep, deeper than the YAML reader goes (an "
                             "Accelerate config is a map of settings)");
  } catch (const YAML::Exception &e) {
    return error(e.mark, e.msg);
  }
  if (documents.empty())
    documents.emplace_back();
  // A second document would otherwise go unread.
  for (const YAML::Node &document : llvm::drop_begin(documents))
    if (!document.IsNull())
      return error(document.Mark(),
                   "expected one YAML document, found a second one");
  const YAML::Node &root = documents.front();
  // Reading nodes does not throw, but a yaml-cpp exception must never leave
  // this file: its callers are built without exceptions.
  try {
    return readTopLevel(root, config);
  } catch (const YAML::Exception &e) {
    return error(e.mark, e.msg);
  }
}

llvm::Error Reader::readTopLevel(const YAML::Node &root,
                                 AccelerateConfig &config) {
  if (!root.IsMap())
    return error(root.Mark(), "expected a map of Accelerate settings, found " +
                                  (root.IsNull() ? std::string("an empty file")
                                                 : describe(root)));
  llvm::SmallVector<Entry> entries;
  if (llvm::Error err = entriesOf(root, "", entries))
    return err;

  // What the file is for comes first: a DeepSpeed file fails on its
  // distributed_type rather than on its deepspeed_config.
  auto find = [&](llvm::StringRef key) -> const Entry * {
    for (const Entry &entry : entries)
      if (entry.keyName() == key && !entry.value.IsNull())
        return &entry;
    return nullptr;
  };
  if (const Entry *environment = find("compute_environment")) {
    std::string value;
    if (llvm::Error err = readScalar(*environment, value))
      return err;
    if (value != "LOCAL_MACHINE")
      return notSupported(*environment, value, "LOCAL_MACHINE only");
  }
  const Entry *distributed = find("distributed_type");
  if (!distributed)
    return error(YAML::Mark::null_mark(),
                 "distributed_type is not set: fsdp-opt compiles FSDP plans "
                 "(distributed_type: FSDP)");
  std::string distributedType;
  if (llvm::Error err = readScalar(*distributed, distributedType))
    return err;
  if (distributedType != "FSDP")
    return error(*distributed,
                 "fsdp-opt compiles FSDP plans, and this file asks for " +
                     distributedType);

  for (const Entry &entry : entries) {
    // `key:` with no value, or `null`, leaves the key unset.
    if (entry.value.IsNull())
      continue;
    if (llvm::Error err = readTopEntry(entry, config))
      return err;
  }
  // The older `fp16: true` counts where mixed_precision is not set, as
  // Accelerate reads it.
  if (const Entry *fp16 = find("fp16"); fp16 && !find("mixed_precision")) {
    bool value = false;
    if (llvm::Error err = readBool(*fp16, value))
      return err;
    if (value)
      config.mixedPrecision = "fp16";
  }
  return llvm::Error::success();
}

llvm::Error Reader::readTopEntry(const Entry &entry, AccelerateConfig &config) {
  llvm::StringRef key = entry.keyName();
  // Read before the loop.
  if (key == "compute_environment" || key == "distributed_type")
    return llvm::Error::success();

  if (key == "fsdp_config")
    return readFsdpConfig(entry, config);
  if (key == "num_processes") {
    int64_t value;
    if (llvm::Error err = readInt(entry, 1, value))
      return err;
    config.numProcesses = value;
    return llvm::Error::success();
  }
  // Accelerate's FSDP plugin: MixedPrecision(param_dtype, reduce_dtype,
  // buffer_dtype) all in the chosen type.
  if (key == "mixed_precision") {
    std::string value;
    if (llvm::Error err = readScalar(entry, value))
      return err;
    // fp16 brings Accelerate's ShardedGradScaler (fsdp-opt's
    // --grad-scaler, on with fp16).
    if (value == "bf16" || value == "fp16") {
      config.mixedPrecision = value;
      return llvm::Error::success();
    }
    return readChoice(entry, {"no", "fp16", "bf16", "fp8"}, "no",
                      "bf16, fp16 or no");
  }
  // The older spelling of mixed_precision: fp16.
  if (key == "fp16") {
    bool value = false;
    return readBool(entry, value); // applied after every key
  }

  // Settings of other kinds of run, fine while they turn nothing on.
  if (key == "deepspeed_config")
    return readUnsupportedSection(
        entry, "DeepSpeed settings are not supported (fsdp-opt compiles "
               "FSDP plans)");
  if (key == "megatron_lm_config")
    return readUnsupportedSection(
        entry, "Megatron-LM settings are not supported (fsdp-opt compiles "
               "FSDP plans)");
  if (key == "tp_config")
    return readUnsupportedSection(
        entry, "tensor parallelism is not supported yet (fsdp-opt compiles "
               "FSDP plans)");
  if (key == "dynamo_config")
    return readUnsupportedSection(
        entry, "torch.compile settings are not supported yet (fsdp-opt "
               "compiles the training step itself)");
  if (key == "fp8_config")
    return readUnsupportedSection(
        entry, "FP8 settings are not supported yet (fp32 plans only)");
  if (key == "ipex_config")
    return readUnsupportedSection(
        entry, "Intel Extension for PyTorch settings are not supported yet");
  if (key == "mpirun_config")
    return readUnsupportedSection(entry,
                                  "mpirun settings are not supported yet");
  // The older spelling of dynamo_config.
  if (key == "dynamo_backend") {
    std::string value;
    if (llvm::Error err = readScalar(entry, value))
      return err;
    if (value == "NO" || value == "no")
      return llvm::Error::success();
    return notSupported(entry, value,
                        "fsdp-opt compiles the training step itself");
  }

  // Accepted: how and where the ranks start, none of which changes the plan.
  int64_t number;
  if (key == "num_machines") {
    // The nodes: HYBRID_SHARD shards within one by default.
    if (llvm::Error err = readInt(entry, 1, number))
      return err;
    config.numMachines = number;
    return llvm::Error::success();
  }
  if (key == "machine_rank")
    return readInt(entry, 0, number);
  if (key == "main_process_port")
    return readInt(entry, 0, number);
  bool flag;
  if (llvm::is_contained({"same_network", "debug", "enable_cpu_affinity",
                          "use_cpu", "tpu_use_cluster", "tpu_use_sudo"},
                         key))
    return readBool(entry, flag);
  std::string text;
  // downcast_bf16 is a TPU setting (`accelerate config` writes 'no'): no
  // effect on an fp32 plan.
  if (llvm::is_contained({"main_process_ip", "rdzv_backend",
                          "main_training_function", "gpu_ids", "downcast_bf16",
                          "tpu_name", "tpu_zone", "command_file"},
                         key))
    return readScalar(entry, text);
  if (llvm::is_contained({"tpu_env", "tpu_vm", "commands"}, key))
    return readList(entry);

  return error(entry.key.Mark(), "unknown key '" + key + "' at the top level");
}

llvm::Error Reader::readFsdpConfig(const Entry &section,
                                   AccelerateConfig &config) {
  if (!section.value.IsMap())
    return error(section, "expected a map, found " + describe(section.value));
  llvm::SmallVector<Entry> entries;
  if (llvm::Error err = entriesOf(section.value, "fsdp_config", entries))
    return err;
  // Accelerate's early releases wrote the keys without the `fsdp_` prefix
  // (`min_num_params`, `sharding_strategy`, ...); both spellings mean the
  // same, and one file may not give both.
  llvm::StringMap<const Entry *> byCanonical;
  for (const Entry &entry : entries) {
    std::string canonical = canonicalFsdpKey(entry.keyName());
    auto [seen, inserted] = byCanonical.try_emplace(canonical, &entry);
    if (!inserted)
      return error(entry.key.Mark(),
                   entry.name + " and " + seen->second->name + " (line " +
                       lineOf(*seen->second) +
                       ") are two spellings of one key: keep one");
  }
  FsdpState state;
  for (const Entry &entry : entries) {
    if (entry.value.IsNull())
      continue;
    if (llvm::Error err = readFsdpEntry(entry, config, state))
      return err;
  }
  // Accelerate's releases before fsdp_auto_wrap_policy turned a positive
  // min_num_params into size-based wrapping ("FSDP's minimum number of
  // parameters for Default Auto Wrapping"); a file that still says only
  // that gets it.
  if (!config.autoWrap && state.minNumParams && config.minNumParams &&
      *config.minNumParams > 0) {
    config.autoWrap = "size";
    config.autoWrapReason =
        where(*state.minNumParams) + ": " + std::to_string(*config.minNumParams) +
        " with no auto-wrap policy: size-based wrapping, as Accelerate's "
        "default auto wrap";
  } else if (config.autoWrap && state.policy) {
    config.autoWrapReason = where(*state.policy) + ": " +
                            state.policy->value.Scalar();
  }
  // FSDP2 prefetches the next unit in the backward by itself, and has no
  // rate limiter.
  if (!state.backwardPrefetch && config.fsdpVersion == 2)
    config.backwardPrefetch = "BACKWARD_PRE";
  if (!state.limitAllGathers && config.fsdpVersion == 2)
    config.limitAllGathers = 0;
  // FSDP2: reshard_after_forward is the sharding strategy's half that
  // applies (true: FULL_SHARD, false: SHARD_GRAD_OP).
  if (state.reshardAfterForward && config.fsdpVersion != 2)
    return error(*state.reshardAfterForward,
                 "an FSDP2 setting: it needs fsdp_version: 2");
  if (state.reshardAfterForward) {
    bool reshard = false;
    if (llvm::Error err = readBool(*state.reshardAfterForward, reshard))
      return err;
    std::string sharding = reshard ? "FULL_SHARD" : "SHARD_GRAD_OP";
    if (config.sharding && state.sharding && *config.sharding != sharding &&
        !(*config.sharding == "HYBRID_SHARD" && reshard))
      return error(*state.reshardAfterForward,
                   std::string(reshard ? "true" : "false") +
                       " contradicts " + state.sharding->name + " (line " +
                       lineOf(*state.sharding) +
                       "): " + *config.sharding);
    if (!config.sharding)
      config.sharding = sharding;
  }
  // Accelerate falls back on a Transformers model's `_no_split_modules`;
  // fsdp-opt has no such list to fall back on.
  if (config.autoWrap == "class" && config.wrapClasses.empty())
    return error(*state.policy,
                 "TRANSFORMER_BASED_WRAP needs "
                 "fsdp_config.fsdp_transformer_layer_cls_to_wrap (fsdp-opt "
                 "cannot fall back on a Transformers model's "
                 "_no_split_modules)");
  return llvm::Error::success();
}

std::string Reader::where(const Entry &entry) const {
  return path + ":" + lineOf(entry) + ": " + entry.name;
}

llvm::Error Reader::readFsdpEntry(const Entry &entry, AccelerateConfig &config,
                                  FsdpState &state) {
  std::string canonical = canonicalFsdpKey(entry.keyName());
  llvm::StringRef key = canonical;

  if (key == "fsdp_sharding_strategy") {
    static const char *const kStrategies[] = {"FULL_SHARD", "SHARD_GRAD_OP",
                                              "NO_SHARD", "HYBRID_SHARD"};
    // torch's ShardingStrategy numbers them from 1; Accelerate also takes
    // the number as a string.
    if (std::optional<int64_t> number =
            parseInt(entry.value, /*allowQuoted=*/true)) {
      if (*number >= 1 && *number <= 4) {
        config.sharding = kStrategies[*number - 1];
        state.sharding = &entry;
        return llvm::Error::success();
      }
      if (*number == 5)
        return notSupported(entry, "5 (_HYBRID_SHARD_ZERO2)",
                            "use HYBRID_SHARD or SHARD_GRAD_OP");
    } else if (entry.value.IsScalar()) {
      const std::string &name = entry.value.Scalar();
      if (llvm::is_contained(kStrategies, name)) {
        config.sharding = name;
        state.sharding = &entry;
        return llvm::Error::success();
      }
      // Accelerate spells torch's _HYBRID_SHARD_ZERO2 without the underscore.
      if (name == "HYBRID_SHARD_ZERO2" || name == "_HYBRID_SHARD_ZERO2")
        return notSupported(entry, name, "use HYBRID_SHARD or SHARD_GRAD_OP");
    }
    return error(entry, "expected FULL_SHARD, SHARD_GRAD_OP, NO_SHARD, "
                        "HYBRID_SHARD or their numbers 1-4, found " +
                            describe(entry.value));
  }

  if (key == "fsdp_auto_wrap_policy") {
    std::string value;
    if (llvm::Error err = readScalar(entry, value))
      return err;
    if (value == "TRANSFORMER_BASED_WRAP") {
      config.autoWrap = "class";
    } else if (value == "SIZE_BASED_WRAP") {
      config.autoWrap = "size";
    } else if (value == "NO_WRAP") {
      config.autoWrap = "none";
    } else {
      return error(entry, "expected TRANSFORMER_BASED_WRAP, SIZE_BASED_WRAP "
                          "or NO_WRAP, found " +
                              describe(entry.value));
    }
    state.policy = &entry;
    return llvm::Error::success();
  }

  if (key == "fsdp_min_num_params") {
    int64_t value;
    if (llvm::Error err = readInt(entry, 0, value))
      return err;
    config.minNumParams = value;
    state.minNumParams = &entry;
    return llvm::Error::success();
  }

  if (key == "fsdp_transformer_layer_cls_to_wrap")
    return readWrapClasses(entry, config.wrapClasses);

  // fsdp_backward_prefetch_policy is the older spelling.
  if (key == "fsdp_backward_prefetch" ||
      key == "fsdp_backward_prefetch_policy") {
    std::string value;
    if (llvm::Error err = readScalar(entry, value))
      return err;
    if (!symbolizeBackwardPrefetch(value))
      return error(entry, "expected BACKWARD_PRE, BACKWARD_POST or "
                          "NO_PREFETCH, found " +
                              describe(entry.value));
    config.backwardPrefetch = value;
    state.backwardPrefetch = &entry;
    return llvm::Error::success();
  }
  if (key == "fsdp_forward_prefetch")
    return readBool(entry, config.forwardPrefetch);
  // FSDP1's rate limiter: two gathered buffers at most when true.
  if (key == "fsdp_limit_all_gathers") {
    bool limit = true;
    if (llvm::Error err = readBool(entry, limit))
      return err;
    config.limitAllGathers = limit ? StepDefaults::limitAllGathers() : 0;
    state.limitAllGathers = &entry;
    return llvm::Error::success();
  }
  if (key == "fsdp_offload_params")
    return readBool(entry, config.offloadParams);
  // Accelerate applies activation checkpointing with the wrapping policy:
  // the units (transformer layers under TRANSFORMER_BASED_WRAP).
  if (key == "fsdp_activation_checkpointing")
    return readBool(entry, config.activationCheckpointing);

  if (key == "fsdp_state_dict_type") {
    // The kind of fsdp-run's checkpoints (the plan carries it).
    std::string value;
    if (llvm::Error err = readScalar(entry, value))
      return err;
    if (value == "LOCAL_STATE_DICT")
      return notSupported(entry, value,
                          "fsdp-run writes FULL_STATE_DICT or "
                          "SHARDED_STATE_DICT checkpoints");
    if (value != "FULL_STATE_DICT" && value != "SHARDED_STATE_DICT")
      return error(entry, "expected FULL_STATE_DICT, SHARDED_STATE_DICT or "
                          "LOCAL_STATE_DICT, found " +
                              describe(entry.value));
    config.stateDictType = value;
    return llvm::Error::success();
  }

  // No effect: checkpoints keep the original parameter names, and every rank
  // reads the same model file.
  bool flag;
  if (key == "fsdp_use_orig_params" || key == "fsdp_sync_module_states" ||
      key == "fsdp_cpu_ram_efficient_loading")
    return readBool(entry, flag);

  if (key == "fsdp_version") {
    std::optional<int64_t> version = parseInt(entry.value);
    if (version != 1 && version != 2)
      return error(entry, "expected 1 or 2, found " + describe(entry.value));
    config.fsdpVersion = *version;
    return llvm::Error::success();
  }
  // Read once fsdp_version is known, whatever the order of the keys.
  if (key == "fsdp_reshard_after_forward") {
    state.reshardAfterForward = &entry;
    return llvm::Error::success();
  }

  return error(entry.key.Mark(),
               "unknown key '" + entry.keyName() + "' in fsdp_config");
}

llvm::Error Reader::readWrapClasses(const Entry &entry,
                                    std::vector<std::string> &classes) const {
  classes.clear();
  // `accelerate config` writes "GPT2Block,GPT2MLP"; a YAML list reads as well.
  if (entry.value.IsScalar()) {
    llvm::StringRef text = llvm::StringRef(entry.value.Scalar()).trim();
    if (text.empty())
      return llvm::Error::success();
    llvm::SmallVector<llvm::StringRef> names;
    text.split(names, ',');
    for (llvm::StringRef name : names) {
      name = name.trim();
      if (name.empty())
        return error(entry,
                     "empty class name in '" + entry.value.Scalar() + "'");
      classes.push_back(name.str());
    }
    return llvm::Error::success();
  }
  if (!entry.value.IsSequence())
    return error(entry, "expected a comma-separated string or a list of "
                        "class names, found " +
                            describe(entry.value));
  for (YAML::Node item : entry.value) {
    if (!item.IsScalar() || llvm::StringRef(item.Scalar()).trim().empty())
      return error(item.Mark(), entry.name + ": expected a class name, found " +
                                    describe(item));
    classes.push_back(llvm::StringRef(item.Scalar()).trim().str());
  }
  return llvm::Error::success();
}

llvm::Expected<AccelerateConfig>
fsdp::readAccelerateConfig(llvm::StringRef path) {
  llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      readInputFile(path, kMaxSettingsFileBytes);
  if (!buffer)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   "cannot read config file '" + path + "': " +
                                       llvm::toString(buffer.takeError()));
  AccelerateConfig config;
  if (llvm::Error err = Reader(path).read((*buffer)->getBuffer(), config))
    return err;
  return config;
}
