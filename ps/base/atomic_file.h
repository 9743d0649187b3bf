// Writes a whole file so that no reader (and no crash) ever sees a part of
// it: the text goes to PATH.tmp, which is then renamed over PATH. Not
// durable across a power cut (no fsync); checkpoints, which must be, do
// their own (ps/table/checkpoint.h).
//
// Thread-safety: free function; two writers of one path at once leave one
// of the two texts whole.
#ifndef SHARDPS_PS_BASE_ATOMIC_FILE_H_
#define SHARDPS_PS_BASE_ATOMIC_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ps {

// Errors name the file and the system's reason (ps/base/file_io.h); the
// temporary file is removed when the rename fails.
absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view text);

}  // namespace ps

#endif  // SHARDPS_PS_BASE_ATOMIC_FILE_H_
