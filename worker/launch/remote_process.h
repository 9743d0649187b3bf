// Starting and stopping one of a run's processes at its HostSlot: on this
// host, through a command prefix (a network namespace), or through a remote
// shell (SSH), where the command first prints its PID so that it can later
// be stopped cleanly on its own host.
//
// Thread-safety: free functions; a ChildProcess belongs to one thread.
#ifndef SHARDPS_WORKER_LAUNCH_REMOTE_PROCESS_H_
#define SHARDPS_WORKER_LAUNCH_REMOTE_PROCESS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "ps/base/child_process.h"
#include "worker/launch/host_slot.h"

namespace worker {

// The command line that runs `command` at `slot`: the prefix plus the
// command, which a remote shell gets as one quoted string that first prints
// the shell's PID (the process keeps it through exec) for StopAt.
std::vector<std::string> CommandAt(const HostSlot& slot,
                                   const std::vector<std::string>& command);

// The PID a remote process printed first ("shardps-pid N") in its log; 0 if
// none yet.
int RemotePid(const std::string& log_path);

// Stops `p`: SIGTERM (for a remote process, sent on its host to the PID it
// printed, so that it can exit cleanly), then SIGKILL after `grace`. How it
// ended.
absl::Status StopAt(ps::ChildProcess& p, const HostSlot& slot,
                    absl::Duration grace);

}  // namespace worker

#endif  // SHARDPS_WORKER_LAUNCH_REMOTE_PROCESS_H_
