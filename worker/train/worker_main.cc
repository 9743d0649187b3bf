// shardps-worker: trains --model on --data against the parameter servers at
// --server_addrs (worker/train/worker_process.h), or measures its own model
// and loader alone (--bench, worker/train/self_bench.h).
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "ps/base/program.h"
#include "ps/client/server_addrs.h"
#include "ps/wire/row_partition.h"
#include "ps/wire/security_flags.h"
#include "worker/train/cluster_env.h"
#include "worker/train/self_bench.h"
#include "worker/train/training_config.h"
#include "worker/train/worker_process.h"

ABSL_FLAG(std::string, server_addrs, "",
          "Parameter servers: host:port,... or a pattern with {i} plus "
          "--num_servers.");
ABSL_FLAG(int, num_servers, 0,
          "Server count for a {i} --server_addrs; with --etcd, the job's "
          "shard count.");
ABSL_FLAG(std::string, etcd, "",
          "Replicated servers: http://host:port of the job's etcd; each "
          "shard's calls go to its primary. --server_addrs may then name "
          "the primaries to start with if etcd cannot be read at start.");
ABSL_FLAG(std::string, job, "default", "Job id the servers were started with.");
ABSL_FLAG(int, rank, -1,
          "This worker's rank; -1 takes it from SLURM_PROCID, "
          "OMPI_COMM_WORLD_RANK, PMI_RANK or JOB_COMPLETION_INDEX, else 0.");
ABSL_FLAG(int, world, -1,
          "Number of workers; -1 takes it from SLURM_NTASKS, "
          "OMPI_COMM_WORLD_SIZE or PMI_SIZE, else 1.");
ABSL_FLAG(std::string, model, "mlp:784-256-256-10",
          "Model spec: mlp:IN-HIDDEN...-CLASSES, or "
          "cnn:[HxWxC-]LAYERS...-CLASSES with layers cFkK (F filters of K x "
          "K), pP (P x P max pooling), fN (N dense units), e.g. "
          "cnn:c32k5-p2-c64k5-p2-f1024-10 (model/README.md), or a click model "
          "dlrm:D-HIDDEN... (embedding width D) on data with categorical "
          "fields (shardps-data criteo-synthetic).");
ABSL_FLAG(std::string, row_sharding, "hash",
          "dlrm models: how the embedding rows are spread over the servers, "
          "hash (XXH3 of the id) or range (the data's id space cut into equal "
          "ranges, the baseline).");
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
ABSL_FLAG(bool, shared_memory, true,
          "Float32 values to and from servers on this host go through shared "
          "memory (/dev/shm) instead of TCP; servers elsewhere get TCP.");
ABSL_FLAG(int, chunk_kb, 0,
          "Largest payload of one Pull/Push call, KiB; 0: 1024, and pushes "
          "256 with --etcd (smaller chunks keep the backups close behind a "
          "primary).");
ABSL_FLAG(double, rpc_timeout_s, 30, "Deadline of every server call.");
ABSL_FLAG(double, retry_give_up_s, 60,
          "How long calls retry an unavailable server (with backoff) before "
          "failing; a retried push is applied once. 0: no retries.");
ABSL_FLAG(double, ready_timeout_s, 60,
          "How long to wait for every server to be ready.");
ABSL_FLAG(int, blas_threads, 1, "OpenBLAS threads for the model.");
ABSL_FLAG(int, progress_every, 100, "Steps between progress lines.");
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
ABSL_FLAG(std::string, overlap, "none",
          "none: each step pulls the model, computes, then pushes the "
          "gradient (the baseline); layer: each layer's gradient goes with "
          "PushPull as soon as backward has it, and the next step's forward "
          "waits only for the layer it reaches (wait-free backpropagation).");
ABSL_FLAG(double, emulate_compute_ms, 0,
          "EMULATION for cluster experiments: replace each step's "
          "forward/backward with a wait of this many ms and push a zero "
          "gradient (pulls and pushes still move every parameter). 0: real "
          "compute. Recorded in the summary.");

ABSL_FLAG(std::string, bench, "",
          "Measure this worker's own pieces, without servers, and exit: "
          "'model' (training steps of --model on one random batch of "
          "--batch, --blas_threads) or 'loader' (one epoch of --data "
          "through --loader against a plain read of its files). Empty: "
          "train.");
ABSL_FLAG(double, bench_seconds, 5, "--bench=model: seconds of steps.");
ABSL_FLAG(bool, json, false, "--bench=model: print one JSON line.");

namespace {

absl::Status FlagError(absl::string_view flag, const absl::Status& s) {
  return absl::InvalidArgumentError(absl::StrCat(flag, ": ", s.message()));
}

absl::StatusOr<ps::ClientOptions> ClientOptionsFromFlags(int rank) {
  ps::ClientOptions co;
  co.etcd = absl::GetFlag(FLAGS_etcd);
  absl::StatusOr<std::vector<std::string>> addrs = std::vector<std::string>();
  if (co.etcd.empty() || !absl::GetFlag(FLAGS_server_addrs).empty()) {
    addrs = ps::ParseServerAddrs(absl::GetFlag(FLAGS_server_addrs),
                                 absl::GetFlag(FLAGS_num_servers));
    if (!addrs.ok()) return FlagError("--server_addrs", addrs.status());
  }
  if (!co.etcd.empty() &&
      (absl::GetFlag(FLAGS_num_servers) < 1 ||
       (!addrs->empty() && addrs->size() != static_cast<size_t>(absl::GetFlag(
                                                FLAGS_num_servers))))) {
    return absl::InvalidArgumentError(
        "--etcd takes --num_servers (the shard count), and --server_addrs "
        "only as that many primaries to start with while etcd is away");
  }
  co.num_shards = absl::GetFlag(FLAGS_num_servers);
  absl::StatusOr<ps::WireEncodings> encodings =
      worker::MakeWireEncodings(absl::GetFlag(FLAGS_compression));
  if (!encodings.ok()) return encodings.status();
  absl::StatusOr<ps::Security> security = ps::SecurityFromFlags();
  if (!security.ok()) return security.status();
  co.server_addrs = *std::move(addrs);
  co.job = absl::GetFlag(FLAGS_job);
  co.worker = rank;
  if (absl::GetFlag(FLAGS_chunk_kb) < 0) {
    return absl::InvalidArgumentError("--chunk_kb must be >= 0");
  }
  co.chunk_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_chunk_kb)) << 10;
  co.rpc_timeout = absl::Seconds(absl::GetFlag(FLAGS_rpc_timeout_s));
  co.retry_give_up = absl::Seconds(absl::GetFlag(FLAGS_retry_give_up_s));
  co.pull_encoding = encodings->pull;
  co.push_encoding = encodings->push;
  co.shared_memory = absl::GetFlag(FLAGS_shared_memory);
  co.tls = security->tls;
  co.auth_token = security->auth_token;
  return co;
}

absl::StatusOr<shardps::OptimizerConfig> OptimizerFromFlags() {
  worker::OptimizerFlags optimizer;
  optimizer.name = absl::GetFlag(FLAGS_optimizer);
  optimizer.lr = absl::GetFlag(FLAGS_lr);
  optimizer.momentum = absl::GetFlag(FLAGS_momentum);
  optimizer.beta1 = absl::GetFlag(FLAGS_beta1);
  optimizer.beta2 = absl::GetFlag(FLAGS_beta2);
  optimizer.epsilon = absl::GetFlag(FLAGS_epsilon);
  optimizer.initial_accumulator = absl::GetFlag(FLAGS_initial_accumulator);
  return worker::MakeOptimizerConfig(optimizer);
}

// What the servers' table does with the pushes: optimizer, consistency.
absl::Status TableFromFlags(int world, worker::TrainerOptions* to) {
  absl::StatusOr<shardps::OptimizerConfig> optimizer = OptimizerFromFlags();
  if (!optimizer.ok()) return optimizer.status();
  absl::StatusOr<shardps::ConsistencyConfig> consistency =
      worker::MakeConsistencyConfig(absl::GetFlag(FLAGS_consistency), world,
                                    absl::GetFlag(FLAGS_straggler_timeout_s),
                                    absl::GetFlag(FLAGS_straggler_policy));
  if (!consistency.ok()) return consistency.status();
  to->optimizer = *std::move(optimizer);
  to->consistency = *std::move(consistency);
  to->lr_schedule = absl::GetFlag(FLAGS_lr_schedule);
  if (to->lr_schedule != "constant" && to->lr_schedule != "cosine") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--lr_schedule=", to->lr_schedule, ": expected constant or cosine"));
  }
  return absl::OkStatus();
}

// Checks what TrainerOptionsFromFlags read.
absl::Status CheckTrainer(const worker::TrainerOptions& to) {
  if (to.data.empty()) return absl::InvalidArgumentError("--data is required");
  if (to.checkpoint_every < 0) {
    return absl::InvalidArgumentError("--checkpoint_every_steps must be >= 0");
  }
  if (to.emulate_compute_ms < 0) {
    return absl::InvalidArgumentError(
        "--emulate_compute_ms must be >= 0 (0: real compute)");
  }
  if (to.overlap != "none" && to.overlap != "layer") {
    return absl::InvalidArgumentError(
        absl::StrCat("--overlap=", to.overlap, ": expected none or layer"));
  }
  if (to.overlap == "layer" && to.emulate_compute_ms > 0) {
    return absl::InvalidArgumentError(
        "--overlap=layer needs a real backward to overlap with: it does not "
        "combine with --emulate_compute_ms");
  }
  if (to.resume && to.consistency.mode() != shardps::CONSISTENCY_ASYNC) {
    return absl::InvalidArgumentError(
        "--resume works with --consistency=async only: under a barrier the "
        "servers refuse the steps a rejoining worker would do again");
  }
  return absl::OkStatus();
}

absl::StatusOr<worker::TrainerOptions> TrainerOptionsFromFlags(
    const worker::RankWorld& rw) {
  worker::TrainerOptions to;
  if (absl::Status s = TableFromFlags(rw.world, &to); !s.ok()) return s;
  to.model = absl::GetFlag(FLAGS_model);
  to.row_sharding = absl::GetFlag(FLAGS_row_sharding);
  if (absl::Status s = ps::ParseRowSharding(to.row_sharding).status();
      !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--row_sharding ", s.message()));
  }
  to.data = absl::GetFlag(FLAGS_data);
  to.loader = absl::GetFlag(FLAGS_loader);
  to.batch = absl::GetFlag(FLAGS_batch);
  to.compression = absl::GetFlag(FLAGS_compression);
  to.epochs = absl::GetFlag(FLAGS_epochs);
  to.seed = absl::GetFlag(FLAGS_seed);
  to.reader_threads = absl::GetFlag(FLAGS_reader_threads);
  to.prefetch_batches = absl::GetFlag(FLAGS_prefetch_batches);
  to.rank = rw.rank;
  to.world = rw.world;
  to.run_dir = absl::GetFlag(FLAGS_run_dir);
  to.progress_every = absl::GetFlag(FLAGS_progress_every);
  to.max_steps = absl::GetFlag(FLAGS_max_steps);
  to.emulate_compute_ms = absl::GetFlag(FLAGS_emulate_compute_ms);
  to.overlap = absl::GetFlag(FLAGS_overlap);
  to.checkpoint_every = absl::GetFlag(FLAGS_checkpoint_every_steps);
  to.resume = absl::GetFlag(FLAGS_resume);
  if (absl::Status s = CheckTrainer(to); !s.ok()) return s;
  return to;
}

absl::StatusOr<worker::WorkerOptions> WorkerOptionsFromFlags() {
  absl::StatusOr<worker::RankWorld> rw = worker::ResolveRankWorld(
      absl::GetFlag(FLAGS_rank), absl::GetFlag(FLAGS_world), &std::getenv);
  if (!rw.ok()) return rw.status();
  worker::WorkerOptions o;
  absl::StatusOr<ps::ClientOptions> client = ClientOptionsFromFlags(rw->rank);
  if (!client.ok()) return client.status();
  absl::StatusOr<worker::TrainerOptions> trainer = TrainerOptionsFromFlags(*rw);
  if (!trainer.ok()) return trainer.status();
  o.client = *std::move(client);
  o.trainer = *std::move(trainer);
  o.evaluate_only = absl::GetFlag(FLAGS_evaluate_only);
  o.rank_source = rw->source;
  o.ready_timeout = absl::Seconds(absl::GetFlag(FLAGS_ready_timeout_s));
  o.blas_threads = std::max(1, absl::GetFlag(FLAGS_blas_threads));
  o.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  o.metrics_host = absl::GetFlag(FLAGS_metrics_host);
  if (o.metrics_port < -1 || o.metrics_port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--metrics_port=", o.metrics_port, " is not in -1..65535"));
  }
  o.trace_path = absl::GetFlag(FLAGS_trace);
  o.trace_name = absl::GetFlag(FLAGS_trace_name);
  if (o.trace_name.empty()) o.trace_name = absl::StrCat("worker-", rw->rank);
  return o;
}

absl::Status RunBenchFromFlags(const std::string& bench) {
  if (bench == "model") {
    worker::ModelBenchOptions o;
    o.model = absl::GetFlag(FLAGS_model);
    o.batch = absl::GetFlag(FLAGS_batch);
    o.blas_threads = absl::GetFlag(FLAGS_blas_threads);
    o.length = absl::Seconds(absl::GetFlag(FLAGS_bench_seconds));
    o.json = absl::GetFlag(FLAGS_json);
    return worker::RunModelBench(o);
  }
  if (bench == "loader") {
    worker::LoaderBenchOptions o;
    o.data = absl::GetFlag(FLAGS_data);
    o.loader = absl::GetFlag(FLAGS_loader);
    o.batch = absl::GetFlag(FLAGS_batch);
    o.reader_threads = absl::GetFlag(FLAGS_reader_threads);
    o.prefetch_batches = absl::GetFlag(FLAGS_prefetch_batches);
    return worker::RunLoaderBench(o);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--bench=", bench, " is not model or loader"));
}

}  // namespace

int main(int argc, char** argv) {
  const absl::Time start = absl::Now();
  ps::GrpcRuntime grpc_runtime;
  ps::InitProgram(argc, argv,
                  "trains a model against shardps servers.\n"
                  "  shardps-worker --server_addrs=h1:7070,h2:7070 "
                  "--data=DIR --rank=0 --world=2 --run_dir=RUN\n"
                  "  shardps-worker --bench=model --model=mlp:784-256-256-10 "
                  "--batch=128 --json");
  absl::Status status;
  if (const std::string bench = absl::GetFlag(FLAGS_bench); !bench.empty()) {
    status = RunBenchFromFlags(bench);
  } else {
    absl::StatusOr<worker::WorkerOptions> options = WorkerOptionsFromFlags();
    status = options.ok() ? worker::RunWorker(*std::move(options), start)
                          : options.status();
  }
  if (!status.ok()) {
    absl::FPrintF(stderr, "shardps-worker: %s\n", status.ToString());
    return 1;
  }
  return 0;
}
