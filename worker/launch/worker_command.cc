#include "worker/launch/worker_command.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace worker {
namespace {

// What every worker process gets besides its own flags.
std::vector<std::string> JobArgs(const LaunchOptions& o,
                                 const ServerReach& servers) {
  std::vector<std::string> args = {
      !servers.etcd.empty()
          ? absl::StrCat("--etcd=", servers.etcd)
          : absl::StrCat("--server_addrs=", absl::StrJoin(servers.addrs, ",")),
      absl::StrCat("--world=", o.workers),
      absl::StrCat("--loader=", o.loader),
      absl::StrCat("--overlap=", o.overlap),
      absl::StrCat("--run_dir=", o.run_dir),
      absl::StrCat("--job=", o.job)};
  if (!servers.etcd.empty()) {
    args.push_back(absl::StrCat("--num_servers=", o.servers));
  }
  if (!o.data.empty()) args.push_back(absl::StrCat("--data=", o.data));
  if (!o.auth_token_file.empty()) {
    args.push_back("--auth_token_file=" + o.auth_token_file);
  }
  const std::pair<const char*, const std::string&> tls[] = {
      {"--tls_ca=", o.tls.ca},
      {"--tls_cert=", o.tls.cert},
      {"--tls_key=", o.tls.key}};
  for (const auto& [flag, file] : tls) {
    if (!file.empty()) args.push_back(flag + file);
  }
  return args;
}

}  // namespace

std::vector<std::string> WorkerCommand(const LaunchOptions& o,
                                       const ServerReach& servers, int rank,
                                       const std::string& process) {
  std::vector<std::string> argv = {o.worker_binary};
  if (!o.worker_script.empty()) {
    // env sets the package's path the same way on every cluster kind (a
    // local child, a network namespace, an ssh command line).
    argv = {o.python, o.worker_script};
    if (!o.python_path.empty()) {
      argv.insert(argv.begin(),
                  {"/usr/bin/env", "PYTHONPATH=" + o.python_path});
    }
  }
  argv.insert(argv.end(), o.worker_args.begin(), o.worker_args.end());
  const std::vector<std::string> job = JobArgs(o, servers);
  argv.insert(argv.end(), job.begin(), job.end());
  argv.push_back(absl::StrCat("--rank=", rank));
  if (o.trace) {
    argv.push_back(TraceFlag(o.run_dir, process));
    argv.push_back("--trace_name=" + process);
  }
  if (o.metrics_port > 0 && process != "evaluate") {
    argv.push_back(absl::StrCat(
        "--metrics_port=", o.metrics_port + o.servers * o.replicas + rank));
    argv.push_back("--metrics_host=" + o.worker_hosts[rank].address);
  }
  return argv;
}

std::string TraceFlag(const std::string& run_dir, const std::string& process) {
  return absl::StrCat("--trace=", run_dir, "/", process, ".trace.json");
}

}  // namespace worker
