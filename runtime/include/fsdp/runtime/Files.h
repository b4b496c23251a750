//===- Files.h - reading the files a run is handed -------------*- C++ -*-===//
//
// The plan, the model, the data and a checkpoint's files may come from
// someone else. They are read only as regular files: a device, a pipe or a
// socket could block a rank forever or never end, and a checkpoint's files
// are not followed through symbolic links (which could point outside it).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_FILES_H
#define FSDP_RUNTIME_FILES_H

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace fsdp::runtime {

/// A checkpoint's file, whole: a regular file (not a symbolic link, a
/// device or a pipe, which could point outside the checkpoint, never end or
/// block), of at most `limit` bytes.
std::vector<char> readFile(const std::string &path,
                           int64_t limit = std::numeric_limits<int64_t>::max());

} // namespace fsdp::runtime

#endif // FSDP_RUNTIME_FILES_H
