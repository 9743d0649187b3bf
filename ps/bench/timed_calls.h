// RunTimedCalls: `threads` threads start together and each makes calls one
// after another until `length` has passed; the latency of every call is
// kept. A benchmark phase of shardps-bench.
//
// Thread-safety: `call` runs on every thread at once (each with its own
// index); RunTimedCalls itself is called from one thread.
#ifndef SHARDPS_PS_BENCH_TIMED_CALLS_H_
#define SHARDPS_PS_BENCH_TIMED_CALLS_H_

#include <cstdint>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ps {

struct TimedCalls {
  std::vector<double> latencies_ms;  // every call of every thread
  double seconds = 0;                // from the start to the last thread's end
  double p50_ms = 0;
  double p99_ms = 0;
};

// call(thread, n): thread's n-th call (n from 0). The first failed call
// stops its thread and is the phase's error.
absl::StatusOr<TimedCalls> RunTimedCalls(
    int threads, absl::Duration length,
    absl::FunctionRef<absl::Status(int thread, uint64_t n)> call);

}  // namespace ps

#endif  // SHARDPS_PS_BENCH_TIMED_CALLS_H_
