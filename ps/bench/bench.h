// The servers' push/pull benchmark behind shardps-bench: `workers` threads,
// each with a ps::Client of its own (as worker processes would have), move
// the whole table of `params` floats per call: first every thread pushes
// for `length`, then every thread pulls for `length`, then every thread
// makes PushPulls (a step's push and pull in one round trip) for `length`,
// after a short warm-up of each. Prints MB/s of float32 parameters (and on
// the wire) and the calls' p50/p99 latency, one line or one JSON line.
// With sparse.enabled it measures rows instead (ps/bench/sparse_bench.h).
//
// Thread-safety: call from one thread (the spawned servers belong to it).
#ifndef SHARDPS_PS_BENCH_BENCH_H_
#define SHARDPS_PS_BENCH_BENCH_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ps/client/client.h"

namespace ps {

// --mode=sparse (ps/bench/sparse_bench.h): a sparse table's rows instead of
// a dense table.
struct SparseBenchOptions {
  bool enabled = false;
  uint32_t dim = 16;
  uint64_t ids_per_call = 100000;
  uint64_t id_space = 10000000;  // ids are drawn from [0, id_space)
  // Zipf exponent q > 1 of the ids' popularity (P(id) ~ (1 + id)^-q: id 0
  // the hottest), or 0 for uniform ids.
  double zipf = 1.1;
  shardps::RowSharding sharding = shardps::ROW_HASH;
};

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
  SparseBenchOptions sparse;
};

absl::Status RunBench(BenchOptions options);

// One client per worker thread (worker = its index), each ready and
// having run create_table (idempotent on the servers).
absl::StatusOr<std::vector<std::unique_ptr<Client>>> ConnectBenchClients(
    const BenchOptions& options,
    absl::FunctionRef<absl::Status(Client&)> create_table);

}  // namespace ps

#endif  // SHARDPS_PS_BENCH_BENCH_H_
