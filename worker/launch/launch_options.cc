#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "worker/launch/launcher.h"

namespace worker {
namespace {

// INVALID_ARGUMENT when a worker flag after -- is one the launcher gives
// every worker itself, which would silently win over it.
absl::Status CheckWorkerArgs(const LaunchOptions& options) {
  std::vector<std::string> owned = {"server_addrs", "etcd",    "num_servers",
                                    "rank",         "world",   "loader",
                                    "overlap",      "run_dir", "job"};
  if (!options.data.empty()) owned.push_back("data");
  if (!options.auth_token_file.empty()) owned.push_back("auth_token_file");
  for (const std::string& arg : options.worker_args) {
    for (const std::string& flag : owned) {
      if (arg == "--" + flag || absl::StartsWith(arg, "--" + flag + "=")) {
        return absl::InvalidArgumentError(absl::StrCat(
            "worker flag ", arg, " after -- is the launcher's own: give --",
            flag, " before -- (the launcher passes it to every worker)"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckLaunchOptions(const LaunchOptions& options) {
  if (options.servers < 1 || options.workers < 1) {
    return absl::InvalidArgumentError(
        "--servers and --workers must be at least 1");
  }
  if (options.replicas < 1 || options.replicas > 5) {
    return absl::InvalidArgumentError("--replicas must be in [1, 5]");
  }
  if (options.server_hosts.size() !=
          static_cast<size_t>(options.servers * options.replicas) ||
      options.worker_hosts.size() != static_cast<size_t>(options.workers)) {
    return absl::InvalidArgumentError("one host slot per server and worker");
  }
  if (options.metrics_port < 0 || options.metrics_port +
                                          options.servers * options.replicas +
                                          options.workers >
                                      65536) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--metrics_port=", options.metrics_port, " leaves no room for ",
        options.servers * options.replicas + options.workers,
        " ports below 65536"));
  }
  if (options.loader != "sequential" && options.loader != "parallel") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--loader=", options.loader, " is not sequential or parallel"));
  }
  if (options.overlap != "none" && options.overlap != "layer") {
    return absl::InvalidArgumentError(
        absl::StrCat("--overlap=", options.overlap, " is not none or layer"));
  }
  if (absl::Status s = CheckWorkerArgs(options); !s.ok()) return s;
  return absl::OkStatus();
}

}  // namespace worker
