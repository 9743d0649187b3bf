// One control call (table creation, statistics, readiness) to every server
// at once: the servers work in parallel, and a worker among many starting
// together pays their latency once, not once per server.
//
// Thread-safety: `call` runs on one thread per server (per lane, for
// ForEachChunk) concurrently.
#ifndef SHARDPS_PS_CLIENT_FAN_OUT_H_
#define SHARDPS_PS_CLIENT_FAN_OUT_H_

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/types/span.h"

namespace ps {

// Runs call(0) ... call(n - 1) concurrently, waits for all of them, and
// returns the first error in server order, or OK.
absl::Status ForEachServer(int n, absl::FunctionRef<absl::Status(int)> call);

// Runs call(s, c) for every chunk c < chunks[s] of every shard s, with up to
// `inflight` of each shard's chunks in flight at once (each shard's lanes
// take every inflight-th chunk), all shards together; returns the first
// error in shard order, or OK. A lane stops at its first error.
absl::Status ForEachChunk(
    absl::Span<const size_t> chunks, int inflight,
    absl::FunctionRef<absl::Status(int shard, size_t chunk)> call);

}  // namespace ps

#endif  // SHARDPS_PS_CLIENT_FAN_OUT_H_
