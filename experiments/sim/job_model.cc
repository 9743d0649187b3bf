#include "experiments/sim/job_model.h"

#include <xbt/log.h>

#include <algorithm>
#include <cmath>
#include <simgrid/s4u.hpp>
#include <utility>

#include "absl/strings/str_cat.h"
#include "experiments/sim/platform.h"
#include "experiments/sim/worker_actor.h"

namespace sim {
namespace {

// Samples of steps ending in (begin, end], per second.
double RateIn(const std::vector<std::vector<double>>& step_ends,
              const std::vector<double>& samples_per_step, double begin,
              double end) {
  if (end <= begin) return 0;
  double samples = 0;
  for (size_t w = 0; w < step_ends.size(); ++w) {
    for (double t : step_ends[w]) {
      if (t > begin && t <= end) samples += samples_per_step[w];
    }
  }
  return samples / (end - begin);
}

absl::Status Positive(const char* name, double value) {
  if (value > 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(name, " must be > 0, got ", value));
}

absl::Status AtLeastZero(const char* name, double value) {
  if (value >= 0) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(name, " must be >= 0, got ", value));
}

// The layers of an overlapped job: async only (a sync step's answers wait
// for every worker's push of that layer, which is not simulated), each
// with bytes, its offsets inside the step, and together the model.
absl::Status CheckLayers(const JobSpec& job) {
  if (job.overlap == Overlap::kNone) return absl::OkStatus();
  if (job.consistency != Consistency::kAsync) {
    return absl::InvalidArgumentError(
        "overlap=layer is simulated for async consistency only");
  }
  if (job.layers.empty()) {
    return absl::InvalidArgumentError("overlap=layer needs the model's layers");
  }
  double bytes = 0;
  for (size_t i = 0; i < job.layers.size(); ++i) {
    const LayerTiming& l = job.layers[i];
    if (!(l.bytes > 0) || !(l.forward_at >= 0) ||
        !(l.forward_at <= l.gradient_at) || !(l.gradient_at <= 1)) {
      return absl::InvalidArgumentError(
          absl::StrCat("layer ", i,
                       ": needs bytes > 0 and 0 <= forward_at <= gradient_at "
                       "<= 1, got ",
                       l.bytes, " bytes, ", l.forward_at, ", ", l.gradient_at));
    }
    bytes += l.bytes;
  }
  if (std::abs(bytes - job.param_bytes) > 1e-9 * job.param_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the layers have ", bytes, " bytes, param_bytes is ", job.param_bytes));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckSpecs(const ClusterSpec& cluster, const JobSpec& job,
                        const Calibration& calibration) {
  for (const auto& [name, value] :
       {std::pair{"server_link", cluster.server_link},
        std::pair{"worker_link", cluster.worker_link},
        std::pair{"storage_link", cluster.storage_link},
        std::pair{"workers", static_cast<double>(job.workers)},
        std::pair{"servers", static_cast<double>(job.servers)},
        std::pair{"param_bytes", job.param_bytes},
        std::pair{"pull_ratio", job.pull_ratio},
        std::pair{"push_ratio", job.push_ratio},
        std::pair{"batch", static_cast<double>(job.batch)},
        std::pair{"steps", static_cast<double>(job.steps)},
        std::pair{"chunk_bytes", job.chunk_bytes},
        std::pair{"server_cores", static_cast<double>(cluster.server_cores)},
        std::pair{"worker_cores", static_cast<double>(cluster.worker_cores)},
        std::pair{"pull_efficiency", calibration.pull_efficiency},
        std::pair{"push_efficiency", calibration.push_efficiency},
        std::pair{"storage_efficiency", calibration.storage_efficiency}}) {
    if (absl::Status s = Positive(name, value); !s.ok()) return s;
  }
  if (calibration.startup_threads < 1 ||
      calibration.startup_threads != std::floor(calibration.startup_threads)) {
    return absl::InvalidArgumentError(
        absl::StrCat("startup_threads must be a whole number >= 1, got ",
                     calibration.startup_threads));
  }
  for (const auto& [name, value] :
       {std::pair{"latency", cluster.latency},
        std::pair{"shared_cores", static_cast<double>(cluster.shared_cores)},
        std::pair{"dataset_bytes", job.dataset_bytes},
        std::pair{"sample_bytes", job.sample_bytes},
        std::pair{"compute_seconds", job.compute_seconds},
        std::pair{"startup_wait", calibration.startup_wait},
        std::pair{"startup_cpu", calibration.startup_cpu},
        std::pair{"startup_cpu_per_server", calibration.startup_cpu_per_server},
        std::pair{"launch_cpu", calibration.launch_cpu},
        std::pair{"read_cpu_per_byte", calibration.read_cpu_per_byte},
        std::pair{"pull_delay", calibration.pull_delay},
        std::pair{"push_delay", calibration.push_delay},
        std::pair{"call_cpu", calibration.call_cpu},
        std::pair{"client_cpu_per_byte", calibration.client_cpu_per_byte},
        std::pair{"server_cpu_per_byte", calibration.server_cpu_per_byte},
        std::pair{"wire_cpu_per_byte", calibration.wire_cpu_per_byte},
        std::pair{"transfer_cv", calibration.transfer_cv},
        std::pair{"queued_push_bytes", calibration.queued_push_bytes}}) {
    if (absl::Status s = AtLeastZero(name, value); !s.ok()) return s;
  }
  return CheckLayers(job);
}

SimResult Summarize(const std::vector<double>& inits,
                    std::vector<std::vector<double>> step_ends,
                    const std::vector<double>& samples_per_step) {
  SimResult r;
  double begin = 0, end = 1e300;
  for (size_t w = 0; w < step_ends.size(); ++w) {
    r.init_seconds = std::max(r.init_seconds, inits[w]);
    if (step_ends[w].empty()) {
      end = 0;
      continue;
    }
    begin = std::max(begin, step_ends[w].front());
    end = std::min(end, step_ends[w].back());
    r.simulated_seconds = std::max(r.simulated_seconds, step_ends[w].back());
  }
  r.samples_per_second = RateIn(step_ends, samples_per_step, begin, end);
  // The halves split at the step end nearest the window's middle, so that
  // a periodic run's halves are equal.
  double middle = begin;
  for (const std::vector<double>& w : step_ends) {
    for (double t : w) {
      if (t > begin && t <= end &&
          std::abs(t - (begin + end) / 2) <
              std::abs(middle - (begin + end) / 2)) {
        middle = t;
      }
    }
  }
  r.first_half = RateIn(step_ends, samples_per_step, begin, middle);
  r.second_half = RateIn(step_ends, samples_per_step, middle, end);
  r.step_ends = std::move(step_ends);
  return r;
}

double UncontendedStep(const ClusterSpec& cluster, const JobSpec& job,
                       const Calibration& calibration) {
  const double rate =
      std::min(cluster.worker_link, cluster.server_link * job.servers);
  return job.compute_seconds +
         job.param_bytes *
             (job.pull_ratio / calibration.pull_efficiency +
              job.push_ratio / calibration.push_efficiency) /
             rate;
}

absl::StatusOr<SimResult> Simulate(const ClusterSpec& cluster,
                                   const JobSpec& spec,
                                   const Calibration& calibration) {
  if (absl::Status s = CheckSpecs(cluster, spec, calibration); !s.ok()) {
    return s;
  }
  JobSpec job = spec;
  if (job.consistency == Consistency::kAsync) {
    job.phase_spread_seconds = UncontendedStep(cluster, job, calibration);
  }
  xbt_log_control_set("xbt_cfg.thres:warning");  // config echoes
  simgrid::s4u::Engine engine("shardps-sim");
  // The plain max-min sharing of link capacities: no TCP correction
  // factors, no acknowledgement traffic; the calibrated pull and push
  // efficiencies stand for both.
  simgrid::s4u::Engine::set_config("network/model:CM02");
  simgrid::s4u::Engine::set_config("network/crosstraffic:0");
  const Platform platform = BuildPlatform(cluster, job, calibration);
  JobState state(job.workers, static_cast<int>(platform.servers.size()));
  const std::vector<double> samples_per_step(job.workers, job.batch);
  if (cluster.shared_cores > 0) {
    simgrid::s4u::Actor::create(
        "launcher", platform.worker_cpus[0],
        [&job, &calibration, &platform, &state] {
          for (int w = 0; w < job.workers; ++w) {
            simgrid::s4u::this_actor::execute(calibration.launch_cpu *
                                              kFlopsPerSecond);
            StartWorker(w, job, calibration, platform, &state);
          }
        });
  } else {
    for (int w = 0; w < job.workers; ++w) {
      StartWorker(w, job, calibration, platform, &state);
    }
  }
  engine.run();
  SimResult r =
      Summarize(state.inits, std::move(state.step_ends), samples_per_step);
  const double steps = static_cast<double>(job.workers) * job.steps;
  r.pull_seconds = state.pull_seconds / steps;
  r.push_seconds = state.push_seconds / steps;
  return r;
}

}  // namespace sim
