// ForEachServer: the calls run at once, every one is waited for, and the
// first error in server order is the answer.
#include "ps/client/fan_out.h"

#include <gtest/gtest.h>

#include <atomic>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace ps {
namespace {

TEST(FanOutTest, CallsRunAtOnce) {
  // Each call waits until all have started: run one after another, the
  // first would time out.
  constexpr int kServers = 8;
  absl::Mutex mu;
  int started = 0;
  absl::Status s = ForEachServer(kServers, [&](int) {
    absl::MutexLock lock(&mu);
    ++started;
    const bool all = mu.AwaitWithTimeout(
        absl::Condition(
            +[](int* n) { return *n == kServers; }, &started),
        absl::Seconds(10));
    return all ? absl::OkStatus()
               : absl::DeadlineExceededError("calls ran one at a time");
  });
  EXPECT_TRUE(s.ok()) << s;
}

TEST(FanOutTest, WaitsForAllAndReturnsTheFirstErrorInServerOrder) {
  std::atomic<int> finished{0};
  absl::Status s = ForEachServer(5, [&](int server) {
    if (server == 4) absl::SleepFor(absl::Milliseconds(50));
    ++finished;
    if (server == 3) return absl::NotFoundError("three");
    if (server == 1) return absl::UnavailableError("one");
    return absl::OkStatus();
  });
  EXPECT_EQ(finished.load(), 5);
  EXPECT_EQ(s, absl::UnavailableError("one"));
  EXPECT_TRUE(ForEachServer(0, [](int) {
                return absl::InternalError("never called");
              }).ok());
}

}  // namespace
}  // namespace ps
