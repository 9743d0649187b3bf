// Which shardps release a binary was built from, as clients and servers
// tell each other (ps/wire/protocol_version.h) and --version prints.
//
// Thread-safety: a constant.
#ifndef SHARDPS_PS_BASE_BUILD_VERSION_H_
#define SHARDPS_PS_BASE_BUILD_VERSION_H_

#include "absl/strings/string_view.h"

namespace ps {

// "shardps 0.21.0": the project version of the top-level CMakeLists.txt.
absl::string_view BuildVersion();

}  // namespace ps

#endif  // SHARDPS_PS_BASE_BUILD_VERSION_H_
