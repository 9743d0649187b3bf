// shardps-worker: trains --model on --data against the parameter servers at
// --server_addrs, writing RUN_DIR/metrics-<rank>.csv and
// RUN_DIR/summary-<rank>.json.
#include <cblas.h>
#include <sys/stat.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "ps/client.h"
#include "ps/client_metrics.h"
#include "ps/metrics_endpoint.h"
#include "ps/program.h"
#include "ps/security.h"
#include "ps/server_addrs.h"
#include "worker/cluster_env.h"
#include "worker/json_file.h"
#include "worker/trainer.h"
#include "worker/training_config.h"
#include "worker/worker_metrics.h"

ABSL_FLAG(std::string, server_addrs, "",
          "Parameter servers: host:port,... or a pattern with {i} plus "
          "--num_servers.");
ABSL_FLAG(int, num_servers, 0, "Server count for a {i} --server_addrs.");
ABSL_FLAG(std::string, job, "default", "Job id the servers were started with.");
ABSL_FLAG(int, rank, -1,
          "This worker's rank; -1 takes it from SLURM_PROCID, "
          "OMPI_COMM_WORLD_RANK, PMI_RANK or JOB_COMPLETION_INDEX, else 0.");
ABSL_FLAG(int, world, -1,
          "Number of workers; -1 takes it from SLURM_NTASKS, "
          "OMPI_COMM_WORLD_SIZE or PMI_SIZE, else 1.");
ABSL_FLAG(std::string, model, "mlp:784-256-256-10", "Model spec.");
ABSL_FLAG(std::string, data, "",
          "Data directory with train/ and test/ (shardps-data output).");
ABSL_FLAG(std::string, loader, "parallel",
          "parallel (prefetching, own partition) or sequential (the "
          "CNTK-like baseline: full read before training).");
ABSL_FLAG(int, reader_threads, 4, "Reader threads of the parallel loader.");
ABSL_FLAG(int, prefetch_batches, 8, "Batches the parallel loader reads ahead.");
ABSL_FLAG(int, batch, 128, "Batch size.");
ABSL_FLAG(std::string, optimizer, "sgd",
          "The servers' optimizer, its state held in the shards: sgd, "
          "momentum, nesterov (momentum with Nesterov's look-ahead), adagrad "
          "or adam.");
ABSL_FLAG(double, lr, 0,
          "Learning rate (applied by the servers); 0: the optimizer's "
          "default (sgd 0.1, momentum and nesterov 0.01, adagrad 0.05, adam "
          "0.001).");
ABSL_FLAG(std::string, lr_schedule, "constant",
          "constant, or cosine: the learning rate of step s of S is scaled "
          "by (1 + cos(pi s / S)) / 2 (sent with each push).");
ABSL_FLAG(double, momentum, 0.9, "momentum, nesterov: the momentum factor.");
ABSL_FLAG(double, beta1, 0.9, "adam: decay of the gradient's mean.");
ABSL_FLAG(double, beta2, 0.999, "adam: decay of the gradient's variance.");
ABSL_FLAG(double, epsilon, 1e-8,
          "adagrad, adam: added to the denominator's square root.");
ABSL_FLAG(std::string, consistency, "async",
          "async (pushes applied on arrival), sync (BSP: each step's "
          "gradients of all --world workers averaged, then the next step's "
          "pulls released) or ssp:K (a pull at step c waits until every "
          "worker pushed step c-K).");
ABSL_FLAG(double, straggler_timeout_s, 60,
          "sync, ssp: how long a pull waits for workers that do not push "
          "before --straggler_policy applies to them.");
ABSL_FLAG(std::string, straggler_policy, "fail",
          "sync, ssp: fail (the job stops with a message naming the "
          "stragglers) or drop (the servers leave them out of the barrier, "
          "logged).");
ABSL_FLAG(std::string, compression, "none",
          "Values on the wire: none (float32), fp16 or bf16 (pulls and "
          "pushes, 2 bytes a value; fp16 saturates at +-65504), onebit "
          "(1-bit SGD pushes with error feedback, about 1.25 bits a value; "
          "float32 pulls).");
ABSL_FLAG(double, initial_accumulator, 0.1,
          "adagrad: the starting sum of squared gradients.");
ABSL_FLAG(int, epochs, 1, "Epochs over this worker's partition.");
ABSL_FLAG(uint64_t, seed, 1, "Seed of the initial model and the shuffles.");
ABSL_FLAG(std::string, run_dir, ".", "Directory for metrics and summary.");
ABSL_FLAG(int, chunk_kb, 1024, "Largest payload of one Pull/Push call, KiB.");
ABSL_FLAG(double, rpc_timeout_s, 30, "Deadline of every server call.");
ABSL_FLAG(double, retry_give_up_s, 60,
          "How long pulls and table creation retry an unavailable server "
          "(with backoff) before failing; pushes are never retried. 0: no "
          "retries.");
ABSL_FLAG(double, ready_timeout_s, 60,
          "How long to wait for every server to be ready.");
ABSL_FLAG(int, blas_threads, 1, "OpenBLAS threads for the model.");
ABSL_FLAG(int, progress_every, 100, "Steps between progress lines.");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM CA that signs the servers' certificates: connect with TLS.");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM client certificate for mutual TLS (with --tls_key).");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert.");
ABSL_FLAG(std::string, auth_token_file, "",
          "File holding the job's token, sent with every call.");
ABSL_FLAG(uint64_t, max_steps, 0,
          "Stop after this many steps (0: run all --epochs).");
ABSL_FLAG(int, checkpoint_every_steps, 50,
          "Steps between saves of this worker's position "
          "(RUN_DIR/worker-RANK.checkpoint.json, also saved at every epoch's "
          "end); 0: epoch ends only.");
ABSL_FLAG(bool, resume, false,
          "Rejoin a run: continue from this worker's checkpoint in --run_dir "
          "(its epoch and position; steps since it are done again) instead "
          "of from the start. Other workers need not stop.");
ABSL_FLAG(bool, evaluate_only, false,
          "Do not train: pull the model as it is on the servers, report its "
          "accuracy on DATA/test and write RUN_DIR/evaluation.json (e.g. "
          "after an asynchronous run, whose last worker to finish is not "
          "necessarily rank 0).");
ABSL_FLAG(std::string, trace, "",
          "Write a Chrome trace (Perfetto, chrome://tracing) of this "
          "worker's phases and of every chunk call to this file, rewritten "
          "every 10 s and at exit.");
ABSL_FLAG(std::string, trace_name, "",
          "The process's name in the --trace file; empty: worker-RANK.");
ABSL_FLAG(int, metrics_port, -1,
          "Serve Prometheus metrics (step phases, loader queue and stalls, "
          "per-shard call latency and bytes) at "
          "http://--metrics_host:PORT/metrics; 0 picks any free port; -1: no "
          "metrics endpoint.");
ABSL_FLAG(std::string, metrics_host, "0.0.0.0",
          "Address the metrics endpoint listens on.");
ABSL_FLAG(double, emulate_compute_ms, 0,
          "EMULATION for cluster experiments: replace each step's "
          "forward/backward with a wait of this many ms and push a zero "
          "gradient (pulls and pushes still move every parameter). 0: real "
          "compute. Recorded in the summary.");

namespace {

int Fail(const absl::Status& s) {
  absl::FPrintF(stderr, "shardps-worker: %s\n", s.ToString());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const absl::Time start = absl::Now();
  ps::GrpcRuntime grpc_runtime;
  ps::InitProgram(argc, argv,
                  "trains a model against shardps servers.\n"
                  "  shardps-worker --server_addrs=h1:7070,h2:7070 "
                  "--data=DIR --rank=0 --world=2 --run_dir=RUN");
  absl::StatusOr<worker::RankWorld> rw = worker::ResolveRankWorld(
      absl::GetFlag(FLAGS_rank), absl::GetFlag(FLAGS_world), &std::getenv);
  if (!rw.ok()) return Fail(rw.status());
  absl::StatusOr<std::vector<std::string>> addrs = ps::ParseServerAddrs(
      absl::GetFlag(FLAGS_server_addrs), absl::GetFlag(FLAGS_num_servers));
  if (!addrs.ok()) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("--server_addrs: ", addrs.status().message())));
  }
  if (absl::GetFlag(FLAGS_data).empty()) {
    return Fail(absl::InvalidArgumentError("--data is required"));
  }
  const std::string run_dir = absl::GetFlag(FLAGS_run_dir);
  ::mkdir(run_dir.c_str(), 0755);
  openblas_set_num_threads(std::max(1, absl::GetFlag(FLAGS_blas_threads)));

  worker::OptimizerFlags optimizer;
  optimizer.name = absl::GetFlag(FLAGS_optimizer);
  optimizer.lr = absl::GetFlag(FLAGS_lr);
  optimizer.momentum = absl::GetFlag(FLAGS_momentum);
  optimizer.beta1 = absl::GetFlag(FLAGS_beta1);
  optimizer.beta2 = absl::GetFlag(FLAGS_beta2);
  optimizer.epsilon = absl::GetFlag(FLAGS_epsilon);
  optimizer.initial_accumulator = absl::GetFlag(FLAGS_initial_accumulator);
  absl::StatusOr<shardps::OptimizerConfig> optimizer_config =
      worker::MakeOptimizerConfig(optimizer);
  if (!optimizer_config.ok()) return Fail(optimizer_config.status());
  absl::StatusOr<shardps::ConsistencyConfig> consistency =
      worker::MakeConsistencyConfig(absl::GetFlag(FLAGS_consistency), rw->world,
                                    absl::GetFlag(FLAGS_straggler_timeout_s),
                                    absl::GetFlag(FLAGS_straggler_policy));
  if (!consistency.ok()) return Fail(consistency.status());
  absl::StatusOr<ps::WireEncodings> encodings =
      worker::MakeWireEncodings(absl::GetFlag(FLAGS_compression));
  if (!encodings.ok()) return Fail(encodings.status());
  const std::string lr_schedule = absl::GetFlag(FLAGS_lr_schedule);
  if (lr_schedule != "constant" && lr_schedule != "cosine") {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        "--lr_schedule=", lr_schedule, ": expected constant or cosine")));
  }
  if (absl::GetFlag(FLAGS_resume) && !consistency->mode().empty()) {
    return Fail(absl::InvalidArgumentError(
        "--resume works with --consistency=async only: under a barrier the "
        "servers refuse the steps a rejoining worker would do again"));
  }

  std::string trace_name = absl::GetFlag(FLAGS_trace_name);
  if (trace_name.empty()) trace_name = absl::StrCat("worker-", rw->rank);
  absl::StatusOr<std::unique_ptr<ps::Tracer>> tracer =
      ps::OpenTraceFlag(absl::GetFlag(FLAGS_trace), trace_name);
  if (!tracer.ok()) return Fail(tracer.status());
  if (*tracer != nullptr) (*tracer)->NameThread("main");

  // Before the client and the trainer that count into it, so that it
  // outlives them.
  std::unique_ptr<ps::MetricsEndpoint> metrics_endpoint;
  std::unique_ptr<ps::ClientMetrics> client_metrics;
  std::unique_ptr<worker::WorkerMetrics> worker_metrics;
  if (const int port = absl::GetFlag(FLAGS_metrics_port); port >= 0) {
    absl::StatusOr<std::unique_ptr<ps::MetricsEndpoint>> endpoint =
        ps::MetricsEndpoint::Start(absl::GetFlag(FLAGS_metrics_host), port);
    if (!endpoint.ok()) {
      return Fail(absl::Status(
          endpoint.status().code(),
          absl::StrCat("--metrics_port: ", endpoint.status().message())));
    }
    metrics_endpoint = *std::move(endpoint);
    client_metrics = std::make_unique<ps::ClientMetrics>(
        metrics_endpoint->registry(), static_cast<int>(addrs->size()));
    worker_metrics =
        std::make_unique<worker::WorkerMetrics>(metrics_endpoint->registry());
    absl::FPrintF(stderr, "shardps-worker: metrics at http://%s:%d/metrics\n",
                  absl::GetFlag(FLAGS_metrics_host), metrics_endpoint->port());
  } else if (port < -1) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("--metrics_port=", port, " is not in -1..65535")));
  }

  ps::ClientOptions co;
  co.tracer = tracer->get();
  co.metrics = client_metrics.get();
  co.server_addrs = *addrs;
  co.job = absl::GetFlag(FLAGS_job);
  co.worker = rw->rank;
  co.chunk_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_chunk_kb)) << 10;
  co.rpc_timeout = absl::Seconds(absl::GetFlag(FLAGS_rpc_timeout_s));
  co.retry_give_up = absl::Seconds(absl::GetFlag(FLAGS_retry_give_up_s));
  co.pull_encoding = encodings->pull;
  co.push_encoding = encodings->push;
  co.tls = {absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key),
            absl::GetFlag(FLAGS_tls_ca)};
  absl::StatusOr<std::string> token =
      ps::ReadTokenFile(absl::GetFlag(FLAGS_auth_token_file));
  if (!token.ok()) return Fail(token.status());
  co.auth_token = *token;
  absl::StatusOr<std::unique_ptr<ps::Client>> client = ps::Client::Connect(co);
  if (!client.ok()) return Fail(client.status());
  if (absl::Status s = (*client)->WaitReady(
          absl::Seconds(absl::GetFlag(FLAGS_ready_timeout_s)));
      !s.ok()) {
    return Fail(s);
  }
  absl::FPrintF(stderr, "shardps-worker: rank %d of %d (%s), %d servers\n",
                rw->rank, rw->world, rw->source, addrs->size());

  worker::TrainerOptions to;
  to.model = absl::GetFlag(FLAGS_model);
  to.data = absl::GetFlag(FLAGS_data);
  to.loader = absl::GetFlag(FLAGS_loader);
  to.batch = absl::GetFlag(FLAGS_batch);
  to.optimizer = *optimizer_config;
  to.consistency = *consistency;
  to.lr_schedule = lr_schedule;
  to.compression = absl::GetFlag(FLAGS_compression);
  to.tracer = tracer->get();
  to.metrics = worker_metrics.get();
  to.epochs = absl::GetFlag(FLAGS_epochs);
  to.seed = absl::GetFlag(FLAGS_seed);
  to.reader_threads = absl::GetFlag(FLAGS_reader_threads);
  to.prefetch_batches = absl::GetFlag(FLAGS_prefetch_batches);
  to.rank = rw->rank;
  to.world = rw->world;
  to.run_dir = run_dir;
  to.progress_every = absl::GetFlag(FLAGS_progress_every);
  to.max_steps = absl::GetFlag(FLAGS_max_steps);
  to.emulate_compute_ms = absl::GetFlag(FLAGS_emulate_compute_ms);
  to.checkpoint_every = absl::GetFlag(FLAGS_checkpoint_every_steps);
  to.resume = absl::GetFlag(FLAGS_resume);
  if (to.checkpoint_every < 0) {
    return Fail(
        absl::InvalidArgumentError("--checkpoint_every_steps must be >= 0"));
  }
  if (to.emulate_compute_ms < 0) {
    return Fail(absl::InvalidArgumentError(
        "--emulate_compute_ms must be >= 0 (0: real compute)"));
  }
  if (to.emulate_compute_ms > 0) {
    absl::FPrintF(stderr,
                  "shardps-worker: EMULATED compute: each step waits %.1f ms "
                  "instead of forward/backward\n",
                  to.emulate_compute_ms);
  }
  if (absl::GetFlag(FLAGS_evaluate_only)) {
    absl::StatusOr<double> accuracy = worker::Evaluate(**client, to);
    if (!accuracy.ok()) return Fail(accuracy.status());
    shardps::WorkerSummary evaluation;
    evaluation.set_rank(rw->rank);
    evaluation.set_test_accuracy(*accuracy);
    if (absl::Status s = worker::WriteJsonFile(
            evaluation, absl::StrCat(run_dir, "/evaluation.json"));
        !s.ok()) {
      return Fail(s);
    }
    absl::FPrintF(stderr, "shardps-worker: test accuracy %.4f\n", *accuracy);
    return 0;
  }
  absl::StatusOr<shardps::WorkerSummary> summary =
      worker::Train(**client, to, start);
  if (!summary.ok()) return Fail(summary.status());
  const std::string path =
      absl::StrCat(run_dir, "/summary-", rw->rank, ".json");
  if (absl::Status s = worker::WriteJsonFile(*summary, path); !s.ok()) {
    return Fail(s);
  }
  absl::FPrintF(stderr, "shardps-worker: done: %s\n",
                worker::ToJson(*summary).value_or("{}"));
  return 0;
}
