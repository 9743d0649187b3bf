#include "worker/train/trainer.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "model/dlrm.h"
#include "ps/obs/progress_line.h"
#include "worker/train/click_trainer.h"
#include "worker/train/evaluation.h"
#include "worker/train/inputs.h"
#include "worker/train/layer_exchange.h"
#include "worker/train/model_table.h"
#include "worker/train/position.h"
#include "worker/train/step_log.h"
#include "worker/train/training_config.h"

namespace worker {
namespace {

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

// One step's batch and times, as the step's phases record them. With
// --overlap=layer, `waited` is the part of [pulled, computed) that forward
// spent waiting for layers' parameters: counted as pulling.
struct StepRecord {
  int epoch = 0;
  const loader::Batch* batch = nullptr;
  float loss = 0;
  absl::Time start, got_batch, pulled, computed, pushed;
  absl::Duration waited;
  StepTimes times() const {
    return {got_batch - start, pulled - got_batch + waited,
            computed - pulled - waited, pushed - computed};
  }
};

// The training loop of one worker, phase by phase: open inputs, starting
// point (table and position), steps, end of each epoch, summary.
class Trainer {
 public:
  Trainer(ps::Client& client, const TrainerOptions& options,
          absl::Time process_start)
      : client_(client),
        o_(options),
        process_start_(process_start),
        progress_(stderr, isatty(STDERR_FILENO) != 0) {}

  absl::StatusOr<shardps::WorkerSummary> Run() {
    if (absl::Status s = Open(); !s.ok()) return s;
    if (absl::Status s = StartingPoint(); !s.ok()) return s;
    for (int epoch = first_epoch_;
         epoch < o_.epochs && summary_.steps() < total_steps_; ++epoch) {
      if (absl::Status s = RunEpoch(epoch); !s.ok()) return s;
    }
    return Summary();
  }

 private:
  // Phase 1: the model and the data.
  absl::Status Open() {
    data_start_ = absl::Now();
    absl::StatusOr<std::unique_ptr<Inputs>> inputs = OpenInputs(o_);
    if (!inputs.ok()) return inputs.status();
    in_ = *std::move(inputs);
    const model::Network& net = in_->net;
    params_.resize(net.num_params());
    grad_.resize(net.num_params());
    // Sized for what this rank runs: first touches of fresh pages are slow
    // here (see DESIGN.md), and every worker pays them before its first step.
    ws_.emplace(net.MakeWorkspace(emulate() ? 1 : o_.batch));
    if (in_->test != nullptr) {
      eval_ws_.emplace(net.MakeWorkspace(net.EvaluationBatch()));
    }
    if (emulate()) std::fill(grad_.begin(), grad_.end(), 0.0f);
    if (o_.overlap == "layer") {
      exchange_ = std::make_unique<LayerExchange>(
          client_, o_.table, net, params_.data(), grad_.data(), o_.tracer);
    }
    steps_per_epoch_ = StepsPerEpoch(o_, *in_);
    const uint64_t all = steps_per_epoch_ * o_.epochs;
    total_steps_ = o_.max_steps > 0 ? std::min(o_.max_steps, all) : all;
    return absl::OkStatus();
  }

  // Phase 2: the table (created by whichever rank asks first; an identical
  // request finds it, different model flags get ALREADY_EXISTS), the
  // position to start from and the step log.
  absl::Status StartingPoint() {
    table_start_ = absl::Now();
    if (absl::Status s = client_.CreateTable(ModelTable(o_, in_->net));
        !s.ok()) {
      return s;
    }
    table_done_ = absl::Now();
    absl::StatusOr<Position> position = Position::Start(o_, o_.log);
    if (!position.ok()) return position.status();
    position_.emplace(*std::move(position));
    // A rejoining worker adds to its metrics; its redone steps appear twice.
    absl::StatusOr<std::unique_ptr<StepLog>> log =
        StepLog::Open(absl::StrCat(o_.run_dir, "/metrics-", o_.rank, ".csv"),
                      position_->resumed());
    if (!log.ok()) return log.status();
    step_log_ = *std::move(log);
    StartSummary();
    return absl::OkStatus();
  }

  void StartSummary() {
    const shardps::WorkerCheckpoint& at = position_->saved();
    summary_.set_rank(o_.rank);
    summary_.set_world(o_.world);
    summary_.set_loader(o_.loader);
    summary_.set_partition_records(in_->batches->partition_size());
    summary_.set_optimizer(o_.optimizer.ShortDebugString());
    summary_.set_consistency(ConsistencyFlag(o_.consistency));
    summary_.set_compression(o_.compression);
    summary_.set_lr_schedule(o_.lr_schedule);
    summary_.set_overlap(o_.overlap);
    summary_.set_model(o_.model);
    summary_.set_model_params(static_cast<uint32_t>(in_->net.num_params()));
    summary_.set_last_lr_scale(1);
    summary_.set_test_accuracy(-1);
    summary_.set_init_data_seconds(Seconds(table_start_ - data_start_));
    summary_.set_init_table_seconds(Seconds(table_done_ - table_start_));
    summary_.set_emulated_compute_ms(emulate() ? o_.emulate_compute_ms : 0);
    summary_.set_steps(at.steps());
    summary_.set_samples(at.samples());
    first_step_ = at.steps();
    first_samples_ = at.samples();
    first_epoch_ = at.epoch();
  }

  // Phase 3: one epoch's steps, then its end.
  absl::Status RunEpoch(int epoch) {
    if (absl::Status s = in_->batches->StartEpoch(epoch); !s.ok()) return s;
    loss_sum_ = 0;
    epoch_steps_ = 0;
    uint64_t position = 0;  // batches of the epoch done, for resuming
    if (epoch == first_epoch_) {
      absl::StatusOr<uint64_t> skipped = SkipDoneBatches();
      if (!skipped.ok()) return skipped.status();
      position = *skipped;
    }
    bool finished = false;  // every batch of the epoch done
    while (!finished && summary_.steps() < total_steps_) {
      absl::StatusOr<bool> stepped = Step(epoch, position);
      if (!stepped.ok()) return stepped.status();
      finished = !*stepped;  // the partition ran out
      if (*stepped) finished = ++position == steps_per_epoch_;
    }
    // Stopped by max_steps mid-epoch, a rejoining worker goes on from here.
    if (absl::Status s = finished ? SavePosition(epoch + 1, 0)
                                  : SavePosition(epoch, position);
        !s.ok()) {
      return s;
    }
    return EndEpoch(epoch);
  }

  // Rejoining mid-epoch: the batches before the saved position were trained
  // on already (the loader's order is a function of the seed and the
  // epoch). How many were skipped.
  absl::StatusOr<uint64_t> SkipDoneBatches() {
    uint64_t skipped = 0;
    for (; skipped < position_->saved().epoch_step(); ++skipped) {
      absl::StatusOr<const loader::Batch*> b = in_->batches->Next();
      if (!b.ok()) return b.status();
      if (*b == nullptr) break;
    }
    return skipped;
  }

  // One step: batch, pull, forward/backward, push, records. False when the
  // epoch has no batch left.
  absl::StatusOr<bool> Step(int epoch, uint64_t position) {
    StepRecord r;
    r.epoch = epoch;
    r.start = absl::Now();
    absl::StatusOr<const loader::Batch*> batch = in_->batches->Next();
    if (!batch.ok()) return batch.status();
    if (*batch == nullptr) return false;
    r.batch = *batch;
    r.got_batch = absl::Now();
    if (summary_.steps() == first_step_) RecordInit(r.got_batch);
    const float lr_scale = LearningRateScale();
    if (absl::Status s = exchange_ != nullptr ? ExchangeByLayer(&r, lr_scale)
                                              : PullComputePush(&r, lr_scale);
        !s.ok()) {
      return s;
    }
    summary_.set_last_lr_scale(lr_scale);
    if (absl::Status s = Record(r, position + 1); !s.ok()) return s;
    return true;
  }

  // The whole model at this step's clock.
  absl::Status PullAll() {
    return client_.Pull(o_.table, 0, params_.size(), params_.data(),
                        summary_.steps());
  }

  // --overlap=none: the whole model's pull, forward/backward, the whole
  // gradient's push.
  absl::Status PullComputePush(StepRecord* r, float lr_scale) {
    if (absl::Status s = PullAll(); !s.ok()) return s;
    r->pulled = absl::Now();
    r->loss = Compute(*r->batch);
    r->computed = absl::Now();
    if (absl::Status s = client_.Push(o_.table, 0, grad_.size(), grad_.data(),
                                      summary_.steps(), lr_scale);
        !s.ok()) {
      return s;
    }
    r->pushed = absl::Now();
    return absl::OkStatus();
  }

  // --overlap=layer: the first step of this process pulls the whole model;
  // after it, each step's exchanges bring the next step's parameters.
  absl::Status ExchangeByLayer(StepRecord* r, float lr_scale) {
    if (summary_.steps() == first_step_) {
      if (absl::Status s = PullAll(); !s.ok()) return s;
    }
    r->pulled = absl::Now();
    exchange_->BeginStep(summary_.steps(), lr_scale);
    r->loss = in_->net.TrainStep(params_.data(), r->batch->features.data(),
                                 r->batch->labels.data(), r->batch->size,
                                 grad_.data(), &*ws_, exchange_.get());
    r->computed = absl::Now();
    r->waited = exchange_->TakeWaited();
    r->pushed = r->computed;  // the exchanges go on during the next step
    return exchange_->status();
  }

  float Compute(const loader::Batch& batch) {
    if (emulate()) {
      absl::SleepFor(absl::Milliseconds(o_.emulate_compute_ms));
      return 0;
    }
    return in_->net.TrainStep(params_.data(), batch.features.data(),
                              batch.labels.data(), batch.size, grad_.data(),
                              &*ws_);
  }

  // cosine: step s of S pushes at (1 + cos(pi s / S)) / 2 of the rate.
  float LearningRateScale() const {
    if (o_.lr_schedule != "cosine") return 1.0f;
    return static_cast<float>(
        0.5 * (1 + std::cos(M_PI * summary_.steps() / total_steps_)));
  }

  // The first step of this process: initialisation is over.
  void RecordInit(absl::Time now) {
    train_start_ = now;
    if (ps::Tracer* t = o_.tracer; t != nullptr) {
      t->Record("init", "worker", process_start_, now);
      t->Record("open_data", "worker", data_start_, table_start_);
      t->Record("create_table", "worker", table_start_, table_done_);
    }
    summary_.set_init_seconds(Seconds(now - process_start_));
    summary_.set_init_startup_seconds(Seconds(data_start_ - process_start_));
    summary_.set_init_first_batch_seconds(Seconds(now - table_done_));
  }

  // A step's figures into the trace, the metrics, the step log and the
  // summary; the position every checkpoint_every steps; progress.
  absl::Status Record(const StepRecord& r, uint64_t next_position) {
    const StepTimes t = r.times();
    TraceStepPhases(o_.tracer, r.start, r.got_batch, r.pulled, r.computed,
                    r.pushed);
    if (o_.metrics != nullptr) {
      o_.metrics->RecordStep(r.epoch, r.batch->size, r.loss, t,
                             in_->batches->ReadyBatches());
    }
    AddPhaseSeconds(t, &summary_);
    if (absl::Status s = step_log_->Append(r.epoch, summary_.steps(),
                                           r.batch->size, r.loss, t, r.pushed);
        !s.ok()) {
      return s;
    }
    loss_sum_ += r.loss;
    ++epoch_steps_;
    summary_.set_steps(summary_.steps() + 1);
    summary_.set_samples(summary_.samples() + r.batch->size);
    if (o_.checkpoint_every > 0 &&
        summary_.steps() % o_.checkpoint_every == 0) {
      if (absl::Status s = SavePosition(r.epoch, next_position); !s.ok()) {
        return s;
      }
    }
    ShowProgress(r);
    return absl::OkStatus();
  }

  // After the step's pushes: with --overlap=layer, once its exchanges
  // ended.
  absl::Status SavePosition(int epoch, uint64_t epoch_step) {
    if (exchange_ != nullptr) {
      if (absl::Status s = exchange_->Drain(); !s.ok()) return s;
    }
    return position_->Save(epoch, epoch_step, summary_.steps(),
                           summary_.samples());
  }

  void ShowProgress(const StepRecord& r) {
    if (o_.progress_every <= 0 || summary_.steps() % o_.progress_every != 0) {
      return;
    }
    const double elapsed = Seconds(absl::Now() - train_start_);
    const double rate = summary_.samples() / std::max(elapsed, 1e-9);
    const double left_steps =
        static_cast<double>(total_steps_ - summary_.steps());
    progress_.Update(absl::StrFormat(
        "worker %d: epoch %d step %d loss %.4f %.0f samples/s ETA %.0f s",
        o_.rank, r.epoch, summary_.steps(), r.loss, rate,
        left_steps * o_.batch / std::max(rate, 1e-9)));
  }

  // Phase 4: the epoch's mean loss and (rank 0) test accuracy.
  absl::Status EndEpoch(int epoch) {
    const double mean = epoch_steps_ ? loss_sum_ / epoch_steps_ : 0;
    if (epoch == 0) summary_.set_first_epoch_loss(mean);
    summary_.set_last_epoch_loss(mean);
    if (in_->test == nullptr) {
      progress_.Print(absl::StrFormat(
          "worker %d: epoch %d done, mean loss %.4f", o_.rank, epoch, mean));
      return absl::OkStatus();
    }
    ps::TraceSpan span(o_.tracer, "evaluate", "worker");
    const uint64_t pulled_before = PulledBytes();
    if (absl::Status s =
            client_.Pull(o_.table, 0, params_.size(), params_.data());
        !s.ok()) {
      return s;
    }
    evaluation_pull_bytes_ += PulledBytes() - pulled_before;
    absl::StatusOr<double> acc =
        TestAccuracy(in_->net, params_.data(), *in_->test, &*eval_ws_);
    if (!acc.ok()) return acc.status();
    summary_.set_test_accuracy(*acc);
    progress_.Print(absl::StrFormat(
        "worker %d: epoch %d done, mean loss %.4f, test accuracy %.4f", o_.rank,
        epoch, mean, *acc));
    return absl::OkStatus();
  }

  // What the client moved, in messages or through shared memory.
  uint64_t PulledBytes() const {
    return client_.pull_bytes() + client_.memory_pull_bytes();
  }

  // Phase 5: traffic and rates.
  shardps::WorkerSummary Summary() {
    // The steps' traffic only, not the evaluations'.
    summary_.set_pull_bytes(
        static_cast<double>(PulledBytes() - evaluation_pull_bytes_));
    summary_.set_push_bytes(static_cast<double>(client_.push_bytes() +
                                                client_.memory_push_bytes()));
    summary_.set_train_seconds(summary_.steps() > first_step_
                                   ? Seconds(absl::Now() - train_start_)
                                   : 0);
    // This process's own rate: a rejoined worker's earlier steps are not in
    // train_seconds.
    const uint64_t own_samples = summary_.samples() - first_samples_;
    summary_.set_samples_per_second(summary_.train_seconds() > 0
                                        ? own_samples / summary_.train_seconds()
                                        : 0);
    return summary_;
  }

  bool emulate() const { return o_.emulate_compute_ms > 0; }

  ps::Client& client_;
  const TrainerOptions& o_;
  const absl::Time process_start_;
  ps::ProgressLine progress_;  // rewritten in place on a terminal
  std::unique_ptr<Inputs> in_;
  std::vector<float> params_, grad_;
  // After params_ and grad_, which its threads use until it is destroyed.
  std::unique_ptr<LayerExchange> exchange_;
  std::optional<model::Network::Workspace> ws_, eval_ws_;
  std::optional<Position> position_;
  std::unique_ptr<StepLog> step_log_;
  shardps::WorkerSummary summary_;
  absl::Time data_start_, table_start_, table_done_, train_start_;
  uint64_t steps_per_epoch_ = 0, total_steps_ = 0;
  uint64_t first_step_ = 0, first_samples_ = 0;
  int first_epoch_ = 0;
  double loss_sum_ = 0;       // this epoch's, for its mean
  uint64_t epoch_steps_ = 0;  // trained in this epoch by this process
  uint64_t evaluation_pull_bytes_ = 0;
};

}  // namespace

shardps::OptimizerConfig DefaultOptimizer() {
  shardps::OptimizerConfig sgd;
  sgd.set_name("sgd");
  sgd.set_learning_rate(0.1f);
  return sgd;
}

absl::StatusOr<shardps::WorkerSummary> Train(ps::Client& client,
                                             const TrainerOptions& options,
                                             absl::Time process_start) {
  if (model::IsDlrmSpec(options.model)) {
    return TrainClickModel(client, options, process_start);
  }
  Trainer trainer(client, options, process_start);
  return trainer.Run();
}

absl::StatusOr<double> Evaluate(ps::Client& client,
                                const TrainerOptions& options) {
  ps::TraceSpan span(options.tracer, "evaluate", "worker");
  if (model::IsDlrmSpec(options.model)) {
    absl::StatusOr<ClickScore> score = EvaluateClickModel(client, options);
    if (!score.ok()) return score.status();
    return score->accuracy;
  }
  absl::StatusOr<model::ModelSpec> spec = model::ParseModelSpec(options.model);
  if (!spec.ok()) return spec.status();
  loader::Dataset test_set;
  absl::StatusOr<std::unique_ptr<loader::Loader>> test =
      OpenTestSet(options, &test_set);
  if (!test.ok()) return test.status();
  absl::StatusOr<model::Network> net =
      model::Network::Create(*spec, SampleShape(test_set.manifest));
  if (!net.ok()) return net.status();
  ps::TableOptions table;
  table.name = options.table;
  table.num_params = net->num_params();
  if (absl::Status s = client.OpenTable(table, absl::Seconds(10)); !s.ok()) {
    return s;
  }
  std::vector<float> params(net->num_params());
  if (absl::Status s =
          client.Pull(options.table, 0, params.size(), params.data());
      !s.ok()) {
    return s;
  }
  model::Network::Workspace ws = net->MakeWorkspace(net->EvaluationBatch());
  return TestAccuracy(*net, params.data(), **test, &ws);
}

}  // namespace worker
