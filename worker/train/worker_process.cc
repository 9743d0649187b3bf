#include "worker/train/worker_process.h"

#include <cblas.h>

#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "model/dlrm.h"
#include "ps/base/file_io.h"
#include "ps/base/json_file.h"
#include "ps/base/log.h"
#include "ps/client/client_metrics.h"
#include "ps/obs/metrics_endpoint.h"
#include "ps/obs/trace.h"
#include "worker/train/click_trainer.h"
#include "worker/train/worker_metrics.h"

namespace worker {
namespace {

// The worker's observers, declared before the client and the trainer that
// report to them so that they outlive both.
struct Observers {
  std::unique_ptr<ps::Tracer> tracer;
  std::unique_ptr<ps::MetricsEndpoint> endpoint;
  std::unique_ptr<ps::ClientMetrics> client_metrics;
  std::unique_ptr<WorkerMetrics> worker_metrics;
};

absl::StatusOr<Observers> OpenObservers(const WorkerOptions& options) {
  Observers o;
  absl::StatusOr<std::unique_ptr<ps::Tracer>> tracer =
      ps::OpenTraceFlag(options.trace_path, options.trace_name);
  if (!tracer.ok()) return tracer.status();
  o.tracer = *std::move(tracer);
  if (o.tracer != nullptr) o.tracer->NameThread("main");
  if (options.metrics_port < 0) return o;
  absl::StatusOr<std::unique_ptr<ps::MetricsEndpoint>> endpoint =
      ps::MetricsEndpoint::Start(options.metrics_host, options.metrics_port);
  if (!endpoint.ok()) {
    return absl::Status(
        endpoint.status().code(),
        absl::StrCat("--metrics_port: ", endpoint.status().message()));
  }
  o.endpoint = *std::move(endpoint);
  o.client_metrics = std::make_unique<ps::ClientMetrics>(
      o.endpoint->registry(),
      options.client.etcd.empty()
          ? static_cast<int>(options.client.server_addrs.size())
          : options.client.num_shards);
  o.worker_metrics = std::make_unique<WorkerMetrics>(o.endpoint->registry());
  ps::Logf(nullptr, "metrics at http://%s:%d/metrics", options.metrics_host,
           o.endpoint->port());
  return o;
}

absl::Status EvaluateOnly(ps::Client& client, const TrainerOptions& options) {
  shardps::WorkerSummary evaluation;
  evaluation.set_rank(options.rank);
  if (model::IsDlrmSpec(options.model)) {
    absl::StatusOr<ClickScore> score = EvaluateClickModel(client, options);
    if (!score.ok()) return score.status();
    evaluation.set_test_accuracy(score->accuracy);
    evaluation.set_test_auc(score->auc);
    evaluation.set_generator_auc(score->generator_auc);
    ps::Logf(nullptr, "test AUC %.4f (the generator's %.4f)", score->auc,
             score->generator_auc);
  } else {
    absl::StatusOr<double> accuracy = Evaluate(client, options);
    if (!accuracy.ok()) return accuracy.status();
    evaluation.set_test_accuracy(*accuracy);
  }
  if (absl::Status s = ps::WriteJsonFile(
          evaluation, absl::StrCat(options.run_dir, "/evaluation.json"));
      !s.ok()) {
    return s;
  }
  ps::Logf(nullptr, "test accuracy %.4f", evaluation.test_accuracy());
  return absl::OkStatus();
}

absl::Status TrainAndReport(ps::Client& client, const TrainerOptions& options,
                            absl::Time process_start) {
  absl::StatusOr<shardps::WorkerSummary> summary =
      Train(client, options, process_start);
  if (!summary.ok()) return summary.status();
  const std::string path =
      absl::StrCat(options.run_dir, "/summary-", options.rank, ".json");
  if (absl::Status s = ps::WriteJsonFile(*summary, path); !s.ok()) return s;
  ps::Logf(nullptr, "done: %s", ps::ToJson(*summary).value_or("{}"));
  return absl::OkStatus();
}

}  // namespace

absl::Status RunWorker(WorkerOptions options, absl::Time process_start) {
  if (absl::Status s = ps::CreateDirectories(options.trainer.run_dir);
      !s.ok()) {
    return s;
  }
  openblas_set_num_threads(options.blas_threads);
  absl::StatusOr<Observers> observers = OpenObservers(options);
  if (!observers.ok()) return observers.status();
  options.client.tracer = observers->tracer.get();
  options.client.metrics = observers->client_metrics.get();
  options.trainer.tracer = observers->tracer.get();
  options.trainer.metrics = observers->worker_metrics.get();
  if (options.trainer.emulate_compute_ms > 0) {
    ps::Logf(nullptr,
             "EMULATED compute: each step waits %.1f ms instead of "
             "forward/backward",
             options.trainer.emulate_compute_ms);
  }
  absl::StatusOr<std::unique_ptr<ps::Client>> client =
      ps::Client::Connect(options.client);
  if (!client.ok()) return client.status();
  if (absl::Status s = (*client)->WaitReady(options.ready_timeout); !s.ok()) {
    return s;
  }
  ps::Logf(nullptr, "rank %d of %d (%s), %d servers", options.trainer.rank,
           options.trainer.world, options.rank_source,
           (*client)->num_servers());
  return options.evaluate_only
             ? EvaluateOnly(**client, options.trainer)
             : TrainAndReport(**client, options.trainer, process_start);
}

}  // namespace worker
