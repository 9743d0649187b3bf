// The shardps wire protocol's version. A client and a server tell each
// other theirs (and their builds, ps/base/build_version.h) in Stats, which
// a client calls once each server is ready: two builds that cannot speak
// to each other then fail at once, naming both versions, rather than later
// with errors that look like bugs (a field one side needs and the other
// never sends).
//
// Thread-safety: constants and a pure function.
#ifndef SHARDPS_PS_WIRE_PROTOCOL_VERSION_H_
#define SHARDPS_PS_WIRE_PROTOCOL_VERSION_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace ps {

// Raised when a change to proto/shardps.proto means a peer of the previous
// version would misread it (a field removed or retyped, a new field a
// peer must not ignore); a new optional field needs no new version.
inline constexpr uint32_t kProtocolVersion = 1;
// The oldest version this build still speaks.
inline constexpr uint32_t kOldestProtocolVersion = 1;

// OK when a peer that speaks wire protocol `peer_protocol` (built as
// `peer_build`) can talk to this build. 0 means the peer did not say (a
// client written from the proto alone): it is taken to speak this
// version. Otherwise FAILED_PRECONDITION naming `peer` ("the client",
// "shard 2 at host:7070") and both builds and protocol versions.
absl::Status CheckPeerProtocol(absl::string_view peer, uint32_t peer_protocol,
                               absl::string_view peer_build);

}  // namespace ps

#endif  // SHARDPS_PS_WIRE_PROTOCOL_VERSION_H_
