#include "ps/table/consistency.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace ps {
namespace {

absl::Status Invalid(absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("consistency: ", message));
}

absl::Status NotInBarrier(uint32_t worker, absl::string_view table,
                          size_t workers) {
  return absl::InvalidArgumentError(
      absl::StrCat("worker ", worker, " is not in the barrier of table '",
                   table, "' (workers 0..", workers - 1, ")"));
}

}  // namespace

Consistency::Consistency(const shardps::ConsistencyConfig& config,
                         std::string table, ShardStore* store, LogSink* log,
                         bool replicated)
    : mode_(config.mode() == shardps::CONSISTENCY_SYNC  ? Mode::kSync
            : config.mode() == shardps::CONSISTENCY_SSP ? Mode::kSsp
                                                        : Mode::kAsync),
      staleness_(config.staleness()),
      straggler_timeout_(absl::Seconds(config.straggler_timeout_seconds())),
      drop_stragglers_(config.straggler_policy() == shardps::STRAGGLER_DROP),
      replicated_(replicated),
      table_(std::move(table)),
      store_(store),
      log_(log),
      workers_(config.num_workers()) {
  if (mode_ == Mode::kAsync) return;
  const absl::Time now = absl::Now();
  for (WorkerProgress& w : workers_) w.last_push = now;
  if (mode_ == Mode::kSync) {
    absl::MutexLock lock(&sum_mu_);
    sum_.assign(store_->range().size(), 0.0f);
  }
  watchdog_ = std::thread([this] { Watch(); });
}

Consistency::~Consistency() {
  Close(absl::UnavailableError(
      absl::StrCat("table '", table_, "' is being destroyed")));
  if (watchdog_.joinable()) watchdog_.join();
}

uint64_t Consistency::ProgressLocked() const {
  if (mode_ == Mode::kSync) return applied_;
  uint64_t least = std::numeric_limits<uint64_t>::max();
  for (const WorkerProgress& w : workers_) {
    if (!w.dropped) least = std::min(least, w.pushed);
  }
  return least;
}

bool Consistency::BehindLocked(const WorkerProgress& w, uint64_t need) const {
  if (w.dropped) return false;
  // sync: the clock in progress is applied_, which needs every push of it.
  return mode_ == Mode::kSync ? w.pushed <= applied_ : w.pushed < need;
}

uint64_t Consistency::clock() const {
  absl::MutexLock lock(&mu_);
  if (mode_ == Mode::kAsync) return 0;
  const uint64_t progress = ProgressLocked();
  return progress == std::numeric_limits<uint64_t>::max() ? 0 : progress;
}

std::vector<uint32_t> Consistency::dropped_workers() const {
  absl::MutexLock lock(&mu_);
  std::vector<uint32_t> out;
  for (size_t i = 0; i < workers_.size(); ++i) {
    if (workers_[i].dropped) out.push_back(static_cast<uint32_t>(i));
  }
  return out;
}

void Consistency::Run(std::vector<Release>* released) {
  for (Release& r : *released) std::move(r.then)(std::move(r.status));
  released->clear();
}

uint64_t Consistency::Pull(uint32_t worker, uint64_t clock,
                           PullContinuation then) {
  if (mode_ == Mode::kAsync) {
    std::move(then)(absl::OkStatus());
    return 0;
  }
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    // sync: clock c reads after clocks 0..c-1 are applied; ssp: after every
    // worker pushed clocks 0..c-K.
    const uint64_t need = mode_ == Mode::kSync  ? clock
                          : clock >= staleness_ ? clock - staleness_ + 1
                                                : 0;
    if (closed_) {
      status = closed_status_;
    } else if (!failed_.ok()) {
      status = failed_;
    } else if (worker >= workers_.size()) {
      status = NotInBarrier(worker, table_, workers_.size());
    } else if (const WorkerProgress& w = workers_[worker];
               !w.dropped && need > w.pushed + 1) {
      status = absl::InvalidArgumentError(absl::StrCat(
          "worker ", worker, " pulled clock ", clock, " of table '", table_,
          "', which waits for every worker to push clock ", need - 1,
          ", but it has pushed only clocks below ", w.pushed,
          " itself (a pull may wait for at most one more push of its own "
          "worker)"));
    } else if (need > ProgressLocked() && !w.dropped) {
      if (waiters_.size() >= kMaxWaitingPulls) {
        status = absl::ResourceExhaustedError(absl::StrCat(
            waiters_.size(), " pulls already wait on table '", table_, "'"));
      } else {
        const uint64_t ticket = next_ticket_++;
        waiters_.push_back(
            {ticket, worker, need, absl::Now(), std::move(then)});
        wake_.Signal();
        return ticket;
      }
    }
  }
  std::move(then)(std::move(status));
  return 0;
}

void Consistency::CancelPull(uint64_t ticket, const absl::Status& status) {
  PullContinuation then;
  {
    absl::MutexLock lock(&mu_);
    auto it =
        std::find_if(waiters_.begin(), waiters_.end(),
                     [ticket](const Waiter& w) { return w.ticket == ticket; });
    if (it == waiters_.end()) return;
    then = std::move(it->then);
    waiters_.erase(it);
  }
  std::move(then)(status);
}

absl::Status Consistency::CheckWorker(uint32_t worker) const {
  if (mode_ == Mode::kAsync || worker < workers_.size()) {
    return absl::OkStatus();
  }
  return NotInBarrier(worker, table_, workers_.size());
}

size_t Consistency::waiting_pulls() const {
  absl::MutexLock lock(&mu_);
  return waiters_.size();
}

absl::Status Consistency::CheckPushLocked(uint32_t worker, uint64_t clock,
                                          KeyRange keys) {
  if (!failed_.ok()) return failed_;
  if (worker >= workers_.size()) {
    return NotInBarrier(worker, table_, workers_.size());
  }
  const WorkerProgress& w = workers_[worker];
  if (w.dropped) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker ", worker, " was dropped from the barrier of table '", table_,
        "' for straggling; its pushes are refused"));
  }
  if (clock != w.pushed) {
    return absl::FailedPreconditionError(
        absl::StrCat("worker ", worker, " pushed clock ", clock, " of table '",
                     table_, "' but its next clock here is ", w.pushed,
                     " (clocks are pushed in order, each once)"));
  }
  if (mode_ == Mode::kSync && clock == applied_ + 1 && replicated_) {
    return absl::UnavailableError(absl::StrCat(
        "clock ", applied_, " of table '", table_,
        "' is not complete on this replica yet (after a failover, the "
        "pushes that complete it are being retried); retry worker ",
        worker, "'s push of clock ", clock));
  }
  if (mode_ == Mode::kSync && clock != applied_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker ", worker, " pushed clock ", clock, " of table '", table_,
        "' before clock ", applied_,
        " was applied (under sync a worker pulls a clock before pushing "
        "it)"));
  }
  for (const KeyRange& r : w.claimed) {
    if (keys.begin < r.end && r.begin < keys.end) {
      return absl::FailedPreconditionError(absl::StrCat(
          "worker ", worker, " pushed keys [", keys.begin, ", ", keys.end,
          ") of table '", table_, "' twice in clock ", clock));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> Consistency::Push(uint32_t worker, uint64_t clock,
                                           KeyRange keys, FloatPieces& gradient,
                                           float lr_scale) {
  if (mode_ == Mode::kAsync) {
    return store_->ApplyChecked(keys, gradient, lr_scale);
  }
  {
    absl::MutexLock lock(&mu_);
    if (absl::Status s = CheckPushLocked(worker, clock, keys); !s.ok()) {
      return s;
    }
    workers_[worker].claimed.push_back(keys);
    ++workers_[worker].in_flight;
    workers_[worker].last_push = absl::Now();
    sync_lr_scale_ = lr_scale;
  }
  uint64_t version;
  if (mode_ == Mode::kSsp) {
    version = store_->ApplyChecked(keys, gradient, lr_scale);
  } else {
    gradient.Reset();
    absl::MutexLock lock(&sum_mu_);
    float* sum = &sum_[keys.begin - store_->range().begin];
    gradient.ForEachRun(keys.size(), [&](UnalignedFloats run) {
      for (size_t i = 0; i < run.size(); ++i) sum[i] += run[i];
      sum += run.size();
    });
    version = store_->version();
  }
  std::vector<Release> released;
  {
    absl::MutexLock lock(&mu_);
    WorkerProgress& w = workers_[worker];
    --w.in_flight;
    if (w.dropped) {
      // Dropped meanwhile: its piece is in its clock's sum, which may have
      // waited for it; its place in the barrier is gone.
      AdvanceLocked(&released);
    } else if (w.pushed == clock) {
      w.done_keys += keys.size();
      if (w.done_keys == store_->range().size()) {
        ++w.pushed;
        w.claimed.clear();
        w.done_keys = 0;
        AdvanceLocked(&released);
      }
    }
    if (mode_ == Mode::kSync) version = store_->version();
  }
  Run(&released);
  return version;
}

void Consistency::AdvanceLocked(std::vector<Release>* out) {
  if (mode_ == Mode::kSync) {
    size_t members = 0;
    bool complete = true;
    for (const WorkerProgress& w : workers_) {
      if (w.dropped) {
        complete = complete && w.in_flight == 0;
        continue;
      }
      ++members;
      complete = complete && w.pushed > applied_;
    }
    if (complete && members > 0) ApplyAverageLocked(members);
  }
  const uint64_t progress = ProgressLocked();
  // A dropped worker's pulls no longer wait (as if they arrived now).
  auto ready = [&](const Waiter& w) {
    return w.need <= progress || workers_[w.worker].dropped;
  };
  for (Waiter& w : waiters_) {
    if (ready(w)) out->push_back({std::move(w.then), absl::OkStatus()});
  }
  waiters_.erase(std::remove_if(waiters_.begin(), waiters_.end(), ready),
                 waiters_.end());
}

void Consistency::ApplyAverageLocked(size_t members) {
  const KeyRange range = store_->range();
  // How many workers pushed each key: every member, plus each worker
  // dropped during this clock for the keys it had pushed.
  std::vector<float> pushers;
  for (const WorkerProgress& w : workers_) {
    if (!w.dropped || w.pushed != applied_ || w.claimed.empty()) continue;
    if (pushers.empty()) pushers.assign(range.size(), members);
    for (const KeyRange& r : w.claimed) {
      for (uint64_t k = r.begin; k < r.end; ++k) pushers[k - range.begin] += 1;
    }
  }
  absl::MutexLock lock(&sum_mu_);
  if (pushers.empty()) {
    const float scale = 1.0f / static_cast<float>(members);
    for (float& v : sum_) v *= scale;
  } else {
    for (size_t i = 0; i < sum_.size(); ++i) sum_[i] /= pushers[i];
  }
  const absl::string_view bytes(reinterpret_cast<const char*>(sum_.data()),
                                sum_.size() * sizeof(float));
  FloatPieces average(absl::MakeConstSpan(&bytes, 1));
  store_->ApplyChecked(range, average, sync_lr_scale_);
  std::fill(sum_.begin(), sum_.end(), 0.0f);
  ++applied_;
}

void Consistency::FailAllLocked(const absl::Status& status,
                                std::vector<Release>* out) {
  for (Waiter& w : waiters_) out->push_back({std::move(w.then), status});
  waiters_.clear();
}

void Consistency::HandleStragglersLocked(std::vector<Release>* out) {
  const uint64_t need = waiters_.front().need;
  const absl::Time now = absl::Now();
  std::vector<uint32_t> stragglers;
  // The earliest last push of the workers waited for that pushed within
  // the timeout: when they are all like that, the policy waits until then.
  absl::Time silent_since = absl::InfiniteFuture();
  for (size_t i = 0; i < workers_.size(); ++i) {
    const WorkerProgress& w = workers_[i];
    if (!BehindLocked(w, need)) continue;
    if (now - w.last_push >= straggler_timeout_) {
      stragglers.push_back(static_cast<uint32_t>(i));
    } else {
      silent_since = std::min(silent_since, w.last_push);
    }
  }
  if (stragglers.empty()) {
    const absl::Time restart = std::min(silent_since, now);
    for (Waiter& w : waiters_) w.since = std::max(w.since, restart);
    return;
  }
  const uint64_t stuck_clock = mode_ == Mode::kSync ? applied_
                               : need == 0          ? 0
                                                    : need - 1;
  const std::string what = absl::StrCat(
      "table '", table_, "' keys [", store_->range().begin, ", ",
      store_->range().end, "): worker", stragglers.size() == 1 ? " " : "s ",
      absl::StrJoin(stragglers, ", "), " did not push clock ", stuck_clock,
      " within ", absl::FormatDuration(straggler_timeout_));
  if (!drop_stragglers_) {
    failed_ = absl::AbortedError(
        absl::StrCat(what, " (straggler_policy=fail: the job stops)"));
    Log(log_, failed_.message());
    FailAllLocked(failed_, out);
    return;
  }
  Logf(log_, "%s; dropping them from the barrier (straggler_policy=drop)",
       what);
  for (uint32_t w : stragglers) workers_[w].dropped = true;
  AdvanceLocked(out);
  // The waits that remain began their timeout anew: the workers now in the
  // barrier were not the ones being waited for.
  for (Waiter& w : waiters_) w.since = std::max(w.since, now);
}

void Consistency::Save(shardps::BarrierState* out,
                       std::vector<float>* sum) const {
  out->Clear();
  sum->clear();
  if (mode_ == Mode::kAsync) return;
  absl::MutexLock lock(&mu_);
  out->set_applied(applied_);
  out->set_lr_scale(sync_lr_scale_);
  for (const WorkerProgress& w : workers_) {
    shardps::BarrierState::Worker* saved = out->add_workers();
    saved->set_pushed(w.pushed);
    saved->set_dropped(w.dropped);
    for (const KeyRange& r : w.claimed) {
      saved->add_claimed(r.begin);
      saved->add_claimed(r.end);
    }
  }
  if (mode_ == Mode::kSync) {
    absl::MutexLock sum_lock(&sum_mu_);
    sum->assign(sum_.begin(), sum_.end());
  }
}

absl::Status Consistency::Restore(const shardps::BarrierState& state,
                                  std::vector<float> sum) {
  absl::MutexLock lock(&mu_);
  if (mode_ == Mode::kAsync) {
    return state.workers().empty() && sum.empty()
               ? absl::OkStatus()
               : Invalid("an async table has no barrier to restore");
  }
  if (static_cast<size_t>(state.workers_size()) != workers_.size()) {
    return Invalid(absl::StrCat("the checkpoint's barrier has ",
                                state.workers_size(), " workers, the table ",
                                workers_.size()));
  }
  if (mode_ == Mode::kSync && sum.size() != store_->range().size()) {
    return Invalid("the checkpoint's sum does not match the shard");
  }
  std::vector<WorkerProgress> restored(workers_.size());
  for (size_t i = 0; i < workers_.size(); ++i) {
    const shardps::BarrierState::Worker& saved = state.workers(i);
    WorkerProgress& w = restored[i];
    w.pushed = saved.pushed();
    w.dropped = saved.dropped();
    if (saved.claimed_size() % 2 != 0) return Invalid("odd claimed list");
    for (int k = 0; k < saved.claimed_size(); k += 2) {
      const KeyRange r{saved.claimed(k), saved.claimed(k + 1)};
      if (r.empty() || r.begin > r.end || !store_->range().Contains(r)) {
        return Invalid("a claimed key range is outside the shard");
      }
      w.claimed.push_back(r);
      w.done_keys += r.size();
    }
    if (w.done_keys >= store_->range().size()) {
      return Invalid("a worker's claimed keys cover the whole shard");
    }
  }
  const absl::Time now = absl::Now();
  for (WorkerProgress& w : restored) w.last_push = now;
  workers_ = std::move(restored);
  applied_ = state.applied();
  sync_lr_scale_ = state.lr_scale();
  if (mode_ == Mode::kSync) {
    absl::MutexLock sum_lock(&sum_mu_);
    sum_ = std::move(sum);
  }
  return absl::OkStatus();
}

void Consistency::Close(const absl::Status& status) {
  std::vector<Release> released;
  {
    absl::MutexLock lock(&mu_);
    if (!closed_) {
      closed_ = true;
      closed_status_ = status;
    }
    FailAllLocked(closed_status_, &released);
    wake_.SignalAll();
  }
  Run(&released);
}

void Consistency::EndWaits(const absl::Status& status) {
  std::vector<Release> released;
  {
    absl::MutexLock lock(&mu_);
    FailAllLocked(status, &released);
  }
  Run(&released);
}

void Consistency::Watch() {
  std::vector<Release> released;
  absl::MutexLock lock(&mu_);
  while (!closed_) {
    const absl::Time deadline =
        waiters_.empty() ? absl::InfiniteFuture()
                         : waiters_.front().since + straggler_timeout_;
    wake_.WaitWithDeadline(&mu_, deadline);
    if (closed_ || waiters_.empty() ||
        absl::Now() < waiters_.front().since + straggler_timeout_) {
      continue;
    }
    HandleStragglersLocked(&released);
    mu_.Unlock();
    Run(&released);
    mu_.Lock();
  }
}

}  // namespace ps
