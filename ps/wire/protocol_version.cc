#include "ps/wire/protocol_version.h"

#include "absl/strings/str_cat.h"
#include "ps/base/build_version.h"

namespace ps {

absl::Status CheckPeerProtocol(absl::string_view peer, uint32_t peer_protocol,
                               absl::string_view peer_build) {
  if (peer_protocol == 0 || (peer_protocol >= kOldestProtocolVersion &&
                             peer_protocol <= kProtocolVersion)) {
    return absl::OkStatus();
  }
  const std::string accepted =
      kOldestProtocolVersion == kProtocolVersion
          ? absl::StrCat("wire protocol ", kProtocolVersion)
          : absl::StrCat("wire protocols ", kOldestProtocolVersion, " to ",
                         kProtocolVersion);
  return absl::FailedPreconditionError(absl::StrCat(
      peer, " (", peer_build.empty() ? "build not stated" : peer_build,
      ") speaks wire protocol ", peer_protocol, "; this side (", BuildVersion(),
      ") speaks ", accepted,
      ": run one shardps release on servers and workers"));
}

}  // namespace ps
