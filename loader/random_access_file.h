// RandomAccessFile: read-only bytes at any offset, from a local file or an
// http:// URL, so every reader in loader/ works the same on local disks and
// on shared storage behind a web server (the emulated cluster's storage
// host). HTTP files are read with range requests over kept-alive
// connections.
//
// Every error names the file or URL, and the offset for a short read.
//
// Thread-safety: Read may be called from several threads at once.
#ifndef SHARDPS_LOADER_RANDOM_ACCESS_FILE_H_
#define SHARDPS_LOADER_RANDOM_ACCESS_FILE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace loader {

class RandomAccessFile {
 public:
  virtual ~RandomAccessFile() = default;

  const std::string& name() const { return name_; }
  uint64_t size() const { return size_; }

  // Reads bytes [offset, offset + n) into out. DATA_LOSS naming `what`, the
  // file and the offset when the file is shorter.
  absl::Status ReadExactly(uint64_t offset, void* out, uint64_t n,
                           absl::string_view what) const;

 protected:
  RandomAccessFile(std::string name, uint64_t size)
      : name_(std::move(name)), size_(size) {}

  // Reads exactly [offset, offset + n), which lies inside the file.
  virtual absl::Status ReadInside(uint64_t offset, char* out,
                                  uint64_t n) const = 0;

 private:
  const std::string name_;
  const uint64_t size_;
};

// True for names that OpenFile reads over HTTP.
bool IsUrl(absl::string_view name);

// A cache of kept-alive HTTP connections that the files opened with it
// share (thread-safe), so that opening a data set's many small files (the
// manifest, the indexes) does not open a connection per file.
class HttpConnections;
std::shared_ptr<HttpConnections> NewHttpConnections();

// Opens a local path or an http:// URL (with `connections` when given, else
// with its own). NOT_FOUND for a missing file (or HTTP 404), UNAVAILABLE
// for an unreachable host.
absl::StatusOr<std::unique_ptr<RandomAccessFile>> OpenFile(
    const std::string& name,
    std::shared_ptr<HttpConnections> connections = nullptr);
absl::StatusOr<std::unique_ptr<RandomAccessFile>> OpenLocalFile(
    const std::string& path);
absl::StatusOr<std::unique_ptr<RandomAccessFile>> OpenHttpFile(
    const std::string& url, std::shared_ptr<HttpConnections> connections);

// The whole content of a local file or URL.
absl::StatusOr<std::string> ReadWholeFile(
    const std::string& name,
    std::shared_ptr<HttpConnections> connections = nullptr);

}  // namespace loader

#endif  // SHARDPS_LOADER_RANDOM_ACCESS_FILE_H_
