// The servers' push/pull benchmark behind shardps-bench: `workers` threads,
// each with a ps::Client of its own (as worker processes would have), move
// the whole table of `params` floats per call: first every thread pushes
// for `length`, then every thread pulls for `length`, then every thread
// makes PushPulls (a step's push and pull in one round trip) for `length`,
// after a short warm-up of each. Prints MB/s of float32 parameters (and on
// the wire) and the calls' p50/p99 latency, one line or one JSON line.
//
// Thread-safety: call from one thread (the spawned servers belong to it).
#ifndef SHARDPS_PS_BENCH_BENCH_H_
#define SHARDPS_PS_BENCH_BENCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "ps/client/client.h"

namespace ps {

struct BenchOptions {
  // > 0: start this many shardps-server processes on loopback and bench
  // them; 0: bench the servers at client.server_addrs.
  int spawn_servers = 0;
  // > 1 with spawn_servers: each shard has this many replicas, with an etcd
  // for their membership (ps/server/replicator.h); the clients follow the
  // primaries. What replication costs a push.
  int replicas = 1;
  // Every thread's client: its servers (unless spawned; client.etcd and
  // num_shards for a replicated job), job, chunking,
  // encodings and security; `worker` is set per thread.
  ClientOptions client;
  int workers = 1;
  uint64_t params = 1000000;
  absl::Duration length = absl::Seconds(5);
  std::string compression = "none";  // as set in client; for the output
  bool json = false;
};

absl::Status RunBench(BenchOptions options);

}  // namespace ps

#endif  // SHARDPS_PS_BENCH_BENCH_H_
