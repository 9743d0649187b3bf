#include "worker/train/position.h"

#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "ps/base/file_io.h"
#include "ps/base/json_file.h"

namespace worker {

absl::StatusOr<Position> Position::Start(const TrainerOptions& options,
                                         ps::LogSink* log) {
  shardps::WorkerCheckpoint start;
  start.set_rank(options.rank);
  start.set_world(options.world);
  start.set_model(options.model);
  start.set_seed(options.seed);
  start.set_batch(options.batch);
  std::string path = absl::StrCat(options.run_dir, "/worker-", options.rank,
                                  ".checkpoint.json");
  if (!options.resume) return Position(std::move(start), std::move(path));
  if (::access(path.c_str(), F_OK) != 0) {
    ps::Logf(log, "worker %d: no checkpoint %s, starting from the beginning",
             options.rank, path);
    return Position(std::move(start), std::move(path));
  }
  shardps::WorkerCheckpoint saved;
  if (absl::Status s = ps::ReadJsonFile(path, &saved); !s.ok()) return s;
  if (saved.rank() != start.rank() || saved.world() != start.world() ||
      saved.model() != start.model() || saved.seed() != start.seed() ||
      saved.batch() != start.batch()) {
    return absl::FailedPreconditionError(absl::StrCat(
        path,
        " is of another configuration (rank, world, model, seed or "
        "batch differ): ",
        saved.ShortDebugString()));
  }
  ps::Logf(log,
           "worker %d: resuming from %s at epoch %d, batch %d (%d steps "
           "done)",
           options.rank, path, saved.epoch(), saved.epoch_step(),
           saved.steps());
  return Position(std::move(saved), std::move(path));
}

absl::Status Position::Save(int epoch, uint64_t epoch_step, uint64_t steps,
                            uint64_t samples) {
  saved_.set_epoch(epoch);
  saved_.set_epoch_step(epoch_step);
  saved_.set_steps(steps);
  saved_.set_samples(samples);
  return ps::WriteJsonFile(saved_, path_);
}

absl::Status TruncateToLastLine(const std::string& path) {
  absl::StatusOr<std::string> text = ps::ReadFileToString(path);
  if (absl::IsNotFound(text.status())) return absl::OkStatus();
  if (!text.ok()) return text.status();
  const size_t last = text->rfind('\n');
  const size_t keep = last == std::string::npos ? 0 : last + 1;
  if (keep == text->size()) return absl::OkStatus();
  if (::truncate(path.c_str(), static_cast<off_t>(keep)) != 0) {
    return ps::ErrnoStatus(errno, "truncate", path);
  }
  return absl::OkStatus();
}

}  // namespace worker
