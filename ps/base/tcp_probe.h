// Whether anything listens at host:port: a replica uses it to tell a dead
// primary (its port refuses connections at once) from a slow one, without
// waiting for the primary's lease to run out. Only a refusal counts as
// dead; a host that does not answer at all may be partitioned, not dead.
//
// Thread-safety: a free function without shared state.
#ifndef SHARDPS_PS_BASE_TCP_PROBE_H_
#define SHARDPS_PS_BASE_TCP_PROBE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ps {

enum class ProbeResult {
  kListening,  // the connection was accepted
  kRefused,    // ECONNREFUSED: nothing listens there
  kNoAnswer,   // timed out, unreachable, or another error
};

// Connects to `address` ("ipv4:port") within `timeout` and hangs up.
// INVALID_ARGUMENT when the address is not an IPv4 address and port.
absl::StatusOr<ProbeResult> ProbeTcp(const std::string& address,
                                     absl::Duration timeout);

}  // namespace ps

#endif  // SHARDPS_PS_BASE_TCP_PROBE_H_
