#include "ps/client/chunk_plan.h"

#include <algorithm>
#include <set>

namespace ps {

std::vector<Chunk> PlanChunks(const RangePartition& partition, KeyRange range,
                              uint64_t chunk_floats, int channels) {
  if (range.empty()) return {};
  const std::vector<ShardSlice> pieces = partition.Split(range);
  std::vector<std::vector<Chunk>> per_shard(pieces.size());
  size_t longest = 0;
  for (size_t p = 0; p < pieces.size(); ++p) {
    const ShardSlice& piece = pieces[p];
    int channel = 0;
    for (uint64_t at = piece.keys.begin; at < piece.keys.end;) {
      const uint64_t stop =
          std::min(piece.keys.end, (at / chunk_floats + 1) * chunk_floats);
      per_shard[p].push_back({piece.shard, channel, {at, stop}});
      channel = (channel + 1) % channels;
      at = stop;
    }
    longest = std::max(longest, per_shard[p].size());
  }
  std::vector<Chunk> chunks;
  for (size_t i = 0; i < longest; ++i) {
    for (const std::vector<Chunk>& shard_chunks : per_shard) {
      if (i < shard_chunks.size()) chunks.push_back(shard_chunks[i]);
    }
  }
  return chunks;
}

int ShardsTouched(const std::vector<Chunk>& chunks) {
  std::set<int> shards;
  for (const Chunk& c : chunks) shards.insert(c.shard);
  return static_cast<int>(shards.size());
}

}  // namespace ps
