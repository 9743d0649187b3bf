// EtcdProcess runs a single-member etcd (Debian's etcd-server) as a child
// process for a job's membership: what shardps-launch --replicas starts and
// what the tests use. Its data directory is the caller's; a restart on the
// same directory and ports keeps the keys and leases (etcd renews the
// leases' TTLs when it starts).
//
// Raft ticks are shortened (heartbeat 50 ms, election 250 ms) so that a
// lease may be as short as 1 s: how soon a dead server's keys go, which is
// how soon a replica takes over.
//
// Thread-safety: none; owned and used by one thread.
#ifndef SHARDPS_PS_COORD_ETCD_PROCESS_H_
#define SHARDPS_PS_COORD_ETCD_PROCESS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ps/base/child_process.h"

namespace ps {

struct EtcdProcessOptions {
  std::string binary = "/usr/bin/etcd";
  std::string data_dir;  // created by etcd if missing
  std::string log_path;  // etcd's output
  std::string host = "127.0.0.1";
  // Free ports; 0: picked here (ps/base/free_port.h).
  int client_port = 0;
  int peer_port = 0;
  absl::Duration start_timeout = absl::Seconds(20);
};

class EtcdProcess {
 public:
  // Starts etcd and waits until its gateway answers; on failure the error
  // quotes the end of its log. Ports left 0 are picked free, and picked
  // again (up to three starts) if another process took one first.
  static absl::StatusOr<std::unique_ptr<EtcdProcess>> Start(
      EtcdProcessOptions options);

  EtcdProcess(const EtcdProcess&) = delete;
  EtcdProcess& operator=(const EtcdProcess&) = delete;
  ~EtcdProcess() = default;  // stops it (ChildProcess)

  // "http://host:port", for EtcdOptions::endpoint.
  std::string endpoint() const;
  const EtcdProcessOptions& options() const { return options_; }
  ChildProcess& process() { return *process_; }
  void Kill() { process_->Kill(); }

 private:
  // One start on the ports `options` names.
  static absl::StatusOr<std::unique_ptr<EtcdProcess>> StartOnce(
      const EtcdProcessOptions& options);
  EtcdProcess(EtcdProcessOptions options, std::unique_ptr<ChildProcess> process)
      : options_(std::move(options)), process_(std::move(process)) {}

  const EtcdProcessOptions options_;
  const std::unique_ptr<ChildProcess> process_;
};

}  // namespace ps

#endif  // SHARDPS_PS_COORD_ETCD_PROCESS_H_
