#include "ps/bench/timed_calls.h"

#include <thread>

#include "absl/synchronization/barrier.h"
#include "absl/time/clock.h"
#include "ps/obs/percentile.h"

namespace ps {
namespace {

struct ThreadCalls {
  std::vector<double> latencies_ms;
  absl::Status error;
};

}  // namespace

absl::StatusOr<TimedCalls> RunTimedCalls(
    int threads, absl::Duration length,
    absl::FunctionRef<absl::Status(int thread, uint64_t n)> call) {
  std::vector<ThreadCalls> calls(threads);
  absl::Barrier start(threads + 1);
  std::vector<std::thread> running;
  for (int t = 0; t < threads; ++t) {
    running.emplace_back([&, t] {
      ThreadCalls& mine = calls[t];
      mine.latencies_ms.reserve(1 << 16);
      start.Block();
      const absl::Time stop = absl::Now() + length;
      for (uint64_t n = 0; absl::Now() < stop; ++n) {
        const absl::Time t0 = absl::Now();
        if (absl::Status s = call(t, n); !s.ok()) {
          mine.error = s;
          return;
        }
        mine.latencies_ms.push_back(
            absl::ToDoubleMilliseconds(absl::Now() - t0));
      }
    });
  }
  start.Block();
  const absl::Time begin = absl::Now();
  for (std::thread& t : running) t.join();
  TimedCalls out;
  out.seconds = absl::ToDoubleSeconds(absl::Now() - begin);
  for (const ThreadCalls& c : calls) {
    if (!c.error.ok()) return c.error;
    out.latencies_ms.insert(out.latencies_ms.end(), c.latencies_ms.begin(),
                            c.latencies_ms.end());
  }
  out.p50_ms = Percentile(out.latencies_ms, 0.50);
  out.p99_ms = Percentile(out.latencies_ms, 0.99);
  return out;
}

}  // namespace ps
