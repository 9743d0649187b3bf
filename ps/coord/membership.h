// Membership of a replicated job in etcd (DESIGN.md, "Membership and
// replication"). Under /shardps/JOB/ each shard S has
//   shards/S/replicas/R   -> "host:port" of replica R, tied to its lease,
//                            with " catching-up" after it until the
//                            replica holds the shard's state
//   shards/S/primary      -> "R host:port" of the primary, tied to the
//                            primary's lease and created by a transaction
//                            that succeeds only when the key is absent
// so a server that dies (its lease ends) leaves the layout by itself, and
// exactly one live replica becomes primary after it. A shard's epoch is
// the etcd revision that created its primary key: it grows with every
// change of primary, so a stale primary can be told apart.
//
// ServerMembership is one server's place in it: it keeps its lease alive,
// campaigns for primary while it is ready to serve, and notices when it is
// no longer primary. When etcd cannot be reached it keeps the role it has
// (the layout stands; no failover can happen meanwhile) and says so in the
// log, once, and again when etcd is back.
//
// Thread-safety: all methods are safe to call concurrently.
#ifndef SHARDPS_PS_COORD_MEMBERSHIP_H_
#define SHARDPS_PS_COORD_MEMBERSHIP_H_

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
#include "ps/coord/etcd_client.h"

namespace ps {

// The keys of a job and shard.
std::string JobPrefix(absl::string_view job);
std::string ReplicaKey(absl::string_view job, uint32_t shard, uint32_t replica);
std::string PrimaryKey(absl::string_view job, uint32_t shard);

struct ReplicaAddress {
  uint32_t replica = 0;
  std::string address;
  bool ready = true;  // false while it catches up
};

struct ShardLayout {
  std::vector<ReplicaAddress> replicas;  // live ones, by replica id
  // The primary, if the shard has one now; epoch 0 when it has none.
  uint32_t primary_replica = 0;
  std::string primary_address;
  int64_t epoch = 0;
};

struct JobLayout {
  int64_t revision = 0;  // etcd's, when read
  std::vector<ShardLayout> shards;
};

// The layout of `num_shards` shards of `job` as etcd holds it now.
// INVALID_ARGUMENT naming the key when a value is not what servers write.
absl::StatusOr<JobLayout> ReadLayout(const EtcdClient& etcd,
                                     absl::string_view job,
                                     uint32_t num_shards);

// Reads the layout until every one of `num_shards` shards of `job` has a
// primary (polling every 20 ms); that layout. UNAVAILABLE naming the first
// shard without one after `timeout`.
absl::StatusOr<JobLayout> AwaitPrimaries(const EtcdClient& etcd,
                                         absl::string_view job,
                                         uint32_t num_shards,
                                         absl::Duration timeout);

// Ends the term of shard `shard`'s primary of `epoch`, if it is still that
// one: revokes the lease its primary key is tied to, which deletes the
// keys of that process (a replica key since taken over by a restarted
// process of the same replica is on another lease and stays). For a
// primary known to be dead (its port refuses connections) before its lease
// runs out, so that a ready replica takes over now. True when it was
// deposed.
absl::StatusOr<bool> DeposePrimary(const EtcdClient& etcd,
                                   absl::string_view job, uint32_t shard,
                                   int64_t epoch);

struct MembershipOptions {
  const EtcdClient* etcd = nullptr;  // must outlive the membership
  std::string job;
  uint32_t shard = 0;
  uint32_t replica = 0;
  std::string address;  // "host:port" clients reach this server at
  // How long after its last renewal a dead server's keys last; renewed
  // every ttl/3. etcd may round it up to its minimum.
  absl::Duration ttl = absl::Seconds(1);
  LogSink* log = nullptr;  // null: stderr
};

class ServerMembership {
 public:
  // Takes a lease and registers the replica; it campaigns for primary only
  // after SetReady(true).
  static absl::StatusOr<std::unique_ptr<ServerMembership>> Join(
      MembershipOptions options);

  ServerMembership(const ServerMembership&) = delete;
  ServerMembership& operator=(const ServerMembership&) = delete;
  // Leave()s.
  ~ServerMembership();

  // Says in etcd whether this replica holds the shard's state: one that is
  // not (yet) caught up must not become primary, nor be counted on by the
  // primary. A replica whose lease ended (etcd did not hear from it for
  // the ttl) is registered again as not ready: call SetReady(true) once
  // caught up.
  absl::Status SetReady(bool ready);
  // For a replica that finds its shard held by nobody (no primary, no
  // ready replica): becomes the primary, by an etcd transaction only one
  // replica can win, and then ready. False when another replica won: this
  // one must copy the state from it. Two replicas starting at once would
  // otherwise both call themselves ready with empty state, and the one
  // that lost the election could miss pushes made before it said so.
  absl::StatusOr<bool> ClaimFreshShard();
  bool ready() const;
  bool is_primary() const;
  // The shard's epoch while this replica is primary; else 0.
  int64_t epoch() const;
  // The newest epoch of the shard this replica has seen (its own or
  // another primary's); a forwarded push of an older one is stale.
  int64_t newest_epoch() const;
  // Whether another process registered as this replica: this one then
  // steps aside for good.
  bool displaced() const;
  // Whether the last call to etcd failed (the layout is frozen meanwhile).
  bool etcd_unreachable() const;

  // Ends the lease at once (the keys go, another replica may take over)
  // and stops. Idempotent.
  void Leave();

 private:
  explicit ServerMembership(MembershipOptions options);

  // Every ttl/3: renew the lease (a new one, registered anew, if it ended),
  // then check or campaign for the primary key.
  void Run();
  // Watches the primary key and wakes Run when it changes, so that a
  // backup campaigns as soon as a dead primary's key is gone.
  void WatchPrimary();
  absl::Status Renew();
  absl::Status Campaign();
  // Puts the replica key back, not ready, if it is not `lease`'s any more.
  absl::Status CheckRegistered(int64_t lease);
  // Registers the replica key under `lease`, not ready, unless another
  // process holds it: then this one is displaced for good.
  absl::Status Reregister(int64_t lease);
  std::string ReplicaValue(bool ready) const;
  // Records whether etcd answered; logs the changes.
  void NoteReachable(const absl::Status& status);

  const MembershipOptions options_;
  const std::string replica_key_;
  const std::string primary_key_;
  const std::string primary_value_;

  mutable absl::Mutex mu_;
  absl::CondVar wake_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool ready_ ABSL_GUARDED_BY(mu_) = false;
  bool primary_ ABSL_GUARDED_BY(mu_) = false;
  int64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t newest_epoch_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t lease_ ABSL_GUARDED_BY(mu_) = 0;
  bool unreachable_ ABSL_GUARDED_BY(mu_) = false;
  bool displaced_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<bool> stop_watch_{false};
  std::thread thread_;
  std::thread watcher_;
};

}  // namespace ps

#endif  // SHARDPS_PS_COORD_MEMBERSHIP_H_
