// A TCP port nothing listens on right now, for programs that must be told
// their port (etcd) rather than report the one they bound (shardps-server
// does that through a port file). Another process may take it before it is
// used; callers start what needs it at once.
//
// Thread-safety: a free function without shared state.
#ifndef SHARDPS_PS_BASE_FREE_PORT_H_
#define SHARDPS_PS_BASE_FREE_PORT_H_

#include <string>

#include "absl/status/statusor.h"

namespace ps {

// The kernel's pick for port 0 on `ipv4_host` (a dotted address).
absl::StatusOr<int> PickFreePort(const std::string& ipv4_host);

}  // namespace ps

#endif  // SHARDPS_PS_BASE_FREE_PORT_H_
