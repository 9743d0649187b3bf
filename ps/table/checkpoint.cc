#include "ps/table/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>

#include "absl/base/config.h"
#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "proto/checkpoint.pb.h"
#include "ps/base/file_io.h"

namespace ps {
namespace {

static_assert(ABSL_IS_LITTLE_ENDIAN, "the file format stores little-endian");

constexpr char kMagic[] = "SPSCKPT1";
constexpr size_t kMagicBytes = 8;
constexpr char kEndMark[] = "END";
constexpr size_t kBlockHeaderBytes = 12;  // u64 length, u32 CRC
// 2: ConsistencyConfig's mode and straggler policy are enums (fields 6
// and 7); format 1 had them as strings in fields 1 and 5.
constexpr uint32_t kFormatVersion = 2;

uint32_t Crc(const char* data, size_t n) {
  return static_cast<uint32_t>(
      crc32_z(crc32_z(0, nullptr, 0), reinterpret_cast<const Bytef*>(data), n));
}

class BlockWriter {
 public:
  BlockWriter(int fd, const std::string& path) : fd_(fd), path_(path) {}

  absl::Status Raw(const char* data, size_t n) {
    return WriteFully(fd_, absl::string_view(data, n), path_);
  }

  absl::Status Block(const char* data, size_t n) {
    char header[kBlockHeaderBytes];
    const uint64_t length = n;
    const uint32_t crc = Crc(data, n);
    std::memcpy(header, &length, sizeof length);
    std::memcpy(header + sizeof length, &crc, sizeof crc);
    if (absl::Status s = Raw(header, sizeof header); !s.ok()) return s;
    return Raw(data, n);
  }

 private:
  const int fd_;
  const std::string& path_;
};

class BlockReader {
 public:
  BlockReader(int fd, const std::string& path, uint64_t file_size)
      : fd_(fd), path_(path), file_size_(file_size) {}

  uint64_t offset() const { return offset_; }

  absl::Status Corrupt(absl::string_view what) const {
    return absl::DataLossError(
        absl::StrCat("checkpoint ", path_, " at byte ", offset_, ": ", what));
  }

  absl::Status Raw(char* out, size_t n) {
    if (n > file_size_ - offset_) return Corrupt("truncated");
    absl::StatusOr<size_t> got = PreadFully(fd_, out, n, offset_, path_);
    if (!got.ok()) return got.status();
    if (*got < n) return Corrupt("truncated");
    offset_ += n;
    return absl::OkStatus();
  }

  // Reads one block of at most `max_bytes` into `out` (resized to fit).
  absl::Status Block(size_t max_bytes, std::string* out) {
    size_t n = 0;
    return BlockInto(max_bytes, &n, [&](size_t length) {
      out->resize(length);
      return out->data();
    });
  }

  // Reads one block whose payload goes where `place(length)` says; the
  // length is checked against `max_bytes` and the file size first.
  template <typename Place>
  absl::Status BlockInto(size_t max_bytes, size_t* length, Place place) {
    const uint64_t at = offset_;
    char header[kBlockHeaderBytes];
    if (absl::Status s = Raw(header, sizeof header); !s.ok()) return s;
    uint64_t n;
    uint32_t crc;
    std::memcpy(&n, header, sizeof n);
    std::memcpy(&crc, header + sizeof n, sizeof crc);
    if (n > max_bytes || n > file_size_ - offset_) {
      offset_ = at;
      return Corrupt(absl::StrCat("block length ", n, " is impossible here"));
    }
    char* data = place(n);
    if (absl::Status s = Raw(data, n); !s.ok()) return s;
    if (Crc(data, n) != crc) {
      offset_ = at;
      return Corrupt("block checksum mismatch");
    }
    *length = n;
    return absl::OkStatus();
  }

 private:
  const int fd_;
  const std::string& path_;
  const uint64_t file_size_;
  uint64_t offset_ = 0;
};

absl::Status SyncDirectoryOf(const std::string& path) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  const int fd = ::open(dir.empty() ? "." : dir.c_str(),
                        O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "open directory", dir);
  const int rc = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  if (rc != 0) return ErrnoStatus(error, "fsync directory", dir);
  return absl::OkStatus();
}

// Format 1's string mode (field 1) and straggler policy (field 5) of a
// ConsistencyConfig, which today's parser keeps as unknown fields, as enums.
absl::Status MigrateConsistency(shardps::ConsistencyConfig* c) {
  const google::protobuf::Reflection* reflection = c->GetReflection();
  google::protobuf::UnknownFieldSet old;
  old.MergeFrom(reflection->GetUnknownFields(*c));
  reflection->MutableUnknownFields(c)->Clear();
  for (int i = 0; i < old.field_count(); ++i) {
    const google::protobuf::UnknownField& f = old.field(i);
    if (f.type() != google::protobuf::UnknownField::TYPE_LENGTH_DELIMITED) {
      return absl::DataLossError("unexpected consistency field");
    }
    const std::string& value = f.length_delimited();
    if (f.number() == 1 && (value == "sync" || value == "ssp")) {
      c->set_mode(value == "sync" ? shardps::CONSISTENCY_SYNC
                                  : shardps::CONSISTENCY_SSP);
    } else if (f.number() == 5 && value == "drop") {
      c->set_straggler_policy(shardps::STRAGGLER_DROP);
    } else if (!((f.number() == 1 && value == "async") ||
                 (f.number() == 5 && value == "fail"))) {
      return absl::DataLossError(absl::StrCat("format 1 consistency field ",
                                              f.number(), " is '", value, "'"));
    }
  }
  return absl::OkStatus();
}

absl::Status MigrateFormat1(shardps::CheckpointHeader* header) {
  for (shardps::TableCheckpoint& table : *header->mutable_tables()) {
    if (absl::Status s =
            MigrateConsistency(table.mutable_spec()->mutable_consistency());
        !s.ok()) {
      return absl::DataLossError(
          absl::StrCat("table '", table.spec().table(), "': ", s.message()));
    }
  }
  header->set_format_version(kFormatVersion);
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteCheckpoint(const std::string& path, absl::string_view job,
                             const std::vector<TableSnapshot>& tables) {
  shardps::CheckpointHeader header;
  header.set_format_version(kFormatVersion);
  header.set_job(std::string(job));
  header.set_written_unix_micros(absl::ToUnixMicros(absl::Now()));
  for (const TableSnapshot& table : tables) *header.add_tables() = table.meta;

  const std::string tmp = path + ".tmp";
  const int fd =
      ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus(errno, "create", tmp);
  bool closed = false;
  absl::Cleanup close_and_remove = [&] {
    if (!closed) ::close(fd);
    ::unlink(tmp.c_str());
  };
  BlockWriter out(fd, tmp);
  const std::string encoded = header.SerializeAsString();
  if (absl::Status s = out.Raw(kMagic, kMagicBytes); !s.ok()) return s;
  if (absl::Status s = out.Block(encoded.data(), encoded.size()); !s.ok()) {
    return s;
  }
  for (const TableSnapshot& table : tables) {
    for (const std::vector<float>& array : table.arrays) {
      const char* bytes = reinterpret_cast<const char*>(array.data());
      size_t left = array.size() * sizeof(float);
      while (left > 0) {
        const size_t n = std::min(left, kMaxBlockBytes);
        if (absl::Status s = out.Block(bytes, n); !s.ok()) return s;
        bytes += n;
        left -= n;
      }
    }
  }
  if (absl::Status s = out.Block(kEndMark, sizeof kEndMark - 1); !s.ok()) {
    return s;
  }
  if (::fsync(fd) != 0) return ErrnoStatus(errno, "fsync", tmp);
  closed = true;
  if (::close(fd) != 0) return ErrnoStatus(errno, "close", tmp);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    return ErrnoStatus(errno, absl::StrCat("rename ", tmp, " to"), path);
  }
  std::move(close_and_remove).Cancel();
  return SyncDirectoryOf(path);
}

namespace {

// The magic and the header block, in today's format.
absl::StatusOr<shardps::CheckpointHeader> ReadHeader(BlockReader& in,
                                                     const std::string& path,
                                                     uint64_t file_size) {
  char magic[kMagicBytes];
  if (absl::Status s = in.Raw(magic, sizeof magic); !s.ok()) return s;
  if (std::memcmp(magic, kMagic, kMagicBytes) != 0) {
    return absl::DataLossError(
        absl::StrCat("checkpoint ", path, " is not a shardps checkpoint"));
  }
  std::string encoded;
  if (absl::Status s = in.Block(file_size, &encoded); !s.ok()) return s;
  shardps::CheckpointHeader header;
  if (!header.ParseFromString(encoded)) return in.Corrupt("unparsable header");
  if (header.format_version() == 1) {
    if (absl::Status s = MigrateFormat1(&header); !s.ok()) {
      return in.Corrupt(s.message());
    }
  } else if (header.format_version() != kFormatVersion) {
    return in.Corrupt(absl::StrCat("format version ", header.format_version(),
                                   " is not ", kFormatVersion));
  }
  return header;
}

// One array of `keys` floats, from as many blocks as it was cut into.
absl::Status ReadArray(BlockReader& in, uint64_t keys,
                       std::vector<float>* array) {
  array->resize(keys);
  char* bytes = reinterpret_cast<char*>(array->data());
  size_t left = keys * sizeof(float);
  while (left > 0) {
    size_t n = 0;
    if (absl::Status s = in.BlockInto(std::min(left, kMaxBlockBytes), &n,
                                      [bytes](size_t) { return bytes; });
        !s.ok()) {
      return s;
    }
    if (n == 0) return in.Corrupt("empty block inside an array");
    bytes += n;
    left -= n;
  }
  return absl::OkStatus();
}

// The arrays of a sparse table (TableCheckpoint.rows): its ids, then its
// values and optimizer state arrays of rows x dim floats.
absl::Status ReadRows(BlockReader& in, uint64_t file_size,
                      shardps::TableCheckpoint meta, TableSnapshot* table) {
  const uint64_t rows = meta.rows(), dim = meta.spec().dim();
  const uint64_t floats = file_size / sizeof(float);
  // As for dense tables, the file's size bounds what this may allocate.
  if (meta.arrays() < 2 || rows > floats / 2 ||
      (rows > 0 && dim > floats / rows) ||
      (rows > 0 && meta.arrays() - 1 > floats / (rows * dim))) {
    return in.Corrupt(absl::StrCat("sparse table '", meta.spec().table(),
                                   "' claims ", meta.arrays(), " arrays of ",
                                   rows, " rows, more than the file holds"));
  }
  table->arrays.resize(meta.arrays());
  for (size_t a = 0; a < table->arrays.size(); ++a) {
    if (absl::Status s =
            ReadArray(in, a == 0 ? 2 * rows : rows * dim, &table->arrays[a]);
        !s.ok()) {
      return s;
    }
  }
  table->meta = std::move(meta);
  return absl::OkStatus();
}

// The arrays of the table `meta` describes, into *table (with the meta).
absl::Status ReadTable(BlockReader& in, uint64_t file_size,
                       shardps::TableCheckpoint meta, TableSnapshot* table) {
  const shardps::CreateTableRequest& spec = meta.spec();
  if (spec.num_shards() < 1 || spec.num_shards() > kMaxShards ||
      spec.shard_index() >= spec.num_shards()) {
    return in.Corrupt(
        absl::StrCat("table '", spec.table(), "' has an impossible shard"));
  }
  if (spec.dim() > 0) return ReadRows(in, file_size, std::move(meta), table);
  const uint64_t keys = RangePartition(spec.num_params(), spec.num_shards())
                            .shard_range(spec.shard_index())
                            .size();
  // Every array is on disk in full, so the file size bounds the memory a
  // damaged header can make this allocate.
  if (meta.arrays() == 0 || keys > file_size / sizeof(float) ||
      meta.arrays() > file_size / std::max<uint64_t>(1, keys * sizeof(float))) {
    return in.Corrupt(absl::StrCat("table '", spec.table(), "' claims ",
                                   meta.arrays(), " arrays of ", keys,
                                   " floats, more than the file holds"));
  }
  table->arrays.resize(meta.arrays());
  for (std::vector<float>& array : table->arrays) {
    if (absl::Status s = ReadArray(in, keys, &array); !s.ok()) return s;
  }
  table->meta = std::move(meta);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<Checkpoint> ReadCheckpoint(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "open", path);
  absl::Cleanup close = [fd] { ::close(fd); };
  struct stat st;
  if (::fstat(fd, &st) != 0) return ErrnoStatus(errno, "stat", path);
  const uint64_t file_size = st.st_size;
  BlockReader in(fd, path, file_size);
  absl::StatusOr<shardps::CheckpointHeader> header =
      ReadHeader(in, path, file_size);
  if (!header.ok()) return header.status();
  Checkpoint checkpoint;
  checkpoint.job = header->job();
  checkpoint.written = absl::FromUnixMicros(header->written_unix_micros());
  for (shardps::TableCheckpoint& meta : *header->mutable_tables()) {
    if (absl::Status s = ReadTable(in, file_size, std::move(meta),
                                   &checkpoint.tables.emplace_back());
        !s.ok()) {
      return s;
    }
  }
  std::string end;
  if (absl::Status s = in.Block(sizeof kEndMark - 1, &end); !s.ok()) return s;
  if (end != kEndMark) return in.Corrupt("no end mark");
  if (in.offset() != file_size) return in.Corrupt("bytes after the end mark");
  return checkpoint;
}

}  // namespace ps
