// One control call (table creation, statistics, readiness) to every server
// at once: the servers work in parallel, and a worker among many starting
// together pays their latency once, not once per server.
//
// Thread-safety: `call` runs on one thread per server concurrently.
#ifndef SHARDPS_PS_CLIENT_FAN_OUT_H_
#define SHARDPS_PS_CLIENT_FAN_OUT_H_

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"

namespace ps {

// Runs call(0) ... call(n - 1) concurrently, waits for all of them, and
// returns the first error in server order, or OK.
absl::Status ForEachServer(int n, absl::FunctionRef<absl::Status(int)> call);

}  // namespace ps

#endif  // SHARDPS_PS_CLIENT_FAN_OUT_H_
