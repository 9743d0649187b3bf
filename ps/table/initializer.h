// Initial values of a table. A key's value depends only on the InitConfig
// and the key itself, never on the shard layout, so a table sharded over S
// servers starts out identical to the same table on one server: the
// one-server baseline and the sharded runs train from the same model.
//
// Thread-safety: pure functions.
#ifndef SHARDPS_PS_TABLE_INITIALIZER_H_
#define SHARDPS_PS_TABLE_INITIALIZER_H_

#include "absl/status/status.h"
#include "proto/shardps.pb.h"
#include "ps/wire/range_partition.h"
#include "ps/wire/table_spec.h"

namespace ps {

// Writes the initial values of keys [keys.begin, keys.end) to out[0, size).
// Requires ValidateInit(config).ok().
void FillInitialValues(const shardps::InitConfig& config, KeyRange keys,
                       float* out);

// Writes the initial values of a sparse table's row `id` (dim floats) to
// out[0, dim): a function of (config, id, dim) alone, so a row created on
// first touch by any server holding it starts out the same.
void FillInitialRow(const shardps::InitConfig& config, uint64_t id,
                    uint32_t dim, float* out);

}  // namespace ps

#endif  // SHARDPS_PS_TABLE_INITIALIZER_H_
