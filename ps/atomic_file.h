// Writes a whole file so that no reader (and no crash) ever sees a part of
// it: the text goes to PATH.tmp, which is then renamed over PATH. Not
// durable across a power cut (no fsync); checkpoints, which must be, do
// their own (ps/checkpoint.h).
#ifndef SHARDPS_PS_ATOMIC_FILE_H_
#define SHARDPS_PS_ATOMIC_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ps {

// UNAVAILABLE names the file and the system's reason when it cannot be
// written or renamed.
absl::Status WriteFileAtomically(const std::string& path,
                                 absl::string_view text);

}  // namespace ps

#endif  // SHARDPS_PS_ATOMIC_FILE_H_
