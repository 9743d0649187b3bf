#include "ps/base/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"

namespace ps {

absl::Status ErrnoStatus(int error, absl::string_view what,
                         absl::string_view path) {
  return absl::ErrnoToStatus(error, absl::StrCat("cannot ", what, " ", path));
}

absl::Status WriteFully(int fd, absl::string_view data,
                        absl::string_view path) {
  while (!data.empty()) {
    const ssize_t wrote = ::write(fd, data.data(), data.size());
    if (wrote < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "write", path);
    }
    data.remove_prefix(static_cast<size_t>(wrote));
  }
  return absl::OkStatus();
}

absl::StatusOr<size_t> PreadFully(int fd, char* out, size_t n, uint64_t offset,
                                  absl::string_view path) {
  size_t done = 0;
  while (done < n) {
    const ssize_t got =
        ::pread(fd, out + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "read", path);
    }
    if (got == 0) break;
    done += static_cast<size_t>(got);
  }
  return done;
}

ssize_t ReadSome(int fd, char* out, size_t n) {
  ssize_t got;
  do {
    got = ::read(fd, out, n);
  } while (got < 0 && errno == EINTR);
  return got;
}

absl::Status CreateDirectories(absl::string_view path) {
  if (path.empty()) {
    return absl::InvalidArgumentError("cannot create a directory of no name");
  }
  std::error_code error;
  std::filesystem::create_directories(std::string(path), error);
  if (error) return ErrnoStatus(error.value(), "create directory", path);
  // create_directories reports an existing file of that name as success.
  if (!std::filesystem::is_directory(std::string(path), error)) {
    return ErrnoStatus(ENOTDIR, "create directory", path);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadFileToString(absl::string_view path) {
  const std::string name(path);
  const int fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "open", path);
  std::string text;
  char block[1 << 16];
  ssize_t got;
  while ((got = ReadSome(fd, block, sizeof block)) > 0) text.append(block, got);
  const int error = errno;
  ::close(fd);
  if (got < 0) return ErrnoStatus(error, "read", path);
  return text;
}

absl::Status WriteStringToFile(absl::string_view path, absl::string_view text,
                               mode_t mode) {
  const std::string name(path);
  const int fd =
      ::open(name.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return ErrnoStatus(errno, "create", path);
  absl::Status s = WriteFully(fd, text, path);
  if (::close(fd) != 0 && s.ok()) s = ErrnoStatus(errno, "close", path);
  return s;
}

}  // namespace ps
