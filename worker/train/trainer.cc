#include "worker/train/trainer.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "loader/loader.h"
#include "model/mlp.h"
#include "ps/base/json_file.h"
#include "ps/obs/progress_line.h"
#include "worker/train/training_config.h"

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

// Cuts `path` after its last newline (a no-op for a missing file).
absl::Status TruncateToLastLine(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::OkStatus();
  const std::string text((std::istreambuf_iterator<char>(in)),
                         std::istreambuf_iterator<char>());
  const size_t keep =
      text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
  if (keep == text.size()) return absl::OkStatus();
  if (::truncate(path.c_str(), keep) != 0) {
    return absl::UnavailableError(absl::StrCat("cannot truncate ", path));
  }
  return absl::OkStatus();
}

std::string CheckpointPath(const TrainerOptions& options) {
  return absl::StrCat(options.run_dir, "/worker-", options.rank,
                      ".checkpoint.json");
}

// The checkpoint to resume from: a fresh one (position 0) unless --resume
// finds one, which must belong to this worker's configuration.
absl::StatusOr<shardps::WorkerCheckpoint> StartingPoint(
    const TrainerOptions& options) {
  shardps::WorkerCheckpoint start;
  start.set_rank(options.rank);
  start.set_world(options.world);
  start.set_model(options.model);
  start.set_seed(options.seed);
  start.set_batch(options.batch);
  const std::string path = CheckpointPath(options);
  if (!options.resume) return start;
  if (::access(path.c_str(), F_OK) != 0) {
    absl::FPrintF(stderr,
                  "worker %d: no checkpoint %s, starting from the "
                  "beginning\n",
                  options.rank, path);
    return start;
  }
  shardps::WorkerCheckpoint saved;
  if (absl::Status s = ps::ReadJsonFile(path, &saved); !s.ok()) return s;
  if (saved.rank() != start.rank() || saved.world() != start.world() ||
      saved.model() != start.model() || saved.seed() != start.seed() ||
      saved.batch() != start.batch()) {
    return absl::FailedPreconditionError(absl::StrCat(
        path,
        " is of another configuration (rank, world, model, seed or "
        "batch differ): ",
        saved.ShortDebugString()));
  }
  absl::FPrintF(stderr,
                "worker %d: resuming from %s at epoch %d, batch %d "
                "(%d steps done)\n",
                options.rank, path, saved.epoch(), saved.epoch_step(),
                saved.steps());
  return saved;
}

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
  if (options.tracer != nullptr || options.metrics != nullptr) {
    lo.on_read = [tracer = options.tracer, metrics = options.metrics](
                     absl::Time start, absl::Time end) {
      if (tracer != nullptr) tracer->Record("read", "loader", start, end);
      if (metrics != nullptr) metrics->RecordRead(end - start);
    };
  }
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
  table.optimizer = options.optimizer;
  table.consistency = options.consistency;
  uint64_t seed = options.seed;
  for (const model::Mlp::TensorInit& t : mlp.InitPlan()) {
    table.init_segments.push_back(ToSegment(t, seed++));
  }
  const absl::Time table_start = absl::Now();
  if (absl::Status s = client.CreateTable(table); !s.ok()) {
    return s;
  }

  const absl::Time table_done = absl::Now();
  absl::StatusOr<shardps::WorkerCheckpoint> position = StartingPoint(options);
  if (!position.ok()) return position.status();
  const bool resumed = position->steps() > 0 || position->epoch() > 0;
  const std::string metrics_path =
      absl::StrCat(options.run_dir, "/metrics-", options.rank, ".csv");
  // A rejoining worker adds to its metrics; its redone steps appear twice.
  // A line cut short by the kill is dropped first.
  if (resumed) {
    if (absl::Status s = TruncateToLastLine(metrics_path); !s.ok()) return s;
  }
  std::ofstream metrics(metrics_path,
                        resumed ? std::ios::app : std::ios::trunc);
  if (!metrics) {
    return absl::UnavailableError(absl::StrCat("cannot write ", metrics_path));
  }
  // end_unix_s (when the step ended, wall clock) lets the launcher line up
  // the workers' steps.
  if (!resumed) {
    metrics << "epoch,step,batch,loss,read_ms,compute_ms,pull_ms,push_ms,"
               "end_unix_s\n";
  }
  auto save_position = [&](int epoch, uint64_t epoch_step,
                           const shardps::WorkerSummary& done) {
    position->set_epoch(epoch);
    position->set_epoch_step(epoch_step);
    position->set_steps(done.steps());
    position->set_samples(done.samples());
    return ps::WriteJsonFile(*position, CheckpointPath(options));
  };

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
  summary.set_optimizer(options.optimizer.ShortDebugString());
  summary.set_consistency(ConsistencyFlag(options.consistency));
  summary.set_compression(options.compression);
  summary.set_test_accuracy(-1);
  summary.set_init_data_seconds(Seconds(table_start - data_start));
  summary.set_init_table_seconds(Seconds(table_done - table_start));
  // Under a barrier every rank must push the same clocks: all take the
  // smallest partition's steps (the larger ones skip at most one batch).
  const bool barrier = options.consistency.mode() != shardps::CONSISTENCY_ASYNC;
  uint64_t records = (*batches)->partition_size();
  if (barrier) {
    for (int r = 0; r < options.world; ++r) {
      const loader::Partition part =
          loader::PartitionFor(train->manifest.records(), r, options.world);
      records = std::min(records, part.end - part.begin);
    }
  }
  const uint64_t steps_per_epoch =
      (records + options.batch - 1) / options.batch;
  const uint64_t total_steps =
      options.max_steps > 0
          ? std::min<uint64_t>(options.max_steps,
                               steps_per_epoch * options.epochs)
          : steps_per_epoch * options.epochs;
  const bool emulate = options.emulate_compute_ms > 0;
  summary.set_emulated_compute_ms(emulate ? options.emulate_compute_ms : 0);
  if (emulate) std::fill(grad.begin(), grad.end(), 0.0f);
  summary.set_steps(position->steps());
  summary.set_samples(position->samples());
  const uint64_t first_step = position->steps();
  const uint64_t first_samples = position->samples();
  const int first_epoch = position->epoch();
  const uint64_t first_epoch_step = position->epoch_step();
  absl::Time train_start;
  uint64_t evaluation_pull_bytes = 0;
  // Rewritten in place on a terminal, a line per update in a log.
  ps::ProgressLine progress(stderr, isatty(STDERR_FILENO) != 0);
  for (int epoch = first_epoch;
       epoch < options.epochs && summary.steps() < total_steps; ++epoch) {
    if (absl::Status s = (*batches)->StartEpoch(epoch); !s.ok()) return s;
    double loss_sum = 0;
    uint64_t epoch_steps = 0;     // trained here, for the mean loss
    uint64_t epoch_position = 0;  // batches of the epoch done, for resuming
    if (epoch == first_epoch) {
      // Rejoining mid-epoch: the batches before the checkpoint's position
      // were trained on already (the loader's order is a function of the
      // seed and the epoch).
      for (; epoch_position < first_epoch_step; ++epoch_position) {
        absl::StatusOr<const loader::Batch*> skipped = (*batches)->Next();
        if (!skipped.ok()) return skipped.status();
        if (*skipped == nullptr) break;
      }
    }
    while (summary.steps() < total_steps && epoch_position < steps_per_epoch) {
      const absl::Time t0 = absl::Now();
      absl::StatusOr<const loader::Batch*> batch = (*batches)->Next();
      if (!batch.ok()) return batch.status();
      if (*batch == nullptr) break;
      if (summary.steps() == first_step) {
        train_start = absl::Now();
        if (ps::Tracer* t = options.tracer; t != nullptr) {
          t->Record("init", "worker", process_start, train_start);
          t->Record("open_data", "worker", data_start, table_start);
          t->Record("create_table", "worker", table_start, table_done);
        }
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
      const float lr_scale =
          options.lr_schedule == "cosine"
              ? static_cast<float>(
                    0.5 * (1 + std::cos(M_PI * summary.steps() / total_steps)))
              : 1.0f;
      if (absl::Status s = client.Push(options.table, 0, p, grad.data(),
                                       summary.steps(), lr_scale);
          !s.ok()) {
        return s;
      }
      const absl::Time t4 = absl::Now();
      if (ps::Tracer* t = options.tracer; t != nullptr) {
        t->Record("wait_for_data", "worker", t0, t1);
        t->Record("pull", "worker", t1, t2);
        t->Record("compute", "worker", t2, t3);
        t->Record("push", "worker", t3, t4);
      }
      if (options.metrics != nullptr) {
        options.metrics->RecordStep(epoch, (*batch)->size, loss,
                                    {t1 - t0, t2 - t1, t3 - t2, t4 - t3},
                                    (*batches)->ReadyBatches());
      }
      summary.set_read_seconds(summary.read_seconds() + Seconds(t1 - t0));
      summary.set_pull_seconds(summary.pull_seconds() + Seconds(t2 - t1));
      summary.set_compute_seconds(summary.compute_seconds() + Seconds(t3 - t2));
      summary.set_push_seconds(summary.push_seconds() + Seconds(t4 - t3));
      metrics << absl::StrFormat("%d,%d,%d,%.5f,%.3f,%.3f,%.3f,%.3f,%.6f\n",
                                 epoch, summary.steps(), (*batch)->size, loss,
                                 1e3 * Seconds(t1 - t0), 1e3 * Seconds(t3 - t2),
                                 1e3 * Seconds(t2 - t1), 1e3 * Seconds(t4 - t3),
                                 absl::ToUnixMicros(t4) * 1e-6)
              << std::flush;  // a killed worker's file is whole up to here
      loss_sum += loss;
      ++epoch_steps;
      ++epoch_position;
      summary.set_steps(summary.steps() + 1);
      summary.set_samples(summary.samples() + (*batch)->size);
      if (options.checkpoint_every > 0 &&
          summary.steps() % options.checkpoint_every == 0) {
        if (absl::Status s = save_position(epoch, epoch_position, summary);
            !s.ok()) {
          return s;
        }
      }
      if (options.progress_every > 0 &&
          summary.steps() % options.progress_every == 0) {
        const double elapsed = Seconds(absl::Now() - train_start);
        const double rate = summary.samples() / std::max(elapsed, 1e-9);
        const double left_steps =
            static_cast<double>(total_steps - summary.steps());
        progress.Update(absl::StrFormat(
            "worker %d: epoch %d step %d loss %.4f %.0f samples/s ETA %.0f s",
            options.rank, epoch, summary.steps(), loss, rate,
            left_steps * options.batch / std::max(rate, 1e-9)));
      }
    }
    if (absl::Status s = save_position(epoch + 1, 0, summary); !s.ok()) {
      return s;
    }
    const double mean = epoch_steps ? loss_sum / epoch_steps : 0;
    if (epoch == 0) summary.set_first_epoch_loss(mean);
    summary.set_last_epoch_loss(mean);
    if (test != nullptr) {
      ps::TraceSpan span(options.tracer, "evaluate", "worker");
      const uint64_t pulled_before = client.pull_bytes();
      if (absl::Status s = client.Pull(options.table, 0, p, params.data());
          !s.ok()) {
        return s;
      }
      evaluation_pull_bytes += client.pull_bytes() - pulled_before;
      absl::StatusOr<double> acc =
          TestAccuracy(mlp, params.data(), *test, &*eval_ws);
      if (!acc.ok()) return acc.status();
      summary.set_test_accuracy(*acc);
      progress.Print(absl::StrFormat(
          "worker %d: epoch %d done, mean loss %.4f, test accuracy %.4f",
          options.rank, epoch, mean, *acc));
    } else {
      progress.Print(absl::StrFormat("worker %d: epoch %d done, mean loss %.4f",
                                     options.rank, epoch, mean));
    }
  }
  // The steps' traffic only, not the evaluations'.
  summary.set_pull_bytes(
      static_cast<double>(client.pull_bytes() - evaluation_pull_bytes));
  summary.set_push_bytes(static_cast<double>(client.push_bytes()));
  summary.set_train_seconds(
      summary.steps() > first_step ? Seconds(absl::Now() - train_start) : 0);
  // This process's own rate: a rejoined worker's earlier steps are not in
  // train_seconds.
  const uint64_t own_samples = summary.samples() - first_samples;
  summary.set_samples_per_second(
      summary.train_seconds() > 0 ? own_samples / summary.train_seconds() : 0);
  metrics.close();
  return summary;
}

absl::StatusOr<double> Evaluate(ps::Client& client,
                                const TrainerOptions& options) {
  ps::TraceSpan span(options.tracer, "evaluate", "worker");
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
