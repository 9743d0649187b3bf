// ReplicaSet: what shardps-launch --replicas=R adds to a run. It starts the
// job's etcd (data and log in the run directory), writes the replicas' own
// token (RUN_DIR/replication.token, given to servers only, so that a
// worker cannot pose as a primary to a backup) and says where each
// server process sits: process p is replica p / S of shard p % S, started
// replica 0 of every shard first (each becomes its shard's primary) and the
// others once every shard has a primary, so that they copy from it
// (ps/server/replicator.h).
//
// Thread-safety: none; owned by the launcher's thread.
#ifndef SHARDPS_WORKER_LAUNCH_REPLICA_SET_H_
#define SHARDPS_WORKER_LAUNCH_REPLICA_SET_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ps/coord/etcd_client.h"
#include "ps/coord/etcd_process.h"

namespace worker {

class ReplicaSet {
 public:
  // Starts etcd on `host` (an address every server and worker reaches).
  static absl::StatusOr<std::unique_ptr<ReplicaSet>> Start(
      const std::string& run_dir, const std::string& host, int shards,
      int replicas);
  ReplicaSet(const ReplicaSet&) = delete;
  ReplicaSet& operator=(const ReplicaSet&) = delete;
  ~ReplicaSet() = default;  // stops etcd

  std::string endpoint() const { return etcd_->endpoint(); }
  int processes() const { return shards_ * replicas_; }
  int shard(int process) const { return process % shards_; }
  int replica(int process) const { return process / shards_; }
  // "server-S-rR".
  std::string Name(int process) const;
  // The flags that make server process `process` its replica.
  std::vector<std::string> ServerArgs(int process) const;
  // Waits until every shard of `job` has a primary.
  absl::Status AwaitPrimaries(const std::string& job,
                              absl::Duration timeout) const;

 private:
  ReplicaSet(int shards, int replicas) : shards_(shards), replicas_(replicas) {}

  const int shards_;
  const int replicas_;
  std::string token_file_;
  std::unique_ptr<ps::EtcdProcess> etcd_;
  std::unique_ptr<ps::EtcdClient> client_;
};

}  // namespace worker

#endif  // SHARDPS_WORKER_LAUNCH_REPLICA_SET_H_
