// ServerProcess starts a shardps-server binary as a child process on a free
// port of this host and stops it again: what shardps-bench --spawn_servers
// and the end-to-end tests use to get real, separate server processes.
//
// Thread-safety: none; owned and used by one thread.
#ifndef SHARDPS_PS_BASE_SERVER_PROCESS_H_
#define SHARDPS_PS_BASE_SERVER_PROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "ps/base/child_process.h"

namespace ps {

struct ServerProcessOptions {
  std::string binary;             // path of shardps-server
  std::string run_dir;            // port file and log go here; must exist
  std::string name = "server-0";  // names the files: NAME.port, NAME.log
  std::string host = "127.0.0.1";
  int port = 0;  // 0: any free port; set it to restart a server in place
  std::vector<std::string> extra_args;  // e.g. {"--job=j"}
  // Runs the server through this command, e.g. {"/usr/bin/ip", "netns",
  // "exec", "host-3"} to place it in a network namespace.
  std::vector<std::string> command_prefix;
  absl::Duration start_timeout = absl::Seconds(20);
};

class ServerProcess {
 public:
  // Starts the server and waits for its port file. The server gets SIGTERM
  // if the calling thread exits, so call this from a long-lived thread (the
  // main thread, typically). On failure (binary
  // missing, early exit, timeout) the error quotes the log's last lines.
  static absl::StatusOr<std::unique_ptr<ServerProcess>> Spawn(
      const ServerProcessOptions& options);

  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;
  // Stops the server if it still runs (SIGTERM, then SIGKILL).
  ~ServerProcess() = default;

  pid_t pid() const { return process_->pid(); }
  int port() const { return port_; }
  std::string address() const;
  const std::string& log_path() const { return process_->log_path(); }
  ChildProcess& process() { return *process_; }

  // SIGTERM, then waits up to `grace` before SIGKILL. Returns the exit
  // status: OK only for a clean exit with code 0.
  absl::Status Stop(absl::Duration grace = absl::Seconds(10));

  // SIGKILL, as a crash would; waits for the process to be gone.
  void Kill();

 private:
  ServerProcess(std::string host, std::unique_ptr<ChildProcess> process)
      : host_(std::move(host)), process_(std::move(process)) {}

  const std::string host_;
  const std::unique_ptr<ChildProcess> process_;
  int port_ = 0;
};

}  // namespace ps

#endif  // SHARDPS_PS_BASE_SERVER_PROCESS_H_
