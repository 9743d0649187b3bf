// Helpers shared by the test suites.
#ifndef SHARDPS_TESTS_TEST_UTIL_H_
#define SHARDPS_TESTS_TEST_UTIL_H_

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "loader/dataset.h"
#include "ps/base/program.h"
#include "ps/base/server_process.h"
#include "ps/client/client.h"
#include "ps/server/server.h"

namespace testutil {

// A fresh directory under /tmp, removed with everything in it on scope exit.
class ScopedTempDir {
 public:
  explicit ScopedTempDir(const std::string& prefix = "shardps-test") {
    std::string pattern = "/tmp/" + prefix + "-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) {
      ADD_FAILURE() << "mkdtemp failed for " << pattern;
    }
    path_ = pattern;
  }
  ~ScopedTempDir() { std::system(("rm -rf '" + path_ + "'").c_str()); }
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

inline void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// Runs `command` with /bin/sh; its exit code (-1 if it did not exit) and
// its output, stdout and stderr together.
inline std::pair<int, std::string> Shell(const std::string& command) {
  std::string out;
  FILE* f = popen(("(" + command + ") 2>&1").c_str(), "r");
  if (f == nullptr) return {-1, out};
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
  const int status = pclose(f);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
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

// Table "w" of `params` keys, every value `value`, plain SGD with rate 1:
// a gradient g moves a value by exactly -g.
inline ps::TableOptions ConstantTable(uint64_t params, float value) {
  ps::TableOptions t;
  t.name = "w";
  t.num_params = params;
  t.optimizer.set_name("sgd");
  t.optimizer.set_learning_rate(1.0f);
  t.init.set_kind("constant");
  t.init.set_value(value);
  return t;
}

// Writes a float32 data set named "ids" into `dir` whose sample i has the
// features {i, rest...} and the label i % classes, in `shards` shards, so
// that tests can tell which samples a loader delivered.
inline void WriteIdDataset(const std::string& dir, std::vector<float> rest,
                           int classes, int shards, int samples) {
  shardps::DatasetManifest spec;
  spec.set_name("ids");
  spec.add_feature_shape(1 + rest.size());
  spec.set_feature_type("float32");
  spec.set_classes(classes);
  absl::StatusOr<std::unique_ptr<loader::DatasetWriter>> writer =
      loader::DatasetWriter::Create(dir, spec, shards);
  ASSERT_TRUE(writer.ok()) << writer.status();
  std::vector<float> x(1 + rest.size());
  std::copy(rest.begin(), rest.end(), x.begin() + 1);
  for (int i = 0; i < samples; ++i) {
    x[0] = static_cast<float>(i);
    ASSERT_TRUE(
        (*writer)
            ->Add(i % classes,
                  absl::string_view(reinterpret_cast<const char*>(x.data()),
                                    x.size() * sizeof(float)))
            .ok());
  }
  ASSERT_TRUE((*writer)->Finish().ok());
}

// Writes a synthetic data set with shardps-data into `out`; `flags` as on
// its command line. The tool's exit code.
// `n` servers of `job` in this process on free loopback ports; their
// addresses go to *addrs. Empty (and a test failure) if one does not start.
inline std::vector<std::unique_ptr<ps::Server>> StartLocalServers(
    int n, const std::string& job, std::vector<std::string>* addrs) {
  std::vector<std::unique_ptr<ps::Server>> servers;
  addrs->clear();
  for (int i = 0; i < n; ++i) {
    ps::ServerOptions o;
    o.host = "127.0.0.1";
    o.port = 0;
    o.job = job;
    absl::StatusOr<std::unique_ptr<ps::Server>> s = ps::Server::Start(o);
    EXPECT_TRUE(s.ok()) << s.status();
    if (!s.ok()) return {};
    addrs->push_back((*s)->address());
    servers.push_back(*std::move(s));
  }
  return servers;
}

// `n` shardps-server processes of `job`, with their logs and port files in
// `run_dir`; their addresses go to *addrs. Empty (and a test failure) if one
// does not start.
inline std::vector<std::unique_ptr<ps::ServerProcess>> SpawnServers(
    int n, const std::string& run_dir, const std::string& job,
    std::vector<std::string>* addrs) {
  std::vector<std::unique_ptr<ps::ServerProcess>> servers;
  addrs->clear();
  for (int i = 0; i < n; ++i) {
    ps::ServerProcessOptions o;
    o.binary = ps::SiblingBinary("shardps-server");
    o.run_dir = run_dir;
    o.name = "server-" + std::to_string(i);
    o.extra_args = {"--job=" + job};
    absl::StatusOr<std::unique_ptr<ps::ServerProcess>> s =
        ps::ServerProcess::Spawn(o);
    EXPECT_TRUE(s.ok()) << s.status();
    if (!s.ok()) return {};
    addrs->push_back((*s)->address());
    servers.push_back(*std::move(s));
  }
  return servers;
}

inline int MakeSyntheticData(const std::string& out, const std::string& flags) {
  return std::system((ps::SiblingBinary("shardps-data") + " synthetic --out " +
                      out + " " + flags + " 2>/dev/null")
                         .c_str());
}

}  // namespace testutil

#endif  // SHARDPS_TESTS_TEST_UTIL_H_
