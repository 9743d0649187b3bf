#include "ps/base/child_process.h"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
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
#include "absl/time/clock.h"
#include "ps/base/file_io.h"

namespace ps {
namespace {

std::string DescribeExit(int status) {
  if (WIFEXITED(status)) return absl::StrCat("exit code ", WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return absl::StrCat("signal ", WTERMSIG(status));
  return "unknown status";
}

double Seconds(const timeval& t) { return t.tv_sec + t.tv_usec * 1e-6; }

}  // namespace

std::string LogTail(const std::string& path, size_t lines) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::vector<std::string> all =
      absl::StrSplit(text.str(), '\n', absl::SkipEmpty());
  if (all.size() > lines) all.erase(all.begin(), all.end() - lines);
  return absl::StrJoin(all, " | ");
}

absl::StatusOr<std::unique_ptr<ChildProcess>> ChildProcess::Start(
    std::string name, const std::vector<std::string>& argv,
    const std::string& log_path, int death_signal) {
  if (argv.empty()) return absl::InvalidArgumentError("empty command line");
  auto child = absl::WrapUnique(new ChildProcess(std::move(name), log_path));
  std::vector<std::string> args = argv;
  std::vector<char*> cargs;
  for (std::string& a : args) cargs.push_back(a.data());
  cargs.push_back(nullptr);
  const int log_fd =
      open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) return ErrnoStatus(errno, "create", log_path);
  // fork + exec rather than posix_spawn: the child must ask for its death
  // signal itself.
  const pid_t parent = getpid();
  const pid_t pid = fork();
  const int fork_error = errno;
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, death_signal);
    if (getppid() != parent) _exit(127);  // the parent is already gone
    setpgid(0, 0);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);  // the parent may block some
    dup2(log_fd, STDOUT_FILENO);
    dup2(log_fd, STDERR_FILENO);
    execv(cargs[0], cargs.data());
    const std::string msg = absl::StrCat(
        "exec ", cargs[0], " failed: ", std::strerror(errno), "\n");
    (void)!write(STDERR_FILENO, msg.data(), msg.size());
    _exit(127);
  }
  close(log_fd);
  if (pid < 0) return ErrnoStatus(fork_error, "fork to start", child->name());
  child->pid_ = pid;
  child->last_pid_ = pid;
  return child;
}

void ChildProcess::Reaped(int status, const struct rusage& usage) {
  pid_ = -1;
  exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  cpu_seconds_ = Seconds(usage.ru_utime) + Seconds(usage.ru_stime);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
    exit_status_ = absl::OkStatus();
  } else {
    exit_status_ = absl::InternalError(absl::StrCat(
        name_, " ended with ", DescribeExit(status), ": ", LogTail(log_path_)));
  }
}

std::optional<absl::Status> ChildProcess::Poll() {
  if (pid_ < 0) return exit_status_;
  int status = 0;
  struct rusage usage {};
  const pid_t r = wait4(pid_, &status, WNOHANG, &usage);
  if (r == 0) return std::nullopt;
  if (r < 0) {
    pid_ = -1;
    exit_status_ = ErrnoStatus(errno, "wait for", name_);
  } else {
    Reaped(status, usage);
  }
  return exit_status_;
}

absl::Status ChildProcess::Wait(absl::Time deadline) {
  while (true) {
    if (std::optional<absl::Status> s = Poll(); s.has_value()) return *s;
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(name_, " did not exit in time"));
    }
    absl::SleepFor(absl::Milliseconds(10));  // polling interval
  }
}

absl::Status ChildProcess::Stop(absl::Duration grace) {
  if (pid_ < 0) return exit_status_;
  kill(pid_, SIGTERM);
  absl::Status status = Wait(absl::Now() + grace);
  if (absl::IsDeadlineExceeded(status)) {
    Kill();
    return absl::DeadlineExceededError(
        absl::StrCat(name_, " ignored SIGTERM for ",
                     absl::FormatDuration(grace), " and was killed"));
  }
  return status;
}

void ChildProcess::Kill() {
  if (pid_ < 0) return;
  kill(pid_, SIGKILL);
  int status = 0;
  struct rusage usage {};
  if (wait4(pid_, &status, 0, &usage) == pid_) {
    Reaped(status, usage);
  } else {
    pid_ = -1;
  }
}

ChildProcess::~ChildProcess() { Stop(absl::Seconds(5)).IgnoreError(); }

}  // namespace ps
