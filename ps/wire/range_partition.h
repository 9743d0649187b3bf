// RangePartition cuts the flat key space [0, P) of a table into S contiguous,
// disjoint ranges that cover it, of near-equal size, with every interior
// boundary a multiple of kAlignFloats. It is a pure function of (P, S): the
// client and every server compute the same table independently.
//
// Thread-safety: immutable after construction; safe to share.
#ifndef SHARDPS_PS_WIRE_RANGE_PARTITION_H_
#define SHARDPS_PS_WIRE_RANGE_PARTITION_H_

#include <cstdint>
#include <vector>

namespace ps {

// A half-open key range [begin, end).
struct KeyRange {
  uint64_t begin = 0;
  uint64_t end = 0;

  uint64_t size() const { return end - begin; }
  bool empty() const { return begin == end; }
  bool Contains(const KeyRange& other) const {
    return begin <= other.begin && other.end <= end;
  }
  friend bool operator==(const KeyRange& a, const KeyRange& b) {
    return a.begin == b.begin && a.end == b.end;
  }
};

// The piece of a requested range that falls on one shard.
struct ShardSlice {
  int shard = 0;
  KeyRange keys;
};

// Shards a table may have at most; a request for more is refused before any
// RangePartition (which holds num_shards + 1 bounds) is built.
constexpr uint32_t kMaxShards = 4096;

class RangePartition {
 public:
  // Shard boundaries fall on multiples of 16 floats (64 bytes, a cache line).
  static constexpr uint64_t kAlignFloats = 16;

  // Requires num_shards >= 1. When P is too small to give every shard an
  // aligned block, the trailing shards own empty ranges.
  RangePartition(uint64_t num_params, int num_shards);

  uint64_t num_params() const { return num_params_; }
  int num_shards() const { return static_cast<int>(bounds_.size()) - 1; }
  KeyRange shard_range(int shard) const {
    return {bounds_[shard], bounds_[shard + 1]};
  }

  // The shard owning `key`; requires key < num_params().
  int ShardOf(uint64_t key) const;

  // Splits `range` (which must lie inside [0, P)) into its per-shard pieces,
  // in key order, skipping shards it does not touch.
  std::vector<ShardSlice> Split(KeyRange range) const;

 private:
  uint64_t num_params_;
  std::vector<uint64_t> bounds_;  // num_shards + 1 entries, bounds_[0] = 0
};

}  // namespace ps

#endif  // SHARDPS_PS_WIRE_RANGE_PARTITION_H_
