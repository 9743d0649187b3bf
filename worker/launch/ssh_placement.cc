// Hosts of a hostfile over OpenSSH as a placement backend
// (worker/launch/placement.h).
#include <memory>

#include "worker/launch/placement.h"
#include "worker/launch/ssh_cluster.h"

namespace worker {
namespace {

class SshPlacement final : public Placement {
 public:
  absl::StatusOr<Placed> Place(const PlacementOptions& options) override {
    absl::StatusOr<std::vector<SshHost>> hosts = ReadHostfile(options.hostfile);
    if (!hosts.ok()) return hosts.status();
    SshSlots slots = PlaceOnHosts(*hosts, options.servers, options.workers,
                                  options.ssh_base_port, options.ssh_args);
    Placed placed;
    placed.servers = std::move(slots.servers);
    placed.workers = std::move(slots.workers);
    placed.data = options.data;
    return placed;
  }

  // The launcher's own address on the hosts' network is not known here.
  bool has_control_address() const override { return false; }
};

}  // namespace

std::unique_ptr<Placement> MakeSshPlacement() {
  return std::make_unique<SshPlacement>();
}

}  // namespace worker
