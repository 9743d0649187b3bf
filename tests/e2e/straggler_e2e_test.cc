// A worker that stops pushing under --consistency=sync must not hang the
// others: with --straggler_policy=fail the other worker stops with a message
// naming it; with drop the other finishes alone and the servers log the
// drop. Real shardps-server and shardps-worker processes on loopback.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "util/data.h"
#include "util/files.h"
#include "util/servers.h"
#include "util/workers.h"

namespace worker {
namespace {

class StragglerTest : public testing::TestWithParam<const char*> {
 protected:
  testutil::ScopedTempDir tmp_{"shardps-straggler"};
  const std::string dir_ = tmp_.path();
};

TEST_P(StragglerTest, AWorkerThatStopsPushingDoesNotHangTheOther) {
  const std::string policy = GetParam();
  ASSERT_EQ(testutil::MakeSyntheticData(
                dir_ + "/data",
                "--samples 4000 --features 32 --classes 4 --shards 2"),
            0);
  std::vector<std::string> addrs;
  std::vector<std::unique_ptr<ps::ServerProcess>> servers =
      testutil::SpawnServers(2, dir_, "straggler", &addrs);
  ASSERT_EQ(servers.size(), 2u);
  // Worker 1 stops after 5 steps (clocks 0..4) and exits; worker 0 would
  // run 2 epochs of 57 steps.
  std::vector<std::unique_ptr<ps::ChildProcess>> workers;
  for (int rank = 0; rank < 2; ++rank) {
    std::vector<std::string> flags = {"--job=straggler",
                                      absl::StrCat("--rank=", rank),
                                      "--world=2",
                                      "--model=mlp:32-16-4",
                                      "--data=" + dir_ + "/data",
                                      "--epochs=2",
                                      "--batch=32",
                                      "--consistency=sync",
                                      "--straggler_timeout_s=1",
                                      "--straggler_policy=" + policy,
                                      "--run_dir=" + dir_ + "/run",
                                      "--progress_every=0"};
    if (rank == 1) flags.push_back("--max_steps=5");
    workers.push_back(testutil::StartWorker(
        addrs, flags, absl::StrCat(dir_, "/worker-", rank, ".log")));
    ASSERT_NE(workers.back(), nullptr);
  }
  EXPECT_EQ(testutil::ExitCode(*workers[1]), 0)
      << testutil::ReadFile(dir_ + "/worker-1.log");
  const int code = testutil::ExitCode(*workers[0]);
  const std::string log = testutil::ReadFile(dir_ + "/worker-0.log");
  std::string server_logs;
  for (auto& s : servers) {
    EXPECT_TRUE(s->Stop().ok());
    server_logs += testutil::ReadFile(s->log_path());
  }
  if (policy == "fail") {
    EXPECT_NE(code, 0) << log;
    EXPECT_NE(log.find("worker 1 did not push clock 5"), std::string::npos)
        << log;
    EXPECT_NE(log.find("straggler_policy=fail"), std::string::npos) << log;
  } else {
    EXPECT_EQ(code, 0) << log;
    EXPECT_NE(server_logs.find("worker 1 did not push clock 5"),
              std::string::npos)
        << server_logs;
    EXPECT_NE(server_logs.find("dropping them from the barrier"),
              std::string::npos)
        << server_logs;
    // 3600 training samples / 2 workers / batch 32 = 57 steps an epoch.
    EXPECT_NE(
        testutil::ReadFile(dir_ + "/run/summary-0.json").find("\"steps\":114"),
        std::string::npos);
  }
}

INSTANTIATE_TEST_SUITE_P(BothPolicies, StragglerTest,
                         testing::Values("fail", "drop"));

}  // namespace
}  // namespace worker
