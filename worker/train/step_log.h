// A worker's per-step metrics file, RUN_DIR/metrics-RANK.csv: one line per
// step with its epoch, step, batch size, loss and phase times, and when it
// ended (wall clock, so the launcher can line up the workers' steps):
//   epoch,step,batch,loss,read_ms,compute_ms,pull_ms,push_ms,end_unix_s
// Each line is flushed as it is written, so a killed worker's file is whole
// up to its last step; a rejoining worker appends.
//
// Thread-safety: owned and used by the training thread.
#ifndef SHARDPS_WORKER_TRAIN_STEP_LOG_H_
#define SHARDPS_WORKER_TRAIN_STEP_LOG_H_

#include <cstdint>
#include <fstream>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/summary.pb.h"
#include "ps/obs/trace.h"
#include "worker/train/worker_metrics.h"

namespace worker {

class StepLog {
 public:
  // Creates the file with its header, or with `append` adds to it (after
  // cutting a last line left unfinished).
  static absl::StatusOr<std::unique_ptr<StepLog>> Open(const std::string& path,
                                                       bool append);
  StepLog(const StepLog&) = delete;
  StepLog& operator=(const StepLog&) = delete;

  absl::Status Append(int epoch, uint64_t step, int batch, float loss,
                      const StepTimes& times, absl::Time end);

 private:
  StepLog(std::string path, std::ofstream out)
      : path_(std::move(path)), out_(std::move(out)) {}

  const std::string path_;
  std::ofstream out_;
};

// A step's phases as spans of the calling thread (wait_for_data, pull,
// compute, push, between the five times given); nothing without a tracer.
void TraceStepPhases(ps::Tracer* tracer, absl::Time start, absl::Time got_batch,
                     absl::Time pulled, absl::Time computed, absl::Time pushed);
// Adds a step's phase times to the summary's totals.
void AddPhaseSeconds(const StepTimes& times, shardps::WorkerSummary* summary);

}  // namespace worker

#endif  // SHARDPS_WORKER_TRAIN_STEP_LOG_H_
