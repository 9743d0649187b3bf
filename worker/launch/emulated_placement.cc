// The emulated cluster as a placement backend (worker/launch/placement.h).
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "worker/launch/emulated_cluster.h"
#include "worker/launch/placement.h"

namespace worker {
namespace {

class EmulatedPlacement final : public Placement {
 public:
  absl::StatusOr<Placed> Place(const PlacementOptions& options) override {
    if (geteuid() != 0) {
      return absl::PermissionDeniedError(
          "--cluster=emulated needs root (network namespaces and tc): run "
          "it with sudo");
    }
    EmulatedClusterOptions co;
    co.name = absl::StrCat("sps", getpid());
    co.servers = options.servers;
    co.workers = options.workers;
    co.server_link = options.server_link;
    co.worker_link = options.worker_link;
    co.storage_link = options.storage_link;
    co.subnet = options.subnet;
    // Without --data (--check, or scripts that read their own data) the
    // storage host serves nothing.
    if (!options.data.empty()) {
      std::error_code error;
      const std::filesystem::path root =
          std::filesystem::canonical(options.data, error);
      co.data_root = error ? options.data : root.string();
    }
    co.log_dir = options.run_dir;
    absl::StatusOr<std::unique_ptr<EmulatedCluster>> c =
        EmulatedCluster::Create(co);
    if (!c.ok()) return c.status();
    cluster_ = *std::move(c);
    Placed placed;
    for (int i = 0; i < options.servers; ++i) {
      placed.servers.push_back(cluster_->server(i));
    }
    for (int i = 0; i < options.workers; ++i) {
      placed.workers.push_back(cluster_->worker(i));
    }
    if (!co.data_root.empty()) placed.data = cluster_->StorageUrl("");
    placed.control_address = cluster_->control_address();
    placed.links = {{"server", co.server_link},
                    {"worker", co.worker_link},
                    {"storage", co.storage_link}};
    // The launcher's own health checks travel the emulated network too.
    if (absl::Status s = cluster_->EnterControlHost(); !s.ok()) return s;
    return placed;
  }

  // The links' bytes and drops, then the cluster comes down.
  absl::StatusOr<bool> Finish(shardps::RunSummary* summary) override {
    if (cluster_ == nullptr) return false;
    absl::StatusOr<std::vector<shardps::LinkStats>> links =
        cluster_->LinkStats();
    if (links.ok()) {
      for (shardps::LinkStats& l : *links) {
        *summary->add_link_stats() = std::move(l);
      }
    }
    absl::Status down = cluster_->TearDown();
    if (!down.ok()) {
      return absl::Status(down.code(),
                          absl::StrCat("teardown: ", down.message()));
    }
    return links.ok();
  }

 private:
  std::unique_ptr<EmulatedCluster> cluster_;  // torn down when destroyed
};

}  // namespace

std::unique_ptr<Placement> MakeEmulatedPlacement() {
  return std::make_unique<EmulatedPlacement>();
}

}  // namespace worker
