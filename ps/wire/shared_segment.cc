#include "ps/wire/shared_segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "ps/base/file_io.h"

namespace ps {
namespace {

constexpr absl::string_view kNamePrefix = "/shardps-";
constexpr size_t kNameHexDigits = 32;

absl::Status RandomBytes(char* out, size_t n) {
  while (n > 0) {
    const ssize_t got = getrandom(out, n, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "draw random bytes for", "shared memory");
    }
    out += got;
    n -= static_cast<size_t>(got);
  }
  return absl::OkStatus();
}

bool IsSegmentName(absl::string_view name) {
  if (!absl::StartsWith(name, kNamePrefix)) return false;
  name.remove_prefix(kNamePrefix.size());
  if (name.size() != kNameHexDigits) return false;
  for (char c : name) {
    if (!absl::ascii_isxdigit(c) || absl::ascii_isupper(c)) return false;
  }
  return true;
}

// Maps all of `fd` (`bytes` long) shared, read and write, its page tables
// filled now rather than by a fault at each page's first use in a call.
absl::StatusOr<char*> Map(int fd, size_t bytes, absl::string_view name) {
  void* data = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_POPULATE, fd, 0);
  if (data == MAP_FAILED) return ErrnoStatus(errno, "map", name);
  return static_cast<char*>(data);
}

// Closes a descriptor when it goes out of scope.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() { close(fd_); }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;

 private:
  const int fd_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<SharedSegment>> SharedSegment::Create(
    size_t bytes) {
  if (bytes < kHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a shared memory segment needs at least ", kHeaderBytes, " bytes"));
  }
  char raw[kNameHexDigits / 2];
  if (absl::Status s = RandomBytes(raw, sizeof(raw)); !s.ok()) return s;
  std::string name = absl::StrCat(
      kNamePrefix, absl::BytesToHexString(absl::string_view(raw, sizeof(raw))));
  const int fd = shm_open(name.c_str(), O_RDWR | O_CREAT | O_EXCL, 0600);
  if (fd < 0) return ErrnoStatus(errno, "create shared memory", name);
  FdCloser closer(fd);
  // posix_fallocate returns the error rather than setting errno.
  if (fchmod(fd, 0600) != 0 || ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    const int error = errno;
    shm_unlink(name.c_str());
    return ErrnoStatus(error, "size shared memory", name);
  }
  if (const int error = posix_fallocate(fd, 0, static_cast<off_t>(bytes));
      error != 0) {
    shm_unlink(name.c_str());
    return ErrnoStatus(error, "reserve shared memory (is /dev/shm full?)",
                       name);
  }
  absl::StatusOr<char*> data = Map(fd, bytes, name);
  if (!data.ok()) {
    shm_unlink(name.c_str());
    return data.status();
  }
  if (absl::Status s = RandomBytes(*data, kNonceBytes); !s.ok()) {
    munmap(*data, bytes);
    shm_unlink(name.c_str());
    return s;
  }
  return std::unique_ptr<SharedSegment>(
      new SharedSegment(std::move(name), *data, bytes));
}

absl::StatusOr<std::unique_ptr<SharedSegment>> SharedSegment::Open(
    absl::string_view name, size_t bytes, absl::string_view nonce) {
  if (!IsSegmentName(name)) {
    // Echoed only when short: a hostile name may be any size.
    const std::string shown =
        name.size() <= 64 ? absl::StrCat("'", absl::CHexEscape(name), "'")
                          : absl::StrCat("of ", name.size(), " bytes");
    return absl::InvalidArgumentError(
        absl::StrCat("shared memory name ", shown, " is not ", kNamePrefix,
                     " and ", kNameHexDigits, " lower-case hex digits"));
  }
  if (bytes < kHeaderBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("shared memory of ", bytes, " bytes is smaller than its ",
                     kHeaderBytes, "-byte header"));
  }
  if (nonce.size() != kNonceBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shared memory nonce has ", nonce.size(), " bytes, not ", kNonceBytes));
  }
  const std::string path(name);
  // O_NOFOLLOW: the name must be the object itself, not a link elsewhere.
  const int fd = shm_open(path.c_str(), O_RDWR | O_NOFOLLOW, 0);
  if (fd < 0) return ErrnoStatus(errno, "open shared memory", path);
  FdCloser closer(fd);
  struct stat st;
  if (fstat(fd, &st) != 0) return ErrnoStatus(errno, "stat", path);
  if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
      (st.st_mode & 0777) != 0600) {
    return absl::PermissionDeniedError(
        absl::StrCat("shared memory ", path,
                     " is not a mode-0600 object of user ", geteuid()));
  }
  if (static_cast<uint64_t>(st.st_size) != bytes) {
    return absl::FailedPreconditionError(absl::StrCat(
        "shared memory ", path, " has ", st.st_size, " bytes, not ", bytes));
  }
  absl::StatusOr<char*> data = Map(fd, bytes, path);
  if (!data.ok()) return data.status();
  std::unique_ptr<SharedSegment> segment(new SharedSegment(path, *data, bytes));
  if (segment->nonce() != nonce) {
    return absl::FailedPreconditionError(absl::StrCat(
        "shared memory ", path, " does not hold the client's nonce"));
  }
  segment->Unlink();
  return segment;
}

SharedSegment::~SharedSegment() { munmap(data_, size_); }

absl::string_view SharedSegment::nonce() const {
  return absl::string_view(data_, kNonceBytes);
}

void SharedSegment::Unlink() { shm_unlink(name_.c_str()); }

}  // namespace ps
