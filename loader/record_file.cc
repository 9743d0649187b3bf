#include "loader/record_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "loader/crc32c.h"
#include "ps/base/file_io.h"

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

// The 12-byte record header: length and its masked CRC.
absl::Status CheckLength(const std::string& path, uint64_t offset,
                         const char* header) {
  if (MaskCrc(Crc32c(header, 8)) != GetU32(header + 8)) {
    return absl::DataLossError(
        absl::StrCat(path, ": corrupt record length at byte offset ", offset,
                     " (CRC mismatch)"));
  }
  return absl::OkStatus();
}

// `framed` is the payload of `length` bytes followed by its masked CRC.
absl::Status CheckPayload(const std::string& path, uint64_t offset,
                          absl::string_view framed, uint64_t length) {
  if (MaskCrc(Crc32c(framed.data(), length)) !=
      GetU32(framed.data() + length)) {
    return absl::DataLossError(
        absl::StrCat(path, ": corrupt record payload at byte offset ", offset,
                     " (CRC mismatch)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<RecordWriter>> RecordWriter::Create(
    const std::string& path) {
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ps::ErrnoStatus(errno, "create", path);
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
  absl::Status s = ps::WriteFully(fd_, buffer_, path_);
  buffer_.clear();
  return s;
}

absl::Status RecordWriter::Close() {
  if (fd_ < 0) return absl::OkStatus();
  absl::Status s = Flush();
  if (::close(fd_) != 0 && s.ok()) s = ps::ErrnoStatus(errno, "close", path_);
  fd_ = -1;
  return s;
}

absl::StatusOr<std::unique_ptr<RecordReader>> RecordReader::Open(
    const std::string& name) {
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> file = OpenFile(name);
  if (!file.ok()) return file.status();
  return std::make_unique<RecordReader>(
      std::shared_ptr<const RandomAccessFile>(*std::move(file)));
}

absl::StatusOr<uint64_t> RecordReader::ReadAt(uint64_t offset,
                                              std::string* payload) const {
  char header[12];
  if (absl::Status s = ReadExactly(offset, header, 12, "record header");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckLength(path(), offset, header); !s.ok()) return s;
  const uint64_t length = GetU64(header);
  if (length > file_size()) {
    return absl::DataLossError(absl::StrCat(path(), ": record at byte offset ",
                                            offset, " claims ", length,
                                            " bytes, more than the file"));
  }
  payload->resize(length + 4);
  if (absl::Status s =
          ReadExactly(offset + 12, payload->data(), length + 4, "record");
      !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckPayload(path(), offset, *payload, length);
      !s.ok()) {
    return s;
  }
  payload->resize(length);
  return offset + kRecordOverhead + length;
}

absl::Status RecordReader::ReadRecords(
    const uint64_t* offsets, size_t n, uint64_t end, std::string* buffer,
    absl::FunctionRef<absl::Status(uint64_t, absl::string_view)> fn) const {
  if (n == 0) return absl::OkStatus();
  const uint64_t first = offsets[0];
  if (end < first) {
    return absl::InvalidArgumentError(absl::StrCat(
        path(), ": record span [", first, ", ", end, ") is inverted"));
  }
  buffer->resize(end - first);
  if (absl::Status s =
          ReadExactly(first, buffer->data(), end - first, "records");
      !s.ok()) {
    return s;
  }
  for (size_t i = 0; i < n; ++i) {
    const uint64_t offset = offsets[i];
    const uint64_t next = i + 1 < n ? offsets[i + 1] : end;
    const char* record = buffer->data() + (offset - first);
    if (next < offset + kRecordOverhead) {
      return absl::DataLossError(absl::StrCat(
          path(), ": record at byte offset ", offset, " is shorter than its ",
          kRecordOverhead, "-byte framing"));
    }
    if (absl::Status s = CheckLength(path(), offset, record); !s.ok()) {
      return s;
    }
    const uint64_t length = GetU64(record);
    if (length != next - offset - kRecordOverhead) {
      return absl::DataLossError(absl::StrCat(
          path(), ": record at byte offset ", offset, " claims ", length,
          " bytes but the index leaves ", next - offset - kRecordOverhead));
    }
    const absl::string_view framed(record + 12, length + 4);
    if (absl::Status s = CheckPayload(path(), offset, framed, length);
        !s.ok()) {
      return s;
    }
    if (absl::Status s = fn(offset, framed.substr(0, length)); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
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
  if (fd < 0) return ps::ErrnoStatus(errno, "create", path);
  absl::Status s = ps::WriteFully(fd, bytes, path);
  if (::close(fd) != 0 && s.ok()) s = ps::ErrnoStatus(errno, "close", path);
  return s;
}

absl::StatusOr<RecordIndex> ReadIndex(
    const std::string& path, std::shared_ptr<HttpConnections> connections) {
  absl::StatusOr<std::string> whole =
      ReadWholeFile(path, std::move(connections));
  if (!whole.ok()) return whole.status();
  const std::string& bytes = *whole;
  const uint64_t size = bytes.size();
  if (size < 28) {
    return absl::DataLossError(absl::StrCat(path, ": truncated index (", size,
                                            " bytes, at least 28 needed)"));
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
