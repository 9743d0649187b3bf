// RowBuckets and Deduplicate: every position lands in exactly one bucket of
// the shard that owns its id, an id's repeats share its bucket, buckets
// are sized to 7/8 of a call, and a bucket's distinct ids come
// back in first-seen order with each position's index into them.
#include "ps/client/row_buckets.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace ps {
namespace {

TEST(RowBucketsTest, EachPositionOnceInItsShardWithItsRepeats) {
  std::mt19937_64 random(3);
  std::vector<uint64_t> ids(5000);
  for (uint64_t& id : ids) id = random() % 2000;  // many repeats
  for (RowSharding sharding : {RowSharding::kHash, RowSharding::kRange}) {
    const RowPartition partition(sharding, 3, 2000);
    const RowBuckets buckets(ids, partition, 300);
    ASSERT_EQ(buckets.count().size(), 3u);
    std::vector<int> seen(ids.size(), 0);
    absl::flat_hash_map<uint64_t, std::pair<int, size_t>> bucket_of;
    for (int s = 0; s < 3; ++s) {
      const size_t count = buckets.count()[s];
      size_t positions = 0;
      for (size_t b = 0; b < count; ++b) {
        uint32_t last = 0;
        bool first = true;
        for (uint32_t i : buckets.Positions(s, b)) {
          ++seen[i];
          ++positions;
          EXPECT_EQ(partition.ShardOf(ids[i]), s);
          EXPECT_TRUE(first || i > last) << "in the call's order";
          first = false;
          last = i;
          auto [it, fresh] = bucket_of.try_emplace(ids[i], s, b);
          EXPECT_EQ(it->second, std::make_pair(s, b)) << "id " << ids[i];
        }
      }
      // Enough buckets that each holds 7/8 of a call.
      EXPECT_EQ(count, (positions * 8 + 300 * 7 - 1) / (300 * 7));
    }
    for (size_t i = 0; i < ids.size(); ++i) ASSERT_EQ(seen[i], 1) << i;
  }
}

TEST(RowBucketsTest, NoIdsNoBuckets) {
  const RowPartition partition(RowSharding::kHash, 4);
  const RowBuckets none({}, partition, 10);
  EXPECT_EQ(none.count(), (std::vector<size_t>{0, 0, 0, 0}));
  const std::vector<uint64_t> one = {42};
  const RowBuckets single(one, partition, 10);
  size_t total = 0;
  for (size_t c : single.count()) total += c;
  EXPECT_EQ(total, 1u);
}

TEST(DeduplicateTest, FirstSeenOrderAndEveryPositionsIndex) {
  const std::vector<uint64_t> ids = {9, 4, 9, 7, 4, 4, 1};
  const std::vector<uint32_t> positions = {0, 2, 3, 4, 5, 6};  // not 1
  const DistinctIds d = Deduplicate(ids, positions);
  EXPECT_EQ(d.ids, (std::vector<uint64_t>{9, 7, 4, 1}));
  EXPECT_EQ(d.first, (std::vector<uint32_t>{0, 3, 4, 6}));
  EXPECT_EQ(d.index, (std::vector<uint32_t>{0, 0, 1, 2, 2, 3}));
  EXPECT_EQ(d.repeats, (std::vector<uint32_t>{1, 4}));
}

// Ids alone in their filter slot skip the map; ids that share one, repeats
// or not, take it, and all do where most repeat. Against a plain map, over
// buckets small and past the filter's largest size, where many distinct
// ids share slots.
TEST(DeduplicateTest, MatchesAPlainMapAtEverySize) {
  std::mt19937_64 random(11);
  for (size_t n : {size_t{1}, size_t{100}, size_t{14336}, size_t{300000}}) {
    // A tenth, or nine tenths, of the ids drawn from 50 hot ones, the rest
    // mostly distinct.
    for (int hot : {1, 9}) {
      std::vector<uint64_t> ids(n);
      for (uint64_t& id : ids) {
        id = static_cast<int>(random() % 10) < hot ? random() % 50 : random();
      }
      std::vector<uint32_t> positions;
      for (uint32_t i = 0; i < n; i += 1 + random() % 2) positions.push_back(i);
      DistinctIds want;
      std::map<uint64_t, uint32_t> first_k;
      for (size_t j = 0; j < positions.size(); ++j) {
        const uint64_t id = ids[positions[j]];
        auto [it, fresh] = first_k.try_emplace(id, want.ids.size());
        if (fresh) {
          want.ids.push_back(id);
          want.first.push_back(positions[j]);
        } else {
          want.repeats.push_back(j);
        }
        want.index.push_back(it->second);
      }
      const DistinctIds got = Deduplicate(ids, positions);
      EXPECT_EQ(got.ids, want.ids) << n << " " << hot;
      EXPECT_EQ(got.first, want.first) << n << " " << hot;
      EXPECT_EQ(got.index, want.index) << n << " " << hot;
      EXPECT_EQ(got.repeats, want.repeats) << n << " " << hot;
    }
  }
}

}  // namespace
}  // namespace ps
