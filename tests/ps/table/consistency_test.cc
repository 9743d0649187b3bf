#include "ps/table/consistency.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "util/configs.h"

namespace ps {
namespace {

// A shard of keys [100, 110) holding zeros, plain SGD with lr 1 (so a value
// is minus the sum of what was applied to it), behind a Consistency.
struct Shard {
  explicit Shard(const shardps::ConsistencyConfig& config,
                 bool replicated = false)
      : store({100, 110}, std::make_unique<SgdUpdater>(1.0f),
              std::vector<float>(10, 0.0f)),
        consistency(config, "t", &store, nullptr, replicated) {}

  absl::StatusOr<uint64_t> Push(uint32_t worker, uint64_t clock, KeyRange keys,
                                float value) {
    std::vector<float> grad(keys.size(), value);
    const absl::string_view bytes(reinterpret_cast<const char*>(grad.data()),
                                  grad.size() * sizeof(float));
    FloatPieces pieces(absl::MakeConstSpan(&bytes, 1));
    return consistency.Push(worker, clock, keys, pieces);
  }
  absl::StatusOr<uint64_t> PushAll(uint32_t worker, uint64_t clock,
                                   float value) {
    return Push(worker, clock, store.range(), value);
  }
  float Value(uint64_t key) {
    float v;
    EXPECT_TRUE(store.Pull({key, key + 1}, &v).ok());
    return v;
  }

  ShardStore store;
  Consistency consistency;
};

// A pull whose continuation records when and how it ran.
struct PullProbe {
  absl::Notification done;
  absl::Status status;
  PullContinuation Continuation() {
    return [this](absl::Status s) {
      status = std::move(s);
      done.Notify();
    };
  }
  bool WaitFor(absl::Duration d) {
    return done.WaitForNotificationWithTimeout(d);
  }
};

TEST(ConsistencyTest, AsyncAppliesOnArrivalAndNeverWaits) {
  Shard shard(shardps::ConsistencyConfig{});
  ASSERT_EQ(*shard.PushAll(7, 5, 2.0f), 1u);
  EXPECT_EQ(shard.Value(100), -2.0f);
  PullProbe pull;
  shard.consistency.Pull(3, 1000, pull.Continuation());
  EXPECT_TRUE(pull.done.HasBeenNotified());
  EXPECT_TRUE(pull.status.ok());
}

TEST(ConsistencyTest, SyncAppliesTheAverageOnceEveryWorkerPushedTheClock) {
  Shard shard(testutil::Consistency(shardps::CONSISTENCY_SYNC, 3));
  PullProbe first;
  shard.consistency.Pull(0, 0, first.Continuation());
  EXPECT_TRUE(first.done.HasBeenNotified());  // clock 0 never waits

  // Worker 0 pushes its clock-0 gradient in two pieces; 1 and 2 in one.
  ASSERT_TRUE(shard.Push(0, 0, {100, 104}, 3.0f).ok());
  ASSERT_TRUE(shard.Push(0, 0, {104, 110}, 3.0f).ok());
  PullProbe waiting;
  shard.consistency.Pull(0, 1, waiting.Continuation());
  ASSERT_TRUE(shard.PushAll(1, 0, 6.0f).ok());
  EXPECT_FALSE(waiting.done.HasBeenNotified());
  EXPECT_EQ(shard.Value(100), 0.0f) << "nothing applied before the barrier";
  EXPECT_EQ(shard.store.version(), 0u);
  // The last push completes clock 0: (3 + 6 + 0) / 3 is applied, once.
  ASSERT_EQ(*shard.PushAll(2, 0, 0.0f), 1u);
  ASSERT_TRUE(waiting.done.HasBeenNotified());
  EXPECT_TRUE(waiting.status.ok());
  for (uint64_t k = 100; k < 110; ++k) EXPECT_EQ(shard.Value(k), -3.0f);
  EXPECT_EQ(shard.store.version(), 1u);
  EXPECT_EQ(shard.consistency.clock(), 1u);
}

TEST(ConsistencyTest, SyncAppliesTheClocksLearningRateScale) {
  Shard shard(testutil::Consistency(shardps::CONSISTENCY_SYNC, 2));
  auto push = [&](uint32_t worker, float value, float lr_scale) {
    std::vector<float> grad(10, value);
    const absl::string_view bytes(reinterpret_cast<const char*>(grad.data()),
                                  grad.size() * sizeof(float));
    FloatPieces pieces(absl::MakeConstSpan(&bytes, 1));
    return shard.consistency.Push(worker, 0, shard.store.range(), pieces,
                                  lr_scale);
  };
  ASSERT_TRUE(push(0, 2.0f, 0.5f).ok());
  ASSERT_TRUE(push(1, 6.0f, 0.5f).ok());
  EXPECT_EQ(shard.Value(105), -2.0f);  // lr 1 * 0.5 * mean 4
}

TEST(ConsistencyTest, SyncRefusesPushesOutOfOrderOrTwiceAndChangesNothing) {
  Shard shard(testutil::Consistency(shardps::CONSISTENCY_SYNC, 2));
  ASSERT_TRUE(shard.Push(0, 0, {100, 105}, 1.0f).ok());
  auto refused = [&](absl::StatusOr<uint64_t> r, const std::string& says) {
    EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition)
        << r.status();
    EXPECT_NE(r.status().message().find(says), std::string::npos) << r.status();
  };
  refused(shard.Push(0, 0, {104, 106}, 1.0f), "twice in clock 0");
  refused(shard.Push(0, 1, {100, 110}, 1.0f), "its next clock here is 0");
  ASSERT_TRUE(shard.Push(0, 0, {105, 110}, 1.0f).ok());
  // Worker 0 finished clock 0, but clock 0 is not applied yet: it must
  // pull clock 1 (and wait) before pushing it.
  refused(shard.PushAll(0, 1, 1.0f), "before clock 0 was applied");
  refused(shard.PushAll(1, 3, 1.0f), "its next clock here is 0");
  EXPECT_EQ(shard.PushAll(2, 0, 1.0f).status().code(),
            absl::StatusCode::kInvalidArgument);  // not in the barrier
  ASSERT_TRUE(shard.PushAll(1, 0, 3.0f).ok());
  for (uint64_t k = 100; k < 110; ++k) EXPECT_EQ(shard.Value(k), -2.0f);
  EXPECT_EQ(shard.store.version(), 1u);
}

TEST(ConsistencyTest, SspLetsAWorkerRunExactlyStalenessClocksAhead) {
  // K = 2, two workers; worker 1 pushes nothing at first.
  Shard shard(testutil::Consistency(shardps::CONSISTENCY_SSP, 2, 2));
  for (uint64_t c = 0; c < 2; ++c) {
    PullProbe pull;
    shard.consistency.Pull(0, c, pull.Continuation());
    EXPECT_TRUE(pull.done.HasBeenNotified()) << "clock " << c << " waited";
    ASSERT_TRUE(shard.PushAll(0, c, 1.0f).ok());
  }
  EXPECT_EQ(shard.Value(100), -2.0f) << "ssp applies pushes on arrival";
  // Clock 2 needs every worker's clock 0.
  PullProbe third;
  shard.consistency.Pull(0, 2, third.Continuation());
  EXPECT_FALSE(third.done.HasBeenNotified());
  ASSERT_TRUE(shard.Push(1, 0, {100, 105}, 1.0f).ok());
  EXPECT_FALSE(third.done.HasBeenNotified()) << "released by half a push";
  ASSERT_TRUE(shard.Push(1, 0, {105, 110}, 1.0f).ok());
  ASSERT_TRUE(third.done.HasBeenNotified());
  EXPECT_TRUE(third.status.ok());
  EXPECT_EQ(shard.consistency.clock(), 1u);
  // The slow worker itself never waits for the fast one.
  PullProbe slow;
  shard.consistency.Pull(1, 1, slow.Continuation());
  EXPECT_TRUE(slow.done.HasBeenNotified());
}

TEST(ConsistencyTest, AStragglerIsDroppedAfterTheTimeoutAndLogged) {
  Shard shard(testutil::Consistency(shardps::CONSISTENCY_SYNC, 2, 0, 0.2,
                                    shardps::STRAGGLER_DROP));
  ASSERT_TRUE(shard.PushAll(0, 0, 4.0f).ok());
  PullProbe pull;
  const absl::Time start = absl::Now();
  shard.consistency.Pull(0, 1, pull.Continuation());
  ASSERT_TRUE(pull.WaitFor(absl::Seconds(30)));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(190));
  EXPECT_TRUE(pull.status.ok()) << pull.status;
  // Clock 0 was applied with worker 0's gradient alone.
  EXPECT_EQ(shard.Value(100), -4.0f);
  EXPECT_EQ(shard.consistency.dropped_workers(), std::vector<uint32_t>{1});
  absl::StatusOr<uint64_t> late = shard.PushAll(1, 0, 1.0f);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(late.status().message().find("dropped"), std::string::npos);
  // The barrier goes on with worker 0 alone.
  ASSERT_TRUE(shard.PushAll(0, 1, 2.0f).ok());
  EXPECT_EQ(shard.Value(100), -6.0f);
}

TEST(ConsistencyTest, ADroppedWorkersPartialSumsAreKeptAndAveragedPerKey) {
  Shard shard(testutil::Consistency(shardps::CONSISTENCY_SYNC, 2, 0, 0.2,
                                    shardps::STRAGGLER_DROP));
  ASSERT_TRUE(shard.PushAll(0, 0, 4.0f).ok());
  // Worker 1 pushes keys [100, 104) of clock 0 and then stalls.
  ASSERT_TRUE(shard.Push(1, 0, {100, 104}, 2.0f).ok());
  PullProbe pull;
  shard.consistency.Pull(0, 1, pull.Continuation());
  ASSERT_TRUE(pull.WaitFor(absl::Seconds(30)));
  ASSERT_TRUE(pull.status.ok()) << pull.status;
  EXPECT_EQ(shard.consistency.dropped_workers(), std::vector<uint32_t>{1});
  // Keys both pushed: the average of 4 and 2; the rest worker 0's 4 alone.
  for (uint64_t k = 100; k < 104; ++k) EXPECT_EQ(shard.Value(k), -3.0f) << k;
  for (uint64_t k = 104; k < 110; ++k) EXPECT_EQ(shard.Value(k), -4.0f) << k;
  // Nothing of worker 1's leaks into the next clock.
  ASSERT_TRUE(shard.PushAll(0, 1, 1.0f).ok());
  EXPECT_EQ(shard.Value(100), -4.0f);
  EXPECT_EQ(shard.Value(109), -5.0f);
  EXPECT_EQ(shard.consistency.clock(), 2u);
}

TEST(ConsistencyTest, AStragglerFailsTheJobWhenThePolicySaysSo) {
  Shard shard(testutil::Consistency(shardps::CONSISTENCY_SSP, 3, 1, 0.2,
                                    shardps::STRAGGLER_FAIL));
  ASSERT_TRUE(shard.PushAll(0, 0, 1.0f).ok());
  ASSERT_TRUE(shard.PushAll(2, 0, 1.0f).ok());
  PullProbe pull;
  shard.consistency.Pull(0, 1, pull.Continuation());
  ASSERT_TRUE(pull.WaitFor(absl::Seconds(30)));
  EXPECT_EQ(pull.status.code(), absl::StatusCode::kAborted) << pull.status;
  EXPECT_NE(pull.status.message().find("worker 1 did not push clock 0"),
            std::string::npos)
      << pull.status;
  EXPECT_EQ(shard.PushAll(1, 0, 1.0f).status().code(),
            absl::StatusCode::kAborted);
  PullProbe later;
  shard.consistency.Pull(2, 0, later.Continuation());
  EXPECT_EQ(later.status.code(), absl::StatusCode::kAborted);
}

TEST(ConsistencyTest, APullItsOwnWorkerCannotReachIsRefusedAtOnce) {
  // sync: clock c needs clock c-1 pushed by every worker, the puller too,
  // and a worker does not push while its pull waits. One push of its own
  // may still be on the way (a pull sent with it); two cannot.
  Shard sync(testutil::Consistency(shardps::CONSISTENCY_SYNC, 2));
  PullProbe next;
  EXPECT_NE(sync.consistency.Pull(0, 1, next.Continuation()), 0u);
  EXPECT_FALSE(next.done.HasBeenNotified());
  for (uint64_t clock : {uint64_t{2}, uint64_t{1} << 62}) {
    PullProbe far;
    EXPECT_EQ(sync.consistency.Pull(0, clock, far.Continuation()), 0u);
    ASSERT_TRUE(far.done.HasBeenNotified());
    EXPECT_TRUE(absl::IsInvalidArgument(far.status)) << far.status;
    EXPECT_NE(far.status.message().find(absl::StrCat("clock ", clock)),
              std::string::npos)
        << far.status;
  }
  EXPECT_EQ(sync.consistency.waiting_pulls(), 1u);
  // ssp:2: clock c needs clock c-2 from everyone.
  Shard ssp(testutil::Consistency(shardps::CONSISTENCY_SSP, 2, 2));
  PullProbe reach, beyond;
  ssp.consistency.Pull(0, 2, reach.Continuation());  // needs its clock 0
  EXPECT_FALSE(reach.done.HasBeenNotified());
  ssp.consistency.Pull(0, 3, beyond.Continuation());  // its clocks 0 and 1
  ASSERT_TRUE(beyond.done.HasBeenNotified());
  EXPECT_TRUE(absl::IsInvalidArgument(beyond.status)) << beyond.status;
  // After its clock 0, clock 3 is in reach (and waits for worker 1).
  ASSERT_TRUE(ssp.PushAll(0, 0, 1.0f).ok());
  PullProbe now;
  ssp.consistency.Pull(0, 3, now.Continuation());
  EXPECT_FALSE(now.done.HasBeenNotified());
  EXPECT_EQ(ssp.consistency.waiting_pulls(), 2u);
}

TEST(ConsistencyTest, ACancelledPullStopsWaitingAndTriggersNoPolicy) {
  Shard shard(testutil::Consistency(shardps::CONSISTENCY_SYNC, 2, 0, 0.2,
                                    shardps::STRAGGLER_FAIL));
  ASSERT_TRUE(shard.PushAll(1, 0, 2.0f).ok());
  PullProbe pull;
  const uint64_t ticket = shard.consistency.Pull(1, 1, pull.Continuation());
  ASSERT_NE(ticket, 0u);
  EXPECT_EQ(shard.consistency.waiting_pulls(), 1u);
  shard.consistency.CancelPull(ticket, absl::CancelledError("client left"));
  ASSERT_TRUE(pull.done.HasBeenNotified());
  EXPECT_TRUE(absl::IsCancelled(pull.status)) << pull.status;
  EXPECT_EQ(shard.consistency.waiting_pulls(), 0u);
  shard.consistency.CancelPull(ticket, absl::CancelledError("again"));
  // Twice the straggler timeout with nobody waiting: the policy (fail)
  // has nobody to act for, and worker 0 joins late without harm.
  absl::SleepFor(absl::Milliseconds(500));
  ASSERT_TRUE(shard.PushAll(0, 0, 4.0f).ok());
  EXPECT_EQ(shard.Value(100), -3.0f);
}

TEST(ConsistencyTest, AWorkerThatKeepsPushingIsNotAStraggler) {
  // ssp:1, straggler timeout 2 s. Worker 0 is two clocks ahead of worker 1,
  // which pushes a clock every 1.2 s: worker 0's pull waits 2.4 s, longer
  // than the timeout, yet worker 1 never went 2 s without a push.
  Shard shard(testutil::Consistency(shardps::CONSISTENCY_SSP, 2, 1, 2.0,
                                    shardps::STRAGGLER_FAIL));
  ASSERT_TRUE(shard.PushAll(0, 0, 1.0f).ok());
  ASSERT_TRUE(shard.PushAll(0, 1, 1.0f).ok());
  PullProbe pull;
  const absl::Time start = absl::Now();
  shard.consistency.Pull(0, 2, pull.Continuation());  // needs clock 1 of all
  EXPECT_FALSE(pull.done.HasBeenNotified());
  std::thread slow([&] {
    for (uint64_t c = 0; c < 2; ++c) {
      absl::SleepFor(absl::Milliseconds(1200));
      ASSERT_TRUE(shard.PushAll(1, c, 1.0f).ok());
    }
  });
  slow.join();
  ASSERT_TRUE(pull.WaitFor(absl::Seconds(30)));
  EXPECT_TRUE(pull.status.ok()) << pull.status;
  EXPECT_GE(absl::Now() - start, absl::Seconds(2));
  EXPECT_TRUE(shard.consistency.dropped_workers().empty());
}

TEST(ConsistencyTest, OnAReplicaAPushOneClockAheadIsRetriedNotRefused) {
  // After a failover the new primary may lack the pushes completing clock
  // 0 (retries on their way) while a worker that pulled past it on the old
  // primary already pushes clock 1.
  Shard shard(testutil::Consistency(shardps::CONSISTENCY_SYNC, 2),
              /*replicated=*/true);
  ASSERT_TRUE(shard.PushAll(0, 0, 1.0f).ok());
  const absl::StatusOr<uint64_t> early = shard.PushAll(0, 1, 1.0f);
  EXPECT_TRUE(absl::IsUnavailable(early.status())) << early.status();
  EXPECT_NE(early.status().message().find("clock 0"), std::string::npos);
  // Further ahead is still a client's mistake.
  EXPECT_EQ(shard.PushAll(1, 2, 1.0f).status().code(),
            absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(shard.PushAll(1, 0, 3.0f).ok());
  ASSERT_TRUE(shard.PushAll(0, 1, 1.0f).ok());  // the retry
  for (uint64_t k = 100; k < 110; ++k) EXPECT_EQ(shard.Value(k), -2.0f);
}

TEST(ConsistencyTest, EndWaitsReleasesTodaysPullsOnly) {
  Shard shard(testutil::Consistency(shardps::CONSISTENCY_SYNC, 2));
  PullProbe pull;
  shard.consistency.Pull(1, 1, pull.Continuation());
  shard.consistency.EndWaits(absl::UnavailableError("no longer the primary"));
  ASSERT_TRUE(pull.done.HasBeenNotified());
  EXPECT_TRUE(absl::IsUnavailable(pull.status));
  // A later pull waits as before, and is released by the clock.
  PullProbe after;
  shard.consistency.Pull(1, 1, after.Continuation());
  EXPECT_FALSE(after.done.HasBeenNotified());
  ASSERT_TRUE(shard.PushAll(0, 0, 1.0f).ok());
  ASSERT_TRUE(shard.PushAll(1, 0, 1.0f).ok());
  ASSERT_TRUE(after.WaitFor(absl::Seconds(10)));
  EXPECT_TRUE(after.status.ok()) << after.status;
}

TEST(ConsistencyTest, CloseEndsWaitingPulls) {
  Shard shard(testutil::Consistency(shardps::CONSISTENCY_SYNC, 2));
  PullProbe pull;
  shard.consistency.Pull(1, 1, pull.Continuation());
  EXPECT_FALSE(pull.done.HasBeenNotified());
  shard.consistency.Close(absl::UnavailableError("server is shutting down"));
  ASSERT_TRUE(pull.done.HasBeenNotified());
  EXPECT_TRUE(absl::IsUnavailable(pull.status));
  PullProbe after;
  shard.consistency.Pull(1, 1, after.Continuation());
  EXPECT_TRUE(absl::IsUnavailable(after.status));
}

}  // namespace
}  // namespace ps
