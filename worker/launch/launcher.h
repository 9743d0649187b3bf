// Launch: one training run on one machine. Starts S shardps-server and N
// shardps-worker processes on the given hosts, waits for every server's
// health check, shows one combined progress line, and stops everything when
// a process fails or a stop is requested. Every process logs into the run
// directory; the result is RUN_DIR/summary.json (proto/summary.proto
// RunSummary), also written for a failed run.
//
// Thread-safety: call from the main thread (children get SIGTERM when the
// thread that started them exits).
#ifndef SHARDPS_WORKER_LAUNCH_LAUNCHER_H_
#define SHARDPS_WORKER_LAUNCH_LAUNCHER_H_

#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/summary.pb.h"
#include "ps/wire/security.h"
#include "worker/launch/host_slot.h"

namespace worker {

struct LaunchOptions {
  int servers = 1;
  // > 1: every shard has this many replicated servers (an etcd for their
  // membership starts with them; worker/launch/replica_set.h), so a server
  // that dies loses nothing. server_hosts then has servers * replicas
  // slots, process p being replica p / servers of shard p % servers.
  int replicas = 1;
  int workers = 1;
  std::string loader = "parallel";
  // Every worker's --overlap: none (the baseline) or layer.
  std::string overlap = "none";
  std::string run_dir;
  std::string job = "launch";
  std::string cluster = "local";  // recorded in the summary
  std::string data;               // passed to workers as --data when set
  // Worker flags from the command line; the launcher's own (--server_addrs,
  // --rank, --world, --loader, --overlap, --run_dir, --job, --data) follow
  // and win.
  std::vector<std::string> worker_args;
  std::vector<std::string> server_args;
  // The job's token file, given to every server and worker
  // (--auth_token_file); empty: none.
  std::string auth_token_file;
  // The client side's TLS files (ps/wire/security.h): the launcher's own
  // health checks and statistics use them, and every worker gets them
  // (--tls_ca, --tls_cert, --tls_key). The servers' own go in server_args.
  ps::TlsFiles tls;
  std::vector<HostSlot> server_hosts;        // one per server process
  std::vector<HostSlot> worker_hosts;        // one per worker
  std::map<std::string, std::string> links;  // recorded in the summary
  // Where the etcd of --replicas listens (Placed::control_address).
  std::string control_address = "127.0.0.1";
  std::string server_binary;
  std::string worker_binary;
  // Non-empty: workers are this Python script (--worker_script), run as
  // `env PYTHONPATH=python_path python script <worker_args> <the
  // launcher's flags>` instead of worker_binary; the launcher then takes
  // the final accuracy from rank 0's summary rather than evaluating.
  std::string worker_script;
  std::string python = "/usr/bin/python3";
  // Where the shardps package is; empty: on the interpreter's own path.
  std::string python_path;
  absl::Duration ready_timeout = absl::Seconds(60);
  // Start the servers, check each once from the launcher's place
  // (worker/launch/cluster_check.h; waiting up to ready_timeout while they
  // come up), write RUN_DIR/check.json, stop: no workers. The run is ok
  // when every server is ready.
  bool check_only = false;
  // Every server and worker writes a Chrome trace to
  // RUN_DIR/<process>.trace.json; at the end they are merged into
  // RUN_DIR/trace.json.
  bool trace = false;
  // > 0: every server and worker serves Prometheus metrics on its host,
  // server i on port metrics_port + i, worker r on metrics_port + S + r;
  // RUN_DIR/prometheus-targets.json lists them for Prometheus'
  // file_sd_configs. 0: no metrics.
  int metrics_port = 0;
  // Between progress updates; on a terminal the line is rewritten in place.
  absl::Duration progress_every = absl::Seconds(1);
};

// INVALID_ARGUMENT naming the option that is out of range or inconsistent
// (counts, host slots, metrics ports, loader).
absl::Status CheckLaunchOptions(const LaunchOptions& options);

// Waits up to the given time for a stop request (Ctrl-C, SIGTERM); true if
// one came.
using StopWait = std::function<bool(absl::Duration)>;

// Runs to completion. The summary says whether the run succeeded (`ok`,
// `error`); an error status only when the run could not be recorded.
absl::StatusOr<shardps::RunSummary> Launch(const LaunchOptions& options,
                                           const StopWait& wait_for_stop);

}  // namespace worker

#endif  // SHARDPS_WORKER_LAUNCH_LAUNCHER_H_
