//===- Files.h - reading the files a run is handed -------------*- C++ -*-===//
//
// The plan, the model, the data and a checkpoint's files may come from
// someone else. They are read only as regular files: a device, a pipe or a
// socket could block a rank forever or never end (/dev/zero), and a
// checkpoint's files are not followed through symbolic links (which could
// point outside it).
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_RUNTIME_FILES_H
#define FSDP_RUNTIME_FILES_H

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace fsdp::runtime {

/// Whether a file named through a symbolic link is read: the files the
/// user names are (as any tool's), a checkpoint's own files are not.
enum class Links { Follow, Refuse };

/// The bytes of `path`, a regular file of at most `limit` bytes; an Error
/// "cannot read WHAT'PATH': why" where it is not (`what` names the kind of
/// file, "plan " say, or is empty).
std::vector<char> readFile(const std::string &path,
                           int64_t limit = std::numeric_limits<int64_t>::max(),
                           Links links = Links::Refuse,
                           const std::string &what = "");

/// Checks, without reading it, that `path` (after symbolic links) is a
/// regular file, for a reader that opens it by name (an archive's); the
/// same Error as readFile's where it is not.
void checkFile(const std::string &path, const std::string &what);

/// Reads `n` bytes at `offset` of the open file `fd` (`path`, for the
/// message) into `into`, however many reads that takes; an Error "cannot
/// read WHAT'PATH': why" where the file fails or ends early.
void readAt(int fd, const std::string &path, int64_t offset, void *into,
            int64_t n, const std::string &what);

/// This executable's own path (/proc/self/exe resolved; that name itself
/// where it cannot be read).
std::string selfPath();

} // namespace fsdp::runtime

#endif // FSDP_RUNTIME_FILES_H
