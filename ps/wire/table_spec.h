// What a valid table spec is: the rules of proto/shardps.proto's
// CreateTableRequest and its OptimizerConfig, InitConfig and
// ConsistencyConfig, checked alike by a client before it sends a spec and
// by a server before it builds a table from one. Every error is
// INVALID_ARGUMENT and names the field.
//
// Thread-safety: free functions without shared state.
#ifndef SHARDPS_PS_WIRE_TABLE_SPEC_H_
#define SHARDPS_PS_WIRE_TABLE_SPEC_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/shardps.pb.h"

namespace ps {

// An unknown optimizer, a value out of its range, or a field set that the
// named optimizer does not use.
absl::Status ValidateOptimizer(const shardps::OptimizerConfig& config);

// An unknown kind, or a value or scale that is not finite (scale < 0).
absl::Status ValidateInit(const shardps::InitConfig& config);

// An unknown mode or policy, a value out of range, or a field set that the
// mode does not use.
absl::Status ValidateConsistency(const shardps::ConsistencyConfig& config);

// Job and table names, as every request carries them: 1 to kMaxNameLength
// printable ASCII characters without spaces. `what` ("job", "table") names
// the field; the message never quotes a name it refuses, so it stays short
// whatever the request held.
inline constexpr size_t kMaxNameLength = 128;
absl::Status CheckName(absl::string_view what, absl::string_view name);

// Where two specs differ, for an ALREADY_EXISTS message: the paths of the
// first few fields that differ ("optimizer.learning_rate",
// "init_segments[57].init.seed"), never the values; empty when equal.
std::string SpecDifference(const shardps::CreateTableRequest& a,
                           const shardps::CreateTableRequest& b);

// Row width and rows per shard a sparse table may have.
inline constexpr uint32_t kMaxRowDim = 1 << 16;
inline constexpr uint64_t kMaxRowsPerShard = uint64_t{1} << 40;

// Whether `spec` describes a sparse table (dim > 0).
inline bool IsSparse(const shardps::CreateTableRequest& spec) {
  return spec.dim() > 0;
}

// The whole request but its job (which only the server can judge): the
// table name (1 to 128 printable ASCII characters without spaces), the
// shard count and index, every config above and the init segments, a
// sparse table's fields (dim in [1, kMaxRowDim], max_rows in [1,
// kMaxRowsPerShard], num_params 0, async, no init segments; a dense
// table has none of them), and no
// field this build does not know (a request from an older or newer client
// would otherwise be read silently wrong).
absl::Status ValidateTableSpec(const shardps::CreateTableRequest& spec);

// "async", "sync", "ssp": the flags' spellings, for messages.
absl::string_view ConsistencyModeName(shardps::ConsistencyMode mode);
// "fail", "drop".
absl::string_view StragglerPolicyName(shardps::StragglerPolicy policy);
// The policy spelled "fail" or "drop"; INVALID_ARGUMENT otherwise.
absl::StatusOr<shardps::StragglerPolicy> ParseStragglerPolicy(
    absl::string_view name);

}  // namespace ps

#endif  // SHARDPS_PS_WIRE_TABLE_SPEC_H_
