// Retries: only UNAVAILABLE and CANCELLED are retried, with a backoff that
// doubles up to its cap, each retry logged and counted; the give-up time
// ends them with a message saying how many attempts over how long.
#include "ps/client/retry.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "util/log.h"

namespace ps {
namespace {

using testutil::RecordingLog;

// A call that fails with `errors` in turn, then succeeds.
class Script {
 public:
  explicit Script(std::vector<absl::Status> errors)
      : errors_(std::move(errors)) {}
  absl::Status operator()() {
    ++calls_;
    return next_ < errors_.size() ? errors_[next_++] : absl::OkStatus();
  }
  int calls() const { return calls_; }

 private:
  std::vector<absl::Status> errors_;
  size_t next_ = 0;
  int calls_ = 0;
};

TEST(RetryTest, RetriesUnavailableAndCancelledWithAGrowingCappedBackoff) {
  RecordingLog log;
  std::vector<absl::Duration> waits;
  RetryPolicy policy;
  policy.give_up = absl::Seconds(60);
  policy.first_backoff = absl::Milliseconds(100);
  policy.max_backoff = absl::Milliseconds(300);
  policy.log = &log;
  policy.sleep = [&](absl::Duration d) { waits.push_back(d); };
  Script script({absl::UnavailableError("down"), absl::CancelledError("gone"),
                 absl::UnavailableError("down"),
                 absl::UnavailableError("down")});
  EXPECT_TRUE(Retrying(policy, "push", [&] { return script(); }).ok());
  EXPECT_EQ(script.calls(), 5);
  ASSERT_EQ(waits.size(), 4u);
  // 100, 200, 300, 300 ms, each +-50%.
  const double base_ms[] = {100, 200, 300, 300};
  for (size_t i = 0; i < waits.size(); ++i) {
    EXPECT_GE(waits[i], absl::Milliseconds(0.5 * base_ms[i])) << i;
    EXPECT_LE(waits[i], absl::Milliseconds(1.5 * base_ms[i])) << i;
  }
  const std::vector<std::string> lines = log.lines();
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_NE(lines[1].find("push failed: gone; retry in"), std::string::npos)
      << lines[1];
}

TEST(RetryTest, OtherErrorsAndNoGiveUpTimeAreNotRetried) {
  RetryPolicy policy;
  policy.give_up = absl::Seconds(60);
  int sleeps = 0;
  policy.sleep = [&](absl::Duration) { ++sleeps; };
  for (const absl::Status& error :
       {absl::InvalidArgumentError("bad"), absl::DeadlineExceededError("slow"),
        absl::NotFoundError("no table"), absl::AbortedError("stragglers")}) {
    Script script({error});
    EXPECT_EQ(Retrying(policy, "pull", [&] { return script(); }), error);
    EXPECT_EQ(script.calls(), 1);
  }
  policy.give_up = absl::ZeroDuration();
  Script script({absl::UnavailableError("down")});
  EXPECT_TRUE(
      absl::IsUnavailable(Retrying(policy, "pull", [&] { return script(); })));
  EXPECT_EQ(script.calls(), 1);
  EXPECT_EQ(sleeps, 0);
}

TEST(RetryTest, GivingUpSaysHowManyAttemptsOverHowLong) {
  RetryPolicy policy;
  policy.give_up = absl::Milliseconds(200);
  policy.first_backoff = absl::Milliseconds(10);
  policy.max_backoff = absl::Milliseconds(20);
  RecordingLog log;
  policy.log = &log;
  int calls = 0;
  absl::Status s = Retrying(policy, "stats", [&] {
    ++calls;
    return absl::UnavailableError("server 1 at h:1 is down");
  });
  EXPECT_TRUE(absl::IsUnavailable(s)) << s;
  EXPECT_NE(s.message().find("server 1 at h:1 is down; gave up retrying the "
                             "stats after "),
            std::string::npos)
      << s;
  EXPECT_NE(s.message().find(absl::StrCat(calls, " attempts over 200ms")),
            std::string::npos)
      << s << " (" << calls << " calls)";
  EXPECT_GE(calls, 5);  // about 200 ms of 10-20 ms waits
  EXPECT_EQ(log.lines().size(), static_cast<size_t>(calls - 1));
}

}  // namespace
}  // namespace ps
