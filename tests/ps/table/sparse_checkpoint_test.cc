// Sparse tables in checkpoints: every row, its optimizer state, the version
// and the push ledger survive a write and a restore into a new registry, so
// training goes on as if the server never stopped, and a push sent again
// after the restart is acknowledged, not applied twice. Damaged files and
// impossible snapshots are refused by name.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "ps/table/checkpoint.h"
#include "ps/table/table_registry.h"
#include "util/files.h"

namespace ps {
namespace {

shardps::CreateTableRequest RowsSpec() {
  shardps::CreateTableRequest spec;
  spec.set_job("j");
  spec.set_table("emb");
  spec.set_num_shards(1);
  spec.set_dim(3);
  spec.set_max_rows(20000);
  spec.mutable_optimizer()->set_name("adagrad");
  spec.mutable_optimizer()->set_learning_rate(0.5f);
  spec.mutable_optimizer()->set_initial_accumulator(0.1f);
  spec.mutable_optimizer()->set_epsilon(1e-8f);
  spec.mutable_init()->set_kind("normal");
  spec.mutable_init()->set_scale(0.1f);
  spec.mutable_init()->set_seed(4);
  return spec;
}

SparseTable* Create(TableRegistry& registry) {
  bool created = false;
  absl::StatusOr<SparseTable*> t =
      registry.CreateSparseTable(RowsSpec(), &created);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? *t : nullptr;
}

// A push of gradient `g` to each of `ids`, as worker 1's push `sequence`.
absl::StatusOr<PushOutcome> PushRows(SparseTable* table,
                                     const std::vector<uint64_t>& ids,
                                     uint64_t sequence, float g) {
  const std::vector<float> grads(ids.size() * 3, g);
  SparsePush p;
  p.id = PushId{1, 99, sequence, 0};
  p.ids = ids;
  p.grads = UnalignedFloats(grads.data(), grads.size());
  return table->Push(p);
}

std::vector<float> Rows(SparseTable* table, const std::vector<uint64_t>& ids) {
  std::vector<float> out(ids.size() * 3);
  EXPECT_TRUE(table->Pull(ids, /*create=*/false, out.data()).ok());
  return out;
}

class SparseCheckpointTest : public testing::Test {
 protected:
  void SetUp() override {
    table_ = Create(original_);
    ASSERT_NE(table_, nullptr);
    // More rows than one block holds, so the save crosses blocks.
    for (uint64_t i = 0; i < 5000; ++i) ids_.push_back(i * 7919 + 3);
    ASSERT_TRUE(PushRows(table_, ids_, 1, 1.0f).ok());
    ASSERT_TRUE(PushRows(table_, {3, 7922}, 2, -2.0f).ok());
  }

  std::string Write() {
    std::vector<TableSnapshot> snapshot;
    original_.Snapshot(&snapshot);
    const std::string path = dir_.path() + "/checkpoint";
    EXPECT_TRUE(WriteCheckpoint(path, "j", snapshot).ok());
    return path;
  }

  testutil::ScopedTempDir dir_;
  TableRegistry original_{"j"};
  SparseTable* table_ = nullptr;
  std::vector<uint64_t> ids_;
};

TEST_F(SparseCheckpointTest, RowsStateVersionAndLedgerSurviveARestore) {
  absl::StatusOr<Checkpoint> read = ReadCheckpoint(Write());
  ASSERT_TRUE(read.ok()) << read.status();
  ASSERT_EQ(read->tables.size(), 1u);
  EXPECT_EQ(read->tables[0].meta.rows(), 5000u);
  TableRegistry restored("j");
  ASSERT_TRUE(restored.Restore(std::move(read->tables[0])).ok());
  absl::StatusOr<SparseTable*> copy = restored.FindSparse("j", "emb");
  ASSERT_TRUE(copy.ok()) << copy.status();
  EXPECT_EQ((*copy)->num_rows(), 5000u);
  EXPECT_EQ((*copy)->version(), 2u);
  EXPECT_EQ(Rows(*copy, ids_), Rows(table_, ids_));
  // Push 2 again after the restart: acknowledged, not applied.
  absl::StatusOr<PushOutcome> again = PushRows(*copy, {3, 7922}, 2, -2.0f);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->duplicate);
  // The next push lands the same on both: Adagrad's accumulators came too.
  ASSERT_TRUE(PushRows(table_, {3, 15841}, 3, 0.5f).ok());
  ASSERT_TRUE(PushRows(*copy, {3, 15841}, 3, 0.5f).ok());
  EXPECT_EQ(Rows(*copy, ids_), Rows(table_, ids_));
  // A row never touched starts from the same initializer on both.
  std::vector<float> fresh_a(3), fresh_b(3);
  ASSERT_TRUE(table_->Pull({{42}}, true, fresh_a.data()).ok());
  ASSERT_TRUE((*copy)->Pull({{42}}, true, fresh_b.data()).ok());
  EXPECT_EQ(fresh_a, fresh_b);
}

TEST_F(SparseCheckpointTest, ATruncatedFileIsRefusedByNameAndOffset) {
  const std::string path = Write();
  const std::string whole = testutil::ReadFile(path);
  testutil::WriteFile(path, whole.substr(0, whole.size() / 2));
  absl::Status s = ReadCheckpoint(path).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), path)) << s;
}

TEST_F(SparseCheckpointTest, ImpossibleSnapshotsAreRefusedAndRestoreNothing) {
  std::vector<TableSnapshot> snapshot;
  original_.Snapshot(&snapshot);
  ASSERT_EQ(snapshot.size(), 1u);
  // The first two saved ids made equal.
  TableSnapshot twice = snapshot[0];
  std::memcpy(&twice.arrays[0][2], &twice.arrays[0][0], sizeof(uint64_t));
  TableRegistry a("j");
  absl::Status s = a.Restore(twice);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "saved twice")) << s;
  EXPECT_EQ(a.FindSparse("j", "emb").status().code(),
            absl::StatusCode::kNotFound);
  // A values array one row short.
  TableSnapshot short_values = snapshot[0];
  short_values.arrays[1].resize(short_values.arrays[1].size() - 3);
  EXPECT_EQ(a.Restore(short_values).code(), absl::StatusCode::kInvalidArgument);
  // More rows than the spec allows.
  TableSnapshot too_many = snapshot[0];
  too_many.meta.mutable_spec()->set_max_rows(10);
  EXPECT_EQ(a.Restore(too_many).code(), absl::StatusCode::kInvalidArgument);
  // The real one still restores into the same registry.
  EXPECT_TRUE(a.Restore(snapshot[0]).ok());
}

}  // namespace
}  // namespace ps
