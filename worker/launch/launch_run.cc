#include "worker/launch/launch_run.h"

#include <sys/random.h>

#include <cerrno>
#include <filesystem>
#include <optional>
#include <system_error>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "ps/base/file_io.h"
#include "ps/base/json_file.h"
#include "ps/base/log.h"
#include "ps/base/program.h"

namespace worker {
namespace {

absl::Status Prepare(LaunchRequest* r) {
  LaunchOptions& o = r->launch;
  if (o.run_dir.empty()) {
    return absl::InvalidArgumentError("--run_dir is required");
  }
  if (o.servers < 1 || o.workers < 1 || o.servers > 250 || o.workers > 250) {
    return absl::InvalidArgumentError(
        "--servers and --workers must be in [1, 250]");
  }
  if (o.replicas < 1 || o.replicas > 5) {
    return absl::InvalidArgumentError("--replicas must be in [1, 5]");
  }
  if (absl::Status s = ps::CreateDirectories(o.run_dir); !s.ok()) return s;
  std::error_code error;
  const std::filesystem::path absolute =
      std::filesystem::canonical(o.run_dir, error);
  if (!error) o.run_dir = absolute.string();
  // Every run gets a token, so that servers may listen beyond loopback
  // (emulated hosts, SSH) without letting strangers in.
  if (o.auth_token_file.empty()) {
    o.auth_token_file = o.run_dir + "/job.token";
    if (absl::Status s = WriteFreshToken(o.auth_token_file); !s.ok()) return s;
  }
  r->placement.servers = o.servers * o.replicas;
  r->placement.workers = o.workers;
  r->placement.run_dir = o.run_dir;
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteFreshToken(const std::string& path) {
  std::string bytes(32, '\0');
  if (getrandom(bytes.data(), bytes.size(), 0) !=
      static_cast<ssize_t>(bytes.size())) {
    return ps::ErrnoStatus(errno, "get random bytes for", path);
  }
  return ps::WriteStringToFile(path, absl::BytesToHexString(bytes) + "\n",
                               0600);
}

absl::StatusOr<shardps::RunSummary> RunLaunch(LaunchRequest request,
                                              const StopWait& wait_for_stop) {
  if (absl::Status s = Prepare(&request); !s.ok()) return s;
  LaunchOptions& o = request.launch;
  absl::StatusOr<std::unique_ptr<Placement>> placement =
      MakePlacement(o.cluster);
  if (!placement.ok()) return placement.status();
  if (o.replicas > 1 && !(*placement)->has_control_address()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--replicas > 1 runs with --cluster=local or emulated (the launcher "
        "starts the etcd every replica reaches), not --cluster=",
        o.cluster));
  }
  absl::StatusOr<Placed> placed = (*placement)->Place(request.placement);
  if (!placed.ok()) return placed.status();
  o.server_hosts = std::move(placed->servers);
  o.worker_hosts = std::move(placed->workers);
  o.data = std::move(placed->data);
  o.links = std::move(placed->links);
  o.control_address = std::move(placed->control_address);
  absl::StatusOr<shardps::RunSummary> summary;
  {
    // Started after Place, which may move the process between network
    // namespaces while it has one thread; gone before the hosts are.
    ps::GrpcRuntime grpc_runtime;
    summary = Launch(o, wait_for_stop);
  }
  if (!summary.ok()) {
    shardps::RunSummary unrecorded;
    (*placement)->Finish(&unrecorded).IgnoreError();
    return summary.status();
  }
  // The run is over and recorded: a backend that cannot release its hosts
  // is reported, not fatal.
  absl::StatusOr<bool> added = (*placement)->Finish(&*summary);
  if (!added.ok()) ps::Log(nullptr, added.status().ToString());
  if (added.ok() && *added) {
    if (absl::Status s =
            ps::WriteJsonFile(*summary, o.run_dir + "/summary.json");
        !s.ok()) {
      return s;
    }
  }
  return summary;
}

}  // namespace worker
