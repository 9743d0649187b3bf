// shardps-launch: one training run, S servers and N workers, as plain local
// processes, on an emulated cluster (network namespaces with capped links
// and an HTTP storage host; needs root), or on the hosts of a hostfile over
// SSH.
//   shardps-launch --servers=4 --workers=8 --loader=parallel --run_dir=RUN
//       --data=DATA [--cluster=emulated] -- --epochs=1 --batch=64
// or, with Python workers (worker/python/shardps/worker.py):
//   shardps-launch --servers=2 --workers=2 --worker_script=train.py -- ...
// Writes RUN/summary.json and every process's log into RUN; exits non-zero
// if any process failed. Ctrl-C stops everything (and tears the emulated
// cluster down).
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "ps/base/file_io.h"
#include "ps/base/program.h"
#include "ps/wire/security_flags.h"
#include "worker/launch/launch_run.h"

ABSL_FLAG(int, servers, 1, "Parameter servers (1 is the baseline).");
ABSL_FLAG(int, workers, 1, "Workers.");
ABSL_FLAG(int, replicas, 1,
          "Servers per shard (1-5; > 1 starts an etcd and replicated "
          "servers, so a server that dies loses no acknowledged push; "
          "--cluster=local or emulated, each replica on its own host; "
          "--straggler_policy=drop is refused).");
ABSL_FLAG(std::string, loader, "parallel",
          "parallel (the fix) or sequential (the baseline).");
ABSL_FLAG(std::string, overlap, "none",
          "Every worker's --overlap: none (pull, compute, push in turn; the "
          "baseline) or layer (each layer's gradient exchanged for its "
          "fresh parameters as soon as backward has it).");
ABSL_FLAG(std::string, run_dir, "",
          "Run directory (required; created with its parents).");
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
ABSL_FLAG(std::string, worker_script, "",
          "A Python script to run as each worker instead of shardps-worker "
          "(with --python, the shardps package on its PYTHONPATH): the flags "
          "after -- are its own, followed by the launcher's worker flags "
          "(worker/python/shardps/worker.py reads them).");
ABSL_FLAG(std::string, python, "/usr/bin/python3",
          "With --worker_script: the interpreter on every worker host.");
ABSL_FLAG(std::string, python_path, "",
          "With --worker_script: where the shardps package is on the worker "
          "hosts (default: the build's python/ beside this binary's bin/, "
          "else the interpreter's own path, for an installed package).");
ABSL_FLAG(std::string, server_flags, "",
          "Extra shardps-server flags, space-separated (e.g. TLS files).");
ABSL_FLAG(bool, check, false,
          "Start the servers, check each once as a worker would reach it "
          "(address, connection, TLS, token, job, version, tables; as "
          "shardps-doctor), print a line per server, write "
          "RUN_DIR/check.json and stop: no workers. Exit code 1 on a "
          "problem.");
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

std::vector<std::string> Words(const std::string& text) {
  return absl::StrSplit(text, ' ', absl::SkipWhitespace());
}

// --worker_script, --python and --python_path into *o; the script must
// exist here (it is given to every host by its absolute path).
absl::Status ReadWorkerScript(worker::LaunchOptions* o) {
  const std::string script = absl::GetFlag(FLAGS_worker_script);
  if (script.empty()) return absl::OkStatus();
  char resolved[PATH_MAX];
  if (realpath(script.c_str(), resolved) == nullptr) {
    return ps::ErrnoStatus(errno, "read the --worker_script", script);
  }
  o->worker_script = resolved;
  o->python = absl::GetFlag(FLAGS_python);
  o->python_path = absl::GetFlag(FLAGS_python_path);
  if (o->python_path.empty()) {
    // The build's package, if this binary is in a build tree; otherwise
    // the interpreter's own path (an installed package).
    char parent[PATH_MAX];
    const std::string built = ps::SiblingBinary("../python");
    if (realpath(built.c_str(), parent) != nullptr) o->python_path = parent;
  }
  return absl::OkStatus();
}

// The processes, their flags and what the run records.
absl::Status ReadRunFlags(const std::vector<char*>& rest,
                          worker::LaunchOptions* o) {
  o->servers = absl::GetFlag(FLAGS_servers);
  o->replicas = absl::GetFlag(FLAGS_replicas);
  o->workers = absl::GetFlag(FLAGS_workers);
  o->loader = absl::GetFlag(FLAGS_loader);
  o->overlap = absl::GetFlag(FLAGS_overlap);
  o->run_dir = absl::GetFlag(FLAGS_run_dir);
  o->job = absl::GetFlag(FLAGS_job);
  o->cluster = absl::GetFlag(FLAGS_cluster);
  o->trace = absl::GetFlag(FLAGS_trace);
  o->metrics_port = absl::GetFlag(FLAGS_metrics_port);
  o->ready_timeout = absl::Seconds(absl::GetFlag(FLAGS_ready_timeout_s));
  o->check_only = absl::GetFlag(FLAGS_check);
  o->progress_every = absl::Seconds(absl::GetFlag(FLAGS_progress_s));
  o->server_binary = ps::SiblingBinary("shardps-server");
  o->worker_binary = ps::SiblingBinary("shardps-worker");
  if (absl::Status s = ReadWorkerScript(o); !s.ok()) return s;
  o->server_args = Words(absl::GetFlag(FLAGS_server_flags));
  // The launcher's shortcuts first: flags after -- win.
  const std::pair<const char*, std::string> shortcuts[] = {
      {"optimizer", absl::GetFlag(FLAGS_optimizer)},
      {"consistency", absl::GetFlag(FLAGS_consistency)},
      {"compression", absl::GetFlag(FLAGS_compression)}};
  for (const auto& [flag, value] : shortcuts) {
    if (!value.empty()) {
      o->worker_args.push_back(absl::StrCat("--", flag, "=", value));
    }
  }
  for (size_t i = 1; i < rest.size(); ++i) o->worker_args.push_back(rest[i]);
  absl::StatusOr<ps::Security> security = ps::SecurityFromFlags();
  if (!security.ok()) return security.status();
  o->auth_token_file = security->auth_token_file;
  o->tls = security->tls;
  return absl::OkStatus();
}

worker::PlacementOptions PlacementFromFlags() {
  worker::PlacementOptions p;
  p.data = absl::GetFlag(FLAGS_data);
  p.hostfile = absl::GetFlag(FLAGS_hostfile);
  p.ssh_args = Words(absl::GetFlag(FLAGS_ssh_args));
  p.ssh_base_port = absl::GetFlag(FLAGS_ssh_base_port);
  p.server_link = absl::GetFlag(FLAGS_server_link);
  p.worker_link = absl::GetFlag(FLAGS_worker_link);
  p.storage_link = absl::GetFlag(FLAGS_storage_link);
  p.subnet = absl::GetFlag(FLAGS_subnet);
  return p;
}

void PrintResult(const shardps::RunSummary& s, const std::string& run_dir) {
  absl::FPrintF(
      stderr,
      "shardps-launch: %s: servers %d workers %d loader %s overlap %s | "
      "init %.2f s | "
      "train %.2f s | %.0f samples/s | epoch %.2f s | test accuracy %.4f "
      "(final model) | %.0f KiB/step | CPU %.0f%% | %s/summary.json\n",
      s.ok() ? "done" : "FAILED", s.servers(), s.workers(), s.loader(),
      s.overlap(), s.init_seconds(), s.train_seconds(), s.samples_per_second(),
      s.epoch_seconds(), s.final_test_accuracy(), s.bytes_per_step() / 1024,
      100 * s.cpu_utilisation(), run_dir);
  if (s.final_test_auc() > 0) {
    absl::FPrintF(stderr,
                  "shardps-launch: test AUC %.4f (final model); the data's "
                  "generator reaches %.4f\n",
                  s.final_test_auc(), s.generator_auc());
  }
}

int Fail(const absl::Status& s) {
  absl::FPrintF(stderr, "shardps-launch: %s\n", s.ToString());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  // Stop signals are taken in the monitoring loop, so that every child is
  // stopped and the cluster torn down before exit.
  const ps::StopSignals stop;
  std::vector<char*> rest = ps::InitProgram(
      argc, argv,
      "runs S servers and N workers and writes RUN_DIR/summary.json.\n"
      "  shardps-launch --servers=4 --workers=8 --loader=parallel "
      "--run_dir=RUN --data=DATA [--cluster=emulated] -- <worker flags>");
  worker::LaunchRequest request;
  if (absl::Status s = ReadRunFlags(rest, &request.launch); !s.ok()) {
    return Fail(s);
  }
  request.placement = PlacementFromFlags();
  absl::StatusOr<shardps::RunSummary> summary = worker::RunLaunch(
      request, [&stop](absl::Duration d) { return stop.WaitFor(d) != 0; });
  if (!summary.ok()) return Fail(summary.status());
  if (!request.launch.check_only) {
    PrintResult(*summary, request.launch.run_dir);
  } else if (summary->ok()) {
    absl::FPrintF(stderr,
                  "shardps-launch: check passed: %d servers ready (%s/"
                  "check.json)\n",
                  summary->servers(), request.launch.run_dir);
  }
  if (!summary->ok()) return Fail(absl::InternalError(summary->error()));
  return 0;
}
