#include "worker/train/click_trainer.h"

#include <unistd.h>

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "loader/auc.h"
#include "loader/dataset.h"
#include "loader/loader.h"
#include "model/dlrm.h"
#include "ps/obs/progress_line.h"
#include "ps/wire/row_partition.h"
#include "worker/train/inputs.h"
#include "worker/train/model_table.h"
#include "worker/train/step_log.h"
#include "worker/train/training_config.h"

namespace worker {
namespace {

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

// Rows get a seed of their own, away from the MLP's tensors' seeds.
constexpr uint64_t kRowSeedOffset = 1 << 20;
constexpr float kRowInitScale = 0.05f;

std::string RowsTableName(const TrainerOptions& o) {
  return absl::StrCat(o.table, "-rows");
}

// The click model for the data set at `dir` (train/ or test/).
absl::StatusOr<model::Dlrm> ModelFor(const TrainerOptions& o,
                                     const loader::Dataset& data) {
  absl::StatusOr<model::DlrmSpec> spec = model::ParseDlrmSpec(o.model);
  if (!spec.ok()) return spec.status();
  const shardps::DatasetManifest& m = data.manifest;
  if (m.categorical_fields() == 0 || m.classes() != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("--model=", o.model,
                     " needs clicks (2 classes) with categorical "
                     "fields, as shardps-data criteo-synthetic writes; ",
                     data.dir, " has ", m.categorical_fields(),
                     " categorical fields and ", m.classes(), " classes"));
  }
  return model::Dlrm::Create(*spec, static_cast<int>(loader::FeatureCount(m)),
                             static_cast<int>(m.categorical_fields()), 1);
}

absl::StatusOr<ps::RowTableOptions> RowsTable(
    const TrainerOptions& o, const model::Dlrm& dlrm,
    const shardps::DatasetManifest& m) {
  absl::StatusOr<shardps::RowSharding> sharding =
      ps::ParseRowSharding(o.row_sharding);
  if (!sharding.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--row_sharding ", sharding.status().message()));
  }
  ps::RowTableOptions t;
  t.name = RowsTableName(o);
  t.dim = dlrm.embeddings().dim();
  // Every id of the data fits on one server; without a known id space, 2^24.
  t.max_rows_per_shard =
      m.categorical_ids() > 0 ? m.categorical_ids() : uint64_t{1} << 24;
  t.optimizer = o.optimizer;
  t.init.set_kind("normal");
  t.init.set_scale(kRowInitScale);
  t.init.set_seed(o.seed + kRowSeedOffset);
  t.sharding = *sharding;
  t.id_space = m.categorical_ids();
  return t;
}

// A batch's buffers, sized once for the largest batch.
struct StepBuffers {
  std::vector<float> params, grad, rows, row_grads;
  StepBuffers(const model::Dlrm& dlrm, int batch)
      : params(dlrm.mlp().num_params()),
        grad(dlrm.mlp().num_params()),
        rows(int64_t{batch} * dlrm.embeddings().ids_per_sample() *
             dlrm.embeddings().dim()),
        row_grads(rows.size()) {}
};

class ClickTrainer {
 public:
  ClickTrainer(ps::Client& client, const TrainerOptions& options,
               absl::Time process_start)
      : client_(client),
        o_(options),
        process_start_(process_start),
        progress_(stderr, isatty(STDERR_FILENO) != 0) {}

  absl::StatusOr<shardps::WorkerSummary> Run() {
    if (absl::Status s = CheckSupported(); !s.ok()) return s;
    if (absl::Status s = Open(); !s.ok()) return s;
    for (int epoch = 0; epoch < o_.epochs && !Done(); ++epoch) {
      if (absl::Status s = RunEpoch(epoch); !s.ok()) return s;
    }
    progress_.End();
    return Summary();
  }

 private:
  // What the dense trainer offers and this one does not (yet): refused by
  // flag rather than ignored.
  absl::Status CheckSupported() const {
    const char* flag = nullptr;
    if (o_.consistency.mode() != shardps::CONSISTENCY_ASYNC) {
      flag = "--consistency (sparse tables have no clocks: async only)";
    } else if (o_.overlap != "none") {
      flag = "--overlap";
    } else if (o_.lr_schedule != "constant") {
      flag = "--lr_schedule";
    } else if (o_.resume) {
      flag = "--resume";
    } else if (o_.emulate_compute_ms > 0) {
      flag = "--emulate_compute_ms";
    }
    if (flag == nullptr) return absl::OkStatus();
    return absl::InvalidArgumentError(
        absl::StrCat("--model=", o_.model, " does not take ", flag));
  }

  bool Done() const {
    return o_.max_steps > 0 && summary_.steps() >= o_.max_steps;
  }

  absl::Status Open() {
    const absl::Time data_start = absl::Now();
    absl::StatusOr<loader::Dataset> train =
        loader::OpenDataset(o_.data + "/train");
    if (!train.ok()) return train.status();
    train_ = *std::move(train);
    absl::StatusOr<model::Dlrm> dlrm = ModelFor(o_, train_);
    if (!dlrm.ok()) return dlrm.status();
    dlrm_.emplace(*std::move(dlrm));
    absl::StatusOr<std::unique_ptr<loader::Loader>> batches =
        loader::MakeLoader(o_.loader, train_, TrainLoaderOptions(o_));
    if (!batches.ok()) return batches.status();
    batches_ = *std::move(batches);
    buffers_.emplace(*dlrm_, o_.batch);
    ws_.emplace(dlrm_->MakeWorkspace(o_.batch));
    const absl::Time table_start = absl::Now();
    absl::StatusOr<ps::RowTableOptions> rows =
        RowsTable(o_, *dlrm_, train_.manifest);
    if (!rows.ok()) return rows.status();
    if (absl::Status s = client_.CreateTable(ModelTable(o_, dlrm_->mlp()));
        !s.ok()) {
      return s;
    }
    if (absl::Status s = client_.CreateRowTable(*rows); !s.ok()) return s;
    absl::StatusOr<std::unique_ptr<StepLog>> log = StepLog::Open(
        absl::StrCat(o_.run_dir, "/metrics-", o_.rank, ".csv"), false);
    if (!log.ok()) return log.status();
    step_log_ = *std::move(log);
    summary_.set_rank(o_.rank);
    summary_.set_world(o_.world);
    summary_.set_loader(o_.loader);
    summary_.set_partition_records(batches_->partition_size());
    summary_.set_optimizer(o_.optimizer.ShortDebugString());
    summary_.set_consistency(ConsistencyFlag(o_.consistency));
    summary_.set_compression(o_.compression);
    summary_.set_lr_schedule("constant");
    summary_.set_last_lr_scale(1);
    summary_.set_overlap("none");
    summary_.set_model(o_.model);
    summary_.set_model_params(static_cast<uint32_t>(dlrm_->mlp().num_params()));
    summary_.set_test_accuracy(-1);
    summary_.set_init_data_seconds(Seconds(table_start - data_start));
    summary_.set_init_table_seconds(Seconds(absl::Now() - table_start));
    return absl::OkStatus();
  }

  absl::Status RunEpoch(int epoch) {
    if (absl::Status s = batches_->StartEpoch(epoch); !s.ok()) return s;
    double loss_sum = 0;
    uint64_t steps = 0;
    while (!Done()) {
      const absl::Time start = absl::Now();
      absl::StatusOr<const loader::Batch*> batch = batches_->Next();
      if (!batch.ok()) return batch.status();
      if (*batch == nullptr) break;
      if (summary_.steps() == 0) first_step_ = absl::Now();
      absl::StatusOr<float> loss = Step(epoch, **batch, start);
      if (!loss.ok()) return loss.status();
      loss_sum += *loss;
      ++steps;
    }
    if (steps > 0) {
      const double mean = loss_sum / steps;
      if (epoch == 0) summary_.set_first_epoch_loss(mean);
      summary_.set_last_epoch_loss(mean);
      progress_.Print(absl::StrFormat("rank %d epoch %d: mean loss %.4f",
                                      o_.rank, epoch, mean));
    }
    return absl::OkStatus();
  }

  absl::StatusOr<float> Step(int epoch, const loader::Batch& batch,
                             absl::Time start) {
    const absl::Time got_batch = absl::Now();
    const int n = batch.size;
    const model::EmbeddingBag& bags = dlrm_->embeddings();
    const absl::Span<const uint64_t> ids(batch.ids.data(),
                                         n * bags.ids_per_sample());
    StepBuffers& b = *buffers_;
    const uint64_t params = b.params.size();
    if (absl::Status s = client_.PullRows(RowsTableName(o_), ids, b.rows.data(),
                                          /*create=*/true);
        !s.ok()) {
      return s;
    }
    if (absl::Status s = client_.Pull(o_.table, 0, params, b.params.data());
        !s.ok()) {
      return s;
    }
    const absl::Time pulled = absl::Now();
    const float loss = dlrm_->TrainStep(
        b.params.data(), batch.features.data(), b.rows.data(),
        batch.labels.data(), n, b.grad.data(), b.row_grads.data(), &*ws_);
    const absl::Time computed = absl::Now();
    if (absl::Status s = client_.Push(o_.table, 0, params, b.grad.data());
        !s.ok()) {
      return s;
    }
    if (absl::Status s =
            client_.PushRows(RowsTableName(o_), ids, b.row_grads.data());
        !s.ok()) {
      return s;
    }
    const absl::Time pushed = absl::Now();
    const StepTimes times{got_batch - start, pulled - got_batch,
                          computed - pulled, pushed - computed};
    summary_.set_steps(summary_.steps() + 1);
    summary_.set_samples(summary_.samples() + n);
    AddPhaseSeconds(times, &summary_);
    last_step_ = pushed;
    TraceStepPhases(o_.tracer, start, got_batch, pulled, computed, pushed);
    if (o_.metrics != nullptr) {
      o_.metrics->RecordStep(epoch, n, loss, times, batches_->ReadyBatches());
    }
    if (absl::Status s =
            step_log_->Append(epoch, summary_.steps(), n, loss, times, pushed);
        !s.ok()) {
      return s;
    }
    if (o_.progress_every > 0 && summary_.steps() % o_.progress_every == 0) {
      progress_.Update(absl::StrFormat("rank %d epoch %d step %d loss %.4f",
                                       o_.rank, epoch, summary_.steps(), loss));
    }
    return loss;
  }

  absl::StatusOr<shardps::WorkerSummary> Summary() {
    if (summary_.steps() > 0) {
      summary_.set_init_seconds(Seconds(first_step_ - process_start_));
      summary_.set_train_seconds(Seconds(last_step_ - first_step_));
      if (last_step_ > first_step_) {
        summary_.set_samples_per_second(summary_.samples() /
                                        Seconds(last_step_ - first_step_));
      }
    }
    summary_.set_pull_bytes(client_.pull_bytes() + client_.memory_pull_bytes());
    summary_.set_push_bytes(client_.push_bytes() + client_.memory_push_bytes());
    if (o_.rank == 0) {
      absl::StatusOr<ClickScore> score = EvaluateClickModel(client_, o_);
      if (score.ok()) {
        summary_.set_test_accuracy(score->accuracy);
        summary_.set_test_auc(score->auc);
        summary_.set_generator_auc(score->generator_auc);
      } else if (!absl::IsNotFound(score.status())) {
        return score.status();
      }
    }
    return summary_;
  }

  ps::Client& client_;
  const TrainerOptions& o_;
  const absl::Time process_start_;
  ps::ProgressLine progress_;
  loader::Dataset train_;
  std::optional<model::Dlrm> dlrm_;
  std::unique_ptr<loader::Loader> batches_;
  std::optional<StepBuffers> buffers_;
  std::optional<model::Dlrm::Workspace> ws_;
  std::unique_ptr<StepLog> step_log_;
  shardps::WorkerSummary summary_;
  absl::Time first_step_, last_step_;
};

}  // namespace

absl::StatusOr<shardps::WorkerSummary> TrainClickModel(
    ps::Client& client, const TrainerOptions& options,
    absl::Time process_start) {
  return ClickTrainer(client, options, process_start).Run();
}

absl::StatusOr<ClickScore> EvaluateClickModel(ps::Client& client,
                                              const TrainerOptions& options) {
  loader::Dataset test;
  absl::StatusOr<std::unique_ptr<loader::Loader>> batches =
      OpenTestSet(options, &test);
  if (!batches.ok()) return batches.status();
  absl::StatusOr<model::Dlrm> dlrm = ModelFor(options, test);
  if (!dlrm.ok()) return dlrm.status();
  ps::TableOptions mlp;
  mlp.name = options.table;
  mlp.num_params = dlrm->mlp().num_params();
  if (absl::Status s = client.OpenTable(mlp, absl::Seconds(10)); !s.ok()) {
    return s;
  }
  const std::string rows_table = RowsTableName(options);
  if (absl::Status s = client.OpenRowTable(rows_table); !s.ok()) return s;
  constexpr int kBatch = 1000;  // OpenTestSet's
  StepBuffers b(*dlrm, kBatch);
  model::Dlrm::Workspace ws = dlrm->MakeWorkspace(kBatch);
  if (absl::Status s =
          client.Pull(options.table, 0, b.params.size(), b.params.data());
      !s.ok()) {
    return s;
  }
  std::vector<float> clicks;
  std::vector<int32_t> labels;
  if (absl::Status s = (*batches)->StartEpoch(0); !s.ok()) return s;
  const int64_t ids_per_sample = dlrm->embeddings().ids_per_sample();
  for (;;) {
    absl::StatusOr<const loader::Batch*> batch = (*batches)->Next();
    if (!batch.ok()) return batch.status();
    if (*batch == nullptr) break;
    const int n = (*batch)->size;
    if (absl::Status s = client.PullRows(
            rows_table,
            absl::MakeConstSpan((*batch)->ids.data(), n * ids_per_sample),
            b.rows.data(), /*create=*/true);
        !s.ok()) {
      return s;
    }
    const size_t first = clicks.size();
    clicks.resize(first + n);
    dlrm->Predict(b.params.data(), (*batch)->features.data(), b.rows.data(), n,
                  &ws, clicks.data() + first);
    labels.insert(labels.end(), (*batch)->labels.begin(),
                  (*batch)->labels.begin() + n);
  }
  absl::StatusOr<double> auc = loader::Auc(clicks, labels);
  if (!auc.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(test.dir, ": ", auc.status().message()));
  }
  ClickScore score;
  score.auc = *auc;
  score.samples = labels.size();
  uint64_t right = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    right += (clicks[i] >= 0.5f) == (labels[i] == 1);
  }
  score.accuracy = static_cast<double>(right) / labels.size();
  score.generator_auc = test.manifest.generator_auc();
  return score;
}

}  // namespace worker
