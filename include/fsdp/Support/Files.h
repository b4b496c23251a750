//===- Files.h - reading the files a user names ----------------*- C++ -*-===//
//
// A model, a config or a machine file may come from someone else. fsdp-opt
// reads each only as a regular file (after symbolic links): a pipe, a
// device or a socket could block it forever or never end (/dev/zero), and
// a text file is read only up to the size it can need.
//
//===----------------------------------------------------------------------===//
#ifndef FSDP_SUPPORT_FILES_H
#define FSDP_SUPPORT_FILES_H

#include "llvm/ADT/Twine.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/MemoryBuffer.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fsdp {

/// The most bytes fsdp-opt reads of a settings file it is handed (an
/// Accelerate config, a machine file: each a few hundred bytes).
inline constexpr uint64_t kMaxSettingsFileBytes = uint64_t(1) << 20;

/// Why a file of mode `mode` is not read ("" for a regular file).
inline std::string notRegularFile(mode_t mode) {
  if (S_ISREG(mode))
    return "";
  const char *kind = S_ISDIR(mode)    ? "a directory"
                     : S_ISFIFO(mode) ? "a pipe"
                     : S_ISCHR(mode)  ? "a character device"
                     : S_ISBLK(mode)  ? "a block device"
                     : S_ISSOCK(mode) ? "a socket"
                                      : "not a file";
  return std::string("not a regular file (") + kind + ")";
}

/// Opens `path` (following symbolic links) without blocking, checks that
/// it is a regular file of at most `maxBytes`, and returns its descriptor
/// and size; an error saying why not (the reason alone: the caller names
/// the file).
inline llvm::Expected<std::pair<int, uint64_t>>
openRegularFile(const llvm::Twine &path, uint64_t maxBytes) {
  std::string name = path.str();
  auto failure = [&](const std::string &why) {
    return llvm::createStringError(llvm::inconvertibleErrorCode(), why);
  };
  int fd = ::open(name.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    return failure(std::strerror(errno));
  struct stat info;
  std::string why;
  if (::fstat(fd, &info) != 0)
    why = std::strerror(errno);
  else if (!S_ISREG(info.st_mode))
    why = notRegularFile(info.st_mode);
  else if (static_cast<uint64_t>(info.st_size) > maxBytes)
    why = std::to_string(info.st_size) + " bytes, more than the " +
          std::to_string(maxBytes) + " such a file may hold";
  if (!why.empty()) {
    ::close(fd);
    return failure(why);
  }
  return std::make_pair(fd, static_cast<uint64_t>(info.st_size));
}

/// Checks that `path` is a regular file (after symbolic links), for a
/// reader that opens it by name (an archive's).
inline llvm::Error checkInputFile(const llvm::Twine &path) {
  auto opened = openRegularFile(path, UINT64_MAX);
  if (!opened)
    return opened.takeError();
  ::close(opened->first);
  return llvm::Error::success();
}

/// The bytes of `path`, a regular file of at most `maxBytes` (an error
/// with the reason alone where it is not).
inline llvm::Expected<std::unique_ptr<llvm::MemoryBuffer>>
readInputFile(const llvm::Twine &path, uint64_t maxBytes) {
  auto opened = openRegularFile(path, maxBytes);
  if (!opened)
    return opened.takeError();
  auto [fd, size] = *opened;
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getOpenFile(fd, path, size);
  ::close(fd);
  if (!buffer)
    return llvm::createStringError(llvm::inconvertibleErrorCode(),
                                   buffer.getError().message());
  return std::move(*buffer);
}

} // namespace fsdp

#endif // FSDP_SUPPORT_FILES_H
