// shardps-bench: push and pull throughput and latency of the parameter server.
// Each of --workers threads owns a ps::Client (as a worker process would) and
// moves the whole --params table per call: first every thread pushes for
// --seconds, then every thread pulls for --seconds.
#include <cblas.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/barrier.h"
#include "absl/time/clock.h"
#include "loader/loader.h"
#include "model/mlp.h"
#include "ps/client.h"
#include "ps/program.h"
#include "ps/security.h"
#include "ps/server_addrs.h"
#include "ps/server_process.h"
#include "ps/value_codec.h"

ABSL_FLAG(int, spawn_servers, 0,
          "Start this many shardps-server processes on loopback and bench "
          "them; 0 uses --server_addrs instead.");
ABSL_FLAG(std::string, auth_token_file, "",
          "--server_addrs: the job's token file, sent with every call.");
ABSL_FLAG(std::string, tls_ca, "",
          "--server_addrs: PEM CA of the servers' certificates (TLS).");
ABSL_FLAG(std::string, tls_cert, "",
          "--server_addrs: PEM client certificate (mutual TLS).");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert.");
ABSL_FLAG(std::string, server_addrs, "",
          "Servers to bench, host:port,... or a pattern with {i} plus "
          "--num_servers.");
ABSL_FLAG(int, num_servers, 0, "Server count for a {i} --server_addrs.");
ABSL_FLAG(int, workers, 1, "Client threads, each with its own ps::Client.");
ABSL_FLAG(int64_t, params, 1000000, "Table size in float32 parameters.");
ABSL_FLAG(double, seconds, 5, "Seconds of pushing, then of pulling.");
ABSL_FLAG(bool, json, false, "Print one JSON line per run.");
ABSL_FLAG(std::string, job, "bench", "Job id (spawned servers get it too).");
ABSL_FLAG(int, chunk_kb, 1024, "Client chunk size in KiB.");
ABSL_FLAG(int, channels_per_server, 2, "TCP connections per server.");
ABSL_FLAG(int, inflight, 4, "Chunk calls in flight per server.");
ABSL_FLAG(std::string, compression, "none",
          "Values on the wire: none, fp16, bf16 (pulls and pushes) or onebit "
          "(pushes; pulls float32).");
ABSL_FLAG(std::string, mode, "ps",
          "What to measure: 'ps' (push/pull throughput of servers), "
          "'model' (training steps of --model on one thread, no network) or "
          "'loader' (one epoch of --data through --loader, against a plain "
          "sequential read of the same files).");
ABSL_FLAG(std::string, model, "mlp:784-256-256-10",
          "Model spec for --mode=model.");
ABSL_FLAG(int, batch, 128, "Batch size for --mode=model.");
ABSL_FLAG(int, blas_threads, 1, "OpenBLAS threads for --mode=model.");
ABSL_FLAG(std::string, data, "",
          "--mode=loader: a data set directory (with manifest.txt).");
ABSL_FLAG(std::string, loader, "parallel",
          "--mode=loader: parallel or sequential.");
ABSL_FLAG(int, reader_threads, 4, "--mode=loader: parallel loader threads.");
ABSL_FLAG(int, prefetch_batches, 8, "--mode=loader: parallel loader ring.");

namespace {

struct PhaseResult {
  double mbps = 0;
  double p50_ms = 0;
  double p99_ms = 0;
};

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * v.size()));
  return v[i];
}

// All threads start together, run `op` until the phase ends, and report the
// latency of every call; a failed call ends the run with its error.
absl::StatusOr<PhaseResult> RunPhase(
    std::vector<std::unique_ptr<ps::Client>>& clients, uint64_t params,
    absl::Duration length, bool push) {
  const int n = static_cast<int>(clients.size());
  std::vector<std::vector<double>> latencies(n);
  std::vector<absl::Status> errors(n);
  std::vector<uint64_t> calls(n, 0);
  absl::Barrier start(n + 1);
  std::vector<std::thread> threads;
  absl::Time begin;
  for (int w = 0; w < n; ++w) {
    threads.emplace_back([&, w] {
      std::vector<float> buffer(params, push ? 1e-6f : 0.0f);
      latencies[w].reserve(1 << 16);
      start.Block();
      const absl::Time stop = absl::Now() + length;
      while (absl::Now() < stop) {
        const absl::Time t0 = absl::Now();
        absl::Status s =
            push ? clients[w]->Push("bench", 0, params, buffer.data())
                 : clients[w]->Pull("bench", 0, params, buffer.data());
        if (!s.ok()) {
          errors[w] = s;
          return;
        }
        latencies[w].push_back(absl::ToDoubleMilliseconds(absl::Now() - t0));
        ++calls[w];
      }
    });
  }
  start.Block();
  begin = absl::Now();
  for (auto& t : threads) t.join();
  const double elapsed = absl::ToDoubleSeconds(absl::Now() - begin);
  std::vector<double> all;
  uint64_t total_calls = 0;
  for (int w = 0; w < n; ++w) {
    if (!errors[w].ok()) return errors[w];
    all.insert(all.end(), latencies[w].begin(), latencies[w].end());
    total_calls += calls[w];
  }
  PhaseResult r;
  r.mbps = total_calls * params * sizeof(float) / 1e6 / elapsed;
  r.p50_ms = Percentile(all, 0.50);
  r.p99_ms = Percentile(all, 0.99);
  return r;
}

int Fail(const absl::Status& s) {
  absl::FPrintF(stderr, "shardps-bench: %s\n", s.ToString());
  return 1;
}

// Training steps of the model alone: forward, backward and the SGD update of
// the flat parameter vector, on one fixed random batch.
int RunModelBench() {
  const std::string spec_text = absl::GetFlag(FLAGS_model);
  const int batch = absl::GetFlag(FLAGS_batch);
  const int threads = absl::GetFlag(FLAGS_blas_threads);
  const double seconds = absl::GetFlag(FLAGS_seconds);
  absl::StatusOr<model::MlpSpec> spec = model::ParseModelSpec(spec_text);
  if (!spec.ok()) return Fail(spec.status());
  if (batch < 1 || threads < 1 || seconds <= 0) {
    return Fail(absl::InvalidArgumentError(
        "--batch and --blas_threads must be >= 1 and --seconds > 0"));
  }
  openblas_set_num_threads(threads);
  const model::Mlp mlp(*std::move(spec));
  std::vector<float> params(mlp.num_params()), grad(mlp.num_params());
  mlp.Initialize(1, params.data());
  std::mt19937 gen(2);
  std::uniform_real_distribution<float> pixel(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(batch) * mlp.input_width());
  for (float& v : x) v = pixel(gen);
  std::vector<int32_t> labels(batch);
  for (int i = 0; i < batch; ++i) labels[i] = i % mlp.num_classes();
  model::Mlp::Workspace ws = mlp.MakeWorkspace(batch);
  auto step = [&] {
    mlp.TrainStep(params.data(), x.data(), labels.data(), batch, grad.data(),
                  &ws);
    for (size_t i = 0; i < params.size(); ++i) params[i] -= 1e-3f * grad[i];
  };
  for (int i = 0; i < 5; ++i) step();  // warm caches and BLAS buffers
  uint64_t steps = 0;
  const absl::Time start = absl::Now();
  const absl::Time stop = start + absl::Seconds(seconds);
  while (absl::Now() < stop) {
    step();
    ++steps;
  }
  const double rate =
      steps * batch / absl::ToDoubleSeconds(absl::Now() - start);
  if (absl::GetFlag(FLAGS_json)) {
    absl::PrintF(
        "{\"mode\":\"model\",\"model\":\"%s\",\"batch\":%d,"
        "\"blas_threads\":%d,\"samples_per_s\":%.0f}\n",
        spec_text, batch, threads, rate);
  } else {
    absl::PrintF("%s batch %d, %d BLAS thread(s): %.0f samples/s\n", spec_text,
                 batch, threads, rate);
  }
  return 0;
}

// One epoch of the whole data set through a loader (world 1), and a plain
// read(2) of the same shard files in 1 MiB blocks for reference.
int RunLoaderBench() {
  absl::StatusOr<loader::Dataset> data =
      loader::OpenDataset(absl::GetFlag(FLAGS_data));
  if (!data.ok()) return Fail(data.status());
  uint64_t bytes = 0;
  for (const auto& shard : data->manifest.shards()) bytes += shard.bytes();

  absl::Time t0 = absl::Now();
  std::vector<char> block(1 << 20);
  for (size_t k = 0; k < data->indexes.size(); ++k) {
    const int fd = ::open(data->ShardPath(k).c_str(), O_RDONLY);
    if (fd < 0) return Fail(absl::NotFoundError(data->ShardPath(k)));
    while (::read(fd, block.data(), block.size()) > 0) {
    }
    ::close(fd);
  }
  const double plain_s = absl::ToDoubleSeconds(absl::Now() - t0);

  loader::LoaderOptions o;
  o.batch_size = absl::GetFlag(FLAGS_batch);
  o.reader_threads = absl::GetFlag(FLAGS_reader_threads);
  o.prefetch_batches = absl::GetFlag(FLAGS_prefetch_batches);
  const std::string kind = absl::GetFlag(FLAGS_loader);
  absl::StatusOr<std::unique_ptr<loader::Loader>> l =
      loader::MakeLoader(kind, *data, o);
  if (!l.ok()) return Fail(l.status());
  t0 = absl::Now();
  if (absl::Status s = (*l)->StartEpoch(0); !s.ok()) return Fail(s);
  double first_batch_s = -1;
  uint64_t records = 0;
  while (true) {
    absl::StatusOr<const loader::Batch*> b = (*l)->Next();
    if (!b.ok()) return Fail(b.status());
    if (*b == nullptr) break;
    if (first_batch_s < 0) {
      first_batch_s = absl::ToDoubleSeconds(absl::Now() - t0);
    }
    records += (*b)->size;
  }
  const double epoch_s = absl::ToDoubleSeconds(absl::Now() - t0);
  absl::PrintF(
      "{\"mode\":\"loader\",\"loader\":\"%s\",\"records\":%d,"
      "\"MB\":%.1f,\"first_batch_s\":%.4f,\"epoch_s\":%.4f,"
      "\"records_per_s\":%.0f,\"MBps\":%.1f,\"plain_read_MBps\":%.1f}\n",
      kind, records, bytes / 1e6, first_batch_s, epoch_s, records / epoch_s,
      bytes / 1e6 / epoch_s, bytes / 1e6 / plain_s);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  ps::GrpcRuntime grpc_runtime;
  ps::InitProgram(
      argc, argv,
      "push/pull throughput of shardps servers.\n"
      "  shardps-bench --spawn_servers=2 --workers=2 --params=1000000 --json\n"
      "  shardps-bench --mode=model --model=mlp:784-256-256-10 --batch=128");
  const std::string mode = absl::GetFlag(FLAGS_mode);
  if (mode == "model") return RunModelBench();
  if (mode == "loader") return RunLoaderBench();
  if (mode != "ps") {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("--mode=", mode, " is not ps, model or loader")));
  }
  const int spawn = absl::GetFlag(FLAGS_spawn_servers);
  const int workers = absl::GetFlag(FLAGS_workers);
  const int64_t params = absl::GetFlag(FLAGS_params);
  const double seconds = absl::GetFlag(FLAGS_seconds);
  const std::string job = absl::GetFlag(FLAGS_job);
  if (workers < 1 || params < 1 || seconds <= 0 || spawn < 0) {
    return Fail(absl::InvalidArgumentError(
        "--workers and --params must be >= 1, --seconds > 0, "
        "--spawn_servers >= 0"));
  }

  std::vector<std::unique_ptr<ps::ServerProcess>> servers;
  std::vector<std::string> addrs;
  std::string run_dir;
  if (spawn > 0) {
    char dir_template[] = "/tmp/shardps-bench-XXXXXX";
    if (mkdtemp(dir_template) == nullptr) {
      return Fail(absl::InternalError("cannot create a temporary directory"));
    }
    run_dir = dir_template;
    for (int i = 0; i < spawn; ++i) {
      ps::ServerProcessOptions o;
      o.binary = ps::SiblingBinary("shardps-server");
      o.run_dir = run_dir;
      o.name = absl::StrCat("server-", i);
      o.extra_args = {absl::StrCat("--job=", job)};
      absl::StatusOr<std::unique_ptr<ps::ServerProcess>> p =
          ps::ServerProcess::Spawn(o);
      if (!p.ok()) return Fail(p.status());
      addrs.push_back((*p)->address());
      servers.push_back(*std::move(p));
    }
  } else {
    absl::StatusOr<std::vector<std::string>> parsed = ps::ParseServerAddrs(
        absl::GetFlag(FLAGS_server_addrs), absl::GetFlag(FLAGS_num_servers));
    if (!parsed.ok()) {
      return Fail(absl::InvalidArgumentError(
          absl::StrCat("--server_addrs: ", parsed.status().message(),
                       " (or use --spawn_servers=S)")));
    }
    addrs = *std::move(parsed);
  }

  absl::StatusOr<std::string> token =
      ps::ReadTokenFile(absl::GetFlag(FLAGS_auth_token_file));
  if (!token.ok()) return Fail(token.status());
  absl::StatusOr<ps::WireEncodings> encodings =
      ps::EncodingsFor(absl::GetFlag(FLAGS_compression));
  if (!encodings.ok()) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("--compression: ", encodings.status().message())));
  }
  std::vector<std::unique_ptr<ps::Client>> clients;
  for (int w = 0; w < workers; ++w) {
    ps::ClientOptions o;
    o.pull_encoding = encodings->pull;
    o.push_encoding = encodings->push;
    o.auth_token = *token;
    o.tls = {absl::GetFlag(FLAGS_tls_cert), absl::GetFlag(FLAGS_tls_key),
             absl::GetFlag(FLAGS_tls_ca)};
    o.server_addrs = addrs;
    o.job = job;
    o.worker = w;
    o.chunk_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_chunk_kb)) << 10;
    o.channels_per_server = absl::GetFlag(FLAGS_channels_per_server);
    o.max_inflight_per_server = absl::GetFlag(FLAGS_inflight);
    absl::StatusOr<std::unique_ptr<ps::Client>> c = ps::Client::Connect(o);
    if (!c.ok()) return Fail(c.status());
    if (absl::Status s = (*c)->WaitReady(absl::Seconds(20)); !s.ok()) {
      return Fail(s);
    }
    ps::TableOptions table;
    table.name = "bench";
    table.num_params = params;
    table.optimizer.set_name("sgd");
    table.optimizer.set_learning_rate(0.01f);
    if (absl::Status s = (*c)->CreateTable(table); !s.ok()) return Fail(s);
    clients.push_back(*std::move(c));
  }

  // Warm up connections, flow-control windows and buffer pools.
  const absl::Duration warmup =
      absl::Milliseconds(std::min(1000.0, seconds * 200));
  for (bool push : {true, false}) {
    if (auto r = RunPhase(clients, params, warmup, push); !r.ok()) {
      return Fail(r.status());
    }
  }
  // Bytes on the wire (whole messages) per second of each phase.
  auto wire_bytes = [&](bool push) {
    uint64_t n = 0;
    for (const auto& c : clients) n += push ? c->push_bytes() : c->pull_bytes();
    return n;
  };
  uint64_t before = wire_bytes(true);
  absl::StatusOr<PhaseResult> push =
      RunPhase(clients, params, absl::Seconds(seconds), /*push=*/true);
  if (!push.ok()) return Fail(push.status());
  const double push_wire_mbps = (wire_bytes(true) - before) / seconds / 1e6;
  before = wire_bytes(false);
  absl::StatusOr<PhaseResult> pull =
      RunPhase(clients, params, absl::Seconds(seconds), /*push=*/false);
  if (!pull.ok()) return Fail(pull.status());
  const double pull_wire_mbps = (wire_bytes(false) - before) / seconds / 1e6;

  const int num_servers = static_cast<int>(addrs.size());
  if (absl::GetFlag(FLAGS_json)) {
    absl::PrintF(
        "{\"servers\":%d,\"workers\":%d,\"params\":%d,\"compression\":\"%s\","
        "\"push_MBps\":%.1f,\"pull_MBps\":%.1f,\"push_wire_MBps\":%.1f,"
        "\"pull_wire_MBps\":%.1f,\"push_p50_ms\":%.3f,\"push_p99_ms\":%.3f,"
        "\"pull_p50_ms\":%.3f,\"pull_p99_ms\":%.3f}\n",
        num_servers, workers, params, absl::GetFlag(FLAGS_compression),
        push->mbps, pull->mbps, push_wire_mbps, pull_wire_mbps, push->p50_ms,
        push->p99_ms, pull->p50_ms, pull->p99_ms);
  } else {
    absl::PrintF(
        "servers=%d workers=%d params=%d compression=%s (MB/s of float32 "
        "parameters; on the wire in brackets)\n"
        "  push %8.1f MB/s (%.1f)  p50 %.3f ms  p99 %.3f ms\n"
        "  pull %8.1f MB/s (%.1f)  p50 %.3f ms  p99 %.3f ms\n",
        num_servers, workers, params, absl::GetFlag(FLAGS_compression),
        push->mbps, push_wire_mbps, push->p50_ms, push->p99_ms, pull->mbps,
        pull_wire_mbps, pull->p50_ms, pull->p99_ms);
  }
  clients.clear();
  for (auto& s : servers) {
    if (absl::Status st = s->Stop(); !st.ok()) return Fail(st);
  }
  if (!run_dir.empty()) {
    for (int i = 0; i < spawn; ++i) {
      std::remove(absl::StrCat(run_dir, "/server-", i, ".log").c_str());
      std::remove(absl::StrCat(run_dir, "/server-", i, ".port").c_str());
    }
    rmdir(run_dir.c_str());
  }
  return 0;
}
