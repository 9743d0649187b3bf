// Test helper: a single-member etcd on free loopback ports, its data in a
// directory of the test's (ps/coord/etcd_process.h).
#ifndef SHARDPS_TESTS_UTIL_ETCD_H_
#define SHARDPS_TESTS_UTIL_ETCD_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "ps/coord/etcd_client.h"
#include "ps/coord/etcd_process.h"
#include "util/files.h"
#include "util/processes.h"

namespace testutil {

inline constexpr char kEtcd[] = "/usr/bin/etcd";

inline bool HaveEtcd() { return ::access(kEtcd, X_OK) == 0; }

// etcd with its data under `dir`; the same ports again when given (a
// restart). Null, with a test failure, if it does not start.
inline std::unique_ptr<ps::EtcdProcess> StartEtcd(const std::string& dir,
                                                  int client_port = 0,
                                                  int peer_port = 0) {
  ps::EtcdProcessOptions o;
  o.binary = kEtcd;
  o.data_dir = dir + "/etcd-data";
  o.log_path = dir + "/etcd.log";
  const int run = client_port > 0 ? 0 : FreePortRun(2);
  o.client_port = client_port > 0 ? client_port : run;
  o.peer_port = peer_port > 0 ? peer_port : run + 1;
  absl::StatusOr<std::unique_ptr<ps::EtcdProcess>> etcd =
      ps::EtcdProcess::Start(o);
  EXPECT_TRUE(etcd.ok()) << etcd.status();
  return etcd.ok() ? *std::move(etcd) : nullptr;
}

inline std::unique_ptr<ps::EtcdClient> EtcdClientFor(
    const std::string& endpoint) {
  ps::EtcdOptions o;
  o.endpoint = endpoint;
  o.timeout = absl::Seconds(2);
  absl::StatusOr<std::unique_ptr<ps::EtcdClient>> c = ps::EtcdClient::Create(o);
  EXPECT_TRUE(c.ok()) << c.status();
  return c.ok() ? *std::move(c) : nullptr;
}

// A test with an etcd of its own (data in dir_, a client in client_); it
// skips, saying why, where etcd-server is not installed. Fixtures with a
// SetUp of their own call EtcdTest::SetUp first and return when
// IsSkipped() or HasFatalFailure().
class EtcdTest : public testing::Test {
 protected:
  void SetUp() override {
    if (!HaveEtcd()) {
      GTEST_SKIP() << kEtcd
                   << " is missing (deploy/install-deps.sh installs "
                      "etcd-server)";
    }
    etcd_ = StartEtcd(dir_.path());
    ASSERT_NE(etcd_, nullptr);
    client_ = EtcdClientFor(etcd_->endpoint());
    ASSERT_NE(client_, nullptr);
  }

  ScopedTempDir dir_{"shardps-etcd"};
  std::unique_ptr<ps::EtcdProcess> etcd_;
  std::unique_ptr<ps::EtcdClient> client_;
};

}  // namespace testutil

#endif  // SHARDPS_TESTS_UTIL_ETCD_H_
