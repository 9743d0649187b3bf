// The port file is how a process that started a server on port 0 learns the
// port it got: the server writes "PORT\n" to a temporary name and renames it
// into place, so a reader never sees a partial file.
//
// Thread-safety: free functions without shared state.
#ifndef SHARDPS_PS_BASE_PORT_FILE_H_
#define SHARDPS_PS_BASE_PORT_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ps {

absl::Status WritePortFile(const std::string& path, int port);

// NOT_FOUND while the file does not exist yet; INVALID_ARGUMENT (naming the
// file) when it does not hold a port; other errors name the file and why.
absl::StatusOr<int> ReadPortFile(const std::string& path);

}  // namespace ps

#endif  // SHARDPS_PS_BASE_PORT_FILE_H_
