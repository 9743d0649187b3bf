// ChildProcess: one program started by this process with its output in a
// log file, stopped again on request or when the owner goes away. The
// common ground of ServerProcess (bench, tests) and shardps-launch.
//
// The child gets `death_signal` if the thread that started it exits, so a
// crashed parent leaves no stray process; it runs in its own process group,
// so a terminal's Ctrl-C reaches the parent, which then stops it in order.
//
// Thread-safety: none; owned and used by one thread.
#ifndef SHARDPS_PS_BASE_CHILD_PROCESS_H_
#define SHARDPS_PS_BASE_CHILD_PROCESS_H_

#include <signal.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace ps {

class ChildProcess {
 public:
  // Starts argv[0] (a path) with stdout and stderr into `log_path`
  // (truncated). `name` labels the process in errors.
  static absl::StatusOr<std::unique_ptr<ChildProcess>> Start(
      std::string name, const std::vector<std::string>& argv,
      const std::string& log_path, int death_signal = SIGTERM);

  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  // Stops the process if it still runs (SIGTERM, 5 s grace, SIGKILL).
  ~ChildProcess();

  const std::string& name() const { return name_; }
  pid_t pid() const { return pid_; }            // -1 once ended
  pid_t last_pid() const { return last_pid_; }  // also after the end
  const std::string& log_path() const { return log_path_; }
  bool running() const { return pid_ > 0; }

  // Without blocking: nullopt while the process runs, else how it ended (OK
  // only for exit code 0; otherwise the error names it and quotes its log).
  std::optional<absl::Status> Poll();
  // Waits until `deadline` for the end; DEADLINE_EXCEEDED if it still runs.
  absl::Status Wait(absl::Time deadline);
  // SIGTERM, then SIGKILL after `grace`. How the process ended.
  absl::Status Stop(absl::Duration grace = absl::Seconds(10));
  // SIGKILL, as a crash would; waits for the process to be gone.
  void Kill();

  // How it ended, once it has (OK before that).
  const absl::Status& exit_status() const { return exit_status_; }
  // Its exit code once it has exited; -1 before that or when a signal
  // ended it.
  int exit_code() const { return exit_code_; }
  // User + system CPU seconds it used, once it has ended.
  double cpu_seconds() const { return cpu_seconds_; }

 private:
  ChildProcess(std::string name, std::string log_path)
      : name_(std::move(name)), log_path_(std::move(log_path)) {}
  void Reaped(int status, const struct rusage& usage);

  const std::string name_;
  const std::string log_path_;
  pid_t pid_ = -1;
  pid_t last_pid_ = -1;
  absl::Status exit_status_;
  int exit_code_ = -1;
  double cpu_seconds_ = 0;
};

// The last `lines` lines of a log file joined with " | ", for messages.
std::string LogTail(const std::string& path, size_t lines = 5);

}  // namespace ps

#endif  // SHARDPS_PS_BASE_CHILD_PROCESS_H_
