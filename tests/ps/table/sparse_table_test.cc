// SparseTable: ids of another shard are refused by name and change
// nothing; a push resent after a lost reply is acknowledged, not applied
// twice; a refused push leaves no ledger entry, so its corrected resend is
// applied; each applied push counts one version; an overwrite (a replica
// catching up) takes another table's state whole, or changes nothing.
#include "ps/table/sparse_table.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/match.h"

namespace ps {
namespace {

class SparseTableTest : public testing::Test {
 protected:
  void SetUp() override {
    SparseTableOptions o;
    o.rows.dim = 2;
    o.rows.max_rows = 100;
    o.rows.init.set_kind("constant");
    o.rows.init.set_value(1.0f);
    o.rows.optimizer.set_name("sgd");
    o.rows.optimizer.set_learning_rate(1.0f);
    o.sharding = RowSharding::kRange;
    o.num_shards = 2;
    o.shard_index = 1;  // ids [50, 100)
    o.id_space = 100;
    absl::StatusOr<std::unique_ptr<SparseTable>> t = SparseTable::Create(o);
    ASSERT_TRUE(t.ok()) << t.status();
    table_ = *std::move(t);
  }

  std::vector<float> Row(uint64_t id) {
    std::vector<float> out(2);
    EXPECT_TRUE(table_->Pull({{id}}, /*create=*/false, out.data()).ok());
    return out;
  }

  SparsePush Push(uint64_t sequence, const std::vector<uint64_t>& ids,
                  const std::vector<float>& grads) {
    SparsePush p;
    p.id = PushId{/*worker=*/3, /*session=*/77, sequence, /*begin=*/0};
    p.ids = ids;
    p.grads = UnalignedFloats(grads.data(), grads.size());
    return p;
  }

  std::unique_ptr<SparseTable> table_;
};

TEST_F(SparseTableTest, IdsOfAnotherShardAreRefusedByName) {
  std::vector<float> out(4);
  const absl::Status pull = table_->Pull({{60, 7}}, true, out.data());
  EXPECT_EQ(pull.code(), absl::StatusCode::kInvalidArgument) << pull;
  EXPECT_TRUE(absl::StrContains(
      pull.message(),
      "row 7 belongs to shard 0 of 2, not to this server's shard 1"))
      << pull;
  const std::vector<uint64_t> ids = {60, 7};
  const std::vector<float> grads(4, 1.0f);
  const absl::StatusOr<PushOutcome> push = table_->Push(Push(1, ids, grads));
  EXPECT_EQ(push.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(table_->num_rows(), 0u);  // not even row 60 was created
  EXPECT_EQ(table_->version(), 0u);
  EXPECT_EQ(table_->rows_pulled(), 0u);
  EXPECT_EQ(table_->rows_pushed(), 0u);
}

TEST_F(SparseTableTest, AResentPushIsAcknowledgedNotAppliedTwice) {
  const std::vector<uint64_t> ids = {50, 99};
  const std::vector<float> grads = {1, 2, 3, 4};
  absl::StatusOr<PushOutcome> first = table_->Push(Push(1, ids, grads));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->duplicate);
  EXPECT_EQ(first->version, 1u);
  absl::StatusOr<PushOutcome> again = table_->Push(Push(1, ids, grads));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->duplicate);
  EXPECT_EQ(again->version, 1u);
  EXPECT_EQ(Row(50), (std::vector<float>{0, -1}));
  EXPECT_EQ(Row(99), (std::vector<float>{-2, -3}));
  EXPECT_EQ(table_->duplicate_pushes(), 1u);
  EXPECT_EQ(table_->rows_pushed(), 2u);  // the copy is not load
  EXPECT_EQ(table_->rows_pulled(), 2u);  // Row(50), Row(99)
  // The next push is applied and counts a version.
  absl::StatusOr<PushOutcome> next = table_->Push(Push(2, ids, grads));
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(next->version, 2u);
  EXPECT_EQ(Row(50), (std::vector<float>{-1, -3}));
}

TEST_F(SparseTableTest, ARefusedPushCanBeSentAgainCorrected) {
  const std::vector<uint64_t> ids = {55};
  const std::vector<float> bad = {1, std::nanf("")};
  EXPECT_EQ(table_->Push(Push(1, ids, bad)).status().code(),
            absl::StatusCode::kInvalidArgument);
  const std::vector<float> good = {1, 1};
  absl::StatusOr<PushOutcome> fixed = table_->Push(Push(1, ids, good));
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  EXPECT_FALSE(fixed->duplicate);
  EXPECT_EQ(Row(55), (std::vector<float>{0, 0}));
  EXPECT_EQ(table_->version(), 1u);
}

TEST_F(SparseTableTest, AckedBelowPastTheSequenceIsRefused) {
  const std::vector<uint64_t> ids = {55};
  const std::vector<float> grads = {1, 1};
  SparsePush p = Push(1, ids, grads);
  p.acked_below = 5;
  EXPECT_EQ(table_->Push(p).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(table_->num_rows(), 0u);
}

TEST_F(SparseTableTest, OverwriteTakesAnotherTablesRowsVersionAndLedger) {
  const std::vector<float> grads = {1, 1};
  for (uint64_t seq = 1; seq <= 3; ++seq) {
    ASSERT_TRUE(table_->Push(Push(seq, {50}, grads)).ok());
  }
  // The state a primary holds: other rows, version 2, sequences 1 and 2.
  absl::StatusOr<std::unique_ptr<SparseTable>> primary =
      SparseTable::Create(table_->options());
  ASSERT_TRUE(primary.ok()) << primary.status();
  for (uint64_t seq = 1; seq <= 2; ++seq) {
    ASSERT_TRUE((*primary)->Push(Push(seq, {60, 61}, {2, 2, 3, 3})).ok());
  }
  TableSnapshot snapshot;
  (*primary)->Snapshot(&snapshot);
  EXPECT_EQ(snapshot.meta.admitted_pushes(), 2u);

  ASSERT_TRUE(table_->Overwrite(snapshot).ok());
  EXPECT_EQ(table_->version(), 2u);
  EXPECT_EQ(table_->num_rows(), 2u);
  std::vector<float> out(2);
  EXPECT_EQ(table_->Pull({{50}}, /*create=*/false, out.data()).code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(Row(60), (std::vector<float>{-3, -3}));
  EXPECT_EQ(Row(61), (std::vector<float>{-5, -5}));
  // The ledger is the primary's: its sequence 2 is a duplicate here, and
  // this table's own sequence 3, not in it, is applied.
  absl::StatusOr<PushOutcome> again = table_->Push(Push(2, {60, 61}, grads));
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->duplicate);
  absl::StatusOr<PushOutcome> third = table_->Push(Push(3, {60}, grads));
  ASSERT_TRUE(third.ok());
  EXPECT_FALSE(third->duplicate);
  EXPECT_EQ(third->version, 3u);
  EXPECT_EQ(Row(60), (std::vector<float>{-4, -4}));
}

TEST_F(SparseTableTest, AnOverwriteThatDoesNotFitChangesNothing) {
  const std::vector<float> grads = {1, 1};
  ASSERT_TRUE(table_->Push(Push(1, {50}, grads)).ok());
  TableSnapshot good;
  table_->Snapshot(&good);
  ASSERT_TRUE(table_->Push(Push(2, {51}, grads)).ok());

  TableSnapshot short_values = good;
  short_values.arrays[1].pop_back();
  TableSnapshot miscounted = good;
  miscounted.meta.set_rows(5);
  TableSnapshot twice_listed = good;
  *twice_listed.meta.add_ledger() = good.meta.ledger(0);
  for (const TableSnapshot* bad : {&short_values, &miscounted, &twice_listed}) {
    const absl::Status s = table_->Overwrite(*bad);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_EQ(table_->version(), 2u);
    EXPECT_EQ(table_->num_rows(), 2u);
    EXPECT_EQ(Row(51), (std::vector<float>{0, 0}));
    // The ledger still holds sequence 2.
    absl::StatusOr<PushOutcome> again = table_->Push(Push(2, {51}, grads));
    ASSERT_TRUE(again.ok());
    EXPECT_TRUE(again->duplicate);
  }
}

TEST_F(SparseTableTest, APullDuringAnOverwriteSeesAllOldRowsOrAllNew) {
  const std::vector<uint64_t> ids = {50, 60, 70, 80, 90};
  std::vector<float> out(2 * ids.size());
  ASSERT_TRUE(table_->Pull(ids, /*create=*/true, out.data()).ok());
  TableSnapshot old_rows, new_rows;
  table_->Snapshot(&old_rows);
  new_rows = old_rows;
  for (float& v : new_rows.arrays[1]) v = 7.0f;
  std::atomic<bool> done{false};
  std::atomic<int> mixed{0};
  std::thread reader([&] {
    std::vector<float> rows(2 * ids.size());
    while (!done.load()) {
      if (!table_->Pull(ids, /*create=*/false, rows.data()).ok()) {
        mixed.fetch_add(1);
        continue;
      }
      const float first = rows[0];
      for (float v : rows) {
        if (v != first) mixed.fetch_add(1);
      }
    }
  });
  for (int i = 0; i < 200; ++i) {
    ASSERT_TRUE(table_->Overwrite(i % 2 == 0 ? new_rows : old_rows).ok());
  }
  done = true;
  reader.join();
  EXPECT_EQ(mixed.load(), 0);
  ASSERT_TRUE(table_->Overwrite(new_rows).ok());
  EXPECT_EQ(Row(90), (std::vector<float>{7, 7}));
}

TEST(SparseTableCreateTest, AShardOutsideTheTableIsRefused) {
  SparseTableOptions o;
  o.rows.dim = 2;
  o.rows.max_rows = 10;
  o.rows.optimizer.set_name("sgd");
  o.rows.optimizer.set_learning_rate(1.0f);
  o.num_shards = 2;
  o.shard_index = 2;
  EXPECT_EQ(SparseTable::Create(o).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ps
