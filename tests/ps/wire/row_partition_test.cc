// RowPartition: hash sharding is a fixed function of the id (the same in
// every process and build), spreads Zipf-skewed ids over four shards within
// 1.2x of the mean, and groups ids by shard in order; range sharding puts
// contiguous ids together, which is the baseline's imbalance.
#include "ps/wire/row_partition.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "absl/random/zipf_distribution.h"

namespace ps {
namespace {

// Per-shard counts of `draws` ids, Zipf(1.1)-distributed per field, from
// 26 fields of 100,000 ids each (field f's id i is f << 40 | i, as a
// Criteo-like model keys them).
std::vector<double> ZipfLoad(const RowPartition& p, int draws) {
  std::mt19937_64 gen(7);
  absl::zipf_distribution<uint64_t> zipf(100000 - 1, 1.1);
  std::uniform_int_distribution<uint64_t> field(0, 25);
  std::vector<double> load(p.num_shards());
  for (int i = 0; i < draws; ++i) {
    load[p.ShardOf(field(gen) << 40 | zipf(gen))] += 1;
  }
  return load;
}

double MaxOverMean(const std::vector<double>& load) {
  double sum = 0;
  for (double l : load) sum += l;
  return *std::max_element(load.begin(), load.end()) / (sum / load.size());
}

TEST(RowPartitionTest, HashIsXxh3OfTheLittleEndianId) {
  // Expected shards from xxHash's own command line tool (`xxhsum -H3` of
  // the id's 8 little-endian bytes: c77b3abb6f87acd9, 2fbc593564db792e,
  // 2086c65c91eee243, b4dbbeb97aabdc76, 5111c7e47d784413), scaled onto
  // [0, 1000) as floor(h * 1000 / 2^64): fixed by xxHash's specification,
  // so every build on every machine agrees.
  const RowPartition p(RowSharding::kHash, 1000);
  EXPECT_EQ(p.ShardOf(0), 779);
  EXPECT_EQ(p.ShardOf(1), 186);
  EXPECT_EQ(p.ShardOf(2), 127);
  EXPECT_EQ(p.ShardOf(1ull << 40), 706);
  EXPECT_EQ(p.ShardOf(~0ull), 316);
}

TEST(RowPartitionTest, HashSpreadsZipfIdsEvenly) {
  const double hashed =
      MaxOverMean(ZipfLoad(RowPartition(RowSharding::kHash, 4), 400000));
  EXPECT_LE(hashed, 1.2);
  // By range over all of uint64, every field's ids (< 2^45) fall in shard
  // 0: one server takes everything.
  const double ranged =
      MaxOverMean(ZipfLoad(RowPartition(RowSharding::kRange, 4), 400000));
  EXPECT_DOUBLE_EQ(ranged, 4.0);
}

TEST(RowPartitionTest, RangeCutsTheIdSpaceIntoEqualParts) {
  const RowPartition p(RowSharding::kRange, 4, 1000);
  EXPECT_EQ(p.ShardOf(0), 0);
  EXPECT_EQ(p.ShardOf(249), 0);
  EXPECT_EQ(p.ShardOf(250), 1);
  EXPECT_EQ(p.ShardOf(999), 3);
  EXPECT_EQ(p.ShardOf(5000), 3);  // beyond id_space: the last shard
  const RowPartition whole(RowSharding::kRange, 2);
  EXPECT_EQ(whole.ShardOf((1ull << 63) - 1), 0);
  EXPECT_EQ(whole.ShardOf(1ull << 63), 1);
}

}  // namespace
}  // namespace ps
