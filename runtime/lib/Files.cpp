//===- Files.cpp - reading the files a run is handed -----------*- C++ -*-===//

#include "fsdp/runtime/Files.h"
#include "fsdp/runtime/Plan.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fsdp::runtime {

/// A checkpoint's file, whole: a regular file (not a symbolic link, a
/// device or a pipe, which could point outside the checkpoint, never end or
/// block), of at most `limit` bytes.
std::vector<char> readFile(const std::string &path, int64_t limit) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0)
    throw Error("cannot read '" + path + "': " +
                (errno == ELOOP ? std::string("it is a symbolic link, which a "
                                              "checkpoint's files are not")
                                : std::strerror(errno)));
  struct stat info;
  std::string problem;
  if (::fstat(fd, &info) != 0)
    problem = std::strerror(errno);
  else if (!S_ISREG(info.st_mode))
    problem = "not a regular file";
  else if (info.st_size > limit)
    problem = std::to_string(info.st_size) + " bytes, more than the " +
              std::to_string(limit) + " it may hold";
  std::vector<char> bytes;
  if (problem.empty()) {
    bytes.resize(static_cast<size_t>(info.st_size));
    size_t done = 0;
    while (done < bytes.size()) {
      ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
      if (n < 0 && errno == EINTR)
        continue;
      if (n <= 0) {
        problem = n < 0 ? std::strerror(errno) : "it ended early";
        break;
      }
      done += static_cast<size_t>(n);
    }
  }
  ::close(fd);
  if (!problem.empty())
    throw Error("cannot read '" + path + "': " + problem);
  return bytes;
}

} // namespace fsdp::runtime
