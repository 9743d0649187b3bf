#include "ps/table/push_ledger.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"

namespace ps {
namespace {

PushId Id(uint64_t session, uint64_t sequence, uint64_t begin = 0,
          uint32_t worker = 3) {
  return PushId{worker, session, sequence, begin};
}

Admission::Kind Kind(const absl::StatusOr<Admission>& a) {
  EXPECT_TRUE(a.ok()) << a.status();
  return a.ok() ? a->kind : Admission::kApply;
}

TEST(PushLedgerTest, ACopyOfAnAppliedPieceIsAcknowledgedWithItsVersion) {
  PushLedger ledger;
  ASSERT_EQ(Kind(ledger.Admit(Id(7, 1, 0), 1)), Admission::kApply);
  ledger.Commit(Id(7, 1, 0), 41);
  absl::StatusOr<Admission> again = ledger.Admit(Id(7, 1, 0), 1);
  ASSERT_EQ(Kind(again), Admission::kDuplicate);
  EXPECT_EQ(again->version, 41u);
  // Another piece of the same push, and the next push, are new.
  EXPECT_EQ(Kind(ledger.Admit(Id(7, 1, 4096), 1)), Admission::kApply);
  ledger.Commit(Id(7, 1, 4096), 42);
  EXPECT_EQ(Kind(ledger.Admit(Id(7, 2, 0), 1)), Admission::kApply);
  ledger.Commit(Id(7, 2, 0), 43);
  // The same sequence from another worker is another push.
  EXPECT_EQ(Kind(ledger.Admit(Id(7, 1, 0, /*worker=*/4), 1)),
            Admission::kApply);
  ledger.Commit(Id(7, 1, 0, 4), 44);
  EXPECT_EQ(ledger.duplicates(), 1u);
}

TEST(PushLedgerTest, SessionZeroIsNeverDeduplicated) {
  PushLedger ledger;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(Kind(ledger.Admit(Id(0, 1), 0)), Admission::kApply);
    ledger.Commit(Id(0, 1), i + 1);
  }
  EXPECT_EQ(ledger.duplicates(), 0u);
}

TEST(PushLedgerTest, AckedBelowForgetsOldPiecesButStillRefusesToReapply) {
  PushLedger ledger;
  ASSERT_EQ(Kind(ledger.Admit(Id(7, 1), 1)), Admission::kApply);
  ledger.Commit(Id(7, 1), 1);
  // The client says push 1 has ended: its entry may go.
  ASSERT_EQ(Kind(ledger.Admit(Id(7, 2), 2)), Admission::kApply);
  ledger.Commit(Id(7, 2), 2);
  std::vector<shardps::LedgerWorker> saved;
  ledger.Save(&saved);
  ASSERT_EQ(saved.size(), 1u);
  ASSERT_EQ(saved[0].applied_size(), 1) << "push 1 should be forgotten";
  EXPECT_EQ(saved[0].applied(0).sequence(), 2u);
  // A late copy of push 1 is still not applied; its version is unknown.
  absl::StatusOr<Admission> late = ledger.Admit(Id(7, 1), 1);
  ASSERT_EQ(Kind(late), Admission::kDuplicate);
  EXPECT_EQ(late->version, 0u);
}

TEST(PushLedgerTest, AckedBelowAboveTheSequenceIsRefusedAndChangesNothing) {
  PushLedger ledger;
  ASSERT_EQ(Kind(ledger.Admit(Id(7, 4), 4)), Admission::kApply);
  ledger.Commit(Id(7, 4), 1);
  absl::StatusOr<Admission> bad = ledger.Admit(Id(7, 5), 10);
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status())) << bad.status();
  EXPECT_NE(bad.status().message().find("acked_below 10"), std::string::npos)
      << bad.status();
  // Believed, it would have made every sequence below 10 a duplicate.
  EXPECT_EQ(Kind(ledger.Admit(Id(7, 7), 7)), Admission::kApply);
  ledger.Commit(Id(7, 7), 2);
  // Equal is what a client sends with nothing else in flight.
  EXPECT_EQ(Kind(ledger.Admit(Id(7, 8), 8)), Admission::kApply);
  ledger.Commit(Id(7, 8), 4);
  EXPECT_EQ(ledger.duplicates(), 0u);
  // And it is refused in a session the ledger has not seen, which keeps
  // the worker's current one.
  bad = ledger.Admit(Id(9, 1), 2);
  EXPECT_TRUE(absl::IsInvalidArgument(bad.status())) << bad.status();
  EXPECT_EQ(Kind(ledger.Admit(Id(7, 8), 8)), Admission::kDuplicate);
}

TEST(PushLedgerTest, ANewSessionRetiresTheOldOne) {
  PushLedger ledger;
  ASSERT_EQ(Kind(ledger.Admit(Id(7, 1), 1)), Admission::kApply);
  ledger.Commit(Id(7, 1), 1);
  // The worker restarted: a new session starts its sequences again.
  ASSERT_EQ(Kind(ledger.Admit(Id(8, 1), 1)), Admission::kApply);
  ledger.Commit(Id(8, 1), 2);
  absl::StatusOr<Admission> old = ledger.Admit(Id(7, 2), 1);
  EXPECT_EQ(old.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(old.status().message().find("worker 3"), std::string::npos)
      << old.status();
}

TEST(PushLedgerTest, ACopyArrivingMidApplyWaitsForTheOutcome) {
  for (bool commit : {true, false}) {
    SCOPED_TRACE(commit ? "first copy commits" : "first copy aborts");
    PushLedger ledger;
    ASSERT_EQ(Kind(ledger.Admit(Id(7, 1), 1)), Admission::kApply);
    absl::StatusOr<Admission> second;
    absl::Notification answered;
    std::thread copy([&] {
      second = ledger.Admit(Id(7, 1), 1);
      answered.Notify();
    });
    // The copy must not be answered while the first is undecided.
    EXPECT_FALSE(answered.WaitForNotificationWithTimeout(absl::Seconds(0.2)));
    if (commit) {
      ledger.Commit(Id(7, 1), 9);
    } else {
      ledger.Abort(Id(7, 1));
    }
    copy.join();
    if (commit) {
      ASSERT_EQ(Kind(second), Admission::kDuplicate);
      EXPECT_EQ(second->version, 9u);
    } else {
      // The first copy was not applied, so this one must be.
      EXPECT_EQ(Kind(second), Admission::kApply);
      ledger.Commit(Id(7, 1), 1);
    }
  }
}

TEST(PushLedgerTest, SaveAndLoadKeepDuplicatesAndRetiredSessions) {
  PushLedger ledger;
  ASSERT_EQ(Kind(ledger.Admit(Id(7, 1), 1)), Admission::kApply);
  ledger.Commit(Id(7, 1), 1);
  ASSERT_EQ(Kind(ledger.Admit(Id(8, 5, 64), 5)), Admission::kApply);
  ledger.Commit(Id(8, 5, 64), 2);
  std::vector<shardps::LedgerWorker> saved;
  ledger.Save(&saved);
  google::protobuf::RepeatedPtrField<shardps::LedgerWorker> field(saved.begin(),
                                                                  saved.end());

  PushLedger restored;
  ASSERT_TRUE(restored.Load(field).ok());
  absl::StatusOr<Admission> again = restored.Admit(Id(8, 5, 64), 5);
  ASSERT_EQ(Kind(again), Admission::kDuplicate);
  EXPECT_EQ(again->version, 2u);
  EXPECT_EQ(restored.Admit(Id(7, 2), 1).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(Kind(restored.Admit(Id(8, 6, 64), 5)), Admission::kApply);

  // A damaged record is refused.
  field.Add()->set_worker(3);
  EXPECT_EQ(PushLedger().Load(field).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PushLedgerTest, PiecesPendingPerWorkerAreBounded) {
  PushLedger ledger;
  for (uint64_t seq = 1; seq <= PushLedger::kMaxPiecesPerWorker; ++seq) {
    ASSERT_EQ(Kind(ledger.Admit(Id(7, seq), 1)), Admission::kApply);
    ledger.Commit(Id(7, seq), seq);
  }
  absl::StatusOr<Admission> over = ledger.Admit(Id(7, 1 << 20), 1);
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  // Once the client acknowledges them, there is room again.
  EXPECT_EQ(Kind(ledger.Admit(Id(7, 1 << 20), 1 << 20)), Admission::kApply);
}

TEST(PushLedgerTest, PiecesOverAllWorkersAreBounded) {
  PushLedger ledger;
  constexpr uint32_t kWorkers =
      PushLedger::kMaxPieces / PushLedger::kMaxPiecesPerWorker;
  for (uint32_t w = 0; w < kWorkers; ++w) {
    for (uint64_t seq = 1; seq <= PushLedger::kMaxPiecesPerWorker; ++seq) {
      ASSERT_EQ(Kind(ledger.Admit(Id(7, seq, 0, w), 1)), Admission::kApply);
      ledger.Commit(Id(7, seq, 0, w), seq);
    }
  }
  EXPECT_EQ(ledger.Admit(Id(7, 1, 0, kWorkers), 1).status().code(),
            absl::StatusCode::kResourceExhausted);
  // One worker acknowledging its pushes frees room for the others.
  EXPECT_EQ(Kind(ledger.Admit(Id(7, 1 << 20, 0, 0), 1 << 20)),
            Admission::kApply);
  ledger.Commit(Id(7, 1 << 20, 0, 0), 1);
  EXPECT_EQ(Kind(ledger.Admit(Id(7, 1, 0, kWorkers), 1)), Admission::kApply);
}

}  // namespace
}  // namespace ps
