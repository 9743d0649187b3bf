#include "ps/base/build_version.h"

namespace ps {

absl::string_view BuildVersion() { return "shardps " SHARDPS_VERSION; }

}  // namespace ps
