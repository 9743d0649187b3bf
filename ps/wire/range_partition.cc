#include "ps/wire/range_partition.h"

#include <algorithm>
#include <cassert>

namespace ps {

RangePartition::RangePartition(uint64_t num_params, int num_shards)
    : num_params_(num_params) {
  assert(num_shards >= 1);
  // Deal whole aligned blocks out as evenly as possible: the first `extra`
  // shards get one more block than the rest.
  const uint64_t blocks = num_params / kAlignFloats;
  const uint64_t base = blocks / num_shards;
  const uint64_t extra = blocks % num_shards;
  bounds_.reserve(num_shards + 1);
  bounds_.push_back(0);
  uint64_t at = 0;
  for (int s = 0; s < num_shards; ++s) {
    at += (base + (static_cast<uint64_t>(s) < extra ? 1 : 0)) * kAlignFloats;
    bounds_.push_back(at);
  }
  // The unaligned tail (< 16 keys) goes to the last shard that owns blocks,
  // and shards left without a block are empty at the end; a table smaller than
  // one block therefore lives on shard 0 alone instead of being split.
  for (int s = 1; s <= num_shards; ++s) {
    if (bounds_[s] == blocks * kAlignFloats) bounds_[s] = num_params;
  }
}

int RangePartition::ShardOf(uint64_t key) const {
  assert(key < num_params_);
  // The first boundary above `key` closes its shard. Empty shards sit at P,
  // above every key, so they are never chosen.
  auto it = std::upper_bound(bounds_.begin(), bounds_.end(), key);
  return static_cast<int>(it - bounds_.begin()) - 1;
}

std::vector<ShardSlice> RangePartition::Split(KeyRange range) const {
  std::vector<ShardSlice> out;
  if (range.empty()) return out;
  for (int s = ShardOf(range.begin); s < num_shards(); ++s) {
    const KeyRange owned = shard_range(s);
    if (owned.begin >= range.end) break;
    const KeyRange piece{std::max(owned.begin, range.begin),
                         std::min(owned.end, range.end)};
    if (!piece.empty()) out.push_back({s, piece});
  }
  return out;
}

}  // namespace ps
