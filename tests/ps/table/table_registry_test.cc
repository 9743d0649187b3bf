#include "ps/table/table_registry.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "util/table.h"

namespace ps {
namespace {

shardps::CreateTableRequest Spec(uint64_t p, int shards, int index) {
  shardps::CreateTableRequest spec;
  spec.set_job("j");
  spec.set_table("w");
  spec.set_num_params(p);
  spec.set_num_shards(shards);
  spec.set_shard_index(index);
  spec.mutable_optimizer()->set_name("sgd");
  spec.mutable_optimizer()->set_learning_rate(0.1f);
  spec.mutable_init()->set_kind("uniform");
  spec.mutable_init()->set_scale(0.5f);
  spec.mutable_init()->set_seed(42);
  return spec;
}

TEST(TableRegistryTest, CreateIsIdempotentAndConflictsAreRefused) {
  TableRegistry registry("j");
  bool created = false;
  absl::StatusOr<Table*> first =
      registry.CreateTable(Spec(1000, 2, 1), &created);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(created);
  EXPECT_EQ((*first)->range(), RangePartition(1000, 2).shard_range(1));

  absl::StatusOr<Table*> again =
      registry.CreateTable(Spec(1000, 2, 1), &created);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(created);
  EXPECT_EQ(*again, *first);

  shardps::CreateTableRequest other = Spec(1000, 2, 1);
  other.mutable_optimizer()->set_learning_rate(0.2f);
  absl::StatusOr<Table*> conflict = registry.CreateTable(other, &created);
  EXPECT_EQ(conflict.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_NE(conflict.status().message().find("learning_rate"),
            std::string::npos)
      << conflict.status();
  // The existing table is untouched by the refused request.
  EXPECT_EQ((*registry.Find("j", "w"))->spec().optimizer().learning_rate(),
            0.1f);
}

TEST(TableRegistryTest, LimitsOnTablesAndMemoryAreResourceExhausted) {
  TableLimits limits;
  limits.max_tables = 2;
  limits.max_bytes = 4 * 1000;  // 1000 floats
  TableRegistry registry("j", limits);
  bool created = false;
  auto named = [](std::string name, uint64_t p) {
    shardps::CreateTableRequest spec = Spec(p, 1, 0);
    spec.set_table(std::move(name));
    return spec;
  };
  // Too big for the memory limit: refused, and nothing is held.
  absl::Status s = registry.CreateTable(named("big", 1001), &created).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_NE(s.message().find("--max_memory_mb"), std::string::npos) << s;
  // A failed creation (bad optimizer) gives its reservation back.
  shardps::CreateTableRequest bad = named("bad", 600);
  bad.mutable_optimizer()->set_name("nope");
  EXPECT_EQ(registry.CreateTable(bad, &created).status().code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(registry.CreateTable(named("a", 600), &created).ok());
  // 600 + 600 floats would pass the memory limit.
  s = registry.CreateTable(named("b", 600), &created).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  ASSERT_TRUE(registry.CreateTable(named("b", 400), &created).ok());
  // Re-creating an existing table is not a new one.
  EXPECT_TRUE(registry.CreateTable(named("a", 600), &created).ok());
  EXPECT_FALSE(created);
  s = registry.CreateTable(named("c", 1), &created).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_NE(s.message().find("--max_tables"), std::string::npos) << s;
}

TEST(TableRegistryTest, OptimizerStateCountsAgainstTheMemoryLimit) {
  TableLimits limits;
  limits.max_bytes = 4 * 1000;  // 1000 floats
  TableRegistry registry("j", limits);
  bool created = false;
  // Adam keeps three floats per key beside the value: 300 keys need 1200.
  shardps::CreateTableRequest adam = Spec(300, 1, 0);
  adam.mutable_optimizer()->set_name("adam");
  adam.mutable_optimizer()->set_beta1(0.9f);
  adam.mutable_optimizer()->set_beta2(0.999f);
  adam.mutable_optimizer()->set_epsilon(1e-8f);
  absl::Status s = registry.CreateTable(adam, &created).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  adam.set_num_params(250);
  ASSERT_TRUE(registry.CreateTable(adam, &created).ok());
  EXPECT_EQ((*registry.Find("j", "w"))->range().size(), 250u);
  // All 1000 floats are taken now.
  shardps::CreateTableRequest sgd = Spec(1, 1, 0);
  sgd.set_table("x");
  EXPECT_EQ(registry.CreateTable(sgd, &created).status().code(),
            absl::StatusCode::kResourceExhausted);
}

TEST(TableRegistryTest, BadRequestsGetTheirCodes) {
  TableRegistry registry("j");
  bool created;
  shardps::CreateTableRequest spec = Spec(100, 1, 0);
  spec.set_job("other");
  EXPECT_EQ(registry.CreateTable(spec, &created).status().code(),
            absl::StatusCode::kFailedPrecondition);
  spec = Spec(100, 1, 0);
  spec.mutable_optimizer()->set_name("lbfgs");
  EXPECT_EQ(registry.CreateTable(spec, &created).status().code(),
            absl::StatusCode::kInvalidArgument);
  spec = Spec(100, 1, 0);
  spec.mutable_optimizer()->set_learning_rate(-1);
  EXPECT_EQ(registry.CreateTable(spec, &created).status().code(),
            absl::StatusCode::kInvalidArgument);
  spec = Spec(100, 1, 0);
  spec.mutable_init()->set_kind("xavier");
  EXPECT_EQ(registry.CreateTable(spec, &created).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.CreateTable(Spec(100, 2, 2), &created).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Found by tests/fuzz/service_fuzzer: a huge shard count used to abort
  // the server while sizing the partition.
  spec = Spec(300, 1, 0);
  spec.set_num_shards(0xECECECECu);
  absl::Status huge = registry.CreateTable(spec, &created).status();
  EXPECT_EQ(huge.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(huge.message().find("num_shards"), std::string::npos) << huge;
  // 2^62 keys: 4 bytes each wrap a 64-bit byte count around to 0.
  spec = Spec(uint64_t{1} << 62, 1, 0);
  EXPECT_EQ(registry.CreateTable(spec, &created).status().code(),
            absl::StatusCode::kResourceExhausted);
  spec = Spec(100, 1, 0);
  spec.set_table("has space");
  EXPECT_EQ(registry.CreateTable(spec, &created).status().code(),
            absl::StatusCode::kInvalidArgument);

  EXPECT_EQ(registry.Find("j", "nope").status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(registry.Find("x", "w").status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(TableRegistryTest, InitialValuesDoNotDependOnSharding) {
  // The single-server baseline and a sharded run must start from one model.
  for (const char* kind : {"uniform", "normal", "constant"}) {
    SCOPED_TRACE(kind);
    const uint64_t p = 5000;
    std::vector<float> whole;
    {
      TableRegistry registry("j");
      bool created;
      shardps::CreateTableRequest spec = Spec(p, 1, 0);
      spec.mutable_init()->set_kind(kind);
      spec.mutable_init()->set_value(0.25f);
      whole = testutil::Values(*registry.CreateTable(spec, &created));
    }
    std::vector<float> sharded;
    for (int s = 0; s < 3; ++s) {
      TableRegistry registry("j");
      bool created;
      shardps::CreateTableRequest spec = Spec(p, 3, s);
      spec.mutable_init()->set_kind(kind);
      spec.mutable_init()->set_value(0.25f);
      std::vector<float> part =
          testutil::Values(*registry.CreateTable(spec, &created));
      sharded.insert(sharded.end(), part.begin(), part.end());
    }
    EXPECT_EQ(whole, sharded);
    // Random kinds are random: not all equal, and within their range.
    if (std::string(kind) != "constant") {
      EXPECT_NE(whole[0], whole[1]);
    } else {
      EXPECT_EQ(whole[4999], 0.25f);
    }
    if (std::string(kind) == "uniform") {
      for (float v : whole) ASSERT_LE(std::abs(v), 0.5f);
    }
  }
}

TEST(TableRegistryTest, InitSegmentsOverrideTheDefaultOnEveryShard) {
  std::vector<float> values;
  for (int s = 0; s < 2; ++s) {
    TableRegistry registry("j");
    bool created;
    shardps::CreateTableRequest spec = Spec(100, 2, s);
    spec.mutable_init()->set_kind("constant");
    spec.mutable_init()->set_value(1.0f);
    shardps::InitSegment* seg = spec.add_init_segments();
    seg->set_begin(40);  // spans the shard boundary at 48
    seg->set_end(60);
    seg->mutable_init()->set_kind("constant");
    seg->mutable_init()->set_value(-2.0f);
    std::vector<float> part =
        testutil::Values(*registry.CreateTable(spec, &created));
    values.insert(values.end(), part.begin(), part.end());
  }
  ASSERT_EQ(values.size(), 100u);
  for (int k = 0; k < 100; ++k) {
    EXPECT_EQ(values[k], k >= 40 && k < 60 ? -2.0f : 1.0f) << k;
  }
  TableRegistry registry("j");
  bool created;
  shardps::CreateTableRequest bad = Spec(100, 1, 0);
  shardps::InitSegment* seg = bad.add_init_segments();
  seg->set_begin(90);
  seg->set_end(101);
  EXPECT_EQ(registry.CreateTable(bad, &created).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(TableRegistryTest, StatsReportRangesVersionsAndClocks) {
  TableRegistry registry("j");
  bool created;
  Table* table = *registry.CreateTable(Spec(64, 2, 0), &created);
  auto push = [&](uint32_t worker, uint64_t clock) {
    ASSERT_TRUE(testutil::PushValue(table, worker, 0, 0, 1.0f, {}, clock).ok());
  };
  push(3, 5);
  push(3, 4);  // clocks only move forward
  push(1, 2);
  shardps::StatsResponse stats;
  registry.FillStats(&stats);
  EXPECT_EQ(stats.job(), "j");
  ASSERT_EQ(stats.tables_size(), 1);
  const shardps::TableStats& t = stats.tables(0);
  EXPECT_EQ(t.table(), "w");
  EXPECT_EQ(t.begin(), 0u);
  EXPECT_EQ(t.end(), 32u);
  EXPECT_EQ(t.version(), 3u);
  std::map<uint32_t, uint64_t> clocks;
  for (const auto& c : t.worker_clocks()) clocks[c.worker()] = c.clock();
  EXPECT_EQ(clocks, (std::map<uint32_t, uint64_t>{{1, 2}, {3, 5}}));
}

}  // namespace
}  // namespace ps
