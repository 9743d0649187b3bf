// Checkpoint files and the Checkpointer: a round trip keeps everything a
// restored server needs; torn, damaged or foreign files are refused by name.
#include "ps/table/checkpoint.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "ps/server/checkpointer.h"
#include "test_util.h"

namespace ps {
namespace {

using testutil::ReadFile;
using testutil::ScopedTempDir;
using testutil::WriteFile;

shardps::CreateTableRequest Spec(const std::string& name, uint64_t p,
                                 int index = 1) {
  shardps::CreateTableRequest spec;
  spec.set_job("j");
  spec.set_table(name);
  spec.set_num_params(p);
  spec.set_num_shards(2);
  spec.set_shard_index(index);
  spec.mutable_optimizer()->set_name("sgd");
  spec.mutable_optimizer()->set_learning_rate(0.5f);
  spec.mutable_init()->set_kind("uniform");
  spec.mutable_init()->set_scale(1.0f);
  spec.mutable_init()->set_seed(3);
  return spec;
}

Table* Create(TableRegistry& registry, const shardps::CreateTableRequest& s) {
  bool created;
  absl::StatusOr<Table*> table = registry.CreateTable(s, &created);
  EXPECT_TRUE(table.ok()) << table.status();
  return *table;
}

// Pushes `value` everywhere in the table, as the service does, as piece
// (session, sequence) of `worker`.
void Push(Table* table, uint32_t worker, uint64_t session, uint64_t sequence,
          float value) {
  const KeyRange keys = table->store->range();
  std::vector<float> grad(keys.size(), value);
  absl::string_view bytes(reinterpret_cast<const char*>(grad.data()),
                          grad.size() * sizeof(float));
  std::vector<absl::string_view> pieces = {bytes};
  FloatPieces gradient(pieces);
  const PushId id{worker, session, sequence, keys.begin};
  absl::StatusOr<Admission> a = table->ledger.Admit(id, sequence);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->kind, Admission::kApply);
  absl::StatusOr<uint64_t> version = table->store->Push(keys, gradient);
  ASSERT_TRUE(version.ok()) << version.status();
  table->ledger.Commit(id, *version);
  table->RecordClock(worker, sequence);
}

std::vector<float> Values(Table* table) {
  std::vector<float> out(table->store->range().size());
  EXPECT_TRUE(table->store->Pull(table->store->range(), out.data()).ok());
  return out;
}

// A registry with two tables that have seen pushes from two workers.
void Fill(TableRegistry& registry) {
  Table* big = Create(registry, Spec("big", 3'000'000));
  Table* small = Create(registry, Spec("small", 100));
  Push(big, 0, 11, 1, 1.0f);
  Push(big, 1, 22, 1, -2.0f);
  Push(big, 0, 11, 2, 0.25f);
  Push(small, 1, 22, 2, 4.0f);
}

// Snapshots `original`, writes and reads back DIR/checkpoint, and restores
// every table into `restored`; returns each table's array count.
std::vector<size_t> RoundTrip(TableRegistry& original, const std::string& dir,
                              TableRegistry& restored) {
  std::vector<TableSnapshot> snapshot;
  original.Snapshot(&snapshot);
  const std::string path = dir + "/checkpoint";
  EXPECT_TRUE(WriteCheckpoint(path, "j", snapshot).ok());
  absl::StatusOr<Checkpoint> read = ReadCheckpoint(path);
  EXPECT_TRUE(read.ok()) << read.status();
  std::vector<size_t> arrays;
  if (!read.ok()) return arrays;
  for (TableSnapshot& t : read->tables) {
    arrays.push_back(t.arrays.size());
    absl::Status s = restored.Restore(std::move(t));
    EXPECT_TRUE(s.ok()) << s;
  }
  return arrays;
}

std::string WriteFilled(const std::string& dir) {
  TableRegistry registry("j");
  Fill(registry);
  std::vector<TableSnapshot> snapshot;
  registry.Snapshot(&snapshot);
  const std::string path = dir + "/checkpoint";
  absl::Status s = WriteCheckpoint(path, "j", snapshot);
  EXPECT_TRUE(s.ok()) << s;
  return path;
}

TEST(CheckpointTest, RoundTripRestoresValuesVersionClocksAndLedger) {
  ScopedTempDir dir;
  TableRegistry original("j");
  Fill(original);
  std::vector<TableSnapshot> snapshot;
  original.Snapshot(&snapshot);
  const std::string path = dir.path() + "/checkpoint";
  ASSERT_TRUE(WriteCheckpoint(path, "j", snapshot).ok());
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));

  absl::StatusOr<Checkpoint> read = ReadCheckpoint(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->job, "j");
  TableRegistry restored("j");
  for (TableSnapshot& t : read->tables) {
    ASSERT_TRUE(restored.Restore(std::move(t)).ok());
  }
  for (const char* name : {"big", "small"}) {
    SCOPED_TRACE(name);
    Table* before = *original.Find("j", name);
    Table* after = *restored.Find("j", name);
    EXPECT_EQ(Values(after), Values(before));
    EXPECT_EQ(after->store->version(), before->store->version());
    EXPECT_EQ(after->restored_version, before->store->version());
    EXPECT_GT(after->restored_version, 0u);
    absl::MutexLock a(&after->clocks_mu), b(&before->clocks_mu);
    EXPECT_EQ(after->clocks, before->clocks);
  }
  // A push the checkpoint holds is a duplicate after the restore; the next
  // one is applied.
  Table* big = *restored.Find("j", "big");
  absl::StatusOr<Admission> replay =
      big->ledger.Admit({0, 11, 2, big->store->range().begin}, 2);
  ASSERT_TRUE(replay.ok());
  EXPECT_EQ(replay->kind, Admission::kDuplicate);
  EXPECT_EQ(replay->version, 3u);
  Push(big, 0, 11, 3, 1.0f);
  EXPECT_EQ(big->store->version(), 4u);
}

TEST(CheckpointTest, OptimizerStateSurvivesARestore) {
  // Adam's moments and step counts are in the checkpoint: a restored table
  // continues exactly as the original does.
  ScopedTempDir dir;
  shardps::CreateTableRequest spec = Spec("adam", 1000);
  shardps::OptimizerConfig* adam = spec.mutable_optimizer();
  adam->set_name("adam");
  adam->set_learning_rate(0.01f);
  adam->set_beta1(0.9f);
  adam->set_beta2(0.999f);
  adam->set_epsilon(1e-8f);
  TableRegistry original("j");
  Table* before = Create(original, spec);
  Push(before, 0, 11, 1, 1.0f);
  Push(before, 0, 11, 2, -3.0f);
  TableRegistry restored("j");
  // Values, m, v, t.
  ASSERT_EQ(RoundTrip(original, dir.path(), restored), std::vector<size_t>{4});
  Table* after = *restored.Find("j", "adam");
  Push(before, 0, 11, 3, 0.5f);
  Push(after, 0, 11, 3, 0.5f);
  // (Had m, v and t restarted at zero, this push would have moved every
  // value by exactly the learning rate, as Adam's first step does.)
  EXPECT_EQ(Values(after), Values(before));
}

TEST(CheckpointTest, ASyncBarrierSurvivesARestoreMidClock) {
  // The checkpoint is taken while clock 0 is half gathered: worker 0 has
  // pushed half of its keys. The restored table must know that (and the
  // running sum), so that the rest of the clock completes it exactly as on
  // the original.
  ScopedTempDir dir;
  shardps::CreateTableRequest spec = Spec("bsp", 1000);
  shardps::ConsistencyConfig* c = spec.mutable_consistency();
  c->set_mode(shardps::CONSISTENCY_SYNC);
  c->set_num_workers(2);
  c->set_straggler_timeout_seconds(60);
  c->set_straggler_policy(shardps::STRAGGLER_FAIL);
  auto push = [](Table* t, uint32_t worker, KeyRange keys, float value) {
    std::vector<float> grad(keys.size(), value);
    const absl::string_view bytes(reinterpret_cast<const char*>(grad.data()),
                                  grad.size() * sizeof(float));
    FloatPieces pieces(absl::MakeConstSpan(&bytes, 1));
    return t->consistency.Push(worker, 0, keys, pieces);
  };
  TableRegistry original("j");
  Table* before = Create(original, spec);
  const KeyRange all = before->store->range();
  const KeyRange first{all.begin, all.begin + 100},
      rest{all.begin + 100, all.end};
  ASSERT_TRUE(push(before, 0, first, 2.0f).ok());
  TableRegistry restored("j");
  // Values and the running sum.
  ASSERT_EQ(RoundTrip(original, dir.path(), restored), std::vector<size_t>{2});
  Table* after = *restored.Find("j", "bsp");
  EXPECT_EQ(push(after, 0, first, 2.0f).status().code(),
            absl::StatusCode::kFailedPrecondition)
      << "the restored barrier forgot what worker 0 pushed";
  for (Table* t : {before, after}) {
    ASSERT_TRUE(push(t, 0, rest, 2.0f).ok());
    ASSERT_TRUE(push(t, 1, all, 4.0f).ok());
    EXPECT_EQ(t->store->version(), 1u);
    EXPECT_EQ(t->consistency.clock(), 1u);
  }
  // lr 0.5 times the mean gradient 3, on every key.
  EXPECT_EQ(Values(after), Values(before));
  TableRegistry fresh("j");
  const std::vector<float> initial = Values(Create(fresh, spec));
  EXPECT_FLOAT_EQ(Values(after)[150], initial[150] - 1.5f);
}

TEST(CheckpointTest, DamagedOrTruncatedFilesAreRefusedWithTheOffset) {
  ScopedTempDir dir;
  const std::string path = WriteFilled(dir.path());
  const std::string good = ReadFile(path);
  ASSERT_GT(good.size(), 6'000'000u);  // half of 3M floats
  struct Damage {
    const char* what;
    std::string bytes;
  };
  std::vector<Damage> cases;
  for (size_t at :
       {size_t{9}, size_t{30}, size_t{3'000'000}, good.size() - 2}) {
    std::string flipped = good;
    flipped[at] ^= 0x40;
    cases.push_back({"a flipped byte", flipped});
  }
  for (size_t keep :
       {size_t{0}, size_t{5}, size_t{40}, size_t{2'500'000}, good.size() - 1}) {
    cases.push_back({"a truncated file", good.substr(0, keep)});
  }
  cases.push_back({"trailing bytes", good + "x"});
  for (const Damage& d : cases) {
    SCOPED_TRACE(absl::StrCat(d.what, ", ", d.bytes.size(), " bytes"));
    WriteFile(path, d.bytes);
    absl::StatusOr<Checkpoint> read = ReadCheckpoint(path);
    ASSERT_EQ(read.status().code(), absl::StatusCode::kDataLoss)
        << read.status();
    EXPECT_NE(read.status().message().find(path), std::string::npos)
        << read.status();
  }
  WriteFile(path, good);
  EXPECT_TRUE(ReadCheckpoint(path).ok());
}

TEST(CheckpointTest, AFailedWriteLeavesThePreviousCheckpointWhole) {
  ScopedTempDir dir;
  const std::string path = WriteFilled(dir.path());
  const std::string before = ReadFile(path);
  // The temporary file cannot be created where a directory stands.
  std::filesystem::create_directory(path + ".tmp");
  TableRegistry registry("j");
  Create(registry, Spec("other", 10));
  std::vector<TableSnapshot> snapshot;
  registry.Snapshot(&snapshot);
  absl::Status s = WriteCheckpoint(path, "j", snapshot);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(path + ".tmp"), std::string::npos) << s;
  EXPECT_EQ(ReadFile(path), before);
}

TEST(CheckpointerTest, RestoresTheLatestAndDeletesATornWrite) {
  ScopedTempDir dir;
  const std::string path = WriteFilled(dir.path());
  WriteFile(path + ".tmp", "half a checkpoint");
  TableRegistry registry("j");
  absl::StatusOr<std::unique_ptr<Checkpointer>> cp =
      Checkpointer::Open({dir.path()}, &registry);
  ASSERT_TRUE(cp.ok()) << cp.status();
  EXPECT_TRUE((*cp)->restored());
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_EQ((*registry.Find("j", "big"))->store->version(), 3u);
  // A write replaces it with the current state.
  Push(*registry.Find("j", "small"), 0, 11, 1, 1.0f);
  ASSERT_TRUE((*cp)->WriteNow().ok());
  EXPECT_EQ((*cp)->written(), 1u);
  absl::StatusOr<Checkpoint> read = ReadCheckpoint(path);
  ASSERT_TRUE(read.ok());
  uint64_t versions = 0;
  for (const TableSnapshot& t : read->tables) versions += t.meta.version();
  EXPECT_EQ(versions, 5u);
}

TEST(CheckpointerTest, RefusesAForeignDamagedOrSharedDirectory) {
  ScopedTempDir dir;
  const std::string path = WriteFilled(dir.path());
  {
    TableRegistry other_job("k");
    absl::StatusOr<std::unique_ptr<Checkpointer>> cp =
        Checkpointer::Open({dir.path()}, &other_job);
    EXPECT_EQ(cp.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(cp.status().message().find("belongs to job 'j'"),
              std::string::npos)
        << cp.status();
  }
  {
    TableRegistry registry("j");
    absl::StatusOr<std::unique_ptr<Checkpointer>> first =
        Checkpointer::Open({dir.path()}, &registry);
    ASSERT_TRUE(first.ok()) << first.status();
    TableRegistry second_registry("j");
    absl::StatusOr<std::unique_ptr<Checkpointer>> second =
        Checkpointer::Open({dir.path()}, &second_registry);
    EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(second.status().message().find("in use by another server"),
              std::string::npos)
        << second.status();
  }
  std::string bytes = ReadFile(path);
  bytes[bytes.size() / 2] ^= 1;
  WriteFile(path, bytes);
  TableRegistry registry("j");
  absl::StatusOr<std::unique_ptr<Checkpointer>> cp =
      Checkpointer::Open({dir.path()}, &registry);
  EXPECT_EQ(cp.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(cp.status().message().find("refusing to start"), std::string::npos)
      << cp.status();
}

TEST(CheckpointerTest, WritesPeriodically) {
  ScopedTempDir dir;
  TableRegistry registry("j");
  Create(registry, Spec("w", 1000));
  absl::StatusOr<std::unique_ptr<Checkpointer>> cp =
      Checkpointer::Open({dir.path(), absl::Milliseconds(50)}, &registry);
  ASSERT_TRUE(cp.ok());
  (*cp)->StartPeriodic();
  const absl::Time give_up = absl::Now() + absl::Seconds(20);
  while ((*cp)->written() < 3 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(10));  // polling interval
  }
  (*cp)->StopPeriodic();
  EXPECT_GE((*cp)->written(), 3u);
  EXPECT_TRUE(ReadCheckpoint((*cp)->path()).ok());
}

}  // namespace
}  // namespace ps
