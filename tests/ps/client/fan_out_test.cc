// ForEachServer: the calls run at once, every one is waited for, and the
// first error in server order is the answer.
#include "ps/client/fan_out.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <vector>

#include "absl/strings/str_cat.h"
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

// ForEachChunk: every chunk of every shard once, at most `inflight` of a
// shard's at a time, and all `inflight` of them together.
TEST(FanOutTest, ChunksRunOnceEachWithBoundedLanesPerShard) {
  const std::vector<size_t> chunks = {5, 0, 2};
  absl::Mutex mu;
  std::vector<std::vector<int>> seen(3);
  std::vector<int> running(3, 0), most(3, 0);
  absl::Status s = ForEachChunk(chunks, 2, [&](int shard, size_t chunk) {
    {
      absl::MutexLock lock(&mu);
      seen[shard].push_back(static_cast<int>(chunk));
      most[shard] = std::max(most[shard], ++running[shard]);
      // Shard 0's two lanes wait for each other once: sequential calls
      // would time out.
      if (shard == 0 && chunk < 2) {
        mu.AwaitWithTimeout(
            absl::Condition(
                +[](std::vector<int>* r) { return (*r)[0] == 2; }, &running),
            absl::Seconds(10));
      }
      --running[shard];
    }
    return absl::OkStatus();
  });
  ASSERT_TRUE(s.ok()) << s;
  for (auto& v : seen) std::sort(v.begin(), v.end());
  EXPECT_EQ(seen[0], (std::vector<int>{0, 1, 2, 3, 4}));
  EXPECT_TRUE(seen[1].empty());
  EXPECT_EQ(seen[2], (std::vector<int>{0, 1}));
  EXPECT_EQ(most[0], 2);
  EXPECT_LE(most[2], 2);
}

TEST(FanOutTest, ALaneStopsAtItsFirstErrorAndTheFirstShardsErrorWins) {
  std::atomic<int> calls{0};
  absl::Status s =
      ForEachChunk(std::vector<size_t>{4, 3}, 1, [&](int shard, size_t chunk) {
        ++calls;
        if (chunk == 1) return absl::UnavailableError(absl::StrCat(shard));
        return absl::OkStatus();
      });
  EXPECT_EQ(s, absl::UnavailableError("0"));
  EXPECT_EQ(calls.load(), 4);  // chunks 0 and 1 of each shard
}

}  // namespace
}  // namespace ps
