#include "loader/record_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "loader/crc32c.h"

namespace loader {
namespace {

constexpr char kIndexMagic[8] = {'S', 'P', 'S', 'I', 'D', 'X', '0', '1'};
constexpr size_t kWriteBlock = 1 << 20;

void PutU64(std::string* out, uint64_t v) {
  char b[8];
  std::memcpy(b, &v, 8);  // little-endian hosts only (x86-64, arm64)
  out->append(b, 8);
}
void PutU32(std::string* out, uint32_t v) {
  char b[4];
  std::memcpy(b, &v, 4);
  out->append(b, 4);
}
uint64_t GetU64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
uint32_t GetU32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

absl::Status ErrnoError(absl::string_view what, const std::string& path) {
  const int e = errno;
  const std::string message =
      absl::StrCat("cannot ", what, " ", path, ": ", std::strerror(e));
  return e == ENOENT ? absl::NotFoundError(message)
                     : absl::UnavailableError(message);
}

absl::Status WriteAll(int fd, const char* data, size_t n,
                      const std::string& path) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoError("write", path);
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<RecordWriter>> RecordWriter::Create(
    const std::string& path) {
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("create", path);
  return std::unique_ptr<RecordWriter>(new RecordWriter(path, fd));
}

RecordWriter::~RecordWriter() {
  if (fd_ >= 0) ::close(fd_);
}

absl::Status RecordWriter::Append(absl::string_view payload) {
  offsets_.push_back(size_);
  std::string length;
  PutU64(&length, payload.size());
  buffer_ += length;
  PutU32(&buffer_, MaskCrc(Crc32c(length.data(), length.size())));
  buffer_.append(payload.data(), payload.size());
  PutU32(&buffer_, MaskCrc(Crc32c(payload.data(), payload.size())));
  size_ += kRecordOverhead + payload.size();
  return buffer_.size() >= kWriteBlock ? Flush() : absl::OkStatus();
}

absl::Status RecordWriter::Flush() {
  absl::Status s = WriteAll(fd_, buffer_.data(), buffer_.size(), path_);
  buffer_.clear();
  return s;
}

absl::Status RecordWriter::Close() {
  if (fd_ < 0) return absl::OkStatus();
  absl::Status s = Flush();
  if (::close(fd_) != 0 && s.ok()) s = ErrnoError("close", path_);
  fd_ = -1;
  return s;
}

absl::StatusOr<std::unique_ptr<RecordReader>> RecordReader::Open(
    const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError("open", path);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    absl::Status s = ErrnoError("stat", path);
    ::close(fd);
    return s;
  }
  return std::unique_ptr<RecordReader>(
      new RecordReader(path, fd, static_cast<uint64_t>(st.st_size)));
}

RecordReader::~RecordReader() { ::close(fd_); }

absl::Status RecordReader::ReadExactly(uint64_t offset, void* out, uint64_t n,
                                       absl::string_view what) const {
  if (offset + n > file_size_) {
    return absl::DataLossError(
        absl::StrCat(path_, ": truncated ", what, " at byte offset ", offset,
                     ": needs ", n, " bytes, the file ends at ", file_size_));
  }
  char* dst = static_cast<char*>(out);
  while (n > 0) {
    const ssize_t r = ::pread(fd_, dst, n, static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      return r == 0 ? absl::DataLossError(absl::StrCat(
                          path_, ": file shrank while reading byte offset ",
                          offset))
                    : ErrnoError("read", path_);
    }
    dst += r;
    offset += static_cast<uint64_t>(r);
    n -= static_cast<uint64_t>(r);
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> RecordReader::ReadAt(uint64_t offset,
                                              std::string* payload) const {
  char header[12];
  if (absl::Status s = ReadExactly(offset, header, 12, "record header");
      !s.ok()) {
    return s;
  }
  if (MaskCrc(Crc32c(header, 8)) != GetU32(header + 8)) {
    return absl::DataLossError(
        absl::StrCat(path_, ": corrupt record length at byte offset ", offset,
                     " (CRC mismatch)"));
  }
  const uint64_t length = GetU64(header);
  if (length > file_size_) {
    return absl::DataLossError(absl::StrCat(path_, ": record at byte offset ",
                                            offset, " claims ", length,
                                            " bytes, more than the file"));
  }
  payload->resize(length + 4);
  if (absl::Status s =
          ReadExactly(offset + 12, payload->data(), length + 4, "record");
      !s.ok()) {
    return s;
  }
  const uint32_t stored = GetU32(payload->data() + length);
  payload->resize(length);
  if (MaskCrc(Crc32c(payload->data(), length)) != stored) {
    return absl::DataLossError(
        absl::StrCat(path_, ": corrupt record payload at byte offset ", offset,
                     " (CRC mismatch)"));
  }
  return offset + kRecordOverhead + length;
}

absl::Status WriteIndex(const std::string& path,
                        const std::vector<uint64_t>& offsets,
                        uint64_t data_size) {
  std::string bytes(kIndexMagic, sizeof kIndexMagic);
  PutU64(&bytes, offsets.size());
  PutU64(&bytes, data_size);
  for (uint64_t o : offsets) PutU64(&bytes, o);
  PutU32(&bytes, MaskCrc(Crc32c(bytes.data(), bytes.size())));
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoError("create", path);
  absl::Status s = WriteAll(fd, bytes.data(), bytes.size(), path);
  if (::close(fd) != 0 && s.ok()) s = ErrnoError("close", path);
  return s;
}

absl::StatusOr<RecordIndex> ReadIndex(const std::string& path) {
  absl::StatusOr<std::unique_ptr<RecordReader>> file = RecordReader::Open(path);
  if (!file.ok()) return file.status();
  const uint64_t size = (*file)->file_size();
  std::string bytes(size, '\0');
  if (size < 28) {
    return absl::DataLossError(absl::StrCat(path, ": truncated index (", size,
                                            " bytes, at least 28 needed)"));
  }
  if (absl::Status s = (*file)->ReadExactly(0, bytes.data(), size, "index");
      !s.ok()) {
    return s;
  }
  if (std::memcmp(bytes.data(), kIndexMagic, sizeof kIndexMagic) != 0) {
    return absl::DataLossError(
        absl::StrCat(path, ": wrong magic at byte offset 0 (not an index)"));
  }
  const uint64_t count = GetU64(&bytes[8]);
  if (count > (size - 28) / 8 || size != 28 + 8 * count) {
    return absl::DataLossError(absl::StrCat(
        path, ": index of ", size, " bytes cannot hold ", count, " offsets"));
  }
  if (MaskCrc(Crc32c(bytes.data(), size - 4)) != GetU32(&bytes[size - 4])) {
    return absl::DataLossError(
        absl::StrCat(path, ": corrupt index (CRC mismatch)"));
  }
  RecordIndex index;
  index.data_size = GetU64(&bytes[16]);
  index.offsets.resize(count);
  for (uint64_t i = 0; i < count; ++i) {
    index.offsets[i] = GetU64(&bytes[24 + 8 * i]);
    if ((i > 0 && index.offsets[i] <= index.offsets[i - 1]) ||
        index.offsets[i] + kRecordOverhead > index.data_size) {
      return absl::DataLossError(absl::StrCat(
          path, ": offset ", i, " (", index.offsets[i],
          ") is out of order or past the data's end at byte offset ",
          24 + 8 * i));
    }
  }
  return index;
}

}  // namespace loader
