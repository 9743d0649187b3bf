#include "worker/launch/remote_process.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "worker/launch/ssh_cluster.h"

namespace worker {

std::vector<std::string> CommandAt(const HostSlot& slot,
                                   const std::vector<std::string>& command) {
  std::vector<std::string> argv = slot.command_prefix;
  if (!slot.remote) {
    argv.insert(argv.end(), command.begin(), command.end());
    return argv;
  }
  std::vector<std::string> quoted;
  for (const std::string& a : command) quoted.push_back(ShellQuote(a));
  argv.push_back(
      absl::StrCat("echo shardps-pid $$; exec ", absl::StrJoin(quoted, " ")));
  return argv;
}

int RemotePid(const std::string& log_path) {
  std::ifstream in(log_path);
  std::string word;
  int pid = 0;
  while (in >> word) {
    if (word == "shardps-pid") return (in >> pid) ? pid : 0;
  }
  return 0;
}

absl::Status StopAt(ps::ChildProcess& p, const HostSlot& slot,
                    absl::Duration grace) {
  if (!slot.remote || !p.running()) return p.Stop(grace);
  const int pid = RemotePid(p.log_path());
  if (pid > 0) {
    std::vector<std::string> kill = slot.stop_prefix;
    kill.push_back(absl::StrCat("kill -TERM ", pid));
    absl::StatusOr<std::unique_ptr<ps::ChildProcess>> k =
        ps::ChildProcess::Start(p.name() + " stop", kill,
                                p.log_path() + ".stop");
    if (k.ok()) (*k)->Wait(absl::Now() + grace).IgnoreError();
    if (absl::Status s = p.Wait(absl::Now() + grace);
        !absl::IsDeadlineExceeded(s)) {
      return s;
    }
  }
  // No PID, or it did not end: closing the connection hangs it up.
  return p.Stop(grace);
}

}  // namespace worker
