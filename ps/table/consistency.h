// Consistency orders the pushes and pulls of one table shard by the
// workers' clocks, as the table's ConsistencyConfig asks (DESIGN.md,
// "Consistency modes"; proto/shardps.proto):
//   async: a push is applied on arrival and a pull never waits.
//   sync (BSP): the pushes of clock t are summed; once every worker in the
//     barrier has pushed all of its keys for clock t, their average is
//     applied (one update, one version), and the pulls at clock t+1 waiting
//     for it are released. Each key is averaged over the workers that
//     pushed it: those in the barrier, and a worker dropped during clock t
//     for the keys it had pushed by then (its partial sums are kept).
//   ssp:K: pushes are applied on arrival; a pull at clock c waits until
//     every worker in the barrier has pushed all of its keys for every clock
//     up to c-K.
// Under sync and ssp a worker pushes its clocks in order, each key once per
// clock. A pull that has waited straggler_timeout_seconds for workers that
// have not pushed either ends the job's calls on the table with ABORTED,
// naming them ("fail"), or leaves them out of the barrier from then on
// ("drop", logged; their later pushes are refused).
//
// A waiting pull holds no thread: its continuation runs on the thread that
// releases it (the push that completes the barrier, or the straggler
// watchdog, one thread per sync/ssp shard).
//
// Thread-safety: all methods are safe to call concurrently.
#ifndef SHARDPS_PS_TABLE_CONSISTENCY_H_
#define SHARDPS_PS_TABLE_CONSISTENCY_H_

#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/checkpoint.pb.h"
#include "proto/shardps.pb.h"
#include "ps/base/log.h"
#include "ps/table/shard_store.h"
#include "ps/wire/float_pieces.h"
#include "ps/wire/range_partition.h"

namespace ps {

// A pull's continuation: OK when it may read the shard, or the error that
// ended its wait.
using PullContinuation = absl::AnyInvocable<void(absl::Status) &&>;

class Consistency {
 public:
  // Pulls waiting at once on one shard, at most; more is RESOURCE_EXHAUSTED.
  static constexpr size_t kMaxWaitingPulls = 1 << 16;

  // `config` must be valid; `store` must outlive this. `table` names the
  // table in messages; stragglers dropped or failing the job are reported
  // to `log` (null: stderr), which must outlive this.
  // `replicated`: see TableSettings::replicated (ps/table/table.h).
  Consistency(const shardps::ConsistencyConfig& config, std::string table,
              ShardStore* store, LogSink* log = nullptr,
              bool replicated = false);
  Consistency(const Consistency&) = delete;
  Consistency& operator=(const Consistency&) = delete;
  // Ends the waits still pending with UNAVAILABLE and stops the watchdog.
  ~Consistency();

  // Runs `then` once a pull by `worker` at `clock` may read the shard: at
  // once, or later on the thread that makes it possible. An error instead
  // ends its wait: INVALID_ARGUMENT for a worker outside the barrier or a
  // clock its own worker cannot reach (one that needs two or more further
  // pushes of that worker, which does not push while it waits), ABORTED
  // once the job failed, UNAVAILABLE once closed, RESOURCE_EXHAUSTED past
  // kMaxWaitingPulls. A pull at clock 0 never waits. Returns a ticket for
  // CancelPull while the pull waits; 0 when `then` has already run.
  uint64_t Pull(uint32_t worker, uint64_t clock, PullContinuation then);

  // Ends the wait of the pull `ticket` names, running its continuation with
  // `status` on this thread; nothing if it is no longer waiting (its
  // continuation ran or is running elsewhere). For a call its client
  // cancelled or whose deadline passed: it no longer counts as waiting, so
  // the straggler policy does not act for it.
  void CancelPull(uint64_t ticket, const absl::Status& status);

  // INVALID_ARGUMENT when `worker` is not in the barrier (sync, ssp: ids
  // num_workers and above); async tables take any id.
  absl::Status CheckWorker(uint32_t worker) const;

  // Takes a push whose keys and values ShardStore::CheckPush accepted:
  // applies it (async, ssp) or adds it to its clock's sum (sync, applying
  // the average when the clock is complete, at the lr_scale of the clock's
  // last push). Returns the table's version
  // after it. Nothing changes when it is refused: FAILED_PRECONDITION for a
  // clock out of order, keys pushed twice in a clock, or a dropped worker;
  // INVALID_ARGUMENT for a worker outside the barrier; ABORTED once the job
  // failed.
  absl::StatusOr<uint64_t> Push(uint32_t worker, uint64_t clock, KeyRange keys,
                                FloatPieces& gradient, float lr_scale = 1.0f);

  // Ends every wait, and refuses every later one, with `status` (the
  // server is shutting down).
  void Close(const absl::Status& status);
  // Ends the waits pending now with `status`; later pulls wait as before.
  void EndWaits(const absl::Status& status);

  // Copies the barrier (and, for sync, the sum being gathered, else it is
  // left empty) for a checkpoint. Call with no push in flight (the table's
  // snapshot lock).
  void Save(shardps::BarrierState* out, std::vector<float>* sum) const;
  // Takes the barrier back from a checkpoint (before any call, or with no
  // push in flight and no pull waiting: a replica catching up again);
  // `sum` as Save wrote it. INVALID_ARGUMENT, changing nothing, when it
  // does not fit this table.
  absl::Status Restore(const shardps::BarrierState& state,
                       std::vector<float> sum);
  // Whether a pull may have to wait (sync and ssp tables).
  bool pulls_may_wait() const { return mode_ != Mode::kAsync; }
  // Whether Save writes a sum array (sync tables).
  bool saves_sum() const { return mode_ == Mode::kSync; }

  // sync: clocks applied; ssp: clocks every worker in the barrier pushed;
  // async: 0.
  uint64_t clock() const;
  // Pulls waiting right now.
  size_t waiting_pulls() const;
  std::vector<uint32_t> dropped_workers() const;

 private:
  enum class Mode { kAsync, kSync, kSsp };

  struct WorkerProgress {
    uint64_t pushed = 0;            // clocks whose keys all arrived
    std::vector<KeyRange> claimed;  // keys of clock `pushed` accepted
    uint64_t done_keys = 0;         // of those, applied or summed
    // Pushes accepted and not yet applied or summed. A sync clock is not
    // applied while a dropped worker has one: its piece belongs to that
    // clock's sum, not the next one's.
    uint32_t in_flight = 0;
    bool dropped = false;
    // When it last had a push accepted (or the barrier was made): the
    // straggler policy acts only on workers silent for straggler_timeout.
    absl::Time last_push;
  };

  struct Waiter {
    uint64_t ticket;
    uint32_t worker;
    uint64_t need;  // the progress() that releases it
    absl::Time since;
    PullContinuation then;
  };

  // A continuation to run once mu_ is released.
  struct Release {
    PullContinuation then;
    absl::Status status;
  };

  uint64_t ProgressLocked() const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // Whether worker `w` keeps progress() below `need`.
  bool BehindLocked(const WorkerProgress& w, uint64_t need) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  absl::Status CheckPushLocked(uint32_t worker, uint64_t clock, KeyRange keys)
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  // sync: applies every complete clock; then releases the waiters that
  // progress() now lets through.
  void AdvanceLocked(std::vector<Release>* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // sync: applies the average of clock applied_'s sum.
  void ApplyAverageLocked(size_t members) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FailAllLocked(const absl::Status& status, std::vector<Release>* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The oldest waiter has waited straggler_timeout: apply the policy to the
  // workers it waits for that have been silent that long (or, when all of
  // them pushed more recently, wait on).
  void HandleStragglersLocked(std::vector<Release>* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Watch();
  static void Run(std::vector<Release>* released);

  const Mode mode_;
  const uint64_t staleness_;
  const absl::Duration straggler_timeout_;
  const bool drop_stragglers_;
  const bool replicated_;
  const std::string table_;
  ShardStore* const store_;
  LogSink* const log_;

  mutable absl::Mutex mu_;
  absl::CondVar wake_;  // the watchdog's: waiters added, or closed
  std::vector<WorkerProgress> workers_ ABSL_GUARDED_BY(mu_);
  uint64_t applied_ ABSL_GUARDED_BY(mu_) = 0;  // sync: clocks applied
  float sync_lr_scale_ ABSL_GUARDED_BY(mu_) = 1.0f;
  std::vector<Waiter> waiters_ ABSL_GUARDED_BY(mu_);  // oldest first
  uint64_t next_ticket_ ABSL_GUARDED_BY(mu_) = 1;
  absl::Status failed_ ABSL_GUARDED_BY(mu_);  // ABORTED once the job failed
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status closed_status_ ABSL_GUARDED_BY(mu_);

  // sync: the sum of clock applied_'s gradients, one float per key. Pieces
  // of one clock may arrive concurrently; the apply never overlaps them.
  mutable absl::Mutex sum_mu_;
  std::vector<float> sum_ ABSL_GUARDED_BY(sum_mu_);

  std::thread watchdog_;  // sync and ssp only
};

}  // namespace ps

#endif  // SHARDPS_PS_TABLE_CONSISTENCY_H_
