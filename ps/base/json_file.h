// Summaries on disk: protobuf messages (proto/summary.proto) as JSON in the
// proto3 mapping with the .proto's field names, so that Python and jq read
// them directly.
//
// Thread-safety: free functions; writes of one path replace it whole.
#ifndef SHARDPS_PS_BASE_JSON_FILE_H_
#define SHARDPS_PS_BASE_JSON_FILE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "google/protobuf/message.h"

namespace ps {

// One line of JSON, every field present (zeros too).
absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message);
// Writes ToJson + newline to `path`, replacing it atomically (through
// `path`.tmp and a rename).
absl::Status WriteJsonFile(const google::protobuf::Message& message,
                           const std::string& path);
// Parses `path` into *message; errors name the file. Unknown fields are
// ignored so that older readers accept newer files.
absl::Status ReadJsonFile(const std::string& path,
                          google::protobuf::Message* message);

}  // namespace ps

#endif  // SHARDPS_PS_BASE_JSON_FILE_H_
