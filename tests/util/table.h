// Helpers for tests of one server's tables (ps/table): specs and pushes as
// the service would make them.
#ifndef SHARDPS_TESTS_UTIL_TABLE_H_
#define SHARDPS_TESTS_UTIL_TABLE_H_

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "proto/shardps.pb.h"
#include "ps/table/table.h"
#include "ps/table/table_registry.h"
#include "ps/wire/float_pieces.h"

namespace testutil {

// Job "j", table `name` of `p` keys, shard `index` of `shards`; SGD with
// rate `lr`, uniform(-1, 1) initial values of seed 3.
inline shardps::CreateTableRequest TableSpec(const std::string& name,
                                             uint64_t p, int shards = 2,
                                             int index = 1, float lr = 0.5f) {
  shardps::CreateTableRequest spec;
  spec.set_job("j");
  spec.set_table(name);
  spec.set_num_params(p);
  spec.set_num_shards(shards);
  spec.set_shard_index(index);
  spec.mutable_optimizer()->set_name("sgd");
  spec.mutable_optimizer()->set_learning_rate(lr);
  spec.mutable_init()->set_kind("uniform");
  spec.mutable_init()->set_scale(1.0f);
  spec.mutable_init()->set_seed(3);
  return spec;
}

inline ps::Table* CreateIn(ps::TableRegistry& registry,
                           const shardps::CreateTableRequest& spec) {
  bool created = false;
  absl::StatusOr<ps::Table*> table = registry.CreateTable(spec, &created);
  EXPECT_TRUE(table.ok()) << table.status();
  return table.ok() ? *table : nullptr;
}

// Pushes `value` on every key of `keys` (the whole shard when empty) as
// push (session, sequence) of `worker` at `clock`.
inline absl::StatusOr<ps::PushOutcome> PushValue(
    ps::Table* table, uint32_t worker, uint64_t session, uint64_t sequence,
    float value, ps::KeyRange keys = {}, uint64_t clock = 0) {
  ps::PushArgs push;
  push.worker = worker;
  push.keys = keys.empty() ? table->range() : keys;
  push.session = session;
  push.sequence = sequence;
  push.acked_below = sequence;
  push.clock = clock;
  std::vector<float> grad(push.keys.size(), value);
  const absl::string_view bytes(reinterpret_cast<const char*>(grad.data()),
                                grad.size() * sizeof(float));
  ps::FloatPieces gradient(absl::MakeConstSpan(&bytes, 1));
  return table->ApplyPush(push, gradient);
}

// Every value of the table's shard.
inline std::vector<float> Values(const ps::Table* table) {
  std::vector<float> out(table->range().size());
  if (!out.empty()) {
    EXPECT_TRUE(table->Read(table->range(), out.data()).ok());
  }
  return out;
}

inline shardps::TableStats StatsOf(const ps::Table* table) {
  shardps::TableStats stats;
  table->FillStats(&stats);
  return stats;
}

}  // namespace testutil

#endif  // SHARDPS_TESTS_UTIL_TABLE_H_
