#include "ps/bench/spawned_servers.h"

#include <stdlib.h>

#include <cerrno>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "ps/base/file_io.h"
#include "ps/base/program.h"
#include "ps/coord/etcd_client.h"

namespace ps {

absl::StatusOr<JobLayout> AwaitLayout(const ClientOptions& client) {
  EtcdOptions e;
  e.endpoint = client.etcd;
  absl::StatusOr<std::unique_ptr<EtcdClient>> etcd = EtcdClient::Create(e);
  if (!etcd.ok()) return etcd.status();
  return AwaitPrimaries(**etcd, client.job, client.num_shards,
                        absl::Seconds(30));
}

SpawnedServers::~SpawnedServers() {
  servers_.clear();
  std::error_code ignored;
  if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
}

absl::Status SpawnedServers::Start(int n, int replicas, ClientOptions* client) {
  char dir[] = "/tmp/shardps-bench-XXXXXX";
  if (::mkdtemp(dir) == nullptr) return ErrnoStatus(errno, "create", dir);
  dir_ = dir;
  if (replicas > 1) {
    EtcdProcessOptions e;
    e.data_dir = dir_ + "/etcd";
    e.log_path = dir_ + "/etcd.log";
    absl::StatusOr<std::unique_ptr<EtcdProcess>> etcd = EtcdProcess::Start(e);
    if (!etcd.ok()) return etcd.status();
    etcd_ = *std::move(etcd);
    client->etcd = etcd_->endpoint();
    client->num_shards = n;
  }
  // Replica 0 of every shard first: each becomes its shard's primary, and
  // the others copy from it as they join.
  for (int r = 0; r < replicas; ++r) {
    for (int i = 0; i < n; ++i) {
      std::vector<std::string> args = {absl::StrCat("--job=", client->job)};
      if (replicas > 1) {
        args.insert(args.end(), {absl::StrCat("--etcd=", client->etcd),
                                 absl::StrCat("--shard=", i),
                                 absl::StrCat("--replica=", r)});
      }
      absl::StatusOr<std::string> address =
          Spawn(absl::StrCat("server-", i, "-", r), std::move(args));
      if (!address.ok()) return address.status();
      if (replicas == 1) client->server_addrs.push_back(*address);
    }
    if (r == 0 && replicas > 1) {
      if (absl::Status s = AwaitLayout(*client).status(); !s.ok()) return s;
    }
  }
  return absl::OkStatus();
}

absl::Status SpawnedServers::Stop() {
  for (auto& s : servers_) {
    if (absl::Status st = s->Stop(); !st.ok()) return st;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> SpawnedServers::Spawn(
    std::string name, std::vector<std::string> args) {
  ServerProcessOptions o;
  o.binary = SiblingBinary("shardps-server");
  o.run_dir = dir_;
  o.name = std::move(name);
  o.extra_args = std::move(args);
  absl::StatusOr<std::unique_ptr<ServerProcess>> p = ServerProcess::Spawn(o);
  if (!p.ok()) return p.status();
  servers_.push_back(*std::move(p));
  return servers_.back()->address();
}

}  // namespace ps
