//===- Files.cpp - reading the files a run is handed -----------*- C++ -*-===//

#include "fsdp/runtime/Files.h"
#include "fsdp/runtime/Plan.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fsdp::runtime {

namespace {

/// Opens `path` without blocking (a pipe would, in open) and checks it;
/// its descriptor and size.
std::pair<int, int64_t> openChecked(const std::string &path, int64_t limit,
                                    Links links, const std::string &what) {
  auto fail = [&](const std::string &why) {
    return Error("cannot read " + what + "'" + path + "': " + why);
  };
  int flags = O_RDONLY | O_NONBLOCK | O_CLOEXEC;
  if (links == Links::Refuse)
    flags |= O_NOFOLLOW;
  int fd = ::open(path.c_str(), flags);
  if (fd < 0)
    throw fail(errno == ELOOP && links == Links::Refuse
                   ? std::string("it is a symbolic link, which a "
                                 "checkpoint's files are not")
                   : std::string(std::strerror(errno)));
  struct stat info;
  std::string problem;
  if (::fstat(fd, &info) != 0)
    problem = std::strerror(errno);
  else if (!S_ISREG(info.st_mode))
    problem = std::string("not a regular file (") +
              (S_ISDIR(info.st_mode)    ? "a directory"
               : S_ISFIFO(info.st_mode) ? "a pipe"
               : S_ISCHR(info.st_mode)  ? "a character device"
               : S_ISBLK(info.st_mode)  ? "a block device"
               : S_ISSOCK(info.st_mode) ? "a socket"
                                        : "not a file") +
              ")";
  else if (info.st_size > limit)
    problem = std::to_string(info.st_size) + " bytes, more than the " +
              std::to_string(limit) + " it may hold";
  if (!problem.empty()) {
    ::close(fd);
    throw fail(problem);
  }
  return {fd, static_cast<int64_t>(info.st_size)};
}

} // namespace

std::vector<char> readFile(const std::string &path, int64_t limit,
                           Links links, const std::string &what) {
  auto [fd, size] = openChecked(path, limit, links, what);
  std::vector<char> bytes(static_cast<size_t>(size));
  std::string problem;
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
  ::close(fd);
  if (!problem.empty())
    throw Error("cannot read " + what + "'" + path + "': " + problem);
  return bytes;
}

void checkFile(const std::string &path, const std::string &what) {
  ::close(openChecked(path, std::numeric_limits<int64_t>::max(), Links::Follow,
                      what)
              .first);
}

void readAt(int fd, const std::string &path, int64_t offset, void *into,
            int64_t n, const std::string &what) {
  char *out = static_cast<char *>(into);
  while (n > 0) {
    ssize_t got = ::pread(fd, out, n, offset);
    if (got < 0 && errno == EINTR)
      continue;
    if (got <= 0)
      throw Error("cannot read " + what + "'" + path + "': " +
                  (got < 0 ? std::strerror(errno) : "the file ends early"));
    out += got;
    offset += got;
    n -= got;
  }
}

std::string selfPath() {
  std::vector<char> buffer(4096);
  ssize_t n = ::readlink("/proc/self/exe", buffer.data(), buffer.size() - 1);
  if (n <= 0)
    return "/proc/self/exe";
  return std::string(buffer.data(), static_cast<size_t>(n));
}

} // namespace fsdp::runtime
