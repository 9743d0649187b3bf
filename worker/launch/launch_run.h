// What shardps-launch does once its flags are read: creates the run
// directory (with its parents), gives the job a token if it has none,
// places the processes with the cluster kind's backend
// (worker/launch/placement.h), runs them (worker/launch/launcher.h) and
// lets the backend add what it measured to RUN_DIR/summary.json before it
// releases its hosts.
//
// Thread-safety: call from the main thread before any other thread exists
// (the emulated backend moves the process into a network namespace); the
// gRPC runtime is started here, after that.
#ifndef SHARDPS_WORKER_LAUNCH_LAUNCH_RUN_H_
#define SHARDPS_WORKER_LAUNCH_LAUNCH_RUN_H_

#include <string>

#include "absl/status/statusor.h"
#include "proto/summary.pb.h"
#include "worker/launch/launcher.h"
#include "worker/launch/placement.h"

namespace worker {

struct LaunchRequest {
  // Everything but the hosts and the workers' --data, which the placement
  // fills in. launch.cluster names the backend; an empty auth_token_file
  // gets a fresh random token in RUN_DIR/job.token (mode 0600).
  LaunchOptions launch;
  PlacementOptions placement;
};

// The run's summary (also in RUN_DIR/summary.json); an error when the run
// could not be started or recorded (a failed run is a summary with ok
// false).
absl::StatusOr<shardps::RunSummary> RunLaunch(LaunchRequest request,
                                              const StopWait& wait_for_stop);

// 32 random bytes from the kernel, hex, into a new file only its owner can
// read.
absl::Status WriteFreshToken(const std::string& path);

}  // namespace worker

#endif  // SHARDPS_WORKER_LAUNCH_LAUNCH_RUN_H_
