// TableRegistry, continued: sparse tables (ps/table/sparse_table.h).
#include "absl/strings/str_cat.h"
#include "google/protobuf/util/message_differencer.h"
#include "ps/table/table_registry.h"
#include "ps/table/updater.h"
#include "ps/wire/table_spec.h"

namespace ps {
namespace {

SparseTableOptions OptionsOf(const shardps::CreateTableRequest& spec) {
  SparseTableOptions o;
  o.rows.dim = spec.dim();
  o.rows.max_rows = spec.max_rows();
  o.rows.init = spec.init();
  o.rows.optimizer = spec.optimizer();
  o.sharding = FromWire(spec.row_sharding());
  o.num_shards = static_cast<int>(spec.num_shards());
  o.shard_index = static_cast<int>(spec.shard_index());
  o.id_space = spec.id_space();
  return o;
}

}  // namespace

absl::StatusOr<uint64_t> TableRegistry::ReserveRows(
    const shardps::CreateTableRequest& spec) {
  // Rows are made on first touch, but max_rows of them are what the table
  // may come to hold: that is what the memory limit is charged.
  const int arrays = 1 + OptimizerStateArrays(spec.optimizer());
  if (absl::Status s =
          Reserve(spec.table(), spec.max_rows() * spec.dim(), arrays);
      !s.ok()) {
    return s;
  }
  return spec.max_rows() * spec.dim() * arrays * sizeof(float);
}

absl::StatusOr<SparseTable*> TableRegistry::CreateSparseTable(
    const shardps::CreateTableRequest& spec, bool* created) {
  *created = false;
  if (absl::Status s = CheckJob(spec.job()); !s.ok()) return s;
  if (absl::Status s = ValidateTableSpec(spec); !s.ok()) return s;
  if (!IsSparse(spec)) {
    return absl::InvalidArgumentError("a sparse table needs dim > 0");
  }
  if (absl::StatusOr<SparseTable*> found = FindSameSparse(spec);
      !found.ok() || *found != nullptr) {
    return found;
  }
  absl::StatusOr<uint64_t> bytes = ReserveRows(spec);
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<std::unique_ptr<SparseTable>> table =
      SparseTable::Create(OptionsOf(spec));
  if (!table.ok()) {
    Unreserve(*bytes);
    return table.status();
  }
  {
    absl::MutexLock lock(&mu_);
    if (!tables_.contains(spec.table()) &&
        !sparse_tables_.contains(spec.table())) {
      *created = true;
      SparseTable* added = table->get();
      sparse_tables_.emplace(spec.table(),
                             SparseEntry{spec, *std::move(table)});
      return added;
    }
  }
  // Another call created the name meanwhile: answered as if it came first.
  Unreserve(*bytes);
  absl::StatusOr<SparseTable*> found = FindSameSparse(spec);
  if (found.ok() && *found == nullptr) {
    return absl::InternalError("a table vanished while being created");
  }
  return found;
}

absl::Status TableRegistry::RestoreSparse(const TableSnapshot& snapshot) {
  const shardps::CreateTableRequest& spec = snapshot.meta.spec();
  if (absl::Status s = CheckJob(spec.job()); !s.ok()) return s;
  if (absl::Status s = ValidateTableSpec(spec); !s.ok()) return s;
  absl::StatusOr<uint64_t> bytes = ReserveRows(spec);
  if (!bytes.ok()) return bytes.status();
  absl::StatusOr<std::unique_ptr<SparseTable>> table =
      SparseTable::Restore(OptionsOf(spec), snapshot);
  if (!table.ok()) {
    Unreserve(*bytes);
    return absl::Status(
        table.status().code(),
        absl::StrCat("table '", spec.table(), "': ", table.status().message()));
  }
  bool inserted = false;
  {
    absl::MutexLock lock(&mu_);
    inserted =
        !tables_.contains(spec.table()) &&
        sparse_tables_
            .try_emplace(spec.table(), SparseEntry{spec, *std::move(table)})
            .second;
  }
  if (!inserted) {
    Unreserve(*bytes);
    return absl::AlreadyExistsError(
        absl::StrCat("table '", spec.table(), "' is restored twice"));
  }
  return absl::OkStatus();
}

absl::Status TableRegistry::InstallSparse(const TableSnapshot& snapshot) {
  const shardps::CreateTableRequest& spec = snapshot.meta.spec();
  SparseTable* existing = nullptr;
  shardps::CreateTableRequest existing_spec;
  {
    absl::ReaderMutexLock lock(&mu_);
    auto it = sparse_tables_.find(spec.table());
    if (it != sparse_tables_.end()) {
      existing = it->second.table.get();
      existing_spec = it->second.spec;
    }
  }
  if (existing == nullptr) return RestoreSparse(snapshot);
  const std::string differs = SpecDifference(existing_spec, spec);
  if (!differs.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("table '", spec.table(),
                     "' has another spec here; differing: ", differs));
  }
  if (absl::Status s = existing->Overwrite(snapshot); !s.ok()) {
    return absl::Status(
        s.code(), absl::StrCat("table '", spec.table(), "': ", s.message()));
  }
  return absl::OkStatus();
}

void TableRegistry::SnapshotSparse(std::vector<TableSnapshot>* out) {
  std::vector<std::pair<shardps::CreateTableRequest, SparseTable*>> tables;
  {
    absl::ReaderMutexLock lock(&mu_);
    for (const auto& [name, entry] : sparse_tables_) {
      tables.emplace_back(entry.spec, entry.table.get());
    }
  }
  for (auto& [spec, table] : tables) {
    TableSnapshot& snapshot = out->emplace_back();
    table->Snapshot(&snapshot);
    *snapshot.meta.mutable_spec() = std::move(spec);
  }
}

absl::StatusOr<SparseTable*> TableRegistry::FindSameSparse(
    const shardps::CreateTableRequest& spec) {
  absl::ReaderMutexLock lock(&mu_);
  if (tables_.contains(spec.table())) {
    return absl::AlreadyExistsError(absl::StrCat(
        "table '", spec.table(), "' already exists as a dense table"));
  }
  auto it = sparse_tables_.find(spec.table());
  if (it == sparse_tables_.end()) return nullptr;
  if (!google::protobuf::util::MessageDifferencer::Equals(it->second.spec,
                                                          spec)) {
    return absl::AlreadyExistsError(
        absl::StrCat("table '", spec.table(),
                     "' already exists with another spec; differing: ",
                     SpecDifference(it->second.spec, spec)));
  }
  return it->second.table.get();
}

absl::StatusOr<SparseTable*> TableRegistry::FindSparse(
    absl::string_view job, absl::string_view table) {
  if (absl::Status s = CheckJob(job); !s.ok()) return s;
  if (absl::Status s = CheckName("table", table); !s.ok()) return s;
  absl::ReaderMutexLock lock(&mu_);
  auto it = sparse_tables_.find(table);
  if (it == sparse_tables_.end()) {
    return absl::NotFoundError(
        tables_.contains(table)
            ? absl::StrCat("table '", table, "' is dense: use Pull and Push")
            : absl::StrCat("unknown table '", table, "'"));
  }
  return it->second.table.get();
}

void TableRegistry::FillSparseStats(shardps::StatsResponse* out) {
  absl::ReaderMutexLock lock(&mu_);
  for (const auto& [name, entry] : sparse_tables_) {
    shardps::TableStats* t = out->add_tables();
    t->set_table(name);
    t->set_num_shards(entry.spec.num_shards());
    t->set_shard_index(entry.spec.shard_index());
    t->set_version(entry.table->version());
    t->set_dim(entry.spec.dim());
    t->set_rows(entry.table->num_rows());
    t->set_row_sharding(entry.spec.row_sharding());
    t->set_id_space(entry.spec.id_space());
    t->set_rows_pulled(entry.table->rows_pulled());
    t->set_rows_pushed(entry.table->rows_pushed());
  }
}

}  // namespace ps
