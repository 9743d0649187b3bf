// The sparse-table benchmark behind `shardps-bench --mode=sparse`: each of
// `workers` threads, with a ps::Client of its own, pulls and pushes
// batches of ids_per_call ids drawn from [0, id_space) with Zipf (or
// uniform) popularity, as an embedding layer's lookups would. The batches
// are drawn before the clock starts and are touched once first, so the
// figures are those of rows that exist (creation is not timed).
//
// It prints, one line or one JSON line:
//  - ids and distinct rows per second of PushRows and PullRows, and their
//    p50/p99 latency;
//  - the cost of a sparse push per row against a dense push of the same
//    bytes (a table of distinct-rows-per-call x dim floats);
//  - each server's load in both phases, from its own TableStats counters
//    (rows applied and served per second, and their bytes), with max/mean
//    over the servers: how evenly the table's sharding spreads hot ids.
//
// Thread-safety: call from one thread.
#ifndef SHARDPS_PS_BENCH_SPARSE_BENCH_H_
#define SHARDPS_PS_BENCH_SPARSE_BENCH_H_

#include "absl/status/status.h"
#include "ps/bench/bench.h"

namespace ps {

// INVALID_ARGUMENT naming the flag for options.sparse no run can use.
absl::Status CheckSparseBenchOptions(const BenchOptions& options);

// options.client points at the `servers` servers to measure.
absl::Status RunSparseBench(const BenchOptions& options, int servers);

}  // namespace ps

#endif  // SHARDPS_PS_BENCH_SPARSE_BENCH_H_
