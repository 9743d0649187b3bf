// What a run leaves in its directory, read back for its summary
// (proto/summary.proto RunSummary): the workers' summaries and step logs,
// the machine's CPU use, and the Prometheus targets file written before the
// processes start.
//
// Thread-safety: free functions without shared state.
#ifndef SHARDPS_WORKER_LAUNCH_RUN_RECORD_H_
#define SHARDPS_WORKER_LAUNCH_RUN_RECORD_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "proto/summary.pb.h"
#include "worker/launch/host_slot.h"

namespace worker {

// Busy and total jiffies of the whole machine (/proc/stat's first line).
struct CpuTimes {
  double busy = 0;
  double total = 0;
};
CpuTimes ReadCpuTimes();

// When a worker's step ended (unix seconds) and how many samples it took.
using StepEnd = std::pair<double, int>;

// (end time, samples) of every step in a worker's metrics file.
std::vector<StepEnd> StepEnds(const std::string& path);

// Steps a worker has logged: lines of its metrics file after the header.
int64_t StepsLogged(const std::string& path);

// Samples per second of all workers together while all of them train: the
// samples of steps ending in (latest first step, earliest last step] over
// that window. 0 when the windows do not overlap or a worker has no steps.
double SteadySamplesPerSecond(const std::vector<std::vector<StepEnd>>& workers);

// Adds RUN_DIR/summary-R.json of workers 0..workers-1 (a worker that failed
// wrote none) and the rates and times derived from them to `summary`.
void AddWorkerSummaries(const std::string& run_dir, int workers,
                        shardps::RunSummary* summary);

// RUN_DIR/prometheus-targets.json: every process's metrics endpoint (server
// i on base_port + i, worker r on base_port + S + r), in the format of
// Prometheus' file_sd_configs, labelled with its role, name and job.
// Joins RUN_DIR/<process>.trace.json of each of `processes` into
// RUN_DIR/trace.json; what went wrong (a process that left no trace, a
// failed merge), one line each.
std::vector<std::string> MergeRunTraces(
    const std::string& run_dir, const std::vector<std::string>& processes);

absl::Status WriteMetricsTargets(const std::string& path,
                                 const std::string& job, int base_port,
                                 const std::vector<HostSlot>& servers,
                                 const std::vector<HostSlot>& workers);

}  // namespace worker

#endif  // SHARDPS_WORKER_LAUNCH_RUN_RECORD_H_
