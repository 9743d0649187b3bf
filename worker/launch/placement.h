// Where a run's servers and workers go: one placement backend per cluster
// kind behind one interface, as ps-lite's tracker has one launcher per
// kind:
//   local     every process on this host, on loopback;
//   emulated  one network namespace per process with capped links and an
//             HTTP storage host (worker/launch/emulated_cluster.h; root);
//   ssh       the hosts of a hostfile, over OpenSSH
//             (worker/launch/ssh_cluster.h).
//
// Thread-safety: used by the launcher's main thread. Place may change
// process-wide state (the emulated backend moves the process into its
// control host's network namespace), so it runs before any other thread.
#ifndef SHARDPS_WORKER_LAUNCH_PLACEMENT_H_
#define SHARDPS_WORKER_LAUNCH_PLACEMENT_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/summary.pb.h"
#include "worker/launch/host_slot.h"

namespace worker {

// What any backend may need; each reads its own fields.
struct PlacementOptions {
  int servers = 1;
  int workers = 1;
  std::string run_dir;  // absolute; backends log their set-up here
  std::string data;     // the launcher's --data, as given
  // ssh
  std::string hostfile;
  std::vector<std::string> ssh_args;
  int ssh_base_port = 7070;
  // emulated
  std::string server_link = "200mbit";
  std::string worker_link = "1gbit";
  std::string storage_link = "400mbit";
  std::string subnet = "10.213";
};

// Where everything goes.
struct Placed {
  std::vector<HostSlot> servers;             // one per server
  std::vector<HostSlot> workers;             // one per worker
  std::string data;                          // what workers get as --data
  std::map<std::string, std::string> links;  // recorded in the summary
  // Where the launcher itself serves what every host must reach (the etcd
  // of --replicas); empty when !has_control_address().
  std::string control_address;
};

class Placement {
 public:
  virtual ~Placement() = default;

  // Brings the hosts up (if the kind has any to bring up) and places every
  // process. Errors say what is missing (root, a hostfile, --data).
  virtual absl::StatusOr<Placed> Place(const PlacementOptions& options) = 0;

  // Whether Place gives a control_address (where the launcher can start
  // the etcd of --replicas for every host to reach).
  virtual bool has_control_address() const { return true; }

  // After the run: adds what the backend measured to `summary` (true if it
  // added anything) and releases the hosts.
  virtual absl::StatusOr<bool> Finish(shardps::RunSummary* summary) {
    return false;
  }
};

// The backend of --cluster=`kind`; INVALID_ARGUMENT naming the kinds there
// are.
absl::StatusOr<std::unique_ptr<Placement>> MakePlacement(
    absl::string_view kind);

std::unique_ptr<Placement> MakeLocalPlacement();
std::unique_ptr<Placement> MakeEmulatedPlacement();
std::unique_ptr<Placement> MakeSshPlacement();

}  // namespace worker

#endif  // SHARDPS_WORKER_LAUNCH_PLACEMENT_H_
