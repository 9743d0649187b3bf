// Test helpers for processes: the one way tests start a program is
// ps::ChildProcess (its output into a log, reaped, stopped at scope exit);
// these wrap it for running a command to its end and for a shell. Also
// loopback ports and process liveness.
#ifndef SHARDPS_TESTS_UTIL_PROCESSES_H_
#define SHARDPS_TESTS_UTIL_PROCESSES_H_

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/random/random.h"
#include "absl/time/clock.h"
#include "ps/base/child_process.h"
#include "util/files.h"

namespace testutil {

// Starts `argv` with its output into `log`; null (and a test failure) if it
// cannot start.
inline std::unique_ptr<ps::ChildProcess> StartProcess(
    const std::string& name, const std::vector<std::string>& argv,
    const std::string& log) {
  absl::StatusOr<std::unique_ptr<ps::ChildProcess>> p =
      ps::ChildProcess::Start(name, argv, log);
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *std::move(p) : nullptr;
}

// Runs `argv` to its end (at most `limit`, then it is killed): its exit
// code (-1 if a signal ended it) and its output, stdout and stderr together.
inline std::pair<int, std::string> RunCommand(
    const std::vector<std::string>& argv,
    absl::Duration limit = absl::Seconds(300)) {
  ScopedTempDir dir("shardps-run");
  const std::string log = dir.path() + "/output";
  std::unique_ptr<ps::ChildProcess> p = StartProcess(argv[0], argv, log);
  if (p == nullptr) return {-1, ""};
  if (absl::IsDeadlineExceeded(p->Wait(absl::Now() + limit))) p->Kill();
  return {p->exit_code(), ReadFile(log)};
}

// Runs `command` with /bin/sh; as RunCommand.
inline std::pair<int, std::string> Shell(
    const std::string& command, absl::Duration limit = absl::Seconds(300)) {
  return RunCommand({"/bin/sh", "-c", command}, limit);
}

inline bool Alive(pid_t pid) {
  return pid > 0 && (kill(pid, 0) == 0 || errno != ESRCH);
}

// A port nothing listens on right now (the kernel's pick for port 0).
inline int FreeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

// `n` consecutive loopback ports, none bound now, below the kernel's
// ephemeral range (32768 and up on Linux): ports that outgoing connections
// and port-0 binds of concurrent tests never take, for a process that must
// be told its ports in advance (--metrics_port, --ssh_base_port, etcd).
// 0 if none was found.
inline int FreePortRun(int n) {
  absl::BitGen random;
  for (int attempt = 0; attempt < 200; ++attempt) {
    const int first = absl::Uniform(random, 20000, 32768 - n);
    bool free = true;
    for (int p = first; free && p < first + n; ++p) {
      const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(static_cast<uint16_t>(p));
      free = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
      ::close(fd);
    }
    if (free) return first;
  }
  return 0;
}

// Keeps loopback ports taken (bound, not listening: a connection is refused
// as by a dead server) while their process is down, so that no concurrent
// test takes them before it restarts there.
class HeldPorts {
 public:
  explicit HeldPorts(std::initializer_list<int> ports) {
    for (int port : ports) {
      const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
      const int one = 1;
      ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      a.sin_port = htons(static_cast<uint16_t>(port));
      EXPECT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0)
          << "port " << port;
      fds_.push_back(fd);
    }
  }
  HeldPorts(const HeldPorts&) = delete;
  HeldPorts& operator=(const HeldPorts&) = delete;
  ~HeldPorts() {
    for (int fd : fds_) ::close(fd);
  }

 private:
  std::vector<int> fds_;
};

inline bool Connects(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

}  // namespace testutil

#endif  // SHARDPS_TESTS_UTIL_PROCESSES_H_
