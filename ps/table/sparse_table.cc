#include "ps/table/sparse_table.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ps {

absl::StatusOr<std::unique_ptr<SparseTable>> SparseTable::Create(
    SparseTableOptions options) {
  if (options.num_shards < 1 || options.shard_index < 0 ||
      options.shard_index >= options.num_shards) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard ", options.shard_index, " of ", options.num_shards,
                     " does not exist"));
  }
  absl::StatusOr<std::unique_ptr<SparseRows>> rows =
      SparseRows::Create(options.rows);
  if (!rows.ok()) return rows.status();
  return std::unique_ptr<SparseTable>(
      new SparseTable(std::move(options), *std::move(rows)));
}

absl::Status SparseTable::CheckOwned(absl::Span<const uint64_t> ids) const {
  for (uint64_t id : ids) {
    if (const int owner = partition_.ShardOf(id);
        owner != options_.shard_index) {
      return absl::InvalidArgumentError(absl::StrCat(
          "row ", id, " belongs to shard ", owner, " of ", options_.num_shards,
          ", not to this server's shard ", options_.shard_index, " (",
          options_.sharding == RowSharding::kHash ? "hash" : "range",
          " sharding)"));
    }
  }
  return absl::OkStatus();
}

absl::Status SparseTable::Pull(absl::Span<const uint64_t> ids, bool create,
                               float* out) {
  if (absl::Status s = CheckOwned(ids); !s.ok()) return s;
  if (absl::Status s = rows_->Pull(ids, create, out); !s.ok()) return s;
  rows_pulled_.fetch_add(ids.size(), std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::StatusOr<PushOutcome> SparseTable::Push(const SparsePush& push) {
  if (!std::isfinite(push.lr_scale) || push.lr_scale < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "learning_rate_scale must be finite and >= 0, got ", push.lr_scale));
  }
  if (absl::Status s = CheckOwned(push.ids); !s.ok()) return s;
  absl::ReaderMutexLock no_snapshot(&snapshot_mu_);
  absl::StatusOr<Admission> admission =
      ledger_.Admit(push.id, push.acked_below);
  if (!admission.ok()) return admission.status();
  if (admission->kind == Admission::kDuplicate) {
    return PushOutcome{
        admission->version != 0 ? admission->version : version_.load(),
        /*duplicate=*/true};
  }
  if (absl::Status s = rows_->Push(push.ids, push.grads, push.lr_scale);
      !s.ok()) {
    ledger_.Abort(push.id);
    return s;
  }
  rows_pushed_.fetch_add(push.ids.size(), std::memory_order_relaxed);
  const uint64_t version = version_.fetch_add(1) + 1;
  ledger_.Commit(push.id, version);
  // Every push taken is applied at once: its place is its version.
  return PushOutcome{version, /*duplicate=*/false, /*position=*/version};
}

absl::StatusOr<std::unique_ptr<SparseTable>> SparseTable::Restore(
    SparseTableOptions options, const TableSnapshot& snapshot) {
  absl::StatusOr<std::unique_ptr<SparseTable>> table =
      Create(std::move(options));
  if (!table.ok()) return table.status();
  const shardps::TableCheckpoint& meta = snapshot.meta;
  if (absl::Status s = (*table)->rows_->Load(snapshot.arrays); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckRowCount(snapshot); !s.ok()) return s;
  if (absl::Status s = (*table)->ledger_.Load(meta.ledger()); !s.ok()) {
    return s;
  }
  (*table)->version_.store(meta.version());
  return table;
}

absl::Status SparseTable::CheckRowCount(const TableSnapshot& snapshot) {
  const uint64_t held =
      snapshot.arrays.empty() ? 0 : snapshot.arrays[0].size() / 2;
  if (snapshot.meta.rows() != held) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the snapshot says ", snapshot.meta.rows(), " rows but holds ", held));
  }
  return absl::OkStatus();
}

absl::Status SparseTable::Overwrite(const TableSnapshot& snapshot) {
  if (absl::Status s = CheckRowCount(snapshot); !s.ok()) return s;
  absl::MutexLock hold_pushes(&snapshot_mu_);
  std::vector<shardps::LedgerWorker> kept;
  ledger_.Save(&kept);
  if (absl::Status s = ledger_.Load(snapshot.meta.ledger()); !s.ok()) {
    return s;
  }
  if (absl::Status s = rows_->Replace(snapshot.arrays); !s.ok()) {
    ledger_
        .Load(google::protobuf::RepeatedPtrField<shardps::LedgerWorker>(
            kept.begin(), kept.end()))
        .IgnoreError();  // what it held a moment ago
    return s;
  }
  version_.store(snapshot.meta.version());
  return absl::OkStatus();
}

void SparseTable::Snapshot(TableSnapshot* out) {
  out->meta.Clear();
  std::vector<shardps::LedgerWorker> ledger;
  {
    absl::MutexLock hold_pushes(&snapshot_mu_);
    rows_->Save(&out->arrays);
    out->meta.set_version(version_.load());
    out->meta.set_admitted_pushes(out->meta.version());
    ledger_.Save(&ledger);
  }
  for (shardps::LedgerWorker& worker : ledger) {
    *out->meta.add_ledger() = std::move(worker);
  }
  out->meta.set_rows(out->arrays[0].size() / 2);
  out->meta.set_arrays(out->arrays.size());
}

}  // namespace ps
