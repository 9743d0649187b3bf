// Table is one server's shard of one table: its values and optimizer state
// (ShardStore), the consistency barrier that orders pushes and pulls by
// clock (Consistency), the ledger that applies each push once (PushLedger)
// and the workers' clocks. Its methods are the transactions on that state;
// the locking between them is its own business:
//
//   ApplyPush     validate, admit through the ledger, apply (or gather into
//                 the clock's sum), commit, record the clock: all or nothing
//   WhenReadable  wait (without a thread) until a pull may read, per the
//                 consistency mode; then Read copies values out
//   Snapshot      values, state, version, barrier, ledger and clocks, taken
//                 at one point between pushes (for a checkpoint)
//
// It knows nothing of gRPC: ps/server/service.h decodes requests into these
// calls.
//
// Thread-safety: all methods are safe to call concurrently. A push holds
// the snapshot lock shared from its ledger admission until it is
// committed; Snapshot holds it exclusively.
#ifndef SHARDPS_PS_TABLE_TABLE_H_
#define SHARDPS_PS_TABLE_TABLE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "proto/checkpoint.pb.h"
#include "proto/shardps.pb.h"
#include "ps/base/log.h"
#include "ps/table/consistency.h"
#include "ps/table/push_ledger.h"
#include "ps/table/shard_store.h"
#include "ps/wire/float_pieces.h"
#include "ps/wire/range_partition.h"

namespace ps {

// One table as a checkpoint holds it.
struct TableSnapshot {
  shardps::TableCheckpoint meta;           // meta.arrays() == arrays.size()
  std::vector<std::vector<float>> arrays;  // values, then optimizer state
};

// A push as the wire gives it (proto/shardps.proto PushRequest).
struct PushArgs {
  uint32_t worker = 0;
  uint64_t clock = 0;
  KeyRange keys;
  uint64_t session = 0;  // 0: not deduplicated
  uint64_t sequence = 0;
  uint64_t acked_below = 0;
  float lr_scale = 1.0f;
};

struct PushOutcome {
  uint64_t version = 0;    // the table's version after it (see PushResponse)
  bool duplicate = false;  // applied before: acknowledged, not applied again
  // Of a push taken now: its place among the pushes the table took
  // (admitted_pushes() just after it); 0 for a duplicate.
  uint64_t position = 0;
};

// Distinct worker ids an async table takes pushes from, by default.
inline constexpr uint32_t kDefaultMaxWorkers = 4096;

// What a table needs besides its spec.
struct TableSettings {
  // Stragglers dropped or failing are reported here (null: stderr); must
  // outlive the table.
  LogSink* log = nullptr;
  // async: pushes of further worker ids are RESOURCE_EXHAUSTED.
  uint32_t max_workers = kDefaultMaxWorkers;
  // The server is one replica of its shard (ps/server/replicator.h): a sync
  // push one clock ahead of the clock gathered here is UNAVAILABLE (to be
  // retried), not FAILED_PRECONDITION. After a failover the pushes that
  // complete that clock are retries of pushes the old primary took, and
  // let other workers pull past, without acknowledging them.
  bool replicated = false;
};

class Table {
 public:
  // Float arrays per key a table of `spec` holds: values, optimizer state
  // and, under sync, the clock's running sum (for memory limits).
  static int ArraysPerKey(const shardps::CreateTableRequest& spec);

  // A table as `spec` (valid, see ps/wire/table_spec.h) asks, owning keys
  // `range`, at its initial values.
  static absl::StatusOr<std::unique_ptr<Table>> Create(
      const shardps::CreateTableRequest& spec, KeyRange range,
      TableSettings settings = {});

  // The table a checkpoint's snapshot holds, whose spec gave it `range`.
  // INVALID_ARGUMENT, naming the table, when the arrays, ledger or barrier
  // do not fit the spec.
  static absl::StatusOr<std::unique_ptr<Table>> Restore(
      TableSnapshot snapshot, KeyRange range, TableSettings settings = {});

  Table(const Table&) = delete;
  Table& operator=(const Table&) = delete;

  const shardps::CreateTableRequest& spec() const { return spec_; }
  KeyRange range() const { return store_->range(); }
  uint64_t version() const { return store_->version(); }
  // Pushes taken so far (applied, or summed into a sync clock), duplicates
  // not counted; a snapshot holds exactly the first admitted_pushes().
  uint64_t admitted_pushes() const {
    return admitted_.load(std::memory_order_acquire);
  }
  // INVALID_ARGUMENT unless `keys` is a non-empty range inside range().
  absl::Status CheckKeys(KeyRange keys) const {
    return store_->CheckKeys(keys);
  }

  // Applies a push of push.keys.size() float32 in `gradient`, once: a copy
  // of a push already applied is acknowledged as a duplicate. Nothing
  // changes when it is refused: INVALID_ARGUMENT for bad keys, a length
  // that does not match them, a NaN/Inf, a learning rate scale that is
  // negative or not finite, or a worker outside a sync/ssp barrier;
  // RESOURCE_EXHAUSTED for a worker beyond an async table's max_workers;
  // the ledger's and the consistency's errors (ps/table/push_ledger.h,
  // consistency.h).
  absl::StatusOr<PushOutcome> ApplyPush(const PushArgs& push,
                                        FloatPieces& gradient);

  // Replaces the values of args.keys with `values` (AssignRequest in
  // proto/shardps.proto), once, by the ledger as a push: outside the
  // consistency barrier and the workers' clocks (args.clock and
  // args.lr_scale are not read); the optimizer state is kept. Refused, with
  // nothing changed, as ApplyPush refuses bad keys, length or values.
  absl::StatusOr<PushOutcome> Assign(const PushArgs& args, FloatPieces& values);

  // Whether a pull may have to wait (sync and ssp tables).
  bool pulls_may_wait() const { return consistency_.pulls_may_wait(); }
  // Runs `then` once a pull by `worker` at `clock` may read: at once, or
  // later on the thread that makes it possible (Consistency::Pull). Returns
  // the ticket that CancelWait takes while the pull waits, else 0.
  uint64_t WhenReadable(uint32_t worker, uint64_t clock,
                        PullContinuation then) {
    return consistency_.Pull(worker, clock, std::move(then));
  }
  // Ends a waiting pull's wait with `status` (its call was cancelled or
  // timed out), if it still waits (Consistency::CancelPull).
  void CancelWait(uint64_t ticket, const absl::Status& status) {
    consistency_.CancelPull(ticket, status);
  }
  // Copies keys into out[0, keys.size()); the version seen before the copy.
  absl::StatusOr<uint64_t> Read(KeyRange keys, float* out) const {
    return store_->Pull(keys, out);
  }

  // Replaces the state (values, optimizer state, version, barrier, ledger,
  // clocks and admitted pushes) with `snapshot`'s, between pushes: a
  // replica catching up again from its primary. Pulls still waiting must
  // have been ended first (EndWaits). FAILED_PRECONDITION when the
  // snapshot's spec is not this table's; INVALID_ARGUMENT when its arrays,
  // barrier or ledger do not fit. Nothing changes on an error.
  absl::Status Overwrite(const TableSnapshot& snapshot);
  // Ends the pulls waiting now with `status`; later ones wait as before
  // (a replica that stopped being the primary: its clients retry on the
  // new one).
  void EndWaits(const absl::Status& status) { consistency_.EndWaits(status); }

  // Captures the table at one point between pushes, reusing out's buffers;
  // pushes wait only while the arrays are copied.
  void Snapshot(TableSnapshot* out);

  // The table's part of a Stats reply.
  void FillStats(shardps::TableStats* out) const;

  // Ends waiting pulls, and refuses later ones, with `status`.
  void Close(const absl::Status& status) { consistency_.Close(status); }

  // Pushes acknowledged as duplicates so far.
  uint64_t duplicates() const { return ledger_.duplicates(); }

 private:
  Table(shardps::CreateTableRequest spec, std::unique_ptr<ShardStore> store,
        uint64_t restored_version, TableSettings settings);
  // Restore's second half: ledger, barrier and clocks of the snapshot.
  absl::Status RestoreProgress(const shardps::TableCheckpoint& meta,
                               std::vector<float> sum);
  // Under the snapshot lock (shared): admits the push through the ledger,
  // then, unless it is a duplicate, runs `apply` (the new version, or an
  // error that aborts the admission).
  absl::StatusOr<PushOutcome> AdmitOnce(
      const PushArgs& push,
      absl::FunctionRef<absl::StatusOr<uint64_t>()> apply);
  // async: admits `worker` under max_workers, counting it as pending until
  // EndWorkerPush; RESOURCE_EXHAUSTED for one too many.
  absl::Status BeginWorkerPush(uint32_t worker);
  // Ends what BeginWorkerPush began; a push that `applied` records `clock`.
  void EndWorkerPush(uint32_t worker, uint64_t clock, bool applied);

  const shardps::CreateTableRequest spec_;
  const std::unique_ptr<ShardStore> store_;
  const uint64_t restored_version_;  // 0 unless restored from a checkpoint
  std::atomic<uint64_t> admitted_{0};
  const uint32_t max_workers_;
  Consistency consistency_;
  absl::Mutex snapshot_mu_;
  PushLedger ledger_;
  mutable absl::Mutex clocks_mu_;
  // The highest clock each worker pushed; the workers with a first push in
  // flight, and how many each (so that max_workers holds exactly however
  // pushes interleave).
  absl::flat_hash_map<uint32_t, uint64_t> clocks_ ABSL_GUARDED_BY(clocks_mu_);
  absl::flat_hash_map<uint32_t, uint32_t> first_pushes_
      ABSL_GUARDED_BY(clocks_mu_);
};

}  // namespace ps

#endif  // SHARDPS_PS_TABLE_TABLE_H_
