// Checkpointer keeps one server's checkpoint in its directory: it restores
// the latest one when the server starts, writes a new one every `every`
// (and when asked, e.g. on SIGTERM), and holds the directory's lock so that
// two servers never share it.
//
// Directory contents: `checkpoint` (the latest, ps/table/checkpoint.h),
// `checkpoint.tmp` while one is being written (a leftover is a torn write and
// is deleted, never loaded), and `LOCK`.
//
// Thread-safety: all methods are safe to call concurrently, except that
// StartPeriodic and StopPeriodic belong to the thread that owns the object.
#ifndef SHARDPS_PS_SERVER_CHECKPOINTER_H_
#define SHARDPS_PS_SERVER_CHECKPOINTER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "ps/base/log.h"
#include "ps/table/table_registry.h"

namespace ps {

struct CheckpointOptions {
  std::string dir;  // created, with its parents, if missing
  absl::Duration every = absl::ZeroDuration();  // 0: only when asked
  // Restores, writes and failed periodic writes are reported here; null:
  // stderr. Must outlive the Checkpointer.
  LogSink* log = nullptr;
};

class Checkpointer {
 public:
  // Creates and locks the directory (FAILED_PRECONDITION names it if another
  // process holds the lock), deletes a torn temporary file, and restores the
  // latest checkpoint into `registry`, which must be empty. A damaged
  // checkpoint or one of another job is an error: starting empty instead
  // would silently lose the model. `registry` must outlive the Checkpointer.
  static absl::StatusOr<std::unique_ptr<Checkpointer>> Open(
      CheckpointOptions options, TableRegistry* registry);

  Checkpointer(const Checkpointer&) = delete;
  Checkpointer& operator=(const Checkpointer&) = delete;
  // Stops the periodic writes (without a final one) and unlocks.
  ~Checkpointer();

  // Starts writing every options.every, if that is > 0. Failures are logged
  // and retried at the next period; serving goes on.
  void StartPeriodic();
  // Stops the periodic writes; returns once none is running.
  void StopPeriodic();

  // Takes a snapshot of every table and writes it. Errors name the file.
  absl::Status WriteNow();

  // The latest checkpoint's path.
  std::string path() const;
  // True when Open restored tables from a checkpoint.
  bool restored() const { return restored_; }
  uint64_t written() const { return written_.load(std::memory_order_relaxed); }

 private:
  Checkpointer(CheckpointOptions options, TableRegistry* registry, int lock_fd)
      : options_(std::move(options)), registry_(*registry), lock_fd_(lock_fd) {}
  absl::Status Restore();
  void RunPeriodic();

  const CheckpointOptions options_;
  TableRegistry& registry_;
  const int lock_fd_;
  bool restored_ = false;
  std::atomic<uint64_t> written_{0};

  absl::Mutex write_mu_;  // one write at a time; guards the buffers
  std::vector<TableSnapshot> buffers_ ABSL_GUARDED_BY(write_mu_);

  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread periodic_;
};

}  // namespace ps

#endif  // SHARDPS_PS_SERVER_CHECKPOINTER_H_
