#include "ps/wire/range_partition.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace ps {
namespace {

void ExpectValidPartition(uint64_t p, int s) {
  SCOPED_TRACE(testing::Message() << "P=" << p << " S=" << s);
  RangePartition part(p, s);
  ASSERT_EQ(part.num_shards(), s);
  uint64_t at = 0;
  uint64_t largest = 0, smallest = UINT64_MAX;
  int nonempty = 0;
  for (int i = 0; i < s; ++i) {
    KeyRange r = part.shard_range(i);
    EXPECT_EQ(r.begin, at) << "shard " << i << " is not contiguous";
    EXPECT_LE(r.begin, r.end);
    if (r.end != p) {
      EXPECT_EQ(r.end % RangePartition::kAlignFloats, 0u)
          << "interior boundary of shard " << i << " not aligned";
    }
    at = r.end;
    if (!r.empty()) {
      ++nonempty;
      largest = std::max(largest, r.size());
      smallest = std::min(smallest, r.size());
    }
  }
  EXPECT_EQ(at, p) << "shards do not cover [0, P)";
  // Near-equal: non-empty shards differ by at most one aligned block plus the
  // unaligned tail.
  if (nonempty > 0) {
    EXPECT_LE(largest - smallest, 2 * RangePartition::kAlignFloats);
  }
  // Every shard gets a block when there are enough blocks.
  if (p / RangePartition::kAlignFloats >= static_cast<uint64_t>(s)) {
    EXPECT_EQ(nonempty, s);
  }
  // Every key has exactly one owner, and ShardOf agrees with the ranges.
  for (uint64_t k : {uint64_t{0}, p / 3, p / 2, p - 1}) {
    if (k >= p) continue;
    const int owner = part.ShardOf(k);
    EXPECT_TRUE(part.shard_range(owner).Contains({k, k + 1})) << "key " << k;
  }
}

TEST(RangePartitionTest, PropertiesHoldAcrossSizes) {
  for (uint64_t p : {1ull, 15ull, 16ull, 17ull, 100ull, 1000ull, 4096ull,
                     1000003ull, 10000000ull}) {
    for (int s : {1, 2, 3, 5, 8, 16, 64}) ExpectValidPartition(p, s);
  }
}

TEST(RangePartitionTest, EmptyTableHasOnlyEmptyShards) {
  RangePartition part(0, 4);
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(part.shard_range(i).empty());
  EXPECT_TRUE(part.Split({0, 0}).empty());
}

TEST(RangePartitionTest, FewerKeysThanShardsStayOnShardZero) {
  RangePartition part(5, 8);
  EXPECT_EQ(part.shard_range(0), (KeyRange{0, 5}));
  for (int i = 1; i < 8; ++i) EXPECT_TRUE(part.shard_range(i).empty());
  EXPECT_EQ(part.ShardOf(4), 0);
}

TEST(RangePartitionTest, IsAPureFunctionOfPAndS) {
  RangePartition a(123457, 7), b(123457, 7);
  for (int i = 0; i < 7; ++i) EXPECT_EQ(a.shard_range(i), b.shard_range(i));
}

TEST(RangePartitionTest, SingleShardOwnsEverything) {
  RangePartition part(1000, 1);
  EXPECT_EQ(part.shard_range(0), (KeyRange{0, 1000}));
}

TEST(RangePartitionTest, SplitCutsAtShardBoundaries) {
  RangePartition part(64, 4);  // shards of 16 keys
  std::vector<ShardSlice> pieces = part.Split({10, 40});
  ASSERT_EQ(pieces.size(), 3u);
  EXPECT_EQ(pieces[0].shard, 0);
  EXPECT_EQ(pieces[0].keys, (KeyRange{10, 16}));
  EXPECT_EQ(pieces[1].shard, 1);
  EXPECT_EQ(pieces[1].keys, (KeyRange{16, 32}));
  EXPECT_EQ(pieces[2].shard, 2);
  EXPECT_EQ(pieces[2].keys, (KeyRange{32, 40}));
  EXPECT_TRUE(part.Split({20, 20}).empty());
  ASSERT_EQ(part.Split({48, 64}).size(), 1u);
  EXPECT_EQ(part.Split({48, 64})[0].shard, 3);
}

}  // namespace
}  // namespace ps
