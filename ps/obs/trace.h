// Tracer records spans (name, category, thread, start, duration, one
// optional integer argument) into a bounded ring and writes them as Chrome
// trace event JSON ("X" complete events plus process and thread names),
// which Perfetto and chrome://tracing open. Timestamps are microseconds of
// the realtime clock, so traces of processes on one machine (or on hosts
// with synchronised clocks) line up when merged.
//
// Memory is bounded: once the ring holds max_events, each new span replaces
// the oldest (counted in the file's "dropped_events"). The file is rewritten
// whole every flush_every and when the Tracer is destroyed, each time to a
// temporary name and renamed into place.
//
//   TraceSpan span(tracer, "pull", "worker");  // tracer may be null: no-op
//
// Thread-safety: all methods are safe to call concurrently. Span names,
// categories and argument names must be string literals (kept by pointer).
#ifndef SHARDPS_PS_OBS_TRACE_H_
#define SHARDPS_PS_OBS_TRACE_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "ps/base/log.h"

namespace ps {

struct TraceOptions {
  std::string path;          // the JSON file
  std::string process_name;  // shown for the process, e.g. "worker-0"
  size_t max_events = size_t{1} << 20;             // about 40 MiB
  absl::Duration flush_every = absl::Seconds(10);  // 0: only at the end
  // Writes that fail after Open (the periodic and the last flush) are
  // reported here; null: stderr. Must outlive the Tracer.
  LogSink* log = nullptr;
};

class Tracer {
 public:
  // Writes an empty trace to options.path first, so that a path that cannot
  // be written is an error now (naming it) rather than at the end.
  static absl::StatusOr<std::unique_ptr<Tracer>> Open(TraceOptions options);
  Tracer(const Tracer&) = delete;
  Tracer& operator=(const Tracer&) = delete;
  // Stops the periodic flush and writes the file a last time.
  ~Tracer();

  // Names the calling thread in the trace.
  void NameThread(absl::string_view name);

  // Records a span of the calling thread. `arg_name` may be null.
  void Record(const char* name, const char* category, absl::Time start,
              absl::Time end, const char* arg_name = nullptr, int64_t arg = 0);

  // Writes every span held so far.
  absl::Status Flush();

  uint64_t dropped() const;

 private:
  struct Event {
    const char* name;
    const char* category;
    const char* arg_name;
    int64_t arg;
    int64_t start_us;
    int64_t duration_us;
    int32_t tid;
  };

  explicit Tracer(TraceOptions options);
  void FlushPeriodically();

  const TraceOptions options_;
  const int pid_;
  mutable absl::Mutex mu_;
  std::vector<Event> ring_ ABSL_GUARDED_BY(mu_);
  size_t next_ ABSL_GUARDED_BY(mu_) = 0;  // where the next event goes
  uint64_t recorded_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<int32_t, std::string> thread_names_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Mutex flush_mu_;  // one writer of the file at a time
  std::thread flusher_;
};

// Records [construction, destruction) as a span; does nothing when the
// tracer is null.
class TraceSpan {
 public:
  TraceSpan(Tracer* tracer, const char* name, const char* category,
            const char* arg_name = nullptr, int64_t arg = 0)
      : tracer_(tracer),
        name_(name),
        category_(category),
        arg_name_(arg_name),
        arg_(arg),
        start_(tracer != nullptr ? absl::Now() : absl::InfinitePast()) {}
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;
  ~TraceSpan() {
    if (tracer_ != nullptr) {
      tracer_->Record(name_, category_, start_, absl::Now(), arg_name_, arg_);
    }
  }

 private:
  Tracer* const tracer_;
  const char* const name_;
  const char* const category_;
  const char* const arg_name_;
  const int64_t arg_;
  const absl::Time start_;
};

// For a --trace flag: null when `path` is empty, else Tracer::Open, with an
// error that names the flag.
absl::StatusOr<std::unique_ptr<Tracer>> OpenTraceFlag(
    const std::string& path, const std::string& process_name);

// Joins Chrome trace files written by Tracers into one at `out` (their
// events side by side, each process under its own pid). NOT_FOUND or
// INVALID_ARGUMENT names a file that is missing or not such a trace.
absl::Status MergeTraces(const std::vector<std::string>& inputs,
                         const std::string& out);

}  // namespace ps

#endif  // SHARDPS_PS_OBS_TRACE_H_
