#include "worker/launch/emulated_cluster.h"

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "ps/base/child_process.h"
#include "ps/base/file_io.h"
#include "ps/base/program.h"
#include "ps/base/server_process.h"

namespace worker {
namespace {

constexpr char kIp[] = "/usr/bin/ip";

}  // namespace

absl::StatusOr<std::unique_ptr<EmulatedCluster>> EmulatedCluster::Create(
    const EmulatedClusterOptions& options) {
  if (!options.data_root.empty() && options.data_root[0] != '/') {
    return absl::InvalidArgumentError(
        "the emulated cluster serves data from an absolute directory");
  }
  std::unique_ptr<EmulatedCluster> cluster(new EmulatedCluster(options));
  cluster->up_ = true;  // a failed `up` still leaves things to remove
  absl::Status s =
      cluster->RunScript({"up", absl::StrCat("--name=", options.name),
                          absl::StrCat("--servers=", options.servers),
                          absl::StrCat("--workers=", options.workers),
                          absl::StrCat("--subnet=", options.subnet),
                          absl::StrCat("--server_link=", options.server_link),
                          absl::StrCat("--worker_link=", options.worker_link),
                          absl::StrCat("--storage_link=", options.storage_link),
                          absl::StrCat("--data_root=", options.data_root)},
                         options.log_dir + "/emucluster-up.log");
  if (!s.ok()) {
    return absl::Status(s.code(),
                        absl::StrCat("emulated cluster setup: ", s.message()));
  }
  return cluster;
}

EmulatedCluster::~EmulatedCluster() { TearDown().IgnoreError(); }

absl::Status EmulatedCluster::TearDown() {
  if (home_netns_fd_ >= 0) {
    setns(home_netns_fd_, CLONE_NEWNET);
    close(home_netns_fd_);
    home_netns_fd_ = -1;
  }
  if (!up_) return absl::OkStatus();
  up_ = false;
  return RunScript({"down", absl::StrCat("--name=", options_.name)},
                   options_.log_dir + "/emucluster-down.log");
}

absl::StatusOr<std::vector<shardps::LinkStats>> EmulatedCluster::LinkStats()
    const {
  const std::string path = options_.log_dir + "/link-stats.txt";
  if (absl::Status s =
          RunScript({"stats", absl::StrCat("--name=", options_.name)}, path);
      !s.ok()) {
    return s;
  }
  std::vector<shardps::LinkStats> stats;
  std::ifstream in(path);
  std::string host, device;
  double sent, dropped;
  while (in >> host >> device >> sent >> dropped) {
    shardps::LinkStats& l = stats.emplace_back();
    l.set_host(host);
    l.set_device(device);
    l.set_sent_bytes(sent);
    l.set_dropped_packets(dropped);
  }
  return stats;
}

absl::Status EmulatedCluster::RunScript(const std::vector<std::string>& args,
                                        const std::string& log_path) const {
  std::vector<std::string> argv = {ps::SiblingBinary("shardps-emucluster")};
  argv.insert(argv.end(), args.begin(), args.end());
  absl::StatusOr<std::unique_ptr<ps::ChildProcess>> script =
      ps::ChildProcess::Start(absl::StrCat("emucluster ", args[0]), argv,
                              log_path);
  if (!script.ok()) return script.status();
  return (*script)->Wait(absl::Now() + absl::Seconds(120));
}

HostSlot EmulatedCluster::Slot(const std::string& ns,
                               const std::string& address) const {
  HostSlot slot;
  slot.emulated = true;
  slot.address = address;
  slot.command_prefix = {kIp, "netns", "exec",
                         absl::StrCat(options_.name, "-", ns)};
  return slot;
}

HostSlot EmulatedCluster::server(int i) const {
  return Slot(absl::StrCat("s", i),
              absl::StrCat(options_.subnet, ".1.", i + 1));
}

HostSlot EmulatedCluster::worker(int i) const {
  return Slot(absl::StrCat("w", i),
              absl::StrCat(options_.subnet, ".2.", i + 1));
}

std::string EmulatedCluster::control_address() const {
  return absl::StrCat(options_.subnet, ".0.1");
}

std::string EmulatedCluster::StorageUrl(const std::string& path) const {
  return absl::StrCat("http://", options_.subnet, ".0.2",
                      path.empty() ? "" : "/", path);
}

absl::Status EmulatedCluster::EnterControlHost() {
  if (home_netns_fd_ < 0) {
    home_netns_fd_ = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
  }
  const std::string path =
      absl::StrCat("/var/run/netns/", options_.name, "-ctl");
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ps::ErrnoStatus(errno, "open", path);
  const int r = setns(fd, CLONE_NEWNET);
  const int e = errno;
  close(fd);
  if (r != 0) return ps::ErrnoStatus(e, "enter the control host", path);
  return absl::OkStatus();
}

}  // namespace worker
