// shardps-sim's model of one shardps job (DESIGN.md "Scale simulation"): the
// workers of worker_actor.h on the platform of platform.h, run on SimGrid
// until every worker took its steps, and summarised the way shardps-launch
// summarises a real run (worker/launch/run_record.cc).
//
// Thread-safety: Simulate creates SimGrid's engine, of which a process may
// have one: call it once per process.
#ifndef SHARDPS_EXPERIMENTS_SIM_JOB_MODEL_H_
#define SHARDPS_EXPERIMENTS_SIM_JOB_MODEL_H_

#include <vector>

#include "absl/status/statusor.h"
#include "experiments/sim/job.h"

namespace sim {

// INVALID_ARGUMENT naming the field when a spec cannot be simulated.
absl::Status CheckSpecs(const ClusterSpec& cluster, const JobSpec& job,
                        const Calibration& calibration);

absl::StatusOr<SimResult> Simulate(const ClusterSpec& cluster,
                                   const JobSpec& job,
                                   const Calibration& calibration);

// One step of one worker alone: compute, then its pull and push at the
// slower of its link and the servers' together (JobSpec::
// phase_spread_seconds).
double UncontendedStep(const ClusterSpec& cluster, const JobSpec& job,
                       const Calibration& calibration);

// The launcher's figures from each worker's init and step end times: init
// is the slowest worker's; the rate counts samples_per_step[w] per step of
// worker w ending inside the window where every worker was
// training.
SimResult Summarize(const std::vector<double>& inits,
                    std::vector<std::vector<double>> step_ends,
                    const std::vector<double>& samples_per_step);

}  // namespace sim

#endif  // SHARDPS_EXPERIMENTS_SIM_JOB_MODEL_H_
