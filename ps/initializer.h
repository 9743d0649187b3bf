// Initial values of a table. A key's value depends only on the InitConfig
// and the key itself, never on the shard layout, so a table sharded over S
// servers starts out identical to the same table on one server: the
// one-server baseline and the sharded runs train from the same model.
#ifndef SHARDPS_PS_INITIALIZER_H_
#define SHARDPS_PS_INITIALIZER_H_

#include "absl/status/status.h"
#include "proto/shardps.pb.h"
#include "ps/range_partition.h"

namespace ps {

// INVALID_ARGUMENT for an unknown kind or a scale that is negative or not
// finite.
absl::Status ValidateInit(const shardps::InitConfig& config);

// Writes the initial values of keys [keys.begin, keys.end) to out[0, size).
// Requires ValidateInit(config).ok().
void FillInitialValues(const shardps::InitConfig& config, KeyRange keys,
                       float* out);

}  // namespace ps

#endif  // SHARDPS_PS_INITIALIZER_H_
