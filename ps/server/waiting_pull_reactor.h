// WaitingPullReactor is the reactor of a pull that may wait for other
// workers (sync, ssp; ps/server/service.h). It finishes once, with whichever
// comes first: the answer (on the thread that released the pull) or the
// call's end (the client cancelled, or its deadline passed), which takes
// the pull out of its table's waits. gRPC's callback API owns it from
// `new` to OnDone.
//
// Thread-safety: Answer, Started and OnCancel may run concurrently.
#ifndef SHARDPS_PS_SERVER_WAITING_PULL_REACTOR_H_
#define SHARDPS_PS_SERVER_WAITING_PULL_REACTOR_H_

#include <grpcpp/support/server_callback.h>
#include <grpcpp/support/status.h>

#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "ps/table/table.h"

namespace ps {

// Where a pull waits: its table and ticket (Table::CancelWait); a null
// table when it does not wait.
struct WaitingPull {
  Table* table = nullptr;
  uint64_t ticket = 0;
};

class WaitingPullReactor final : public grpc::ServerUnaryReactor {
 public:
  WaitingPullReactor() = default;
  WaitingPullReactor(const WaitingPullReactor&) = delete;
  WaitingPullReactor& operator=(const WaitingPullReactor&) = delete;

  // The pull's continuation calls this with its outcome. The caller must
  // not touch the reactor afterwards: OnDone may delete it at once.
  void Answer(const grpc::Status& status);
  // The handler has registered the pull: it waits as `waiting` says (table
  // null: it was answered already).
  void Started(WaitingPull waiting);

  void OnCancel() override;
  void OnDone() override;

 private:
  // Ends the wait, which answers the call through the continuation;
  // nothing if the pull was released meanwhile.
  static void Cancel(WaitingPull waiting);

  absl::Mutex mu_;
  bool starting_ ABSL_GUARDED_BY(mu_) = true;
  bool answered_early_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status early_answer_ ABSL_GUARDED_BY(mu_);
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  WaitingPull waiting_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ps

#endif  // SHARDPS_PS_SERVER_WAITING_PULL_REACTOR_H_
