// Parsing of the server list a worker is given, in either form of DESIGN.md:
// an explicit list "h1:p1,h2:p2" or a pattern with "{i}" plus a count
// ("shardps-server-{i}.shardps:7070" with 4 -> servers 0..3, as a
// Kubernetes StatefulSet names its pods).
//
// Thread-safety: a pure function.
#ifndef SHARDPS_PS_CLIENT_SERVER_ADDRS_H_
#define SHARDPS_PS_CLIENT_SERVER_ADDRS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ps {

// `count` is required (> 0) with a pattern; with an explicit list it is
// optional (0) and, when given, must match the list's length. Every address
// must be "host:port" (IPv6 as "[addr]:port") with a port in 1..65535.
// INVALID_ARGUMENT names the offending entry.
absl::StatusOr<std::vector<std::string>> ParseServerAddrs(
    absl::string_view addrs, int count);

struct HostPort {
  std::string host;  // an IPv6 address without its brackets
  int port = 0;
};

// One address of that list, split; INVALID_ARGUMENT as ParseServerAddrs.
absl::StatusOr<HostPort> SplitServerAddress(absl::string_view addr);

}  // namespace ps

#endif  // SHARDPS_PS_CLIENT_SERVER_ADDRS_H_
