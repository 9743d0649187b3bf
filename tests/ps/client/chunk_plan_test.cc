// How the client cuts a range into calls: every key exactly once, no call
// across a shard or a grid line, a shard's calls spread over its channels,
// and every shard started before any gets its second call.
#include "ps/client/chunk_plan.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

namespace ps {
namespace {

TEST(ChunkPlanTest, CoversTheRangeOnceWithinShardsAndGridLines) {
  const RangePartition partition(1000, 3);  // bounds 0, 336, 672, 1000
  const KeyRange range{5, 995};
  const uint64_t grid = 64;
  const std::vector<Chunk> chunks = PlanChunks(partition, range, grid, 2);
  std::vector<int> covered(1000, 0);
  for (const Chunk& c : chunks) {
    ASSERT_FALSE(c.keys.empty());
    EXPECT_TRUE(partition.shard_range(c.shard).Contains(c.keys))
        << c.shard << " [" << c.keys.begin << ", " << c.keys.end << ")";
    // Inside one grid cell: [k * grid, (k + 1) * grid).
    EXPECT_EQ(c.keys.begin / grid, (c.keys.end - 1) / grid);
    for (uint64_t k = c.keys.begin; k < c.keys.end; ++k) ++covered[k];
  }
  for (uint64_t k = 0; k < 1000; ++k) {
    ASSERT_EQ(covered[k], range.begin <= k && k < range.end ? 1 : 0) << k;
  }
  EXPECT_EQ(ShardsTouched(chunks), 3);
}

TEST(ChunkPlanTest, ShardsStartTogetherAndChannelsAlternate) {
  const RangePartition partition(1024, 2);  // 512 keys each
  const std::vector<Chunk> chunks = PlanChunks(partition, {0, 1024}, 128, 3);
  ASSERT_EQ(chunks.size(), 8u);
  std::map<int, std::vector<int>> channels;
  for (size_t i = 0; i < chunks.size(); ++i) {
    EXPECT_EQ(chunks[i].shard, static_cast<int>(i % 2)) << i;  // round robin
    channels[chunks[i].shard].push_back(chunks[i].channel);
  }
  for (const auto& [shard, used] : channels) {
    EXPECT_EQ(used, (std::vector<int>{0, 1, 2, 0})) << shard;
  }
  // In key order within a shard.
  EXPECT_EQ(chunks[0].keys.begin, 0u);
  EXPECT_EQ(chunks[2].keys.begin, 128u);
  EXPECT_EQ(chunks[1].keys.begin, 512u);
}

TEST(ChunkPlanTest, AnEmptyRangeHasNoChunksAndOneShardMayBeAll) {
  const RangePartition partition(100, 4);
  EXPECT_TRUE(PlanChunks(partition, {7, 7}, 16, 1).empty());
  const std::vector<Chunk> one = PlanChunks(partition, {0, 10}, 1 << 20, 1);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].shard, 0);
  EXPECT_EQ(one[0].keys, (KeyRange{0, 10}));
  EXPECT_EQ(ShardsTouched(one), 1);
}

}  // namespace
}  // namespace ps
