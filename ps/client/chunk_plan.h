// How a Pull or Push of a key range is cut into calls: split by shard
// (RangePartition), each piece cut on a global grid of chunk_floats keys,
// the chunks of a shard spread over its channels, and all of them ordered
// round-robin over the shards so that every shard starts at once.
//
// Thread-safety: a pure function.
#ifndef SHARDPS_PS_CLIENT_CHUNK_PLAN_H_
#define SHARDPS_PS_CLIENT_CHUNK_PLAN_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ps/wire/range_partition.h"

namespace ps {

struct Chunk {
  int shard = 0;
  int channel = 0;  // which of the shard's connections carries it
  KeyRange keys;
  // ONEBIT pushes: where the chunk's encoded gradient starts in the push's
  // encoded buffer.
  size_t encoded_offset = 0;
};

// `range` must lie inside the partition; empty: no chunks. Requires
// chunk_floats >= 1 and channels >= 1.
std::vector<Chunk> PlanChunks(const RangePartition& partition, KeyRange range,
                              uint64_t chunk_floats, int channels);

// The number of shards `chunks` touch.
int ShardsTouched(const std::vector<Chunk>& chunks);

}  // namespace ps

#endif  // SHARDPS_PS_CLIENT_CHUNK_PLAN_H_
