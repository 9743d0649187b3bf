// Plain hosts over OpenSSH, as ps-lite's ssh tracker does it: a hostfile
// lists the hosts, servers and workers are placed on them round-robin and
// run through `ssh -tt` (so that a lost connection hangs them up), their
// output streamed back into the launcher's run directory. The binaries and
// the run directory must be at the same paths on every host (an install
// path and a shared file system).
//
// Thread-safety: free functions without shared state.
#ifndef SHARDPS_WORKER_LAUNCH_SSH_CLUSTER_H_
#define SHARDPS_WORKER_LAUNCH_SSH_CLUSTER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/launch/host_slot.h"

namespace worker {

struct SshHost {
  std::string destination;  // [user@]host, as ssh takes it
  std::string host;         // how other processes reach it
  int ssh_port = 22;
};

// One host per line: [user@]host[:ssh_port]; blank lines and # comments
// are skipped. Errors name the file and line.
absl::StatusOr<std::vector<SshHost>> ReadHostfile(const std::string& path);

struct SshSlots {
  std::vector<HostSlot> servers;
  std::vector<HostSlot> workers;
};

// Server i on hosts[i % H] listening on base_port + i; worker r on
// hosts[(servers + r) % H]. `ssh_args` go to every ssh call (e.g. "-i",
// "key", "-o", "StrictHostKeyChecking=no").
SshSlots PlaceOnHosts(const std::vector<SshHost>& hosts, int servers,
                      int workers, int base_port,
                      const std::vector<std::string>& ssh_args);

// `arg` quoted for a POSIX shell.
std::string ShellQuote(absl::string_view arg);

}  // namespace worker

#endif  // SHARDPS_WORKER_LAUNCH_SSH_CLUSTER_H_
