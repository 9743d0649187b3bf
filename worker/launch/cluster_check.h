// ClusterCheck: checks every server of a cluster once, as a worker with the
// same flags would reach it, and says per server what is wrong: the address
// resolves, a TCP connection is accepted, the TLS handshake and health check
// succeed, the token and job are accepted, the wire protocol matches
// (ps/wire/protocol_version.h), and every table's shard on it is the one
// RangePartition gives that server. shardps-doctor and shardps-launch
// --check print its report before a run, so that a misconfigured cluster
// fails in seconds with a cause instead of hanging the workers.
//
// Thread-safety: CheckCluster is a free function; it checks the servers on
// threads of its own and returns when all are done.
#ifndef SHARDPS_WORKER_LAUNCH_CLUSTER_CHECK_H_
#define SHARDPS_WORKER_LAUNCH_CLUSTER_CHECK_H_

#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/summary.pb.h"
#include "ps/wire/security.h"

namespace worker {

struct ClusterCheckOptions {
  std::vector<std::string> server_addrs;  // shard order, as workers get them
  std::string job = "default";
  ps::TlsFiles tls;
  std::string auth_token;
  // Each server's checks end within this; a server that has not answered
  // by then is reported with the cause of its last failed attempt.
  absl::Duration timeout = absl::Seconds(5);
};

// Checks all servers in parallel; report.ok() when every one is ready and
// the tables agree. An error only for options no client could use (an
// unreadable TLS file, an address that is not host:port).
absl::StatusOr<shardps::ClusterCheckReport> CheckCluster(
    const ClusterCheckOptions& options);

// Whether every server that is not ready failed where a server still
// starting fails (resolve: a Kubernetes pod's name exists once the pod
// does; connect; handshake), so that checking again later may pass. A
// refused job, token or protocol, or inconsistent tables, will not mend.
bool WorthWaitingFor(const shardps::ClusterCheckReport& report);

// CheckCluster, then again every 2 s while WorthWaitingFor and `give_up`
// is more than 2 s away, telling `waiting` of each report it will retry.
// For a check that may start with the servers (a pre-flight step).
absl::StatusOr<shardps::ClusterCheckReport> CheckClusterUntil(
    const ClusterCheckOptions& options, absl::Time give_up,
    absl::FunctionRef<void(const shardps::ClusterCheckReport&)> waiting);

// "shard 3 at h:7073: connection refused ..." of the first server not
// ready; empty when all are.
std::string FirstProblem(const shardps::ClusterCheckReport& report);

// One line per server and a last line with the verdict, for a terminal.
std::string FormatCheckReport(const shardps::ClusterCheckReport& report);

}  // namespace worker

#endif  // SHARDPS_WORKER_LAUNCH_CLUSTER_CHECK_H_
