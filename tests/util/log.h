// A LogSink that keeps what it is given, for tests of what a component
// reports.
#ifndef SHARDPS_TESTS_UTIL_LOG_H_
#define SHARDPS_TESTS_UTIL_LOG_H_

#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "ps/base/log.h"

namespace testutil {

class RecordingLog : public ps::LogSink {
 public:
  void Write(absl::string_view line) override {
    absl::MutexLock lock(&mu_);
    lines_.emplace_back(line);
  }
  std::vector<std::string> lines() {
    absl::MutexLock lock(&mu_);
    return lines_;
  }
  // Whether some line contains `text`.
  bool Has(absl::string_view text) {
    absl::MutexLock lock(&mu_);
    return HasLocked(text);
  }
  // Waits until some line contains `text`; false when none did within
  // `timeout`.
  bool AwaitLine(absl::string_view text, absl::Duration timeout) {
    absl::MutexLock lock(&mu_);
    auto found = [&] {
      mu_.AssertHeld();
      return HasLocked(text);
    };
    return mu_.AwaitWithTimeout(absl::Condition(&found), timeout);
  }

 private:
  bool HasLocked(absl::string_view text) ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    for (const std::string& l : lines_) {
      if (absl::StrContains(l, text)) return true;
    }
    return false;
  }

  absl::Mutex mu_;
  std::vector<std::string> lines_ ABSL_GUARDED_BY(mu_);
};

}  // namespace testutil

#endif  // SHARDPS_TESTS_UTIL_LOG_H_
