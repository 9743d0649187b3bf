#include "worker/launch/replica_set.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "ps/coord/membership.h"
#include "worker/launch/launch_run.h"

namespace worker {

absl::StatusOr<std::unique_ptr<ReplicaSet>> ReplicaSet::Start(
    const std::string& run_dir, const std::string& host, int shards,
    int replicas) {
  std::unique_ptr<ReplicaSet> set(new ReplicaSet(shards, replicas));
  set->token_file_ = run_dir + "/replication.token";
  if (absl::Status s = WriteFreshToken(set->token_file_); !s.ok()) return s;
  ps::EtcdProcessOptions o;
  o.data_dir = run_dir + "/etcd";
  o.log_path = run_dir + "/etcd.log";
  o.host = host;
  absl::StatusOr<std::unique_ptr<ps::EtcdProcess>> etcd =
      ps::EtcdProcess::Start(o);
  if (!etcd.ok()) {
    return absl::Status(etcd.status().code(),
                        absl::StrCat("etcd for --replicas did not start: ",
                                     etcd.status().message()));
  }
  set->etcd_ = *std::move(etcd);
  ps::EtcdOptions c;
  c.endpoint = set->etcd_->endpoint();
  absl::StatusOr<std::unique_ptr<ps::EtcdClient>> client =
      ps::EtcdClient::Create(c);
  if (!client.ok()) return client.status();
  set->client_ = *std::move(client);
  return set;
}

std::string ReplicaSet::Name(int process) const {
  return absl::StrCat("server-", shard(process), "-r", replica(process));
}

std::vector<std::string> ReplicaSet::ServerArgs(int process) const {
  return {absl::StrCat("--etcd=", endpoint()),
          absl::StrCat("--shard=", shard(process)),
          absl::StrCat("--replica=", replica(process)),
          "--replication_token_file=" + token_file_};
}

absl::Status ReplicaSet::AwaitPrimaries(const std::string& job,
                                        absl::Duration timeout) const {
  return ps::AwaitPrimaries(*client_, job, shards_, timeout).status();
}

}  // namespace worker
