#include "ps/table/push_ledger.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ps {

absl::StatusOr<Admission> PushLedger::Admit(const PushId& id,
                                            uint64_t acked_below) {
  if (id.session == 0) return Admission{};
  // acked_below says every sequence below it has ended at the client, this
  // one included if it were above: such a push contradicts itself, and
  // believing it would drop the session's honest pushes below it.
  if (acked_below > id.sequence) {
    return absl::InvalidArgumentError(absl::StrCat(
        "push sequence ", id.sequence, " carries acked_below ", acked_below,
        ", above itself (acked_below may be at most the sequence)"));
  }
  absl::MutexLock lock(&mu_);
  if (workers_.size() >= kMaxWorkers && !workers_.contains(id.worker)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("this table already tracks pushes of ", workers_.size(),
                     " workers, the limit"));
  }
  Worker& worker = workers_[id.worker];
  if (worker.session != id.session) {
    if (std::find(worker.retired.begin(), worker.retired.end(), id.session) !=
        worker.retired.end()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "push from an old session of worker ", id.worker,
          " after a newer session of that worker started pushing (did the "
          "worker restart, or do two processes run as worker ",
          id.worker, "?)"));
    }
    if (worker.session != 0) {
      worker.retired.push_back(worker.session);
      if (worker.retired.size() > kMaxRetiredSessions) {
        worker.retired.pop_front();
      }
    }
    // Pieces of the old session still being applied keep their entries
    // until they Commit or Abort; nothing else needs them.
    worker.session = id.session;
    worker.acked_below = 0;
    absl::erase_if(worker.pieces,
                   [](const auto& entry) { return entry.second.applied; });
  }
  if (acked_below > worker.acked_below) {
    worker.acked_below = acked_below;
    pieces_ -= absl::erase_if(worker.pieces, [acked_below](const auto& entry) {
      return entry.first.first < acked_below && entry.second.applied;
    });
  }
  const PieceKey key{id.sequence, id.begin};
  while (true) {
    if (id.sequence < worker.acked_below) {
      // The client finished this push long ago; this copy was delayed.
      duplicates_.fetch_add(1, std::memory_order_relaxed);
      return Admission{Admission::kDuplicate, 0};
    }
    auto it = worker.pieces.find(key);
    if (it == worker.pieces.end()) break;
    if (it->second.applied) {
      duplicates_.fetch_add(1, std::memory_order_relaxed);
      return Admission{Admission::kDuplicate, it->second.version};
    }
    // The first copy is being applied; its outcome decides this one's.
    piece_done_.Wait(&mu_);
    if (worker.session != id.session) {
      return absl::FailedPreconditionError(
          absl::StrCat("worker ", id.worker,
                       "'s session changed while its push was being applied"));
    }
  }
  if (worker.pieces.size() >= kMaxPiecesPerWorker || pieces_ >= kMaxPieces) {
    return absl::ResourceExhaustedError(
        absl::StrCat("worker ", id.worker, " has ", worker.pieces.size(),
                     " and all ", pieces_,
                     " push pieces pending acknowledgement on this table; the "
                     "limits are ",
                     kMaxPiecesPerWorker, " and ", kMaxPieces));
  }
  worker.pieces.emplace(key, Piece{});
  ++pieces_;
  return Admission{};
}

void PushLedger::Commit(const PushId& id, uint64_t version) {
  if (id.session == 0) return;
  absl::MutexLock lock(&mu_);
  if (Worker* worker = FindCurrentLocked(id)) {
    auto it = worker->pieces.find(PieceKey{id.sequence, id.begin});
    if (it != worker->pieces.end()) it->second = Piece{true, version};
  } else {
    // A session replaced meanwhile: its entry was kept only for this call.
    auto it = workers_.find(id.worker);
    if (it != workers_.end()) {
      pieces_ -= it->second.pieces.erase({id.sequence, id.begin});
    }
  }
  piece_done_.SignalAll();
}

void PushLedger::Abort(const PushId& id) {
  if (id.session == 0) return;
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(id.worker);
  if (it != workers_.end()) {
    pieces_ -= it->second.pieces.erase({id.sequence, id.begin});
  }
  piece_done_.SignalAll();
}

PushLedger::Worker* PushLedger::FindCurrentLocked(const PushId& id) {
  auto it = workers_.find(id.worker);
  if (it == workers_.end() || it->second.session != id.session) return nullptr;
  return &it->second;
}

void PushLedger::Save(std::vector<shardps::LedgerWorker>* out) const {
  absl::MutexLock lock(&mu_);
  for (const auto& [id, worker] : workers_) {
    shardps::LedgerWorker& saved = out->emplace_back();
    saved.set_worker(id);
    saved.set_session(worker.session);
    saved.set_acked_below(worker.acked_below);
    for (const auto& [key, piece] : worker.pieces) {
      if (!piece.applied) continue;
      shardps::LedgerWorker::Applied* applied = saved.add_applied();
      applied->set_sequence(key.first);
      applied->set_begin(key.second);
      applied->set_version(piece.version);
    }
    for (uint64_t session : worker.retired) saved.add_retired_sessions(session);
  }
}

absl::Status PushLedger::Load(
    const google::protobuf::RepeatedPtrField<shardps::LedgerWorker>& workers) {
  if (workers.size() > static_cast<int>(kMaxWorkers)) {
    return absl::InvalidArgumentError("push ledger has too many workers");
  }
  absl::node_hash_map<uint32_t, Worker> loaded;
  size_t pieces = 0;
  for (const shardps::LedgerWorker& saved : workers) {
    if (saved.applied_size() > static_cast<int>(kMaxPiecesPerWorker) ||
        saved.retired_sessions_size() > static_cast<int>(kMaxRetiredSessions)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "push ledger of worker ", saved.worker(), " is past the limits"));
    }
    auto [it, inserted] = loaded.try_emplace(saved.worker());
    if (!inserted) {
      return absl::InvalidArgumentError(
          absl::StrCat("push ledger lists worker ", saved.worker(), " twice"));
    }
    Worker& worker = it->second;
    worker.session = saved.session();
    worker.acked_below = saved.acked_below();
    for (const shardps::LedgerWorker::Applied& applied : saved.applied()) {
      worker.pieces[{applied.sequence(), applied.begin()}] =
          Piece{true, applied.version()};
    }
    pieces += worker.pieces.size();
    if (pieces > kMaxPieces) {
      return absl::InvalidArgumentError("push ledger is past the limits");
    }
    worker.retired.assign(saved.retired_sessions().begin(),
                          saved.retired_sessions().end());
  }
  absl::MutexLock lock(&mu_);
  workers_ = std::move(loaded);
  pieces_ = pieces;
  return absl::OkStatus();
}

}  // namespace ps
