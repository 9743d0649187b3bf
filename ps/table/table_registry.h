// TableRegistry is a server's set of tables for one job: it creates them
// idempotently within the server's limits, restores them from a checkpoint,
// finds them for each request, and gathers what Stats and checkpoints need
// from all of them. It knows nothing of gRPC; ps/server/service.h adapts it
// to the wire.
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
#include "proto/shardps.pb.h"
#include "ps/base/log.h"
#include "ps/table/sparse_table.h"
#include "ps/table/table.h"

namespace ps {

// What one server may hold; a CreateTable past either is RESOURCE_EXHAUSTED
// (never unbounded memory).
struct TableLimits {
  size_t max_tables = 64;
  uint64_t max_bytes = uint64_t{16} << 30;  // values and optimizer state
  // Distinct worker ids an async table takes pushes from (sync and ssp
  // tables take their num_workers).
  uint32_t max_workers = kDefaultMaxWorkers;
};

class TableRegistry {
 public:
  // `log` (null: stderr) gets the tables' messages; it must outlive this.
  explicit TableRegistry(std::string job, TableLimits limits = {},
                         LogSink* log = nullptr)
      : job_(std::move(job)), limits_(limits), log_(log) {}
  TableRegistry(const TableRegistry&) = delete;
  TableRegistry& operator=(const TableRegistry&) = delete;

  const std::string& job() const { return job_; }
  // Tables created or restored from now on are replicas'
  // (TableSettings::replicated). Call before any table exists.
  void set_replicated() { replicated_ = true; }

  // Creates the table described by `spec`, or finds an identical one
  // (`*created` tells which). FAILED_PRECONDITION for another job's request,
  // INVALID_ARGUMENT for a bad spec, ALREADY_EXISTS when a table of that name
  // exists with a different spec, RESOURCE_EXHAUSTED past the limits.
  absl::StatusOr<Table*> CreateTable(const shardps::CreateTableRequest& spec,
                                     bool* created);

  // CreateTable for a sparse spec (IsSparse, ps/wire/table_spec.h): the
  // shard holds at most spec.max_rows() rows, reserved against the memory
  // limit up front.
  absl::StatusOr<SparseTable*> CreateSparseTable(
      const shardps::CreateTableRequest& spec, bool* created);
  // Find for sparse tables; NOT_FOUND names a dense table of that name.
  absl::StatusOr<SparseTable*> FindSparse(absl::string_view job,
                                          absl::string_view table);

  // Adds a table as a checkpoint held it (for a server starting up): the
  // spec is checked as by CreateTable, and arrays must match it
  // (INVALID_ARGUMENT otherwise). ALREADY_EXISTS if the name is taken.
  absl::Status Restore(TableSnapshot snapshot);
  // A table as its shard's primary holds it (a replica catching up):
  // restored if new here, else the table of that name takes its state
  // (Table::Overwrite or SparseTable::Overwrite, whose errors it returns;
  // FAILED_PRECONDITION when the spec differs from the table's here).
  absl::Status Install(TableSnapshot snapshot);

  // Captures every table, each at one point between pushes (blocking its
  // pushes only while its arrays are copied). Reuses the buffers in *out.
  void Snapshot(std::vector<TableSnapshot>* out);

  // FAILED_PRECONDITION when `job` is not this server's job, NOT_FOUND for an
  // unknown table.
  absl::StatusOr<Table*> Find(absl::string_view job, absl::string_view table);

  // Ends the pulls waiting on any table's consistency, and every later
  // wait, with `status` (the server is shutting down).
  void CloseWaits(const absl::Status& status);
  // Ends the pulls waiting now on every table with `status` (Table::
  // EndWaits).
  void EndWaits(const absl::Status& status);

  // Pushes acknowledged as duplicates, over all tables.
  uint64_t DuplicatePushes();

  // Fills the table part of a Stats reply.
  void FillStats(shardps::StatsResponse* out);

  absl::Status CheckJob(absl::string_view job) const;

 private:
  // What each table of this server gets besides its spec.
  TableSettings NewTableSettings() const;
  // Checks a spec, returning the key range it gives this server.
  absl::StatusOr<KeyRange> CheckSpec(const shardps::CreateTableRequest& spec);
  // Reserves room for a table of `keys` keys with `arrays` floats each (its
  // values and optimizer state); RESOURCE_EXHAUSTED past the limits.
  // Unreserve gives back its bytes.
  absl::Status Reserve(absl::string_view table, uint64_t keys, int arrays);
  void Unreserve(uint64_t bytes);
  // Adds `table` under its name, or keeps the one added meantime
  // (`*inserted` tells which; the reservation of `bytes` is given back then).
  Table* Insert(std::unique_ptr<Table> table, uint64_t bytes, bool* inserted);
  std::vector<Table*> Tables();
  void FillSparseStats(shardps::StatsResponse* out);
  // Reserve for a sparse table's max_rows; the bytes Unreserve gives back.
  absl::StatusOr<uint64_t> ReserveRows(const shardps::CreateTableRequest& spec);
  // Restore, Install and Snapshot of the sparse tables.
  absl::Status RestoreSparse(const TableSnapshot& snapshot);
  absl::Status InstallSparse(const TableSnapshot& snapshot);
  void SnapshotSparse(std::vector<TableSnapshot>* out);
  // The sparse table of spec's name if it has this spec; null if there is
  // no table of that name; ALREADY_EXISTS for another spec or a dense one.
  absl::StatusOr<SparseTable*> FindSameSparse(
      const shardps::CreateTableRequest& spec);

  const std::string job_;
  const TableLimits limits_;
  std::atomic<bool> replicated_{false};
  LogSink* const log_;
  absl::Mutex mu_;
  // Tables and value bytes held or being built.
  size_t reserved_tables_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t reserved_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, std::unique_ptr<Table>> tables_
      ABSL_GUARDED_BY(mu_);
  // Sparse tables with the specs they were created with; their names are
  // not in tables_.
  struct SparseEntry {
    shardps::CreateTableRequest spec;
    std::unique_ptr<SparseTable> table;
  };
  absl::flat_hash_map<std::string, SparseEntry> sparse_tables_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace ps

#endif  // SHARDPS_PS_TABLE_TABLE_REGISTRY_H_
