#include "ps/table/table_registry.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/message_differencer.h"
#include "ps/table/initializer.h"
#include "ps/wire/range_partition.h"

namespace ps {
namespace {}  // namespace

void Table::RecordClock(uint32_t worker, uint64_t clock) {
  absl::MutexLock lock(&clocks_mu);
  uint64_t& seen = clocks[worker];
  seen = std::max(seen, clock);
}

absl::Status TableRegistry::CheckJob(absl::string_view job) const {
  if (job != job_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "request for job '", job, "' reached a server of job '", job_, "'"));
  }
  return absl::OkStatus();
}

absl::StatusOr<KeyRange> TableRegistry::CheckSpec(
    const shardps::CreateTableRequest& spec) {
  if (absl::Status s = CheckJob(spec.job()); !s.ok()) return s;
  if (absl::Status s = ValidateTableSpec(spec); !s.ok()) return s;
  return RangePartition(spec.num_params(), spec.num_shards())
      .shard_range(spec.shard_index());
}

absl::Status TableRegistry::Reserve(absl::string_view table, uint64_t keys,
                                    int arrays) {
  // Compared in keys first: keys * 4 * arrays can wrap around for an absurd
  // spec.
  const uint64_t floats_per_key = static_cast<uint64_t>(arrays);
  const uint64_t bytes = keys * floats_per_key * sizeof(float);
  absl::MutexLock lock(&mu_);
  if (reserved_tables_ >= limits_.max_tables) {
    return absl::ResourceExhaustedError(
        absl::StrCat("this server already holds ", reserved_tables_,
                     " tables, its limit (--max_tables)"));
  }
  if (keys > limits_.max_bytes / (floats_per_key * sizeof(float)) ||
      bytes >
          limits_.max_bytes - std::min(limits_.max_bytes, reserved_bytes_)) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "table '", table, "' needs ", keys, " keys x ", arrays,
        " arrays (values and optimizer state) of floats on this shard; ",
        reserved_bytes_, " of the server's ", limits_.max_bytes,
        " (--max_memory_mb) are taken"));
  }
  ++reserved_tables_;
  reserved_bytes_ += bytes;
  return absl::OkStatus();
}

void TableRegistry::Unreserve(uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  --reserved_tables_;
  reserved_bytes_ -= bytes;
}

absl::StatusOr<Table*> TableRegistry::CreateTable(
    const shardps::CreateTableRequest& spec, bool* created) {
  *created = false;
  if (absl::Status s = CheckJob(spec.job()); !s.ok()) return s;
  {
    absl::MutexLock lock(&mu_);
    auto it = tables_.find(spec.table());
    if (it != tables_.end()) {
      if (!google::protobuf::util::MessageDifferencer::Equals(it->second->spec,
                                                              spec)) {
        return absl::AlreadyExistsError(absl::StrCat(
            "table '", spec.table(), "' already exists with another spec: ",
            it->second->spec.ShortDebugString(), " vs requested ",
            spec.ShortDebugString()));
      }
      return it->second.get();
    }
  }
  // Validate and build outside the lock: filling a large table takes a while
  // and other tables' requests should not wait for it.
  absl::StatusOr<KeyRange> range = CheckSpec(spec);
  if (!range.ok()) return range.status();
  // Values, optimizer state and, under sync, the clock's running sum.
  const int arrays =
      1 + OptimizerStateArrays(spec.optimizer()) +
      (spec.consistency().mode() == shardps::CONSISTENCY_SYNC ? 1 : 0);
  const uint64_t bytes = range->size() * arrays * sizeof(float);
  if (absl::Status s = Reserve(spec.table(), range->size(), arrays); !s.ok()) {
    return s;
  }
  absl::StatusOr<std::unique_ptr<Updater>> updater =
      MakeUpdater(spec.optimizer(), range->size());
  if (!updater.ok()) {
    Unreserve(bytes);
    return updater.status();
  }
  std::vector<float> values(range->size());
  FillInitialValues(spec.init(), *range, values.data());
  for (const shardps::InitSegment& seg : spec.init_segments()) {
    const KeyRange overlap{std::max(seg.begin(), range->begin),
                           std::min(seg.end(), range->end)};
    if (overlap.begin < overlap.end) {
      FillInitialValues(seg.init(), overlap,
                        values.data() + (overlap.begin - range->begin));
    }
  }
  auto table = std::make_unique<Table>(
      spec, std::make_unique<ShardStore>(*range, *std::move(updater),
                                         std::move(values)));

  absl::MutexLock lock(&mu_);
  auto [it, inserted] = tables_.try_emplace(spec.table(), std::move(table));
  if (!inserted) {  // another request built the same name meanwhile
    --reserved_tables_;
    reserved_bytes_ -= bytes;
    if (!google::protobuf::util::MessageDifferencer::Equals(it->second->spec,
                                                            spec)) {
      return absl::AlreadyExistsError(absl::StrCat(
          "table '", spec.table(), "' was just created with another spec: ",
          it->second->spec.ShortDebugString()));
    }
  }
  *created = inserted;
  return it->second.get();
}

absl::Status TableRegistry::Restore(TableSnapshot snapshot) {
  const shardps::CreateTableRequest& spec = snapshot.meta.spec();
  absl::StatusOr<KeyRange> range = CheckSpec(spec);
  if (!range.ok()) return range.status();
  absl::StatusOr<std::unique_ptr<Updater>> updater =
      MakeUpdater(spec.optimizer(), range->size());
  if (!updater.ok()) return updater.status();
  std::vector<absl::Span<float>> state = (*updater)->state();
  const bool has_sum = spec.consistency().mode() == shardps::CONSISTENCY_SYNC;
  if (snapshot.arrays.size() != 1 + state.size() + has_sum) {
    return absl::InvalidArgumentError(
        absl::StrCat("table '", spec.table(), "' has ", snapshot.arrays.size(),
                     " arrays; its optimizer and consistency need ",
                     1 + state.size() + has_sum));
  }
  for (const std::vector<float>& array : snapshot.arrays) {
    if (array.size() != range->size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "table '", spec.table(), "' has an array of ", array.size(),
          " values for its ", range->size(), " keys on this shard"));
    }
  }
  for (size_t i = 0; i < state.size(); ++i) {
    std::copy(snapshot.arrays[1 + i].begin(), snapshot.arrays[1 + i].end(),
              state[i].begin());
  }
  const uint64_t version = snapshot.meta.version();
  auto table = std::make_unique<Table>(
      spec,
      std::make_unique<ShardStore>(*range, *std::move(updater),
                                   std::move(snapshot.arrays[0]), version),
      version);
  if (absl::Status s = table->ledger.Load(snapshot.meta.ledger()); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("table '", spec.table(), "': ", s.message()));
  }
  std::vector<float> sum;
  if (has_sum) sum = std::move(snapshot.arrays.back());
  if (absl::Status s =
          table->consistency.Restore(snapshot.meta.barrier(), std::move(sum));
      !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("table '", spec.table(), "': ", s.message()));
  }
  {
    absl::MutexLock lock(&table->clocks_mu);
    for (const shardps::WorkerClock& wc : snapshot.meta.worker_clocks()) {
      table->clocks[wc.worker()] = wc.clock();
    }
  }
  const int arrays = static_cast<int>(snapshot.arrays.size());
  const uint64_t bytes = range->size() * arrays * sizeof(float);
  if (absl::Status s = Reserve(spec.table(), range->size(), arrays); !s.ok()) {
    return s;
  }
  absl::MutexLock lock(&mu_);
  if (!tables_.try_emplace(spec.table(), std::move(table)).second) {
    --reserved_tables_;
    reserved_bytes_ -= bytes;
    return absl::AlreadyExistsError(
        absl::StrCat("table '", spec.table(), "' is restored twice"));
  }
  return absl::OkStatus();
}

void TableRegistry::Snapshot(std::vector<TableSnapshot>* out) {
  std::vector<Table*> tables;
  {
    absl::ReaderMutexLock lock(&mu_);
    for (const auto& [name, table] : tables_) tables.push_back(table.get());
  }
  out->resize(tables.size());
  for (size_t i = 0; i < tables.size(); ++i) {
    Table& table = *tables[i];
    TableSnapshot& snapshot = (*out)[i];
    snapshot.meta.Clear();
    *snapshot.meta.mutable_spec() = table.spec;
    std::vector<shardps::LedgerWorker> ledger;
    {
      absl::MutexLock hold_pushes(&table.snapshot_mu);
      table.store->SaveArrays(&snapshot.arrays);
      std::vector<float> sum;
      table.consistency.Save(snapshot.meta.mutable_barrier(), &sum);
      if (table.consistency.saves_sum()) {
        snapshot.arrays.push_back(std::move(sum));
      }
      snapshot.meta.set_version(table.store->version());
      table.ledger.Save(&ledger);
      absl::MutexLock lock(&table.clocks_mu);
      for (const auto& [worker, clock] : table.clocks) {
        shardps::WorkerClock* wc = snapshot.meta.add_worker_clocks();
        wc->set_worker(worker);
        wc->set_clock(clock);
      }
    }
    for (shardps::LedgerWorker& worker : ledger) {
      *snapshot.meta.add_ledger() = std::move(worker);
    }
    snapshot.meta.set_arrays(snapshot.arrays.size());
  }
}

absl::StatusOr<Table*> TableRegistry::Find(absl::string_view job,
                                           absl::string_view table) {
  if (absl::Status s = CheckJob(job); !s.ok()) return s;
  absl::ReaderMutexLock lock(&mu_);
  auto it = tables_.find(table);
  if (it == tables_.end()) {
    return absl::NotFoundError(absl::StrCat("unknown table '", table, "'"));
  }
  return it->second.get();
}

void TableRegistry::CloseWaits(const absl::Status& status) {
  absl::ReaderMutexLock lock(&mu_);
  for (const auto& [name, table] : tables_) table->consistency.Close(status);
}

uint64_t TableRegistry::DuplicatePushes() {
  absl::ReaderMutexLock lock(&mu_);
  uint64_t n = 0;
  for (const auto& [name, table] : tables_) n += table->ledger.duplicates();
  return n;
}

void TableRegistry::FillStats(shardps::StatsResponse* out) {
  out->set_job(job_);
  absl::ReaderMutexLock lock(&mu_);
  for (const auto& [name, table] : tables_) {
    shardps::TableStats* ts = out->add_tables();
    ts->set_table(name);
    ts->set_num_params(table->spec.num_params());
    ts->set_num_shards(table->spec.num_shards());
    ts->set_shard_index(table->spec.shard_index());
    ts->set_begin(table->store->range().begin);
    ts->set_end(table->store->range().end);
    ts->set_version(table->store->version());
    ts->set_restored_version(table->restored_version);
    ts->set_consistency_clock(table->consistency.clock());
    for (uint32_t worker : table->consistency.dropped_workers()) {
      ts->add_dropped_workers(worker);
    }
    absl::MutexLock clocks_lock(&table->clocks_mu);
    for (const auto& [worker, clock] : table->clocks) {
      shardps::WorkerClock* wc = ts->add_worker_clocks();
      wc->set_worker(worker);
      wc->set_clock(clock);
    }
  }
}

}  // namespace ps
