// SpawnedServers: shardps-server processes a benchmark starts on loopback
// for its own run (optionally replicated, with an etcd for their
// membership), in a temporary directory removed when it is destroyed.
//
// Thread-safety: use from one thread.
#ifndef SHARDPS_PS_BENCH_SPAWNED_SERVERS_H_
#define SHARDPS_PS_BENCH_SPAWNED_SERVERS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ps/base/server_process.h"
#include "ps/client/client.h"
#include "ps/coord/etcd_process.h"
#include "ps/coord/membership.h"

namespace ps {

// The layout of the client's replicated job (client.etcd, job, num_shards)
// once every shard has a primary in its etcd.
absl::StatusOr<JobLayout> AwaitLayout(const ClientOptions& client);

class SpawnedServers {
 public:
  SpawnedServers() = default;
  SpawnedServers(const SpawnedServers&) = delete;
  SpawnedServers& operator=(const SpawnedServers&) = delete;
  ~SpawnedServers();

  // `n` servers of client->job, or with replicas > 1 an etcd and n shards
  // of `replicas` servers each; the client is pointed at them.
  absl::Status Start(int n, int replicas, ClientOptions* client);
  // Stops every server, failing if one did not exit cleanly.
  absl::Status Stop();

 private:
  absl::StatusOr<std::string> Spawn(std::string name,
                                    std::vector<std::string> args);

  std::string dir_;
  std::unique_ptr<EtcdProcess> etcd_;
  std::vector<std::unique_ptr<ServerProcess>> servers_;
};

}  // namespace ps

#endif  // SHARDPS_PS_BENCH_SPAWNED_SERVERS_H_
