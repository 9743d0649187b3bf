// RowPartition: which shard owns each row of a sparse table (DESIGN.md,
// "Sparse tables"). Rows are keyed by any uint64 id. By default an id goes
// to the shard a hash of it picks (xxHash's XXH3, fixed by its
// specification, so every client and server of any build agrees), which
// spreads ids that are hot together over all servers; by range, the
// baseline switch, [0, id_space) is cut into S equal contiguous ranges, as
// a dense table's keys are, so popular low ids pile onto one server.
//
// Thread-safety: immutable after construction.
#ifndef SHARDPS_PS_WIRE_ROW_PARTITION_H_
#define SHARDPS_PS_WIRE_ROW_PARTITION_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/shardps.pb.h"

namespace ps {

enum class RowSharding { kHash, kRange };

// The wire's sharding (CreateTableRequest.row_sharding) as RowPartition's.
RowSharding FromWire(shardps::RowSharding sharding);
// A sharding by the name flags give it, "hash" or "range";
// INVALID_ARGUMENT "must be hash or range, not 'NAME'" otherwise (callers
// put the flag's name in front).
absl::StatusOr<shardps::RowSharding> ParseRowSharding(absl::string_view name);
const char* RowShardingName(shardps::RowSharding sharding);

class RowPartition {
 public:
  // `id_space` bounds the ids range sharding cuts up (0: all of uint64;
  // larger ids go to the last shard); hash sharding ignores it.
  // Requires num_shards >= 1.
  RowPartition(RowSharding sharding, int num_shards, uint64_t id_space = 0);

  RowSharding sharding() const { return sharding_; }
  int num_shards() const { return num_shards_; }
  int ShardOf(uint64_t id) const;

 private:
  RowSharding sharding_;
  int num_shards_;
  uint64_t id_space_;
};

}  // namespace ps

#endif  // SHARDPS_PS_WIRE_ROW_PARTITION_H_
