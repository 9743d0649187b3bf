#include "ps/server/waiting_pull_reactor.h"

#include "absl/status/status.h"

namespace ps {

void WaitingPullReactor::Answer(const grpc::Status& status) {
  {
    absl::MutexLock lock(&mu_);
    if (starting_) {
      // Answered within the handler; Started finishes the call.
      early_answer_ = status;
      answered_early_ = true;
      return;
    }
    if (finished_) return;
    finished_ = true;
  }
  Finish(status);
}

void WaitingPullReactor::Started(WaitingPull waiting) {
  bool answered;
  bool cancelled;
  grpc::Status answer;
  {
    absl::MutexLock lock(&mu_);
    starting_ = false;
    waiting_ = waiting;
    answered = answered_early_;
    answer = early_answer_;
    cancelled = cancelled_;
    finished_ = answered;
  }
  if (answered) {
    Finish(answer);
  } else if (cancelled) {
    Cancel(waiting);
  }
}

void WaitingPullReactor::OnCancel() {
  WaitingPull waiting;
  {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    if (starting_) return;  // Started sees it
    waiting = waiting_;
  }
  Cancel(waiting);
}

void WaitingPullReactor::OnDone() { delete this; }

void WaitingPullReactor::Cancel(WaitingPull waiting) {
  if (waiting.table == nullptr) return;
  waiting.table->CancelWait(
      waiting.ticket,
      absl::CancelledError("the pull's call was cancelled or its deadline "
                           "passed while it waited for other workers"));
}

}  // namespace ps
