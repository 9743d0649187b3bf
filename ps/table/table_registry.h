// TableRegistry is a server's set of tables for one job: it creates them
// idempotently, finds them for each request, and keeps per-table clocks and
// per-server counters for Stats. It knows nothing of gRPC; ps/server/service.h
// adapts it to the wire.
//
// Thread-safety: all methods are safe to call concurrently. Tables are never
// removed, so a Table* stays valid for the registry's lifetime.
#ifndef SHARDPS_PS_TABLE_TABLE_REGISTRY_H_
#define SHARDPS_PS_TABLE_TABLE_REGISTRY_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "proto/checkpoint.pb.h"
#include "proto/shardps.pb.h"
#include "ps/table/consistency.h"
#include "ps/table/push_ledger.h"
#include "ps/table/shard_store.h"

namespace ps {

struct Table {
  Table(shardps::CreateTableRequest spec, std::unique_ptr<ShardStore> store,
        uint64_t restored_version = 0)
      : spec(std::move(spec)),
        store(std::move(store)),
        restored_version(restored_version),
        consistency(this->spec.consistency(), this->spec.table(),
                    this->store.get()) {}

  // Records that `worker` pushed `clock`; keeps the highest clock seen.
  void RecordClock(uint32_t worker, uint64_t clock);

  const shardps::CreateTableRequest spec;
  const std::unique_ptr<ShardStore> store;
  const uint64_t restored_version;  // 0 unless restored from a checkpoint
  // Orders pushes and pulls by clock (async, sync or ssp); every push and
  // pull goes through it.
  Consistency consistency;

  // A push holds this shared from its ledger admission until it is applied
  // and committed; a snapshot holds it exclusively, so that values, version,
  // clocks and ledger are captured at one point between pushes.
  absl::Mutex snapshot_mu;
  PushLedger ledger;

  absl::Mutex clocks_mu;
  absl::flat_hash_map<uint32_t, uint64_t> clocks ABSL_GUARDED_BY(clocks_mu);
};

// One table as a checkpoint holds it.
struct TableSnapshot {
  shardps::TableCheckpoint meta;           // meta.arrays() == arrays.size()
  std::vector<std::vector<float>> arrays;  // values, then optimizer state
};

// What one server may hold; a CreateTable past either is RESOURCE_EXHAUSTED
// (never unbounded memory).
struct TableLimits {
  size_t max_tables = 64;
  uint64_t max_bytes = uint64_t{16} << 30;  // values and optimizer state
};

class TableRegistry {
 public:
  explicit TableRegistry(std::string job, TableLimits limits = {})
      : job_(std::move(job)), limits_(limits) {}
  TableRegistry(const TableRegistry&) = delete;
  TableRegistry& operator=(const TableRegistry&) = delete;

  const std::string& job() const { return job_; }

  // Creates the table described by `spec`, or finds an identical one
  // (`*created` tells which). FAILED_PRECONDITION for another job's request,
  // INVALID_ARGUMENT for a bad spec, ALREADY_EXISTS when a table of that name
  // exists with a different spec, RESOURCE_EXHAUSTED past the limits.
  absl::StatusOr<Table*> CreateTable(const shardps::CreateTableRequest& spec,
                                     bool* created);

  // Adds a table as a checkpoint held it (for a server starting up): the
  // spec is checked as by CreateTable, and arrays must match it
  // (INVALID_ARGUMENT otherwise). ALREADY_EXISTS if the name is taken.
  absl::Status Restore(TableSnapshot snapshot);

  // Captures every table, each at one point between pushes (blocking its
  // pushes only while its arrays are copied). Reuses the buffers in *out.
  void Snapshot(std::vector<TableSnapshot>* out);

  // FAILED_PRECONDITION when `job` is not this server's job, NOT_FOUND for an
  // unknown table.
  absl::StatusOr<Table*> Find(absl::string_view job, absl::string_view table);

  // Ends the pulls waiting on any table's consistency, and every later
  // wait, with `status` (the server is shutting down).
  void CloseWaits(const absl::Status& status);

  // Pushes acknowledged as duplicates, over all tables.
  uint64_t DuplicatePushes();

  // Fills the table part of a Stats reply.
  void FillStats(shardps::StatsResponse* out);

  absl::Status CheckJob(absl::string_view job) const;

 private:
  // Checks a spec, returning the key range it gives this server.
  absl::StatusOr<KeyRange> CheckSpec(const shardps::CreateTableRequest& spec);
  // Reserves room for a table of `keys` keys with `arrays` floats each (its
  // values and optimizer state); RESOURCE_EXHAUSTED past the limits.
  // Unreserve gives back its bytes.
  absl::Status Reserve(absl::string_view table, uint64_t keys, int arrays);
  void Unreserve(uint64_t bytes);

  const std::string job_;
  const TableLimits limits_;
  absl::Mutex mu_;
  // Tables and value bytes held or being built.
  size_t reserved_tables_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t reserved_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, std::unique_ptr<Table>> tables_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace ps

#endif  // SHARDPS_PS_TABLE_TABLE_REGISTRY_H_
