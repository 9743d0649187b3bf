// Replicator makes one server a replica of one shard (--etcd, --shard,
// --replica; DESIGN.md "Membership and replication"): its place in etcd
// (ps/coord/membership.h), the copy of the shard's state it takes from the
// primary before it serves, and, while it is the primary, the forwarding
// of every push and table creation to the other replicas.
//
// The rules:
// - Clients talk to the primary. A backup answers their calls UNAVAILABLE
//   naming the primary, which a client retries (on the new primary once it
//   reads the layout).
// - The primary applies a push, then forwards the same request (same
//   session and sequence) with its epoch and the push's position (Table::
//   admitted_pushes just after it) to every replica it forwards to, and
//   acknowledges the client only when all of them applied it. A forwarding call
//   that fails is retried until it succeeds or the replica's lease is gone from
//   etcd (it died); so an acknowledged push is on every live replica, and a
//   client's retry after a failover is a duplicate there, never applied twice.
// - A backup refuses a forwarded call whose epoch is older than one it has
//   seen (FAILED_PRECONDITION): a primary that lost its place cannot have
//   pushes acknowledged.
// - A replica that joins while the shard has a primary registers as
//   catching up, asks the primary for its state (Replication.CatchUp; the
//   primary forwards to it from then on), installs it, and only then says
//   it is ready. Forwarded pushes that arrive meanwhile are answered
//   UNAVAILABLE ("catching up") and retried by the primary; those already
//   in the copied state (from the primary copied, of a position at or below
//   the copy's admitted pushes) are acknowledged without being applied
//   again. One that finds the shard held by nobody (no primary, no ready
//   replica) claims it (ServerMembership::ClaimFreshShard): of replicas
//   starting at once, one becomes the primary and the others copy from it
//   like any joining replica. One that lost its place in etcd while alive
//   (its lease ended) copies the shard again, replacing what it holds,
//   before it is ready again (CatchUpAgain).
// - With ReplicationOptions::token, forwarded calls and catch-ups must
//   carry it (UNAUTHENTICATED otherwise): the job's token alone does not
//   make a caller a primary.
// - With checkpoints (--checkpoint_dir), a replica restores its own before
//   Start: copying from a primary replaces it; a replica that claims a
//   shard held by nobody (every replica had died) serves it.
// - Pushes of different workers are forwarded on several threads, so a
//   backup may apply them (or sum them into a sync clock) in another order
//   than the primary did: it holds the same pushes, each once, and values
//   that may differ from the primary's in float rounding (a sum's order),
//   not in what was applied.
// - Sparse tables (async only) as dense async ones: PushRows is forwarded
//   with its position (SparseTable version just after it) and a catch-up
//   copies rows, optimizer state and ledger (SparseTable::Overwrite over
//   what a replica held). A PullRows that creates rows does so on the
//   primary only; a row's initial value is the same wherever it is made.
// - Every consistency mode: a backup takes a sync table's pushes into its
//   own barrier as the primary does (each worker's pushes reach it in the
//   order the worker made them: a worker waits for one clock's acks before
//   the next). Pulls wait on the primary only; a primary that loses its
//   place ends its waiting pulls UNAVAILABLE, so that clients retry on the
//   new one. After a failover the new primary may lack pushes the old one
//   took without acknowledging them and let other workers pull past: a
//   sync push one clock ahead is then UNAVAILABLE, retried until those
//   pushes' retries complete the clock (TableSettings::replicated). The
//   straggler policy drop is refused (FAILED_PRECONDITION): a primary's
//   decision to drop a worker is not forwarded yet.
//
// Thread-safety: all methods are safe to call concurrently.
#ifndef SHARDPS_PS_SERVER_REPLICATOR_H_
#define SHARDPS_PS_SERVER_REPLICATOR_H_

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/support/byte_buffer.h>

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/replication.grpc.pb.h"
#include "ps/base/log.h"
#include "ps/coord/etcd_client.h"
#include "ps/coord/membership.h"
#include "ps/table/table_registry.h"
#include "ps/wire/security.h"

namespace ps {

// Metadata of a forwarded call.
inline constexpr char kEpochMetadataKey[] = "x-shardps-epoch";
inline constexpr char kPositionMetadataKey[] = "x-shardps-position";
// The replicas' own token, on forwarded calls and catch-ups.
inline constexpr char kReplicationTokenMetadataKey[] =
    "x-shardps-replication-token";

struct ReplicationOptions {
  std::string etcd;  // http://host:port; empty: the server is not replicated
  uint32_t shard = 0;
  uint32_t replica = 0;
  // A dead replica's keys last this long in etcd (ServerMembership).
  absl::Duration lease_ttl = absl::Seconds(1);
  // The replicas' own secret (--replication_token_file): forwarded calls
  // and catch-ups must carry it, so that a job member holding only the
  // job's token cannot pose as a primary to a backup. Empty: the job's
  // token is all a forward needs.
  std::string token;
};

class Replicator final : public shardps::Replication::CallbackService {
 public:
  // Peers are called with `tls` as client credentials and `auth_token`.
  // Until Start has caught up, every call is answered UNAVAILABLE.
  static absl::StatusOr<std::unique_ptr<Replicator>> Create(
      const ReplicationOptions& options, std::string job,
      std::string auth_token, TlsFiles tls, TableRegistry* registry,
      LogSink* log);
  Replicator(const Replicator&) = delete;
  Replicator& operator=(const Replicator&) = delete;
  ~Replicator() override;

  // Once the server serves at `address` ("host:port" peers and clients
  // reach): joins etcd, catches up from the primary if the shard has one
  // (else the local state is the shard's), then says it is ready.
  absl::Status Start(std::string address);

  // For a client's call: OK on the primary; UNAVAILABLE naming the primary
  // (or saying there is none yet) on any other replica.
  absl::Status CheckPrimary() const;
  // UNAUTHENTICATED unless the call carries the replicas' token (OK when
  // there is none).
  absl::Status CheckReplicationToken(
      const std::multimap<grpc::string_ref, grpc::string_ref>& metadata) const;
  // For a forwarded call with these metadata values: OK when it may be
  // applied; FAILED_PRECONDITION when its epoch is stale, UNAVAILABLE while
  // catching up. *in_copy: the push is in the state this replica copied
  // (same primary, position at or below the copy's): acknowledge it, do not
  // apply it again.
  absl::Status CheckForwarded(absl::string_view epoch,
                              absl::string_view position_text,
                              absl::string_view table, bool* in_copy) const;
  // After the primary applied a call (`method`: "Push", "Assign",
  // "PushRows" or "CreateTable"; a PushPull goes as its Push),
  // forwards `request` to the replicas and calls `done` with OK once all
  // applied it, or with the error that stopped it. `position`: the push's
  // (PushOutcome::position; 0: not newly taken). The forwarding waits
  // (retries) on one of the replicator's own threads, never on gRPC's: a
  // handler thread blocked on a peer could starve the server of the
  // threads that would answer it. `request` must live until `done`.
  using ForwardDone = absl::AnyInvocable<void(absl::Status) &&>;
  void Forward(std::string method, const grpc::ByteBuffer* request,
               uint64_t position, ForwardDone done);

  // What Stats reports of this replica: "primary", "backup" or
  // "catching-up", and its epoch while primary.
  std::string role() const;
  int64_t epoch() const;

  // Replication.CatchUp, served by the primary.
  grpc::ServerWriteReactor<shardps::CatchUpChunk>* CatchUp(
      grpc::CallbackServerContext* context,
      const shardps::CatchUpRequest* request) override;

 private:
  // How long a joining replica waits for a primary to copy from.
  static constexpr absl::Duration kCatchUpWait = absl::Seconds(30);

  Replicator(ReplicationOptions options, std::string job,
             std::string auth_token, TlsFiles tls, TableRegistry* registry,
             LogSink* log, std::unique_ptr<EtcdClient> etcd);
  // Null until Start joined; then for the Replicator's life.
  ServerMembership* membership() const;
  std::string Address() const;

  struct Peer {
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<grpc::GenericStub> stub;
  };
  // The replicas a primary of `epoch` forwards to: those added by CatchUp
  // and the ready ones of the layout when it became primary.
  std::vector<std::string> Targets(int64_t epoch);
  // Forward's work, on a forwarding thread.
  absl::Status ForwardNow(absl::string_view method,
                          const grpc::ByteBuffer& request, uint64_t position);
  // A forwarding thread: runs queued work until stopping_.
  void RunForwards();
  // While this replica is a ready backup, every 100 ms: probes the
  // primary's port; after three refusals in a row (nothing listens: the
  // process died) deposes it in etcd, so that a ready replica takes over
  // now rather than when its lease runs out. A primary that does not
  // answer at all may be partitioned, not dead: it keeps its place until
  // its lease ends. While this replica is not ready (it lost its place in
  // etcd while it lived), it catches up again instead (CatchUpAgain).
  void ProbePrimary();
  // Forwards to one replica until it applied the call, refused it as stale
  // (UNAVAILABLE: this server is no longer the primary) or left etcd.
  absl::Status ForwardTo(const std::string& address, absl::string_view method,
                         const grpc::ByteBuffer& request, int64_t epoch,
                         uint64_t position);
  void Drop(const std::string& address);
  Peer& PeerFor(const std::string& address);
  // Whether `address` is still a registered replica of the shard.
  bool Registered(const std::string& address) const;
  // Copies the state of the primary of `epoch` into the registry
  // (replacing what is here).
  absl::Status CatchUpFrom(const std::string& primary, int64_t epoch);
  // For a replica that lost its place in etcd while it lived (its lease
  // ended; ServerMembership registered it again, not ready): refuses
  // clients and forwards as catching up, copies the shard from the current
  // primary and says it is ready again. One attempt (the error that
  // stopped it); the prober calls it every 100 ms until it succeeds.
  absl::Status CatchUpAgain();

  const ReplicationOptions options_;
  const std::string job_;
  const std::string auth_token_;
  const TlsFiles tls_;
  TableRegistry* const registry_;
  LogSink* const log_;
  const std::unique_ptr<EtcdClient> etcd_;

  mutable absl::Mutex mu_;
  std::string address_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<ServerMembership> membership_ ABSL_GUARDED_BY(mu_);
  bool catching_up_ ABSL_GUARDED_BY(mu_) = true;
  // The primary's epoch when this replica copied from it, and per table
  // the pushes the copy holds (TableCheckpoint::admitted_pushes).
  int64_t copied_epoch_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, uint64_t> copied_positions_
      ABSL_GUARDED_BY(mu_);
  int64_t targets_epoch_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::string> targets_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::unique_ptr<Peer>> peers_
      ABSL_GUARDED_BY(mu_);

  // Forwarding work waiting for a thread, and the threads.
  absl::Mutex queue_mu_;
  std::deque<absl::AnyInvocable<void() &&>> queue_ ABSL_GUARDED_BY(queue_mu_);
  bool stopping_ ABSL_GUARDED_BY(queue_mu_) = false;
  std::vector<std::thread> forwarders_;
  std::thread prober_;
};

}  // namespace ps

#endif  // SHARDPS_PS_SERVER_REPLICATOR_H_
