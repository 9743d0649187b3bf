// SparseTable: a sparse table's shard on one server as the wire uses it:
// SparseRows (ps/table/sparse_rows.h) behind the checks a server owes its
// clients. Every id must be one this shard owns under the table's
// RowPartition (ps/wire/row_partition.h); a push is applied exactly once
// through a PushLedger (ps/table/push_ledger.h), so a client may resend it
// after a lost reply; each applied push counts one version.
//
// Thread-safety: all methods may be called concurrently.
#ifndef SHARDPS_PS_TABLE_SPARSE_TABLE_H_
#define SHARDPS_PS_TABLE_SPARSE_TABLE_H_

#include <atomic>
#include <cstdint>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "ps/table/push_ledger.h"
#include "ps/table/sparse_rows.h"
#include "ps/table/table.h"
#include "ps/wire/float_pieces.h"
#include "ps/wire/row_partition.h"

namespace ps {

struct SparseTableOptions {
  SparseRowsOptions rows;
  RowSharding sharding = RowSharding::kHash;
  int num_shards = 1;
  int shard_index = 0;    // which of the num_shards this server holds
  uint64_t id_space = 0;  // range sharding's id bound (row_partition.h)
};

// A push of row gradients as the wire gives it: grads holds ids.size() rows
// of dim floats. id names the piece for the ledger (PushId.begin: the
// piece's place within its logical push).
struct SparsePush {
  PushId id;
  uint64_t acked_below = 0;
  absl::Span<const uint64_t> ids;
  UnalignedFloats grads{static_cast<const float*>(nullptr), 0};
  float lr_scale = 1.0f;
};

class SparseTable {
 public:
  // INVALID_ARGUMENT for rows options SparseRows refuses, or a shard index
  // outside [0, num_shards).
  static absl::StatusOr<std::unique_ptr<SparseTable>> Create(
      SparseTableOptions options);
  // The table as Snapshot saved it (`snapshot.meta.spec` aside, which the
  // caller turned into `options`): rows, version and push ledger, so that
  // exactly-once holds across a restart. INVALID_ARGUMENT for a snapshot
  // these options cannot hold.
  static absl::StatusOr<std::unique_ptr<SparseTable>> Restore(
      SparseTableOptions options, const TableSnapshot& snapshot);
  SparseTable(const SparseTable&) = delete;
  SparseTable& operator=(const SparseTable&) = delete;

  const SparseTableOptions& options() const { return options_; }
  uint64_t version() const { return version_.load(); }
  uint64_t num_rows() const { return rows_->num_rows(); }
  uint64_t duplicate_pushes() const { return ledger_.duplicates(); }
  // Rows served by pulls and applied by pushes since the table was created
  // (an id counts at each place it appears); a shard's load.
  uint64_t rows_pulled() const { return rows_pulled_.load(); }
  uint64_t rows_pushed() const { return rows_pushed_.load(); }

  // SparseRows::Pull, after checking that this shard owns every id.
  absl::Status Pull(absl::Span<const uint64_t> ids, bool create, float* out);
  // Applies the push once (a copy of an applied one is acknowledged with
  // duplicate set); refused, changing nothing, for an id of another shard
  // or anything SparseRows::Push refuses.
  absl::StatusOr<PushOutcome> Push(const SparsePush& push);

  // Everything but out->meta.spec, between pushes (checkpoint.h). Its
  // admitted_pushes is its version: every push taken is applied at once.
  void Snapshot(TableSnapshot* out);
  // Takes the state in `snapshot` (its spec aside, which the caller checks)
  // in place of its own: rows, version and ledger, between pushes (a
  // replica catching up; Table::Overwrite's peer). INVALID_ARGUMENT when
  // the rows or ledger do not fit these options; nothing changes then.
  absl::Status Overwrite(const TableSnapshot& snapshot);

 private:
  SparseTable(SparseTableOptions options, std::unique_ptr<SparseRows> rows)
      : options_(std::move(options)),
        partition_(options_.sharding, options_.num_shards, options_.id_space),
        rows_(std::move(rows)) {}
  // INVALID_ARGUMENT when the snapshot's row count is not the rows it holds.
  static absl::Status CheckRowCount(const TableSnapshot& snapshot);
  // INVALID_ARGUMENT naming the first id another shard owns.
  absl::Status CheckOwned(absl::Span<const uint64_t> ids) const;

  const SparseTableOptions options_;
  const RowPartition partition_;
  const std::unique_ptr<SparseRows> rows_;
  // Held shared by a push from admission to commit, exclusively by a
  // snapshot: the ledger is saved with no push half-way.
  absl::Mutex snapshot_mu_;
  PushLedger ledger_;
  std::atomic<uint64_t> version_{0};
  std::atomic<uint64_t> rows_pulled_{0};
  std::atomic<uint64_t> rows_pushed_{0};
};

}  // namespace ps

#endif  // SHARDPS_PS_TABLE_SPARSE_TABLE_H_
