// shardps-launch: one training run, S servers and N workers, as plain local
// processes, on an emulated cluster (network namespaces with capped links
// and an HTTP storage host; needs root), or on the hosts of a hostfile over
// SSH.
//   shardps-launch --servers=4 --workers=8 --loader=parallel --run_dir=RUN
//       --data=DATA [--cluster=emulated] -- --epochs=1 --batch=64
// Writes RUN/summary.json and every process's log into RUN; exits non-zero
// if any process failed. Ctrl-C stops everything (and tears the emulated
// cluster down).
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "ps/base/json_file.h"
#include "ps/base/program.h"
#include "ps/base/server_process.h"
#include "ps/wire/security_flags.h"
#include "worker/launch/emulated_cluster.h"
#include "worker/launch/launcher.h"
#include "worker/launch/ssh_cluster.h"

ABSL_FLAG(int, servers, 1, "Parameter servers (1 is the baseline).");
ABSL_FLAG(int, workers, 1, "Workers.");
ABSL_FLAG(std::string, loader, "parallel",
          "parallel (the fix) or sequential (the baseline).");
ABSL_FLAG(std::string, run_dir, "", "Run directory (required).");
ABSL_FLAG(std::string, data, "",
          "Data directory (shardps-data output) given to every worker as "
          "--data; on the emulated cluster it is served by the storage "
          "host over HTTP.");
ABSL_FLAG(std::string, cluster, "local",
          "local (processes on this host, loopback), emulated (one network "
          "namespace per process, capped links; needs root) or ssh (the "
          "hosts of --hostfile, over OpenSSH).");
ABSL_FLAG(std::string, hostfile, "",
          "ssh: one [user@]host[:ssh_port] per line; servers, then workers, "
          "are placed on the hosts round-robin. Binaries and --run_dir must "
          "be at the same paths on every host.");
ABSL_FLAG(std::string, ssh_args, "",
          "ssh: extra arguments for every ssh call, space-separated (e.g. "
          "\"-i /path/key -o StrictHostKeyChecking=accept-new\").");
ABSL_FLAG(int, ssh_base_port, 7070, "ssh: server i listens on this port + i.");
ABSL_FLAG(std::string, job, "launch", "Job id for servers and workers.");
ABSL_FLAG(std::string, optimizer, "",
          "Given to every worker as --optimizer (see shardps-worker "
          "--help); empty: the worker's default.");
ABSL_FLAG(std::string, consistency, "",
          "Given to every worker as --consistency (async, sync, ssp:K); "
          "empty: the worker's default.");
ABSL_FLAG(bool, trace, false,
          "Every server and worker writes a Chrome trace; at the end they are "
          "merged into RUN_DIR/trace.json (open it in Perfetto or "
          "chrome://tracing).");
ABSL_FLAG(int, metrics_port, 0,
          "> 0: every server and worker serves Prometheus metrics on its "
          "host, server i on this port + i, worker r on this port + "
          "--servers + r, listed in RUN_DIR/prometheus-targets.json for "
          "Prometheus' file_sd_configs. 0: none.");
ABSL_FLAG(std::string, compression, "",
          "Given to every worker as --compression (none, fp16, bf16, "
          "onebit); empty: the worker's default.");
ABSL_FLAG(std::string, server_flags, "",
          "Extra shardps-server flags, space-separated (e.g. TLS files).");
ABSL_FLAG(double, ready_timeout_s, 60,
          "Deadline for every server to start and pass its health check.");
ABSL_FLAG(double, progress_s, 1, "Seconds between progress updates.");
ABSL_FLAG(std::string, server_link, "200mbit",
          "Emulated: each server host's link rate, each direction (tc rate).");
ABSL_FLAG(std::string, worker_link, "1gbit",
          "Emulated: each worker host's link rate, each direction.");
ABSL_FLAG(std::string, storage_link, "400mbit",
          "Emulated: the storage host's link rate, each direction.");
ABSL_FLAG(std::string, subnet, "10.213",
          "Emulated: the /16 (first two octets) used inside the namespaces.");

namespace {

int Fail(const absl::Status& s) {
  absl::FPrintF(stderr, "shardps-launch: %s\n", s.ToString());
  return 1;
}

// 32 random bytes from the kernel, hex, into a new file only we can read.
absl::Status WriteFreshToken(const std::string& path) {
  std::ifstream random("/dev/urandom", std::ios::binary);
  std::string bytes(32, '\0');
  if (!random.read(bytes.data(), bytes.size())) {
    return absl::UnavailableError("cannot read /dev/urandom for a job token");
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot create ", path));
  }
  const std::string hex = absl::BytesToHexString(bytes) + "\n";
  const bool written =
      ::write(fd, hex.data(), hex.size()) == static_cast<ssize_t>(hex.size());
  ::close(fd);
  return written ? absl::OkStatus()
                 : absl::UnavailableError(absl::StrCat("cannot write ", path));
}

std::string Absolute(const std::string& path) {
  char resolved[PATH_MAX];
  return realpath(path.c_str(), resolved) != nullptr ? resolved : path;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> rest = ps::InitProgram(
      argc, argv,
      "runs S servers and N workers and writes RUN_DIR/summary.json.\n"
      "  shardps-launch --servers=4 --workers=8 --loader=parallel "
      "--run_dir=RUN --data=DATA [--cluster=emulated] -- <worker flags>");
  // Stop signals are taken in the monitoring loop, so that every child is
  // stopped and the cluster torn down before exit. Blocked before any
  // thread exists so that all inherit the mask.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stop_signals, sig);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  worker::StopWait wait_for_stop = [&stop_signals](absl::Duration d) {
    const timespec ts = absl::ToTimespec(d);
    return sigtimedwait(&stop_signals, nullptr, &ts) > 0;
  };

  worker::LaunchOptions o;
  o.servers = absl::GetFlag(FLAGS_servers);
  o.workers = absl::GetFlag(FLAGS_workers);
  o.loader = absl::GetFlag(FLAGS_loader);
  o.run_dir = absl::GetFlag(FLAGS_run_dir);
  o.job = absl::GetFlag(FLAGS_job);
  o.cluster = absl::GetFlag(FLAGS_cluster);
  o.trace = absl::GetFlag(FLAGS_trace);
  o.metrics_port = absl::GetFlag(FLAGS_metrics_port);
  o.ready_timeout = absl::Seconds(absl::GetFlag(FLAGS_ready_timeout_s));
  o.progress_every = absl::Seconds(absl::GetFlag(FLAGS_progress_s));
  o.server_binary = ps::SiblingBinary("shardps-server");
  o.worker_binary = ps::SiblingBinary("shardps-worker");
  // The launcher's shortcuts first: flags after -- win.
  for (const auto& [flag, value] :
       {std::pair<std::string, std::string>{"optimizer",
                                            absl::GetFlag(FLAGS_optimizer)},
        {"consistency", absl::GetFlag(FLAGS_consistency)},
        {"compression", absl::GetFlag(FLAGS_compression)}}) {
    if (!value.empty())
      o.worker_args.push_back(absl::StrCat("--", flag, "=", value));
  }
  for (size_t i = 1; i < rest.size(); ++i) o.worker_args.push_back(rest[i]);
  if (o.run_dir.empty()) {
    return Fail(absl::InvalidArgumentError("--run_dir is required"));
  }
  if (o.servers < 1 || o.workers < 1 || o.servers > 250 || o.workers > 250) {
    return Fail(absl::InvalidArgumentError(
        "--servers and --workers must be in [1, 250]"));
  }
  if (::mkdir(o.run_dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return Fail(absl::UnavailableError(
        absl::StrCat("cannot create --run_dir=", o.run_dir)));
  }
  o.run_dir = Absolute(o.run_dir);
  const std::string data = absl::GetFlag(FLAGS_data);
  o.server_args = absl::StrSplit(absl::GetFlag(FLAGS_server_flags), ' ',
                                 absl::SkipWhitespace());
  // Every run gets a token, so that servers may listen beyond loopback
  // (emulated hosts, SSH) without letting strangers in.
  absl::StatusOr<ps::Security> security = ps::SecurityFromFlags();
  if (!security.ok()) return Fail(security.status());
  o.auth_token_file = security->auth_token_file;
  if (o.auth_token_file.empty()) {
    o.auth_token_file = o.run_dir + "/job.token";
    if (absl::Status s = WriteFreshToken(o.auth_token_file); !s.ok()) {
      return Fail(s);
    }
  }

  // Declared before the gRPC runtime so that it is torn down after it.
  std::unique_ptr<worker::EmulatedCluster> cluster;
  if (o.cluster == "local") {
    o.server_hosts.resize(o.servers);
    o.worker_hosts.resize(o.workers);
    o.data = data;
  } else if (o.cluster == "emulated") {
    if (data.empty()) {
      return Fail(absl::InvalidArgumentError(
          "--cluster=emulated needs --data (served by the storage host)"));
    }
    if (geteuid() != 0) {
      return Fail(absl::PermissionDeniedError(
          "--cluster=emulated needs root (network namespaces and tc): run "
          "it with sudo"));
    }
    worker::EmulatedClusterOptions co;
    co.name = absl::StrCat("sps", getpid());
    co.servers = o.servers;
    co.workers = o.workers;
    co.server_link = absl::GetFlag(FLAGS_server_link);
    co.worker_link = absl::GetFlag(FLAGS_worker_link);
    co.storage_link = absl::GetFlag(FLAGS_storage_link);
    co.subnet = absl::GetFlag(FLAGS_subnet);
    co.data_root = Absolute(data);
    co.log_dir = o.run_dir;
    absl::StatusOr<std::unique_ptr<worker::EmulatedCluster>> c =
        worker::EmulatedCluster::Create(co);
    if (!c.ok()) return Fail(c.status());
    cluster = *std::move(c);
    for (int i = 0; i < o.servers; ++i) {
      o.server_hosts.push_back(cluster->server(i));
    }
    for (int i = 0; i < o.workers; ++i) {
      o.worker_hosts.push_back(cluster->worker(i));
    }
    o.data = cluster->StorageUrl("");
    o.links = {{"server", co.server_link},
               {"worker", co.worker_link},
               {"storage", co.storage_link}};
    if (absl::Status s = cluster->EnterControlHost(); !s.ok()) return Fail(s);
  } else if (o.cluster == "ssh") {
    absl::StatusOr<std::vector<worker::SshHost>> hosts =
        worker::ReadHostfile(absl::GetFlag(FLAGS_hostfile));
    if (!hosts.ok()) return Fail(hosts.status());
    const std::vector<std::string> ssh_args = absl::StrSplit(
        absl::GetFlag(FLAGS_ssh_args), ' ', absl::SkipWhitespace());
    worker::SshPlacement placed =
        worker::PlaceOnHosts(*hosts, o.servers, o.workers,
                             absl::GetFlag(FLAGS_ssh_base_port), ssh_args);
    o.server_hosts = std::move(placed.servers);
    o.worker_hosts = std::move(placed.workers);
    o.data = data;
  } else {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        "--cluster=", o.cluster, " is not local, emulated or ssh")));
  }

  std::optional<ps::GrpcRuntime> grpc_runtime;
  grpc_runtime.emplace();
  absl::StatusOr<shardps::RunSummary> summary =
      worker::Launch(o, wait_for_stop);
  grpc_runtime.reset();
  if (cluster != nullptr) {
    absl::StatusOr<std::vector<shardps::LinkStats>> links =
        cluster->LinkStats();
    if (links.ok() && summary.ok()) {
      for (shardps::LinkStats& l : *links) {
        *summary->add_link_stats() = std::move(l);
      }
      if (absl::Status s =
              ps::WriteJsonFile(*summary, o.run_dir + "/summary.json");
          !s.ok()) {
        absl::FPrintF(stderr, "shardps-launch: %s\n", s.ToString());
      }
    }
    if (absl::Status s = cluster->TearDown(); !s.ok()) {
      absl::FPrintF(stderr, "shardps-launch: teardown: %s\n", s.ToString());
    }
  }
  if (!summary.ok()) return Fail(summary.status());
  absl::FPrintF(
      stderr,
      "shardps-launch: %s: servers %d workers %d loader %s | init %.2f s | "
      "train %.2f s | %.0f samples/s | epoch %.2f s | test accuracy %.4f "
      "(final model) | %.0f KiB/step | CPU %.0f%% | %s/summary.json\n",
      summary->ok() ? "done" : "FAILED", summary->servers(), summary->workers(),
      summary->loader(), summary->init_seconds(), summary->train_seconds(),
      summary->samples_per_second(), summary->epoch_seconds(),
      summary->final_test_accuracy(), summary->bytes_per_step() / 1024,
      100 * summary->cpu_utilisation(), o.run_dir);
  if (!summary->ok()) return Fail(absl::InternalError(summary->error()));
  return 0;
}
