#include "loader/random_access_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "ps/base/file_io.h"

namespace loader {
namespace {

class LocalFile final : public RandomAccessFile {
 public:
  LocalFile(std::string path, int fd, uint64_t size)
      : RandomAccessFile(std::move(path), size), fd_(fd) {}
  LocalFile(const LocalFile&) = delete;
  LocalFile& operator=(const LocalFile&) = delete;
  ~LocalFile() override { ::close(fd_); }

 private:
  absl::Status ReadInside(uint64_t offset, char* out,
                          uint64_t n) const override {
    absl::StatusOr<size_t> got = ps::PreadFully(fd_, out, n, offset, name());
    if (!got.ok()) return got.status();
    if (*got < n) {
      return absl::DataLossError(absl::StrCat(
          name(), ": file shrank while reading byte offset ", offset + *got));
    }
    return absl::OkStatus();
  }

  const int fd_;
};

}  // namespace

absl::Status RandomAccessFile::ReadExactly(uint64_t offset, void* out,
                                           uint64_t n,
                                           absl::string_view what) const {
  if (offset > size_ || n > size_ - offset) {
    return absl::DataLossError(
        absl::StrCat(name_, ": truncated ", what, " at byte offset ", offset,
                     ": needs ", n, " bytes, the file ends at ", size_));
  }
  if (n == 0) return absl::OkStatus();
  return ReadInside(offset, static_cast<char*>(out), n);
}

bool IsUrl(absl::string_view name) {
  return absl::StartsWith(name, "http://") ||
         absl::StartsWith(name, "https://");
}

absl::StatusOr<std::unique_ptr<RandomAccessFile>> OpenFile(
    const std::string& name, std::shared_ptr<HttpConnections> connections) {
  if (!IsUrl(name)) return OpenLocalFile(name);
  if (connections == nullptr) connections = NewHttpConnections();
  return OpenHttpFile(name, std::move(connections));
}

absl::StatusOr<std::unique_ptr<RandomAccessFile>> OpenLocalFile(
    const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ps::ErrnoStatus(errno, "open", path);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    absl::Status s = ps::ErrnoStatus(errno, "stat", path);
    ::close(fd);
    return s;
  }
  return std::make_unique<LocalFile>(path, fd,
                                     static_cast<uint64_t>(st.st_size));
}

absl::StatusOr<std::string> ReadWholeFile(
    const std::string& name, std::shared_ptr<HttpConnections> connections) {
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> file =
      OpenFile(name, std::move(connections));
  if (!file.ok()) return file.status();
  std::string bytes((*file)->size(), '\0');
  if (absl::Status s =
          (*file)->ReadExactly(0, bytes.data(), bytes.size(), "file");
      !s.ok()) {
    return s;
  }
  return bytes;
}

}  // namespace loader
