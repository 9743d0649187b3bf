// A worker's own checkpoint: where in its epochs it is (epoch, batch of the
// epoch, steps and samples done), in RUN_DIR/worker-RANK.checkpoint.json
// (proto/summary.proto WorkerCheckpoint), so that a restarted worker can
// rejoin a run (--resume) where its last save left it.
//
// Thread-safety: owned and used by the training thread.
#ifndef SHARDPS_WORKER_TRAIN_POSITION_H_
#define SHARDPS_WORKER_TRAIN_POSITION_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "proto/summary.pb.h"
#include "ps/base/log.h"
#include "worker/train/trainer.h"

namespace worker {

class Position {
 public:
  // Where this worker starts: the beginning, or with options.resume the
  // saved position, which must be of this configuration (rank, world,
  // model, seed, batch; FAILED_PRECONDITION naming the file otherwise).
  // What it found is reported to `log`.
  static absl::StatusOr<Position> Start(const TrainerOptions& options,
                                        ps::LogSink* log);

  const shardps::WorkerCheckpoint& saved() const { return saved_; }
  // Whether training continues from an earlier process's position.
  bool resumed() const { return saved_.steps() > 0 || saved_.epoch() > 0; }

  // Saves that the next batch is `epoch_step` of `epoch`, after `steps`
  // steps and `samples` samples; written whole (renamed into place).
  absl::Status Save(int epoch, uint64_t epoch_step, uint64_t steps,
                    uint64_t samples);

 private:
  Position(shardps::WorkerCheckpoint saved, std::string path)
      : saved_(std::move(saved)), path_(std::move(path)) {}

  shardps::WorkerCheckpoint saved_;
  std::string path_;
};

// Cuts `path` after its last newline (a no-op for a missing file): a line
// cut short by a kill goes before the file is appended to again.
absl::Status TruncateToLastLine(const std::string& path);

}  // namespace worker

#endif  // SHARDPS_WORKER_TRAIN_POSITION_H_
