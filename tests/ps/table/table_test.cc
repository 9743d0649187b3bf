// Table: a push is one transaction (validated whole, applied once, or
// refused changing nothing), and a snapshot restores a table that goes on
// exactly as the original does.
#include "ps/table/table.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "util/table.h"

namespace ps {
namespace {

using testutil::PushValue;
using testutil::StatsOf;
using testutil::TableSpec;
using testutil::Values;

std::unique_ptr<Table> Make(const shardps::CreateTableRequest& spec) {
  const KeyRange range = RangePartition(spec.num_params(), spec.num_shards())
                             .shard_range(spec.shard_index());
  absl::StatusOr<std::unique_ptr<Table>> table = Table::Create(spec, range);
  EXPECT_TRUE(table.ok()) << table.status();
  return table.ok() ? *std::move(table) : nullptr;
}

// A snapshot of `table` restored into a new one.
std::unique_ptr<Table> Reborn(Table& table) {
  TableSnapshot snapshot;
  table.Snapshot(&snapshot);
  absl::StatusOr<std::unique_ptr<Table>> restored =
      Table::Restore(std::move(snapshot), table.range());
  EXPECT_TRUE(restored.ok()) << restored.status();
  return restored.ok() ? *std::move(restored) : nullptr;
}

std::map<uint32_t, uint64_t> Clocks(const Table& table) {
  std::map<uint32_t, uint64_t> clocks;
  const shardps::TableStats stats = StatsOf(&table);
  for (const auto& c : stats.worker_clocks()) {
    clocks[c.worker()] = c.clock();
  }
  return clocks;
}

shardps::CreateTableRequest SyncSpec(uint64_t p) {
  shardps::CreateTableRequest spec = TableSpec("bsp", p);
  shardps::ConsistencyConfig* c = spec.mutable_consistency();
  c->set_mode(shardps::CONSISTENCY_SYNC);
  c->set_num_workers(2);
  c->set_straggler_timeout_seconds(60);
  return spec;
}

TEST(TableTest, APushIsAppliedOnceAndItsCopiesAreAcknowledged) {
  std::unique_ptr<Table> table = Make(TableSpec("w", 1000, 1, 0, 1.0f));
  const std::vector<float> initial = Values(table.get());
  absl::StatusOr<PushOutcome> first = PushValue(table.get(), 0, 7, 1, 2.0f);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->version, 1u);
  EXPECT_FALSE(first->duplicate);
  absl::StatusOr<PushOutcome> again = PushValue(table.get(), 0, 7, 1, 2.0f);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->duplicate);
  EXPECT_EQ(again->version, 1u);  // what the first arrival produced
  EXPECT_EQ(table->version(), 1u);
  EXPECT_EQ(table->duplicates(), 1u);
  const std::vector<float> after = Values(table.get());
  for (size_t k = 0; k < after.size(); ++k) {
    ASSERT_EQ(after[k], initial[k] - 2.0f) << k;
  }
}

TEST(TableTest, ARefusedPushChangesNothingNotEvenTheLedger) {
  std::unique_ptr<Table> table = Make(TableSpec("w", 64, 1, 0, 1.0f));
  const std::vector<float> initial = Values(table.get());
  std::vector<float> grad(64, 1.0f);
  grad[63] = std::numeric_limits<float>::quiet_NaN();
  const absl::string_view bytes(reinterpret_cast<const char*>(grad.data()),
                                grad.size() * sizeof(float));
  FloatPieces nan_gradient(absl::MakeConstSpan(&bytes, 1));
  PushArgs push;
  push.keys = table->range();
  push.session = 9;
  push.sequence = 1;
  EXPECT_TRUE(
      absl::IsInvalidArgument(table->ApplyPush(push, nan_gradient).status()));
  push.lr_scale = -1;
  grad[63] = 1.0f;
  FloatPieces gradient(absl::MakeConstSpan(&bytes, 1));
  EXPECT_TRUE(
      absl::IsInvalidArgument(table->ApplyPush(push, gradient).status()));
  push.keys = {10, 74};  // past the shard
  EXPECT_TRUE(
      absl::IsInvalidArgument(table->ApplyPush(push, gradient).status()));
  EXPECT_EQ(Values(table.get()), initial);
  EXPECT_EQ(table->version(), 0u);
  // The refused pushes left no trace in the ledger: the same id applies.
  absl::StatusOr<PushOutcome> ok = PushValue(table.get(), 0, 9, 1, 1.0f);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_FALSE(ok->duplicate);
}

TEST(TableTest, AnAsyncTableTakesExactlyMaxWorkersWorkers) {
  shardps::CreateTableRequest spec = TableSpec("w", 64, 1, 0, 1.0f);
  spec.mutable_init()->Clear();  // zeros: every step below is exact
  TableSettings settings;
  settings.max_workers = 8;
  absl::StatusOr<std::unique_ptr<Table>> made =
      Table::Create(spec, {0, 64}, settings);
  ASSERT_TRUE(made.ok()) << made.status();
  Table* table = made->get();
  // 32 new workers push at once, with and without a session: exactly 8
  // get in, whichever they are.
  std::vector<std::thread> threads;
  std::atomic<int> applied{0}, refused{0};
  for (uint32_t w = 0; w < 32; ++w) {
    threads.emplace_back([&, w] {
      absl::StatusOr<PushOutcome> r =
          PushValue(table, w, w % 2 == 0 ? 0 : 100 + w, 1, 1.0f);
      if (r.ok()) {
        ++applied;
      } else if (absl::IsResourceExhausted(r.status())) {
        ++refused;
      } else {
        ADD_FAILURE() << r.status();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(applied.load(), 8);
  EXPECT_EQ(refused.load(), 24);
  std::map<uint32_t, uint64_t> clocks = Clocks(*table);
  ASSERT_EQ(clocks.size(), 8u);
  EXPECT_EQ(table->version(), 8u);
  EXPECT_EQ(Values(table), std::vector<float>(64, -8.0f));
  // The 8 go on pushing; a refused worker is still refused.
  const uint32_t known = clocks.begin()->first;
  EXPECT_TRUE(PushValue(table, known, 0, 2, 1.0f).ok());
  uint32_t stranger = 0;
  while (clocks.count(stranger) != 0) ++stranger;
  EXPECT_TRUE(absl::IsResourceExhausted(
      PushValue(table, stranger, 0, 1, 1.0f).status()));
}

TEST(TableTest, ASyncTableRefusesWorkersOutsideItsBarrierBeforeTheLedger) {
  std::unique_ptr<Table> table = Make(SyncSpec(64));
  absl::StatusOr<PushOutcome> r = PushValue(table.get(), 2, 5, 1, 1.0f);
  EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
  EXPECT_NE(r.status().message().find("worker 2 is not in the barrier"),
            std::string::npos)
      << r.status();
  EXPECT_TRUE(Clocks(*table).empty());
  EXPECT_EQ(table->version(), 0u);
}

TEST(TableTest, ARestoredTableKeepsValuesVersionClocksAndLedger) {
  std::unique_ptr<Table> before = Make(TableSpec("w", 3000));
  ASSERT_TRUE(PushValue(before.get(), 0, 11, 1, 1.0f, {}, 4).ok());
  ASSERT_TRUE(PushValue(before.get(), 1, 22, 1, -2.0f, {}, 2).ok());
  ASSERT_TRUE(PushValue(before.get(), 0, 11, 2, 0.25f, {}, 5).ok());
  std::unique_ptr<Table> after = Reborn(*before);
  ASSERT_NE(after, nullptr);
  EXPECT_EQ(Values(after.get()), Values(before.get()));
  EXPECT_EQ(after->version(), 3u);
  EXPECT_EQ(StatsOf(after.get()).restored_version(), 3u);
  EXPECT_EQ(StatsOf(before.get()).restored_version(), 0u);
  EXPECT_EQ(Clocks(*after), (std::map<uint32_t, uint64_t>{{0, 5}, {1, 2}}));
  // A push the snapshot holds is a duplicate after the restore; the next
  // one is applied.
  absl::StatusOr<PushOutcome> replay = PushValue(after.get(), 0, 11, 2, 0.25f);
  ASSERT_TRUE(replay.ok());
  EXPECT_TRUE(replay->duplicate);
  EXPECT_EQ(replay->version, 3u);
  ASSERT_TRUE(PushValue(after.get(), 0, 11, 3, 1.0f).ok());
  EXPECT_EQ(after->version(), 4u);
}

TEST(TableTest, OptimizerStateSurvivesARestore) {
  // Adam's moments and step counts are in the snapshot: a restored table
  // continues exactly as the original does.
  shardps::CreateTableRequest spec = TableSpec("adam", 1000);
  shardps::OptimizerConfig* adam = spec.mutable_optimizer();
  adam->set_name("adam");
  adam->set_learning_rate(0.01f);
  adam->set_beta1(0.9f);
  adam->set_beta2(0.999f);
  adam->set_epsilon(1e-8f);
  std::unique_ptr<Table> before = Make(spec);
  ASSERT_TRUE(PushValue(before.get(), 0, 11, 1, 1.0f).ok());
  ASSERT_TRUE(PushValue(before.get(), 0, 11, 2, -3.0f).ok());
  TableSnapshot snapshot;
  before->Snapshot(&snapshot);
  EXPECT_EQ(snapshot.arrays.size(), 4u);  // values, m, v, t
  std::unique_ptr<Table> after = Reborn(*before);
  ASSERT_TRUE(PushValue(before.get(), 0, 11, 3, 0.5f).ok());
  ASSERT_TRUE(PushValue(after.get(), 0, 11, 3, 0.5f).ok());
  // (Had m, v and t restarted at zero, this push would have moved every
  // value by exactly the learning rate, as Adam's first step does.)
  EXPECT_EQ(Values(after.get()), Values(before.get()));
}

TEST(TableTest, ASyncBarrierSurvivesARestoreMidClock) {
  // The snapshot is taken while clock 0 is half gathered: worker 0 has
  // pushed half of its keys. The restored table must know that (and the
  // running sum), so that the rest of the clock completes it exactly as on
  // the original.
  std::unique_ptr<Table> before = Make(SyncSpec(1000));
  const KeyRange all = before->range();
  const KeyRange first{all.begin, all.begin + 100},
      rest{all.begin + 100, all.end};
  ASSERT_TRUE(PushValue(before.get(), 0, 0, 0, 2.0f, first).ok());
  TableSnapshot snapshot;
  before->Snapshot(&snapshot);
  EXPECT_EQ(snapshot.arrays.size(), 2u);  // values and the running sum
  std::unique_ptr<Table> after = Reborn(*before);
  EXPECT_EQ(PushValue(after.get(), 0, 0, 0, 2.0f, first).status().code(),
            absl::StatusCode::kFailedPrecondition)
      << "the restored barrier forgot what worker 0 pushed";
  for (Table* t : {before.get(), after.get()}) {
    ASSERT_TRUE(PushValue(t, 0, 0, 0, 2.0f, rest).ok());
    ASSERT_TRUE(PushValue(t, 1, 0, 0, 4.0f, all).ok());
    EXPECT_EQ(t->version(), 1u);
    EXPECT_EQ(StatsOf(t).consistency_clock(), 1u);
  }
  // lr 0.5 times the mean gradient 3, on every key.
  EXPECT_EQ(Values(after.get()), Values(before.get()));
  const std::vector<float> initial = Values(Make(SyncSpec(1000)).get());
  EXPECT_FLOAT_EQ(Values(after.get())[150], initial[150] - 1.5f);
}

TEST(TableTest, ASnapshotThatDoesNotFitTheSpecIsRefusedByName) {
  std::unique_ptr<Table> table = Make(TableSpec("w", 1000));
  TableSnapshot snapshot;
  table->Snapshot(&snapshot);
  TableSnapshot extra = snapshot;
  extra.arrays.push_back(extra.arrays[0]);
  absl::Status s = Table::Restore(std::move(extra), table->range()).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("table 'w'"), std::string::npos) << s;
  TableSnapshot short_array = snapshot;
  short_array.arrays[0].pop_back();
  s = Table::Restore(std::move(short_array), table->range()).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  TableSnapshot foreign_barrier = snapshot;
  foreign_barrier.meta.mutable_barrier()->add_workers();
  s = Table::Restore(std::move(foreign_barrier), table->range()).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
}

TEST(TableTest, OverwriteTakesTheSourcesStateAndRefusesWhatDoesNotFit) {
  // A replica catching up again: its table, with pushes of its own that
  // the primary never had, takes the primary's state whole.
  std::unique_ptr<Table> primary = Make(TableSpec("w", 2000));
  std::unique_ptr<Table> replica = Make(TableSpec("w", 2000));
  ASSERT_TRUE(PushValue(primary.get(), 0, 11, 1, 1.0f, {}, 4).ok());
  ASSERT_TRUE(PushValue(primary.get(), 1, 22, 1, -2.0f, {}, 2).ok());
  ASSERT_TRUE(PushValue(replica.get(), 0, 11, 1, 1.0f, {}, 4).ok());
  ASSERT_TRUE(PushValue(replica.get(), 3, 33, 1, 5.0f, {}, 9).ok());
  ASSERT_TRUE(PushValue(replica.get(), 3, 33, 2, 5.0f, {}, 10).ok());
  TableSnapshot snapshot;
  primary->Snapshot(&snapshot);
  const std::vector<float> before = Values(replica.get());
  // Refused, changing nothing: another spec, arrays that do not fit.
  TableSnapshot other = snapshot;
  other.meta.mutable_spec()->mutable_optimizer()->set_learning_rate(9.0f);
  absl::Status s = replica->Overwrite(other);
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_NE(s.message().find("optimizer.learning_rate"), std::string::npos)
      << s;
  TableSnapshot short_array = snapshot;
  short_array.arrays[0].pop_back();
  s = replica->Overwrite(short_array);
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_EQ(Values(replica.get()), before);
  EXPECT_EQ(replica->version(), 3u);
  // Taken: values, version, clocks and ledger are the primary's.
  ASSERT_TRUE(replica->Overwrite(snapshot).ok());
  EXPECT_EQ(Values(replica.get()), Values(primary.get()));
  EXPECT_EQ(replica->version(), 2u);
  EXPECT_EQ(Clocks(*replica), (std::map<uint32_t, uint64_t>{{0, 4}, {1, 2}}));
  absl::StatusOr<PushOutcome> replay =
      PushValue(replica.get(), 1, 22, 1, -2.0f);
  ASSERT_TRUE(replay.ok());
  EXPECT_TRUE(replay->duplicate);
  // Worker 3's pushes were the replica's alone: its next one is applied.
  absl::StatusOr<PushOutcome> again = PushValue(replica.get(), 3, 33, 2, 5.0f);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->duplicate);
}

TEST(TableTest, OverwriteOfASyncTableTakesTheBarrierMidClock) {
  // The source has worker 0's part of clock 0 gathered; the replica being
  // overwritten had gathered nothing. After it, worker 1's push completes
  // the clock on both alike.
  std::unique_ptr<Table> primary = Make(SyncSpec(1000));
  std::unique_ptr<Table> replica = Make(SyncSpec(1000));
  ASSERT_TRUE(PushValue(primary.get(), 0, 7, 1, 2.0f).ok());
  EXPECT_EQ(primary->admitted_pushes(), 1u);
  TableSnapshot snapshot;
  primary->Snapshot(&snapshot);
  EXPECT_EQ(snapshot.meta.admitted_pushes(), 1u);
  ASSERT_TRUE(replica->Overwrite(snapshot).ok());
  EXPECT_EQ(replica->admitted_pushes(), 1u);
  absl::StatusOr<PushOutcome> again = PushValue(replica.get(), 0, 7, 1, 2.0f);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->duplicate) << "the ledger came with the barrier";
  for (Table* t : {primary.get(), replica.get()}) {
    absl::StatusOr<PushOutcome> last = PushValue(t, 1, 8, 1, 4.0f);
    ASSERT_TRUE(last.ok()) << last.status();
    EXPECT_EQ(last->position, 2u);
    EXPECT_EQ(t->version(), 1u);
  }
  EXPECT_EQ(Values(replica.get()), Values(primary.get()));
  // A barrier of another size is refused, the ledger left as it was.
  std::unique_ptr<Table> three = Make(SyncSpec(1000));
  TableSnapshot wrong = snapshot;
  wrong.meta.mutable_barrier()->add_workers();
  EXPECT_TRUE(absl::IsInvalidArgument(three->Overwrite(wrong)));
  absl::StatusOr<PushOutcome> first = PushValue(three.get(), 0, 7, 1, 2.0f);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->duplicate);
}

// Assigns values[k] = first + k to `keys` as (worker 5, session, sequence).
absl::StatusOr<PushOutcome> AssignRamp(Table* table, uint64_t session,
                                       uint64_t sequence, KeyRange keys,
                                       float first) {
  PushArgs args;
  args.worker = 5;  // outside a two-worker barrier: an assignment has none
  args.keys = keys;
  args.session = session;
  args.sequence = sequence;
  args.acked_below = sequence;
  std::vector<float> values(keys.size());
  for (size_t k = 0; k < values.size(); ++k) values[k] = first + k;
  const absl::string_view bytes(reinterpret_cast<const char*>(values.data()),
                                values.size() * sizeof(float));
  FloatPieces pieces(absl::MakeConstSpan(&bytes, 1));
  return table->Assign(args, pieces);
}

TEST(TableTest, AssignReplacesValuesOnceAndKeepsTheOptimizerState) {
  shardps::CreateTableRequest spec = TableSpec("m", 1000, 1, 0, 0.5f);
  spec.mutable_optimizer()->set_name("momentum");
  spec.mutable_optimizer()->set_momentum(0.5f);
  std::unique_ptr<Table> table = Make(spec);
  ASSERT_TRUE(PushValue(table.get(), 0, 3, 1, 2.0f).ok());  // v = 2
  const KeyRange keys{100, 300};
  absl::StatusOr<PushOutcome> first = AssignRamp(table.get(), 3, 2, keys, 7);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->duplicate);
  EXPECT_EQ(first->version, 2u);
  // A retry is acknowledged, not applied again over a later push.
  ASSERT_TRUE(PushValue(table.get(), 0, 3, 3, 0.0f).ok());
  absl::StatusOr<PushOutcome> again = AssignRamp(table.get(), 3, 2, keys, 7);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->duplicate);
  EXPECT_EQ(table->version(), 3u);
  // The last push (gradient 0) moved every key by the momentum it kept:
  // v = 0.5 * 2 = 1, w -= 0.5 * 1.
  const std::vector<float> values = Values(table.get());
  EXPECT_EQ(values[100], 7.0f - 0.5f);
  EXPECT_EQ(values[299], 7.0f + 199 - 0.5f);
  const std::vector<float> initial = Values(Make(spec).get());
  // Outside the range: two steps, -1 then -0.5.
  EXPECT_EQ(values[99], initial[99] - 1.0f - 0.5f);
  EXPECT_EQ(values[300], initial[300] - 1.0f - 0.5f);
  // And the snapshot holds the assignment and its ledger entry.
  std::unique_ptr<Table> reborn = Reborn(*table);
  EXPECT_EQ(Values(reborn.get()), values);
  absl::StatusOr<PushOutcome> retried = AssignRamp(reborn.get(), 3, 2, keys, 7);
  ASSERT_TRUE(retried.ok()) << retried.status();
  EXPECT_TRUE(retried->duplicate);
}

TEST(TableTest, ARefusedAssignChangesNothing) {
  std::unique_ptr<Table> table = Make(TableSpec("w", 64, 1, 0, 1.0f));
  const std::vector<float> initial = Values(table.get());
  std::vector<float> values(64, 1.0f);
  values[5] = std::numeric_limits<float>::infinity();
  const absl::string_view bytes(reinterpret_cast<const char*>(values.data()),
                                values.size() * sizeof(float));
  FloatPieces pieces(absl::MakeConstSpan(&bytes, 1));
  PushArgs args;
  args.keys = table->range();
  args.session = 4;
  args.sequence = 1;
  const absl::Status inf = table->Assign(args, pieces).status();
  EXPECT_TRUE(absl::IsInvalidArgument(inf)) << inf;
  EXPECT_NE(inf.message().find("values for key range [0, 64)"),
            std::string::npos)
      << inf;
  args.keys = {0, 32};  // 64 values for 32 keys
  const absl::Status length = table->Assign(args, pieces).status();
  EXPECT_NE(length.message().find("values has 256 bytes"), std::string::npos)
      << length;
  EXPECT_EQ(Values(table.get()), initial);
  EXPECT_EQ(table->version(), 0u);
  ASSERT_TRUE(AssignRamp(table.get(), 4, 1, table->range(), 0).ok());
  EXPECT_EQ(Values(table.get())[63], 63.0f);
}

TEST(TableTest, AnAssignNeitherWaitsForNorCompletesASyncClock) {
  std::unique_ptr<Table> table = Make(SyncSpec(1000));
  const KeyRange all = table->range();
  ASSERT_TRUE(PushValue(table.get(), 0, 0, 0, 2.0f).ok());
  ASSERT_TRUE(AssignRamp(table.get(), 8, 1, all, 1).ok());
  EXPECT_EQ(StatsOf(table.get()).consistency_clock(), 0u);
  EXPECT_EQ(Values(table.get())[10], 11.0f);
  ASSERT_TRUE(PushValue(table.get(), 1, 0, 0, 4.0f).ok());
  EXPECT_EQ(StatsOf(table.get()).consistency_clock(), 1u);
  // The clock's mean gradient 3 at lr 0.5 lands on the assigned values.
  EXPECT_EQ(Values(table.get())[10], 11.0f - 1.5f);
  EXPECT_EQ(Clocks(*table), (std::map<uint32_t, uint64_t>{{0, 0}, {1, 0}}));
}

TEST(TableTest, ArraysPerKeyCountValuesOptimizerStateAndTheSyncSum) {
  EXPECT_EQ(Table::ArraysPerKey(TableSpec("w", 10)), 1);
  EXPECT_EQ(Table::ArraysPerKey(SyncSpec(10)), 2);
  shardps::CreateTableRequest adam = SyncSpec(10);
  adam.mutable_optimizer()->set_name("adam");
  EXPECT_EQ(Table::ArraysPerKey(adam), 5);
}

}  // namespace
}  // namespace ps
