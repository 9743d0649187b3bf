// Test helpers for servers: in this process (Server) or as shardps-server
// processes (ServerProcess), and the table most tests use.
#ifndef SHARDPS_TESTS_UTIL_SERVERS_H_
#define SHARDPS_TESTS_UTIL_SERVERS_H_

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "ps/base/program.h"
#include "ps/base/server_process.h"
#include "ps/client/client.h"
#include "ps/server/server.h"

namespace testutil {

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

// Calls of `method` ("Push", "PushPull", ...) a server answered, from its
// Stats.
inline uint64_t Calls(const shardps::StatsResponse& stats,
                      const std::string& method) {
  for (const shardps::MethodStats& m : stats.methods()) {
    if (m.method() == method) return m.requests();
  }
  return 0;
}

// `n` servers of `job` in this process on free loopback ports; their
// addresses go to *addrs. Empty (and a test failure) if one does not start.
inline std::vector<std::unique_ptr<ps::Server>> StartLocalServers(
    int n, const std::string& job, std::vector<std::string>* addrs,
    bool shared_memory = true) {
  std::vector<std::unique_ptr<ps::Server>> servers;
  addrs->clear();
  for (int i = 0; i < n; ++i) {
    ps::ServerOptions o;
    o.host = "127.0.0.1";
    o.port = 0;
    o.job = job;
    o.shared_memory = shared_memory;
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

}  // namespace testutil

#endif  // SHARDPS_TESTS_UTIL_SERVERS_H_
