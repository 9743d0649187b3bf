// EmulatedCluster: hosts as network namespaces with capped links
// (experiments/cluster/emucluster.sh, installed beside the binaries as
// shardps-emucluster), brought up on creation and always torn down on
// destruction. The launcher places servers and workers on its hosts and
// moves itself onto the control host so that its health checks travel the
// emulated network too.
//
// Thread-safety: none. EnterControlHost must be called while the process
// has one thread (before gRPC starts).
#ifndef SHARDPS_WORKER_LAUNCH_EMULATED_CLUSTER_H_
#define SHARDPS_WORKER_LAUNCH_EMULATED_CLUSTER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/summary.pb.h"
#include "worker/launch/host_slot.h"

namespace worker {

struct EmulatedClusterOptions {
  std::string name;  // namespaces are NAME-...
  int servers = 1;
  int workers = 1;
  std::string server_link = "200mbit";  // tc rates, each direction
  std::string worker_link = "1gbit";
  std::string storage_link = "400mbit";
  std::string data_root;  // served by the storage host's nginx; empty: none
  std::string subnet = "10.213";
  std::string log_dir;  // the setup script's output: emucluster-*.log
};

class EmulatedCluster {
 public:
  static absl::StatusOr<std::unique_ptr<EmulatedCluster>> Create(
      const EmulatedClusterOptions& options);
  EmulatedCluster(const EmulatedCluster&) = delete;
  EmulatedCluster& operator=(const EmulatedCluster&) = delete;
  ~EmulatedCluster();  // tears everything down

  HostSlot server(int i) const;
  HostSlot worker(int i) const;
  // The control host's address, where the launcher (and what it starts,
  // such as etcd) runs once EnterControlHost moved it there.
  std::string control_address() const;
  // http://STORAGE/ + path under data_root.
  std::string StorageUrl(const std::string& path) const;
  // Moves this process into the control host's network namespace; TearDown
  // moves the calling thread back first, so that the teardown script runs
  // (and kills) outside the cluster.
  absl::Status EnterControlHost();
  absl::Status TearDown();
  // Bytes sent and packets dropped on every capped link so far.
  absl::StatusOr<std::vector<shardps::LinkStats>> LinkStats() const;

 private:
  explicit EmulatedCluster(EmulatedClusterOptions options)
      : options_(std::move(options)) {}
  absl::Status RunScript(const std::vector<std::string>& args,
                         const std::string& log_path) const;
  HostSlot Slot(const std::string& ns, const std::string& address) const;

  const EmulatedClusterOptions options_;
  bool up_ = false;
  int home_netns_fd_ = -1;  // where the process was before EnterControlHost
};

}  // namespace worker

#endif  // SHARDPS_WORKER_LAUNCH_EMULATED_CLUSTER_H_
