#include "ps/server_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/memory/memory.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "ps/port_file.h"

namespace ps {
namespace {

std::string LogTail(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::vector<std::string> lines = absl::StrSplit(text.str(), '\n');
  const size_t keep = 5;
  if (lines.size() > keep) lines.erase(lines.begin(), lines.end() - keep);
  return absl::StrJoin(lines, " | ");
}

std::string DescribeExit(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exit code ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return absl::StrCat("signal ", WTERMSIG(status));
  return "unknown status";
}

}  // namespace

std::string SiblingBinary(const std::string& name) {
  char self[4096];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return name;
  std::string dir(self, n);
  return absl::StrCat(dir.substr(0, dir.rfind('/')), "/", name);
}

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Spawn(
    const ServerProcessOptions& options) {
  const std::string port_path =
      absl::StrCat(options.run_dir, "/", options.name, ".port");
  auto process = absl::WrapUnique(new ServerProcess(
      options.host, absl::StrCat(options.run_dir, "/", options.name, ".log")));
  std::remove(port_path.c_str());

  std::vector<std::string> args = {
      options.binary, absl::StrCat("--host=", options.host), "--port=0",
      absl::StrCat("--port_file=", port_path)};
  args.insert(args.end(), options.extra_args.begin(), options.extra_args.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  // fork + exec rather than posix_spawn: the child asks to be sent SIGTERM
  // when its parent dies, so a crashed bench or test leaves no stray server.
  const int log_fd = open(process->log_path_.c_str(),
                          O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) {
    return absl::NotFoundError(absl::StrCat(
        "cannot create ", process->log_path_, ": ", std::strerror(errno)));
  }
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(127);  // the parent is already gone
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    execv(argv[0], argv.data());
    const char* msg = "exec failed: cannot run the server binary\n";
    (void)!write(STDERR_FILENO, msg, strlen(msg));
    _exit(127);
  }
  close(log_fd);
  if (pid < 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("fork: ", std::strerror(errno)));
  }
  process->pid_ = pid;

  const absl::Time deadline = absl::Now() + options.start_timeout;
  while (true) {
    absl::StatusOr<int> port = ReadPortFile(port_path);
    if (port.ok()) {
      process->port_ = *port;
      return process;
    }
    if (!absl::IsNotFound(port.status())) return port.status();
    int status = 0;
    if (waitpid(process->pid_, &status, WNOHANG) == process->pid_) {
      process->pid_ = -1;
      return absl::UnavailableError(absl::StrCat(
          options.binary, " exited before serving (", DescribeExit(status),
          "): ", LogTail(process->log_path_)));
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(options.binary, " wrote no port file within ",
                       absl::FormatDuration(options.start_timeout), ": ",
                       LogTail(process->log_path_)));
    }
    absl::SleepFor(absl::Milliseconds(10));  // polling interval
  }
}

std::string ServerProcess::address() const {
  return absl::StrCat(host_, ":", port_);
}

absl::Status ServerProcess::Reap(absl::Time deadline) {
  while (true) {
    int status = 0;
    const pid_t r = waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        return absl::OkStatus();
      }
      return absl::InternalError(absl::StrCat("server ended with ",
                                              DescribeExit(status), ": ",
                                              LogTail(log_path_)));
    }
    if (r < 0) {
      pid_ = -1;
      return absl::InternalError(
          absl::StrCat("waitpid: ", std::strerror(errno)));
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError("server did not exit in time");
    }
    absl::SleepFor(absl::Milliseconds(10));  // polling interval
  }
}

absl::Status ServerProcess::Stop(absl::Duration grace) {
  if (pid_ < 0) return absl::OkStatus();
  kill(pid_, SIGTERM);
  absl::Status status = Reap(absl::Now() + grace);
  if (absl::IsDeadlineExceeded(status)) {
    Kill();
    return absl::DeadlineExceededError(
        absl::StrCat("server ignored SIGTERM for ", absl::FormatDuration(grace),
                     " and was killed"));
  }
  return status;
}

void ServerProcess::Kill() {
  if (pid_ < 0) return;
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

ServerProcess::~ServerProcess() { Stop(absl::Seconds(5)).IgnoreError(); }

}  // namespace ps
