// shardps-sim: simulates one shardps job on SimGrid (job_model.h) and prints
// its init time and steady samples/s as one JSON line.
//
//   shardps-sim --calibration=FILE --workers=1024 --servers=64
//       --loader=parallel --server_link=10gbit ... [--steps=N | --steady]
#include <chrono>
#include <cstdio>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "experiments/sim/inputs.h"
#include "experiments/sim/job_model.h"

ABSL_FLAG(std::string, calibration, "",
          "Calibration file (experiments/scale.py writes it).");
ABSL_FLAG(int, workers, 1, "Workers (N).");
ABSL_FLAG(int, servers, 1, "Servers, one shard each (S).");
ABSL_FLAG(std::string, loader, "parallel", "sequential or parallel.");
ABSL_FLAG(std::string, consistency, "async", "async or sync.");
ABSL_FLAG(std::string, compression, "none",
          "Values on the wire: none, fp16, bf16 or onebit (pushes; pulls "
          "float32), as shardps-worker --compression.");
ABSL_FLAG(double, param_bytes, 1077288,
          "Model size, bytes of float32 (with --layers: theirs).");
ABSL_FLAG(std::string, overlap, "none",
          "none, or layer: each layer's exchange started by its gradient "
          "and awaited by its forward (needs --layers; async only).");
ABSL_FLAG(std::string, layers, "",
          "The model's parameterised layers in forward order, "
          "PARAMS:FORWARD_AT:GRADIENT_AT,... (fractions of a step's "
          "compute; experiments/perfmodel.py sim_layers).");
ABSL_FLAG(double, dataset_bytes, 56808000, "Training set, bytes.");
ABSL_FLAG(double, sample_bytes, 3156, "One record, bytes.");
ABSL_FLAG(int, batch, 16, "Samples per step.");
ABSL_FLAG(int, steps, 20, "Steps per worker.");
ABSL_FLAG(double, compute_ms, 100, "Forward/backward per step, ms.");
ABSL_FLAG(int, chunk_kb, 1024, "Largest payload of one call, KiB.");
ABSL_FLAG(int, prefetch_batches, 8, "Parallel loader's ring, batches.");
ABSL_FLAG(std::string, server_link, "100mbit", "Each server's link (tc).");
ABSL_FLAG(std::string, worker_link, "500mbit", "Each worker's link (tc).");
ABSL_FLAG(std::string, storage_link, "400mbit", "The storage host's link.");
ABSL_FLAG(double, latency_ms, 0, "One-way latency between hosts, ms.");
ABSL_FLAG(int, shared_cores, 0,
          "> 0: every process shares one machine of this many cores (the "
          "emulated cluster); 0: hosts have CPUs of their own.");
ABSL_FLAG(int, server_cores, 8, "Cores of a server host (shared_cores 0).");
ABSL_FLAG(int, worker_cores, 1,
          "Cores of a worker host for its client work (shared_cores 0).");
ABSL_FLAG(uint64_t, seed, 1, "Seed of the transfers' variation.");
ABSL_FLAG(bool, every_shard, false,
          "Simulate every shard's server and calls (slow at scale); by default "
          "the S servers are one host of S times the link and cores, the same "
          "by symmetry (job.h). Always so with --shared_cores.");

namespace {

absl::StatusOr<double> Rate(const char* flag, const std::string& value) {
  absl::StatusOr<double> rate = sim::ParseRate(value);
  if (!rate.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, ": ", rate.status().message()));
  }
  return rate;
}

absl::Status WireRatios(const std::string& compression, sim::JobSpec* job) {
  if (compression == "none") return absl::OkStatus();
  if (compression == "fp16" || compression == "bf16") {
    job->pull_ratio = job->push_ratio = 0.5;
  } else if (compression == "onebit") {
    // A bit a value plus two floats per 256-value block (ps/wire/
    // value_codec.h); pulls float32.
    job->push_ratio = (8 + 256 / 8) / (4.0 * 256);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "--compression must be none, fp16, bf16 or onebit, got ", compression));
  }
  return absl::OkStatus();
}

// --overlap and --layers; the layers' bytes are the model's, and a
// --param_bytes set beside them (to other than its default) must say the
// same.
absl::Status LayersFromFlags(sim::JobSpec* job) {
  const std::string overlap = absl::GetFlag(FLAGS_overlap);
  if (overlap != "none" && overlap != "layer") {
    return absl::InvalidArgumentError(
        absl::StrCat("--overlap must be none or layer, got ", overlap));
  }
  job->overlap =
      overlap == "layer" ? sim::Overlap::kLayer : sim::Overlap::kNone;
  const std::string text = absl::GetFlag(FLAGS_layers);
  if (text.empty()) return absl::OkStatus();
  absl::StatusOr<std::vector<sim::LayerTiming>> layers = sim::ParseLayers(text);
  if (!layers.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--layers: ", layers.status().message()));
  }
  double bytes = 0;
  for (const sim::LayerTiming& l : *layers) bytes += l.bytes;
  const absl::CommandLineFlag* given = absl::FindCommandLineFlag("param_bytes");
  if (given->CurrentValue() != given->DefaultValue() &&
      bytes != job->param_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("--param_bytes ", job->param_bytes,
                     " is not the --layers' ", bytes, " bytes"));
  }
  job->param_bytes = bytes;
  job->layers = *std::move(layers);
  return absl::OkStatus();
}

absl::StatusOr<sim::JobSpec> JobFromFlags() {
  sim::JobSpec job;
  job.workers = absl::GetFlag(FLAGS_workers);
  job.servers = absl::GetFlag(FLAGS_servers);
  const std::string loader = absl::GetFlag(FLAGS_loader);
  if (loader != "sequential" && loader != "parallel") {
    return absl::InvalidArgumentError(
        absl::StrCat("--loader must be sequential or parallel, got ", loader));
  }
  job.loader = loader == "sequential" ? sim::Loader::kSequential
                                      : sim::Loader::kParallel;
  const std::string consistency = absl::GetFlag(FLAGS_consistency);
  if (consistency != "async" && consistency != "sync") {
    return absl::InvalidArgumentError(
        absl::StrCat("--consistency must be async or sync, got ", consistency));
  }
  job.consistency = consistency == "sync" ? sim::Consistency::kSync
                                          : sim::Consistency::kAsync;
  if (absl::Status s = WireRatios(absl::GetFlag(FLAGS_compression), &job);
      !s.ok()) {
    return s;
  }
  job.param_bytes = absl::GetFlag(FLAGS_param_bytes);
  if (absl::Status s = LayersFromFlags(&job); !s.ok()) return s;
  job.dataset_bytes = absl::GetFlag(FLAGS_dataset_bytes);
  job.sample_bytes = absl::GetFlag(FLAGS_sample_bytes);
  job.batch = absl::GetFlag(FLAGS_batch);
  job.steps = absl::GetFlag(FLAGS_steps);
  job.compute_seconds = absl::GetFlag(FLAGS_compute_ms) / 1e3;
  job.chunk_bytes = absl::GetFlag(FLAGS_chunk_kb) * 1024.0;
  job.prefetch_batches = absl::GetFlag(FLAGS_prefetch_batches);
  job.every_shard = absl::GetFlag(FLAGS_every_shard);
  job.seed = absl::GetFlag(FLAGS_seed);
  return job;
}

absl::StatusOr<sim::ClusterSpec> ClusterFromFlags() {
  sim::ClusterSpec c;
  for (auto [flag, value, out] :
       {std::tuple{"server_link", absl::GetFlag(FLAGS_server_link),
                   &c.server_link},
        std::tuple{"worker_link", absl::GetFlag(FLAGS_worker_link),
                   &c.worker_link},
        std::tuple{"storage_link", absl::GetFlag(FLAGS_storage_link),
                   &c.storage_link}}) {
    absl::StatusOr<double> rate = Rate(flag, value);
    if (!rate.ok()) return rate.status();
    *out = *rate;
  }
  c.latency = absl::GetFlag(FLAGS_latency_ms) / 1e3;
  c.shared_cores = absl::GetFlag(FLAGS_shared_cores);
  c.server_cores = absl::GetFlag(FLAGS_server_cores);
  c.worker_cores = absl::GetFlag(FLAGS_worker_cores);
  return c;
}

absl::Status Run() {
  if (absl::GetFlag(FLAGS_calibration).empty()) {
    return absl::InvalidArgumentError(
        "--calibration is required (experiments/scale.py writes one)");
  }
  absl::StatusOr<sim::Calibration> calibration =
      sim::ReadCalibration(absl::GetFlag(FLAGS_calibration));
  if (!calibration.ok()) return calibration.status();
  absl::StatusOr<sim::JobSpec> job = JobFromFlags();
  if (!job.ok()) return job.status();
  absl::StatusOr<sim::ClusterSpec> cluster = ClusterFromFlags();
  if (!cluster.ok()) return cluster.status();
  const auto start = std::chrono::steady_clock::now();
  absl::StatusOr<sim::SimResult> r =
      sim::Simulate(*cluster, *job, *calibration);
  if (!r.ok()) return r.status();
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  absl::PrintF(
      "{\"workers\":%d,\"servers\":%d,\"loader\":\"%s\",\"overlap\":\"%s\","
      "\"steps\":%d,"
      "\"init_seconds\":%.6f,\"samples_per_second\":%.4f,"
      "\"first_half\":%.4f,\"second_half\":%.4f,"
      "\"pull_ms\":%.3f,\"push_ms\":%.3f,"
      "\"simulated_seconds\":%.4f,\"wall_seconds\":%.3f}\n",
      job->workers, job->servers, absl::GetFlag(FLAGS_loader),
      absl::GetFlag(FLAGS_overlap), job->steps, r->init_seconds,
      r->samples_per_second, r->first_half, r->second_half,
      1e3 * r->pull_seconds, 1e3 * r->push_seconds, r->simulated_seconds, wall);
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Simulates a shardps job on SimGrid; prints one JSON line.");
  absl::ParseCommandLine(argc, argv);
  if (absl::Status s = Run(); !s.ok()) {
    std::fprintf(stderr, "shardps-sim: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
