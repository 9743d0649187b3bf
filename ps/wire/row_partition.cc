#include "ps/wire/row_partition.h"

#include <xxhash.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ps {
namespace {

// floor(x * n / 2^64): x scaled onto [0, n) without a division (Lemire).
int Scale(uint64_t x, int n) {
  return static_cast<int>((static_cast<unsigned __int128>(x) * n) >> 64);
}

}  // namespace

RowSharding FromWire(shardps::RowSharding sharding) {
  return sharding == shardps::ROW_RANGE ? RowSharding::kRange
                                        : RowSharding::kHash;
}

absl::StatusOr<shardps::RowSharding> ParseRowSharding(absl::string_view name) {
  if (name == "hash") return shardps::ROW_HASH;
  if (name == "range") return shardps::ROW_RANGE;
  return absl::InvalidArgumentError(
      absl::StrCat("must be hash or range, not '", name, "'"));
}

const char* RowShardingName(shardps::RowSharding sharding) {
  return sharding == shardps::ROW_RANGE ? "range" : "hash";
}

RowPartition::RowPartition(RowSharding sharding, int num_shards,
                           uint64_t id_space)
    : sharding_(sharding), num_shards_(num_shards), id_space_(id_space) {}

int RowPartition::ShardOf(uint64_t id) const {
  if (num_shards_ == 1) return 0;  // what both ways below give, unhashed
  if (sharding_ == RowSharding::kHash) {
    // The id's little-endian bytes, as every platform would hash them.
    unsigned char bytes[8];
    for (int i = 0; i < 8; ++i)
      bytes[i] = static_cast<unsigned char>(id >> (8 * i));
    return Scale(XXH3_64bits(bytes, sizeof(bytes)), num_shards_);
  }
  if (id_space_ == 0) return Scale(id, num_shards_);
  const uint64_t clamped = std::min(id, id_space_ - 1);
  return static_cast<int>(static_cast<unsigned __int128>(clamped) *
                          num_shards_ / id_space_);
}

}  // namespace ps
