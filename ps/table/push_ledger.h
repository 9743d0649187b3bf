// PushLedger remembers which pushes one table on one server has applied, so
// that a push sent again (a client retrying after a lost reply, or a copy
// delayed in the network) is acknowledged instead of applied twice.
//
// A push piece is named by (worker, session, sequence, begin): the client's
// random session, the number of the logical push, and where the piece starts
// (one logical push sends one piece per shard and chunk). Per worker the
// ledger keeps its current session, the client's `acked_below` (sequences
// below it are finished and never resent, so their entries are dropped) and
// the pieces at or above it. A new session of a worker (a restarted process)
// retires the old one; a late push of a retired session is refused rather
// than risk applying it twice.
//
// Use: Admit; if it says kApply, apply the push and then Commit (or Abort if
// applying failed). A copy that arrives while the first is being applied
// waits in Admit for the outcome.
//
// Thread-safety: all methods are safe to call concurrently.
#ifndef SHARDPS_PS_TABLE_PUSH_LEDGER_H_
#define SHARDPS_PS_TABLE_PUSH_LEDGER_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "proto/checkpoint.pb.h"

namespace ps {

struct PushId {
  uint32_t worker = 0;
  uint64_t session = 0;  // 0: not tracked, applied on every arrival
  uint64_t sequence = 0;
  uint64_t begin = 0;
};

struct Admission {
  enum Kind { kApply, kDuplicate };
  Kind kind = kApply;
  // kDuplicate: the version the first arrival produced; 0 when the ledger no
  // longer knows it (the caller reports the current version instead).
  uint64_t version = 0;
};

class PushLedger {
 public:
  // Pieces remembered per worker at most; a client cannot have more in
  // flight (RESOURCE_EXHAUSTED beyond, never unbounded memory).
  static constexpr size_t kMaxPiecesPerWorker = 1 << 16;
  // Sessions remembered per worker as retired.
  static constexpr size_t kMaxRetiredSessions = 16;
  // Distinct worker ids tracked per table.
  static constexpr size_t kMaxWorkers = 1 << 16;
  // Pieces remembered per table over all workers (about 64 MiB at most).
  static constexpr size_t kMaxPieces = 1 << 20;

  PushLedger() = default;
  PushLedger(const PushLedger&) = delete;
  PushLedger& operator=(const PushLedger&) = delete;

  // Decides what to do with an arriving piece. INVALID_ARGUMENT, changing
  // nothing, when acked_below > sequence; FAILED_PRECONDITION for a
  // retired session, RESOURCE_EXHAUSTED when the worker has too many pieces
  // in the ledger. Every kApply of a tracked piece must be followed by
  // Commit or Abort with the same id.
  absl::StatusOr<Admission> Admit(const PushId& id, uint64_t acked_below);
  // The piece admitted with kApply produced `version`.
  void Commit(const PushId& id, uint64_t version);
  // The piece admitted with kApply was not applied; forget it.
  void Abort(const PushId& id);

  // Pieces acknowledged as duplicates so far.
  uint64_t duplicates() const {
    return duplicates_.load(std::memory_order_relaxed);
  }

  // Appends every worker's record to `out`; requires that nothing is between
  // Admit and Commit/Abort (the table's snapshot lock guarantees it).
  void Save(std::vector<shardps::LedgerWorker>* out) const;
  // Replaces the ledger's contents. INVALID_ARGUMENT for a worker listed
  // twice or a record past the limits.
  absl::Status Load(
      const google::protobuf::RepeatedPtrField<shardps::LedgerWorker>& workers);

 private:
  struct Piece {
    bool applied = false;
    uint64_t version = 0;
  };
  using PieceKey = std::pair<uint64_t, uint64_t>;  // (sequence, begin)
  struct Worker {
    uint64_t session = 0;
    uint64_t acked_below = 0;
    absl::flat_hash_map<PieceKey, Piece> pieces;
    std::deque<uint64_t> retired;  // oldest first
  };

  // The worker's record if `id.session` is its current session.
  Worker* FindCurrentLocked(const PushId& id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  absl::CondVar piece_done_;  // signalled by Commit and Abort
  // Node-based: a Worker& held across a CondVar wait stays valid.
  absl::node_hash_map<uint32_t, Worker> workers_ ABSL_GUARDED_BY(mu_);
  size_t pieces_ ABSL_GUARDED_BY(mu_) = 0;  // over all workers
  std::atomic<uint64_t> duplicates_{0};
};

}  // namespace ps

#endif  // SHARDPS_PS_TABLE_PUSH_LEDGER_H_
