//===- JSON.h - JSON from files a user may be handed ------------*- C++ -*-===//
//
// llvm::json::parse recurses once per nesting level, and so do the walks of
// its values: a few kilobytes of `[` (a shared model's program, its
// metadata, a machine file) would overflow the stack. Every JSON fsdp-opt
// reads goes through parseJSON, which refuses a document nested deeper
// than anything fsdp-opt reads needs, before parsing it.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_SUPPORT_JSON_H
#define FSDP_SUPPORT_JSON_H

#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/JSON.h"

#include <optional>
#include <string>
#include <vector>

namespace fsdp {

/// The deepest nesting of arrays and objects fsdp-opt reads (torch.export's
/// programs nest about 20 deep).
inline constexpr unsigned kMaxJSONDepth = 1024;

/// The deepest nesting of `text`'s arrays and objects (strings skipped).
inline unsigned jsonDepth(llvm::StringRef text) {
  unsigned depth = 0, deepest = 0;
  bool inString = false, escaped = false;
  for (char c : text) {
    if (inString) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        inString = false;
      continue;
    }
    if (c == '"')
      inString = true;
    else if (c == '[' || c == '{')
      deepest = std::max(deepest, ++depth);
    else if ((c == ']' || c == '}') && depth > 0)
      --depth;
  }
  return deepest;
}

/// The first key given twice in one object of `text`, if any (compared as
/// written: llvm::json::parse keeps one of the two without a word, and
/// which one a reader meant is a guess).
inline std::optional<std::string> duplicateJSONKey(llvm::StringRef text) {
  // One entry per open array or object: whether it is an object, and its
  // keys so far.
  std::vector<std::pair<bool, llvm::StringSet<>>> open;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '"') {
      size_t end = i + 1;
      while (end < text.size() && text[end] != '"')
        end += text[end] == '\\' ? 2 : 1;
      llvm::StringRef raw = text.slice(i + 1, std::min(end, text.size()));
      size_t next = text.find_first_not_of(" \t\r\n", end + 1);
      if (next != llvm::StringRef::npos && text[next] == ':' && !open.empty() &&
          open.back().first && !open.back().second.insert(raw).second)
        return raw.str();
      i = end;
    } else if (c == '{' || c == '[') {
      open.emplace_back(c == '{', llvm::StringSet<>());
    } else if ((c == '}' || c == ']') && !open.empty()) {
      open.pop_back();
    }
  }
  return std::nullopt;
}

/// llvm::json::parse of `text`, refused (an error saying so) where it
/// nests more than kMaxJSONDepth deep.
inline llvm::Expected<llvm::json::Value> parseJSON(llvm::StringRef text) {
  unsigned depth = jsonDepth(text);
  if (depth > kMaxJSONDepth)
    return llvm::createStringError(
        llvm::inconvertibleErrorCode(),
        "arrays and objects nested " + llvm::Twine(depth) +
            " deep; at most " + llvm::Twine(kMaxJSONDepth) + " are read");
  return llvm::json::parse(text);
}

} // namespace fsdp

#endif // FSDP_SUPPORT_JSON_H
