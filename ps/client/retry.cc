#include "ps/client/retry.h"

#include <algorithm>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"

namespace ps {

bool IsRetryable(const absl::Status& status) {
  return absl::IsUnavailable(status) || absl::IsCancelled(status);
}

absl::Status Retrying(const RetryPolicy& policy, absl::string_view what,
                      absl::FunctionRef<absl::Status()> call) {
  absl::Status s = call();
  if (!IsRetryable(s) || policy.give_up <= absl::ZeroDuration()) return s;
  const absl::Time give_up = absl::Now() + policy.give_up;
  absl::Duration backoff = policy.first_backoff;
  absl::BitGen jitter;
  for (int attempt = 1; IsRetryable(s); ++attempt) {
    const absl::Time now = absl::Now();
    if (now >= give_up) {
      return absl::UnavailableError(absl::StrCat(
          s.message(), "; gave up retrying the ", what, " after ", attempt,
          " attempts over ", absl::FormatDuration(policy.give_up)));
    }
    const absl::Duration wait =
        std::min(backoff * absl::Uniform(jitter, 0.5, 1.5), give_up - now);
    Logf(policy.log, "%s failed: %s; retry in %s (gives up in %s)", what,
         s.message(), absl::FormatDuration(wait),
         absl::FormatDuration(give_up - now));
    if (policy.metrics != nullptr) policy.metrics->RecordRetry();
    policy.sleep(wait);
    backoff = std::min(backoff * 2, policy.max_backoff);
    s = call();
  }
  return s;
}

}  // namespace ps
