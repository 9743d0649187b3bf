#include "ps/table/table.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "ps/table/initializer.h"
#include "ps/table/updater.h"
#include "ps/wire/table_spec.h"

namespace ps {
namespace {

bool HasSyncSum(const shardps::CreateTableRequest& spec) {
  return spec.consistency().mode() == shardps::CONSISTENCY_SYNC;
}

// The initial values of `range`: the table's init, then its segments.
std::vector<float> InitialValues(const shardps::CreateTableRequest& spec,
                                 KeyRange range) {
  std::vector<float> values(range.size());
  FillInitialValues(spec.init(), range, values.data());
  for (const shardps::InitSegment& seg : spec.init_segments()) {
    const KeyRange overlap{std::max(seg.begin(), range.begin),
                           std::min(seg.end(), range.end)};
    if (overlap.begin < overlap.end) {
      FillInitialValues(seg.init(), overlap,
                        values.data() + (overlap.begin - range.begin));
    }
  }
  return values;
}

absl::Status InTable(absl::string_view table, const absl::Status& s) {
  return absl::InvalidArgumentError(
      absl::StrCat("table '", table, "': ", s.message()));
}

}  // namespace

int Table::ArraysPerKey(const shardps::CreateTableRequest& spec) {
  return 1 + OptimizerStateArrays(spec.optimizer()) +
         (HasSyncSum(spec) ? 1 : 0);
}

Table::Table(shardps::CreateTableRequest spec,
             std::unique_ptr<ShardStore> store, uint64_t restored_version,
             TableSettings settings)
    : spec_(std::move(spec)),
      store_(std::move(store)),
      restored_version_(restored_version),
      max_workers_(settings.max_workers),
      consistency_(spec_.consistency(), spec_.table(), store_.get(),
                   settings.log, settings.replicated) {}

absl::StatusOr<std::unique_ptr<Table>> Table::Create(
    const shardps::CreateTableRequest& spec, KeyRange range,
    TableSettings settings) {
  absl::StatusOr<std::unique_ptr<Updater>> updater =
      MakeUpdater(spec.optimizer(), range.size());
  if (!updater.ok()) return updater.status();
  auto store = std::make_unique<ShardStore>(range, *std::move(updater),
                                            InitialValues(spec, range));
  return std::unique_ptr<Table>(new Table(spec, std::move(store), 0, settings));
}

absl::StatusOr<std::unique_ptr<Table>> Table::Restore(TableSnapshot snapshot,
                                                      KeyRange range,
                                                      TableSettings settings) {
  const shardps::CreateTableRequest& spec = snapshot.meta.spec();
  absl::StatusOr<std::unique_ptr<Updater>> updater =
      MakeUpdater(spec.optimizer(), range.size());
  if (!updater.ok()) return updater.status();
  std::vector<absl::Span<float>> state = (*updater)->state();
  const size_t arrays = 1 + state.size() + (HasSyncSum(spec) ? 1 : 0);
  if (snapshot.arrays.size() != arrays) {
    return InTable(spec.table(), absl::InvalidArgumentError(
                                     absl::StrCat(snapshot.arrays.size(),
                                                  " arrays; its optimizer and "
                                                  "consistency need ",
                                                  arrays)));
  }
  for (const std::vector<float>& array : snapshot.arrays) {
    if (array.size() != range.size()) {
      return InTable(spec.table(),
                     absl::InvalidArgumentError(absl::StrCat(
                         "an array of ", array.size(), " values for its ",
                         range.size(), " keys on this shard")));
    }
  }
  for (size_t i = 0; i < state.size(); ++i) {
    std::copy(snapshot.arrays[1 + i].begin(), snapshot.arrays[1 + i].end(),
              state[i].begin());
  }
  const uint64_t version = snapshot.meta.version();
  auto store = std::make_unique<ShardStore>(
      range, *std::move(updater), std::move(snapshot.arrays[0]), version);
  std::unique_ptr<Table> table(
      new Table(spec, std::move(store), version, settings));
  std::vector<float> sum;
  if (HasSyncSum(spec)) sum = std::move(snapshot.arrays.back());
  if (absl::Status s = table->RestoreProgress(snapshot.meta, std::move(sum));
      !s.ok()) {
    return InTable(spec.table(), s);
  }
  return table;
}

absl::Status Table::RestoreProgress(const shardps::TableCheckpoint& meta,
                                    std::vector<float> sum) {
  if (absl::Status s = ledger_.Load(meta.ledger()); !s.ok()) return s;
  if (absl::Status s = consistency_.Restore(meta.barrier(), std::move(sum));
      !s.ok()) {
    return s;
  }
  admitted_.store(meta.admitted_pushes(), std::memory_order_release);
  absl::MutexLock lock(&clocks_mu_);
  for (const shardps::WorkerClock& wc : meta.worker_clocks()) {
    clocks_[wc.worker()] = wc.clock();
  }
  return absl::OkStatus();
}

absl::StatusOr<PushOutcome> Table::ApplyPush(const PushArgs& push,
                                             FloatPieces& gradient) {
  // Validate first: a rejected push must not even touch the ledger.
  if (!std::isfinite(push.lr_scale) || push.lr_scale < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "learning_rate_scale must be finite and >= 0, got ", push.lr_scale));
  }
  if (absl::Status s = store_->CheckPush(push.keys, gradient); !s.ok()) {
    return s;
  }
  if (absl::Status s = consistency_.CheckWorker(push.worker); !s.ok()) {
    return s;
  }
  if (absl::Status s = BeginWorkerPush(push.worker); !s.ok()) return s;
  absl::ReaderMutexLock hold(&snapshot_mu_);
  absl::StatusOr<PushOutcome> outcome = AdmitOnce(push, [&] {
    return consistency_.Push(push.worker, push.clock, push.keys, gradient,
                             push.lr_scale);
  });
  // Under the snapshot lock: a checkpoint holds a push's clock with it.
  EndWorkerPush(push.worker, push.clock, outcome.ok() && !outcome->duplicate);
  return outcome;
}

absl::Status Table::BeginWorkerPush(uint32_t worker) {
  absl::MutexLock lock(&clocks_mu_);
  if (clocks_.contains(worker)) return absl::OkStatus();
  auto pending = first_pushes_.find(worker);
  if (pending == first_pushes_.end()) {
    // sync and ssp barriers bound their workers themselves (CheckWorker).
    if (spec_.consistency().mode() == shardps::CONSISTENCY_ASYNC &&
        clocks_.size() + first_pushes_.size() >= max_workers_) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "table '", spec_.table(), "' already takes pushes from ",
          max_workers_, " workers, this server's limit (--max_workers); ",
          "worker ", worker, " is one more"));
    }
    pending = first_pushes_.emplace(worker, 0).first;
  }
  ++pending->second;
  return absl::OkStatus();
}

void Table::EndWorkerPush(uint32_t worker, uint64_t clock, bool applied) {
  absl::MutexLock lock(&clocks_mu_);
  if (auto pending = first_pushes_.find(worker);
      pending != first_pushes_.end() && --pending->second == 0) {
    first_pushes_.erase(pending);
  }
  if (!applied) return;
  uint64_t& seen = clocks_[worker];
  seen = std::max(seen, clock);
}

absl::StatusOr<PushOutcome> Table::AdmitOnce(
    const PushArgs& push, absl::FunctionRef<absl::StatusOr<uint64_t>()> apply) {
  const PushId id{push.worker, push.session, push.sequence, push.keys.begin};
  absl::StatusOr<Admission> admission = ledger_.Admit(id, push.acked_below);
  if (!admission.ok()) return admission.status();
  if (admission->kind == Admission::kDuplicate) {
    return PushOutcome{
        admission->version != 0 ? admission->version : store_->version(),
        /*duplicate=*/true};
  }
  absl::StatusOr<uint64_t> version = apply();
  if (!version.ok()) {
    ledger_.Abort(id);
    return version.status();
  }
  ledger_.Commit(id, *version);
  const uint64_t position = admitted_.fetch_add(1, std::memory_order_acq_rel);
  return PushOutcome{*version, /*duplicate=*/false, position + 1};
}

absl::StatusOr<PushOutcome> Table::Assign(const PushArgs& args,
                                          FloatPieces& values) {
  if (absl::Status s = store_->CheckPush(args.keys, values, "values");
      !s.ok()) {
    return s;
  }
  absl::ReaderMutexLock hold(&snapshot_mu_);
  return AdmitOnce(args, [&]() -> absl::StatusOr<uint64_t> {
    return store_->AssignChecked(args.keys, values);
  });
}

absl::Status Table::Overwrite(const TableSnapshot& snapshot) {
  const std::string differs = SpecDifference(spec_, snapshot.meta.spec());
  if (!differs.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("table '", spec_.table(),
                     "' has another spec here; differing: ", differs));
  }
  // Values and optimizer state, then (sync) the sum being gathered.
  absl::Span<const std::vector<float>> arrays = snapshot.arrays;
  std::vector<float> sum;
  if (consistency_.saves_sum()) {
    if (arrays.empty()) {
      return InTable(spec_.table(), absl::InvalidArgumentError("no arrays"));
    }
    sum = arrays.back();
    arrays.remove_suffix(1);
  }
  if (absl::Status s = store_->CheckArrays(arrays); !s.ok()) {
    return InTable(spec_.table(), s);
  }
  absl::MutexLock hold_pushes(&snapshot_mu_);
  std::vector<shardps::LedgerWorker> ledger;
  ledger_.Save(&ledger);
  if (absl::Status s = ledger_.Load(snapshot.meta.ledger()); !s.ok()) {
    return InTable(spec_.table(), s);
  }
  if (absl::Status s =
          consistency_.Restore(snapshot.meta.barrier(), std::move(sum));
      !s.ok()) {
    google::protobuf::RepeatedPtrField<shardps::LedgerWorker> kept(
        ledger.begin(), ledger.end());
    ledger_.Load(kept).IgnoreError();  // what it held a moment ago
    return InTable(spec_.table(), s);
  }
  store_->LoadArrays(arrays, snapshot.meta.version());
  admitted_.store(snapshot.meta.admitted_pushes(), std::memory_order_release);
  absl::MutexLock lock(&clocks_mu_);
  clocks_.clear();
  for (const shardps::WorkerClock& wc : snapshot.meta.worker_clocks()) {
    clocks_[wc.worker()] = wc.clock();
  }
  return absl::OkStatus();
}

void Table::Snapshot(TableSnapshot* out) {
  out->meta.Clear();
  *out->meta.mutable_spec() = spec_;
  std::vector<shardps::LedgerWorker> ledger;
  {
    absl::MutexLock hold_pushes(&snapshot_mu_);
    store_->SaveArrays(&out->arrays);
    std::vector<float> sum;
    consistency_.Save(out->meta.mutable_barrier(), &sum);
    if (consistency_.saves_sum()) out->arrays.push_back(std::move(sum));
    out->meta.set_version(store_->version());
    out->meta.set_admitted_pushes(admitted_.load(std::memory_order_acquire));
    ledger_.Save(&ledger);
    absl::MutexLock lock(&clocks_mu_);
    for (const auto& [worker, clock] : clocks_) {
      shardps::WorkerClock* wc = out->meta.add_worker_clocks();
      wc->set_worker(worker);
      wc->set_clock(clock);
    }
  }
  for (shardps::LedgerWorker& worker : ledger) {
    *out->meta.add_ledger() = std::move(worker);
  }
  out->meta.set_arrays(out->arrays.size());
}

void Table::FillStats(shardps::TableStats* out) const {
  out->set_table(spec_.table());
  out->set_num_params(spec_.num_params());
  out->set_num_shards(spec_.num_shards());
  out->set_shard_index(spec_.shard_index());
  out->set_begin(store_->range().begin);
  out->set_end(store_->range().end);
  out->set_version(store_->version());
  out->set_restored_version(restored_version_);
  out->set_consistency_clock(consistency_.clock());
  out->set_waiting_pulls(consistency_.waiting_pulls());
  for (uint32_t worker : consistency_.dropped_workers()) {
    out->add_dropped_workers(worker);
  }
  absl::MutexLock lock(&clocks_mu_);
  for (const auto& [worker, clock] : clocks_) {
    shardps::WorkerClock* wc = out->add_worker_clocks();
    wc->set_worker(worker);
    wc->set_clock(clock);
  }
}

}  // namespace ps
