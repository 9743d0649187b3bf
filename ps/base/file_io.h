// POSIX file plumbing as statuses, shared by every component that touches
// files: one way to turn errno into an absl::Status, and EINTR-safe loops
// for the calls that may do less than asked.
//
// Every error names the path and the system's reason, with the code
// absl::ErrnoToStatusCode gives the errno: NOT_FOUND for ENOENT,
// PERMISSION_DENIED for EACCES, RESOURCE_EXHAUSTED for ENOSPC, and so on.
//
// Thread-safety: free functions without shared state.
#ifndef SHARDPS_PS_BASE_FILE_IO_H_
#define SHARDPS_PS_BASE_FILE_IO_H_

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ps {

// "cannot WHAT PATH: <strerror(error)>" with the code of `error` (an errno
// value, read by the caller right after the failed call).
absl::Status ErrnoStatus(int error, absl::string_view what,
                         absl::string_view path);

// Writes all of `data` to `fd`, resuming after short writes and EINTR.
// `path` names the file in errors.
absl::Status WriteFully(int fd, absl::string_view data, absl::string_view path);

// Reads bytes [offset, offset + n) of `fd` into `out`, resuming after short
// reads and EINTR. Returns how many bytes it read: fewer than n only at the
// end of the file.
absl::StatusOr<size_t> PreadFully(int fd, char* out, size_t n, uint64_t offset,
                                  absl::string_view path);

// read(2) that retries EINTR: bytes read, 0 at the end, -1 with errno set.
ssize_t ReadSome(int fd, char* out, size_t n);

// Creates directory `path` and every missing parent (as mkdir -p); OK when
// it exists already. An error names the path and why (a parent that is a
// file, no permission, ...).
absl::Status CreateDirectories(absl::string_view path);

// The whole content of a local file.
absl::StatusOr<std::string> ReadFileToString(absl::string_view path);

// Writes `text` to `path` (created with `mode`, or truncated), in full.
absl::Status WriteStringToFile(absl::string_view path, absl::string_view text,
                               mode_t mode = 0644);

}  // namespace ps

#endif  // SHARDPS_PS_BASE_FILE_IO_H_
