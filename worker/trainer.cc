#include "worker/trainer.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "loader/loader.h"
#include "model/mlp.h"

namespace worker {
namespace {

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

shardps::InitSegment ToSegment(const model::Mlp::TensorInit& t, uint64_t seed) {
  shardps::InitSegment seg;
  seg.set_begin(t.begin);
  seg.set_end(t.end);
  switch (t.kind) {
    case model::Mlp::TensorInit::Kind::kNormal:
      seg.mutable_init()->set_kind("normal");
      break;
    case model::Mlp::TensorInit::Kind::kUniform:
      seg.mutable_init()->set_kind("uniform");
      break;
    case model::Mlp::TensorInit::Kind::kZeros:
      seg.mutable_init()->set_kind("zeros");
      break;
  }
  seg.mutable_init()->set_scale(t.scale);
  seg.mutable_init()->set_seed(seed);
  return seg;
}

// Accuracy of `params` on the whole test set.
absl::StatusOr<double> TestAccuracy(const model::Mlp& mlp, const float* params,
                                    loader::Loader& test,
                                    model::Mlp::Workspace* ws) {
  if (absl::Status s = test.StartEpoch(0); !s.ok()) return s;
  uint64_t correct = 0, seen = 0;
  while (true) {
    absl::StatusOr<const loader::Batch*> b = test.Next();
    if (!b.ok()) return b.status();
    if (*b == nullptr) break;
    correct += mlp.Evaluate(params, (*b)->features.data(), (*b)->labels.data(),
                            (*b)->size, ws, nullptr);
    seen += (*b)->size;
  }
  return seen == 0 ? 0.0 : static_cast<double>(correct) / seen;
}

}  // namespace

absl::StatusOr<shardps::WorkerSummary> Train(ps::Client& client,
                                             const TrainerOptions& options,
                                             absl::Time process_start) {
  absl::StatusOr<model::MlpSpec> spec = model::ParseModelSpec(options.model);
  if (!spec.ok()) return spec.status();
  const model::Mlp mlp(*std::move(spec));
  const absl::Time data_start = absl::Now();
  absl::StatusOr<loader::Dataset> train =
      loader::OpenDataset(options.data + "/train");
  if (!train.ok()) return train.status();
  if (loader::FeatureCount(train->manifest) !=
          static_cast<uint64_t>(mlp.input_width()) ||
      train->manifest.classes() != static_cast<uint32_t>(mlp.num_classes())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--model=", options.model, " takes ", mlp.input_width(),
        " features and ", mlp.num_classes(), " classes but ", options.data,
        "/train has ", loader::FeatureCount(train->manifest), " and ",
        train->manifest.classes()));
  }
  loader::LoaderOptions lo;
  lo.batch_size = options.batch;
  lo.rank = options.rank;
  lo.world = options.world;
  lo.seed = options.seed;
  lo.reader_threads = options.reader_threads;
  lo.prefetch_batches = options.prefetch_batches;
  absl::StatusOr<std::unique_ptr<loader::Loader>> batches =
      loader::MakeLoader(options.loader, *train, lo);
  if (!batches.ok()) return batches.status();

  // The test set, on rank 0 only, read once into memory.
  std::unique_ptr<loader::Loader> test;
  absl::StatusOr<loader::Dataset> test_set =
      options.rank == 0 ? loader::OpenDataset(options.data + "/test")
                        : absl::NotFoundError("the test set is rank 0's");
  if (test_set.ok()) {
    loader::LoaderOptions to;
    to.batch_size = 1000;
    absl::StatusOr<std::unique_ptr<loader::Loader>> t =
        loader::MakeSequentialLoader(*test_set, to);
    if (!t.ok()) return t.status();
    test = *std::move(t);
  }

  // Every rank asks for the same table (seeded, initialised on the
  // servers); CreateTable is idempotent for an identical spec, so the first
  // request creates it and no rank waits for another. A rank started with
  // different model flags gets ALREADY_EXISTS.
  ps::TableOptions table;
  table.name = options.table;
  table.num_params = mlp.num_params();
  table.optimizer.set_name("sgd");
  table.optimizer.set_learning_rate(options.lr);
  uint64_t seed = options.seed;
  for (const model::Mlp::TensorInit& t : mlp.InitPlan()) {
    table.init_segments.push_back(ToSegment(t, seed++));
  }
  const absl::Time table_start = absl::Now();
  if (absl::Status s = client.CreateTable(table); !s.ok()) {
    return s;
  }

  const absl::Time table_done = absl::Now();
  const std::string metrics_path =
      absl::StrCat(options.run_dir, "/metrics-", options.rank, ".csv");
  std::ofstream metrics(metrics_path, std::ios::trunc);
  if (!metrics) {
    return absl::UnavailableError(absl::StrCat("cannot write ", metrics_path));
  }
  // end_unix_s (when the step ended, wall clock) lets the launcher line up
  // the workers' steps.
  metrics << "epoch,step,batch,loss,read_ms,compute_ms,pull_ms,push_ms,"
             "end_unix_s\n";

  const uint64_t p = mlp.num_params();
  std::vector<float> params(p), grad(p);
  // Sized for what this rank runs: first touches of fresh pages are slow
  // here (see DESIGN.md), and every worker pays them before its first step.
  model::Mlp::Workspace ws =
      mlp.MakeWorkspace(options.emulate_compute_ms > 0 ? 1 : options.batch);
  std::optional<model::Mlp::Workspace> eval_ws;
  if (test != nullptr) eval_ws.emplace(mlp.MakeWorkspace(1000));
  shardps::WorkerSummary summary;
  summary.set_rank(options.rank);
  summary.set_world(options.world);
  summary.set_loader(options.loader);
  summary.set_partition_records((*batches)->partition_size());
  summary.set_test_accuracy(-1);
  summary.set_init_data_seconds(Seconds(table_start - data_start));
  summary.set_init_table_seconds(Seconds(table_done - table_start));
  const uint64_t steps_per_epoch =
      ((*batches)->partition_size() + options.batch - 1) / options.batch;
  const uint64_t total_steps =
      options.max_steps > 0
          ? std::min<uint64_t>(options.max_steps,
                               steps_per_epoch * options.epochs)
          : steps_per_epoch * options.epochs;
  const bool emulate = options.emulate_compute_ms > 0;
  summary.set_emulated_compute_ms(emulate ? options.emulate_compute_ms : 0);
  if (emulate) std::fill(grad.begin(), grad.end(), 0.0f);
  absl::Time train_start;
  for (int epoch = 0; epoch < options.epochs && summary.steps() < total_steps;
       ++epoch) {
    if (absl::Status s = (*batches)->StartEpoch(epoch); !s.ok()) return s;
    double loss_sum = 0;
    uint64_t epoch_steps = 0;
    while (summary.steps() < total_steps) {
      const absl::Time t0 = absl::Now();
      absl::StatusOr<const loader::Batch*> batch = (*batches)->Next();
      if (!batch.ok()) return batch.status();
      if (*batch == nullptr) break;
      if (summary.steps() == 0) {
        train_start = absl::Now();
        summary.set_init_seconds(Seconds(train_start - process_start));
        summary.set_init_startup_seconds(Seconds(data_start - process_start));
        summary.set_init_first_batch_seconds(Seconds(train_start - table_done));
      }
      const absl::Time t1 = absl::Now();
      if (absl::Status s =
              client.Pull(options.table, 0, p, params.data(), summary.steps());
          !s.ok()) {
        return s;
      }
      const absl::Time t2 = absl::Now();
      float loss = 0;
      if (emulate) {
        absl::SleepFor(absl::Milliseconds(options.emulate_compute_ms));
      } else {
        loss = mlp.TrainStep(params.data(), (*batch)->features.data(),
                             (*batch)->labels.data(), (*batch)->size,
                             grad.data(), &ws);
      }
      const absl::Time t3 = absl::Now();
      if (absl::Status s =
              client.Push(options.table, 0, p, grad.data(), summary.steps());
          !s.ok()) {
        return s;
      }
      const absl::Time t4 = absl::Now();
      summary.set_read_seconds(summary.read_seconds() + Seconds(t1 - t0));
      summary.set_pull_seconds(summary.pull_seconds() + Seconds(t2 - t1));
      summary.set_compute_seconds(summary.compute_seconds() + Seconds(t3 - t2));
      summary.set_push_seconds(summary.push_seconds() + Seconds(t4 - t3));
      metrics << absl::StrFormat("%d,%d,%d,%.5f,%.3f,%.3f,%.3f,%.3f,%.6f\n",
                                 epoch, summary.steps(), (*batch)->size, loss,
                                 1e3 * Seconds(t1 - t0), 1e3 * Seconds(t3 - t2),
                                 1e3 * Seconds(t2 - t1), 1e3 * Seconds(t4 - t3),
                                 absl::ToUnixMicros(t4) * 1e-6);
      loss_sum += loss;
      ++epoch_steps;
      summary.set_steps(summary.steps() + 1);
      summary.set_samples(summary.samples() + (*batch)->size);
      if (options.progress_every > 0 &&
          summary.steps() % options.progress_every == 0) {
        const double elapsed = Seconds(absl::Now() - train_start);
        const double rate = summary.samples() / std::max(elapsed, 1e-9);
        const double left_steps =
            static_cast<double>(total_steps - summary.steps());
        absl::FPrintF(stderr,
                      "worker %d: epoch %d step %d loss %.4f %.0f samples/s "
                      "ETA %.0f s\n",
                      options.rank, epoch, summary.steps(), loss, rate,
                      left_steps * options.batch / std::max(rate, 1e-9));
      }
    }
    const double mean = epoch_steps ? loss_sum / epoch_steps : 0;
    if (epoch == 0) summary.set_first_epoch_loss(mean);
    summary.set_last_epoch_loss(mean);
    if (test != nullptr) {
      if (absl::Status s = client.Pull(options.table, 0, p, params.data());
          !s.ok()) {
        return s;
      }
      absl::StatusOr<double> acc =
          TestAccuracy(mlp, params.data(), *test, &*eval_ws);
      if (!acc.ok()) return acc.status();
      summary.set_test_accuracy(*acc);
      absl::FPrintF(stderr,
                    "worker %d: epoch %d done, mean loss %.4f, test accuracy "
                    "%.4f\n",
                    options.rank, epoch, mean, *acc);
    } else {
      absl::FPrintF(stderr, "worker %d: epoch %d done, mean loss %.4f\n",
                    options.rank, epoch, mean);
    }
  }
  summary.set_train_seconds(summary.steps() ? Seconds(absl::Now() - train_start)
                                            : 0);
  summary.set_samples_per_second(
      summary.train_seconds() > 0 ? summary.samples() / summary.train_seconds()
                                  : 0);
  metrics.close();
  return summary;
}

absl::StatusOr<double> Evaluate(ps::Client& client,
                                const TrainerOptions& options) {
  absl::StatusOr<model::MlpSpec> spec = model::ParseModelSpec(options.model);
  if (!spec.ok()) return spec.status();
  const model::Mlp mlp(*std::move(spec));
  absl::StatusOr<loader::Dataset> test_set =
      loader::OpenDataset(options.data + "/test");
  if (!test_set.ok()) return test_set.status();
  loader::LoaderOptions to;
  to.batch_size = 1000;
  absl::StatusOr<std::unique_ptr<loader::Loader>> test =
      loader::MakeSequentialLoader(*test_set, to);
  if (!test.ok()) return test.status();
  ps::TableOptions table;
  table.name = options.table;
  table.num_params = mlp.num_params();
  if (absl::Status s = client.OpenTable(table, absl::Seconds(10)); !s.ok()) {
    return s;
  }
  std::vector<float> params(mlp.num_params());
  if (absl::Status s =
          client.Pull(options.table, 0, params.size(), params.data());
      !s.ok()) {
    return s;
  }
  model::Mlp::Workspace ws = mlp.MakeWorkspace(1000);
  return TestAccuracy(mlp, params.data(), **test, &ws);
}

}  // namespace worker
