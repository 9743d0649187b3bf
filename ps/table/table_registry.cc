#include "ps/table/table_registry.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/util/message_differencer.h"
#include "ps/wire/range_partition.h"
#include "ps/wire/table_spec.h"

namespace ps {
namespace {

bool SameSpec(const shardps::CreateTableRequest& a,
              const shardps::CreateTableRequest& b) {
  return google::protobuf::util::MessageDifferencer::Equals(a, b);
}

}  // namespace

absl::Status TableRegistry::CheckJob(absl::string_view job) const {
  if (absl::Status s = CheckName("job", job); !s.ok()) return s;
  if (job != job_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "request for job '", job, "' reached a server of job '", job_, "'"));
  }
  return absl::OkStatus();
}

TableSettings TableRegistry::NewTableSettings() const {
  TableSettings settings;
  settings.log = log_;
  settings.max_workers = limits_.max_workers;
  settings.replicated = replicated_.load();
  return settings;
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

Table* TableRegistry::Insert(std::unique_ptr<Table> table, uint64_t bytes,
                             bool* inserted) {
  absl::MutexLock lock(&mu_);
  const std::string name = table->spec().table();
  auto [it, added] = tables_.try_emplace(name, std::move(table));
  if (!added) {
    --reserved_tables_;
    reserved_bytes_ -= bytes;
  }
  *inserted = added;
  return it->second.get();
}

absl::StatusOr<Table*> TableRegistry::CreateTable(
    const shardps::CreateTableRequest& spec, bool* created) {
  *created = false;
  if (absl::Status s = CheckJob(spec.job()); !s.ok()) return s;
  if (absl::Status s = CheckName("table", spec.table()); !s.ok()) return s;
  {
    absl::MutexLock lock(&mu_);
    if (sparse_tables_.contains(spec.table())) {
      return absl::AlreadyExistsError(absl::StrCat(
          "table '", spec.table(), "' already exists as a sparse table"));
    }
    auto it = tables_.find(spec.table());
    if (it != tables_.end()) {
      if (!SameSpec(it->second->spec(), spec)) {
        return absl::AlreadyExistsError(
            absl::StrCat("table '", spec.table(),
                         "' already exists with another spec; differing: ",
                         SpecDifference(it->second->spec(), spec)));
      }
      return it->second.get();
    }
  }
  // Validate and build outside the lock: filling a large table takes a while
  // and other tables' requests should not wait for it.
  absl::StatusOr<KeyRange> range = CheckSpec(spec);
  if (!range.ok()) return range.status();
  const int arrays = Table::ArraysPerKey(spec);
  const uint64_t bytes = range->size() * arrays * sizeof(float);
  if (absl::Status s = Reserve(spec.table(), range->size(), arrays); !s.ok()) {
    return s;
  }
  absl::StatusOr<std::unique_ptr<Table>> table =
      Table::Create(spec, *range, NewTableSettings());
  if (!table.ok()) {
    Unreserve(bytes);
    return table.status();
  }
  Table* found = Insert(*std::move(table), bytes, created);
  if (!*created && !SameSpec(found->spec(), spec)) {
    // Another request built the same name meanwhile, with another spec.
    return absl::AlreadyExistsError(
        absl::StrCat("table '", spec.table(),
                     "' was just created with another spec; differing: ",
                     SpecDifference(found->spec(), spec)));
  }
  return found;
}

absl::Status TableRegistry::Restore(TableSnapshot snapshot) {
  if (IsSparse(snapshot.meta.spec())) return RestoreSparse(snapshot);
  const shardps::CreateTableRequest spec = snapshot.meta.spec();
  absl::StatusOr<KeyRange> range = CheckSpec(spec);
  if (!range.ok()) return range.status();
  absl::StatusOr<std::unique_ptr<Table>> table =
      Table::Restore(std::move(snapshot), *range, NewTableSettings());
  if (!table.ok()) return table.status();
  const int arrays = Table::ArraysPerKey(spec);
  const uint64_t bytes = range->size() * arrays * sizeof(float);
  if (absl::Status s = Reserve(spec.table(), range->size(), arrays); !s.ok()) {
    return s;
  }
  bool inserted = false;
  Insert(*std::move(table), bytes, &inserted);
  if (!inserted) {
    return absl::AlreadyExistsError(
        absl::StrCat("table '", spec.table(), "' is restored twice"));
  }
  return absl::OkStatus();
}

absl::Status TableRegistry::Install(TableSnapshot snapshot) {
  if (IsSparse(snapshot.meta.spec())) return InstallSparse(snapshot);
  Table* existing = nullptr;
  {
    absl::ReaderMutexLock lock(&mu_);
    auto it = tables_.find(snapshot.meta.spec().table());
    if (it != tables_.end()) existing = it->second.get();
  }
  if (existing != nullptr) return existing->Overwrite(snapshot);
  return Restore(std::move(snapshot));
}

std::vector<Table*> TableRegistry::Tables() {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<Table*> tables;
  for (const auto& [name, table] : tables_) tables.push_back(table.get());
  return tables;
}

void TableRegistry::Snapshot(std::vector<TableSnapshot>* out) {
  const std::vector<Table*> tables = Tables();
  out->resize(tables.size());
  for (size_t i = 0; i < tables.size(); ++i) tables[i]->Snapshot(&(*out)[i]);
  SnapshotSparse(out);
}

absl::StatusOr<Table*> TableRegistry::Find(absl::string_view job,
                                           absl::string_view table) {
  if (absl::Status s = CheckJob(job); !s.ok()) return s;
  if (absl::Status s = CheckName("table", table); !s.ok()) return s;
  absl::ReaderMutexLock lock(&mu_);
  auto it = tables_.find(table);
  if (it == tables_.end()) {
    return absl::NotFoundError(
        sparse_tables_.contains(table)
            ? absl::StrCat("table '", table,
                           "' is sparse: use PullRows and PushRows")
            : absl::StrCat("unknown table '", table, "'"));
  }
  return it->second.get();
}

void TableRegistry::CloseWaits(const absl::Status& status) {
  for (Table* table : Tables()) table->Close(status);
}

void TableRegistry::EndWaits(const absl::Status& status) {
  for (Table* table : Tables()) table->EndWaits(status);
}

uint64_t TableRegistry::DuplicatePushes() {
  uint64_t n = 0;
  for (Table* table : Tables()) n += table->duplicates();
  return n;
}

void TableRegistry::FillStats(shardps::StatsResponse* out) {
  out->set_job(job_);
  for (Table* table : Tables()) table->FillStats(out->add_tables());
  FillSparseStats(out);
}

}  // namespace ps
