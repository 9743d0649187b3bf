// Retries of calls to servers that are down, restarting or shutting down:
// UNAVAILABLE, and CANCELLED (a client never cancels its own calls, so the
// server ended the call, as gRPC does to calls caught by its shutdown).
// Between attempts it waits an exponential backoff with +-50% jitter,
// capped so that workers resume within about a second of a restarted
// server, and of each other.
//
// Thread-safety: Retrying may run concurrently; the sink and metrics must
// be thread-safe.
#ifndef SHARDPS_PS_CLIENT_RETRY_H_
#define SHARDPS_PS_CLIENT_RETRY_H_

#include <functional>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "ps/base/log.h"
#include "ps/client/client_metrics.h"

namespace ps {

struct RetryPolicy {
  // Retrying stops this long after the first failure; 0: no retries.
  absl::Duration give_up = absl::ZeroDuration();
  absl::Duration first_backoff = absl::Milliseconds(100);
  absl::Duration max_backoff = absl::Seconds(1);
  // Each retry is logged here (null: stderr) and counted in metrics (null:
  // not counted).
  LogSink* log = nullptr;
  ClientMetrics* metrics = nullptr;
  // How to wait between attempts (tests replace it).
  std::function<void(absl::Duration)> sleep = absl::SleepFor;
};

bool IsRetryable(const absl::Status& status);

// Runs `call` until it returns anything but a retryable error, or
// policy.give_up has passed since it first failed; then its last status
// (UNAVAILABLE saying how many attempts over how long, when it gave up).
// `what` names the call in messages.
absl::Status Retrying(const RetryPolicy& policy, absl::string_view what,
                      absl::FunctionRef<absl::Status()> call);

}  // namespace ps

#endif  // SHARDPS_PS_CLIENT_RETRY_H_
