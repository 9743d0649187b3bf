// Record files: TFRecord framing, so standard tools can read the shards.
// Each record is
//   uint64 length | uint32 masked CRC-32C of length | payload | uint32 masked
//   CRC-32C of payload
// all little-endian. Beside each record file sits an index (record offsets)
// so that a reader can seek to any record and a partitioner can count
// records without reading data.
//
// Every error names the file and, for bad data, the byte offset.
//
// Thread-safety: RecordWriter is for one thread. RecordReader's reads are
// safe to call from several threads at once.
#ifndef SHARDPS_LOADER_RECORD_FILE_H_
#define SHARDPS_LOADER_RECORD_FILE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "loader/random_access_file.h"

namespace loader {

// Bytes of framing around each payload.
constexpr uint64_t kRecordOverhead = 8 + 4 + 4;

class RecordWriter {
 public:
  // Creates (truncates) `path`.
  static absl::StatusOr<std::unique_ptr<RecordWriter>> Create(
      const std::string& path);
  RecordWriter(const RecordWriter&) = delete;
  RecordWriter& operator=(const RecordWriter&) = delete;
  ~RecordWriter();

  absl::Status Append(absl::string_view payload);
  // Flushes and closes; the file is complete only once this returns OK.
  absl::Status Close();

  // Where each appended record starts, and the file's size so far.
  const std::vector<uint64_t>& offsets() const { return offsets_; }
  uint64_t size() const { return size_; }

 private:
  RecordWriter(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  absl::Status Flush();

  const std::string path_;
  int fd_;
  std::string buffer_;  // pending bytes, written in large blocks
  std::vector<uint64_t> offsets_;
  uint64_t size_ = 0;
};

class RecordReader {
 public:
  // A local path or an http:// URL (loader/random_access_file.h). NOT_FOUND
  // names a missing file.
  static absl::StatusOr<std::unique_ptr<RecordReader>> Open(
      const std::string& name);
  // Reads an already opened file, which the reader shares.
  explicit RecordReader(std::shared_ptr<const RandomAccessFile> file)
      : file_(std::move(file)) {}
  RecordReader(const RecordReader&) = delete;
  RecordReader& operator=(const RecordReader&) = delete;

  const std::string& path() const { return file_->name(); }
  uint64_t file_size() const { return file_->size(); }

  // Reads the record starting at `offset` into *payload (reusing its
  // capacity) and returns the offset just past it. DATA_LOSS, naming the file
  // and offset, for a truncated record or a CRC mismatch.
  absl::StatusOr<uint64_t> ReadAt(uint64_t offset, std::string* payload) const;

  // Reads the records that start at offsets[0, n), which are consecutive and
  // end at `end`, with one read into *buffer, and calls fn(offset, payload)
  // for each in order. Checks framing and CRCs like ReadAt; the first error
  // (from the data or from fn) stops the scan and is returned.
  absl::Status ReadRecords(
      const uint64_t* offsets, size_t n, uint64_t end, std::string* buffer,
      absl::FunctionRef<absl::Status(uint64_t, absl::string_view)> fn) const;

  // Reads bytes [offset, offset + n) of the file; DATA_LOSS naming `what`
  // and the offset when the file is shorter.
  absl::Status ReadExactly(uint64_t offset, void* out, uint64_t n,
                           absl::string_view what) const {
    return file_->ReadExactly(offset, out, n, what);
  }

 private:
  const std::shared_ptr<const RandomAccessFile> file_;
};

// The index of a record file: its record offsets and the size of the file
// they index, framed by a magic number and a CRC.
absl::Status WriteIndex(const std::string& path,
                        const std::vector<uint64_t>& offsets,
                        uint64_t data_size);

struct RecordIndex {
  std::vector<uint64_t> offsets;
  uint64_t data_size = 0;
};
// `name` is a local path or an http:// URL. DATA_LOSS naming the file for a
// wrong magic number, a truncated index, a CRC mismatch or offsets that are
// not increasing inside the data.
absl::StatusOr<RecordIndex> ReadIndex(
    const std::string& name,
    std::shared_ptr<HttpConnections> connections = nullptr);

}  // namespace loader

#endif  // SHARDPS_LOADER_RECORD_FILE_H_
