// The command line of one worker process: shardps-worker, or a Python
// script (--worker_script), run through env with the shardps package on its
// PYTHONPATH when LaunchOptions::python_path is set; either way the flags after
// -- come first, then the flags the launcher gives every worker (where the
// servers are, rank and world, the run directory, security files, trace and
// metrics).
//
// Thread-safety: pure functions.
#ifndef SHARDPS_WORKER_LAUNCH_WORKER_COMMAND_H_
#define SHARDPS_WORKER_LAUNCH_WORKER_COMMAND_H_

#include <string>
#include <vector>

#include "worker/launch/launcher.h"

namespace worker {

// Where a run's workers find the servers.
struct ServerReach {
  std::vector<std::string> addrs;  // in shard order, without etcd
  std::string etcd;                // --replicas > 1: the etcd endpoint
};

// The command of worker `rank`, named `process` in traces ("evaluate" for
// the final evaluation, which serves no metrics).
std::vector<std::string> WorkerCommand(const LaunchOptions& o,
                                       const ServerReach& servers, int rank,
                                       const std::string& process);

// --trace=RUN_DIR/PROCESS.trace.json.
std::string TraceFlag(const std::string& run_dir, const std::string& process);

}  // namespace worker

#endif  // SHARDPS_WORKER_LAUNCH_WORKER_COMMAND_H_
