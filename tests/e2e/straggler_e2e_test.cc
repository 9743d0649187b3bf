// A worker that stops pushing under --consistency=sync must not hang the
// others: with --straggler_policy=fail the other worker stops with a message
// naming it; with drop the other finishes alone and the servers log the
// drop. Real shardps-server and shardps-worker processes on loopback.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "ps/base/program.h"
#include "ps/base/server_process.h"
#include "test_util.h"

namespace worker {
namespace {

class StragglerTest : public testing::TestWithParam<const char*> {
 protected:
  // Runs `command` in a shell; returns its pid.
  static pid_t Start(const std::string& command) {
    const pid_t pid = fork();
    if (pid == 0) {
      execl("/bin/sh", "sh", "-c", command.c_str(), nullptr);
      _exit(127);
    }
    return pid;
  }
  static int ExitCode(pid_t pid) {
    int status = 0;
    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

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
  std::vector<pid_t> workers;
  for (int rank = 0; rank < 2; ++rank) {
    workers.push_back(Start(absl::StrCat(
        ps::SiblingBinary("shardps-worker"), " --server_addrs=",
        absl::StrJoin(addrs, ","), " --job=straggler --rank=", rank,
        " --world=2 --model=mlp:32-16-4 --data=", dir_,
        "/data --epochs=2 --batch=32 --consistency=sync"
        " --straggler_timeout_s=1 --straggler_policy=",
        policy, rank == 1 ? " --max_steps=5" : "", " --run_dir=", dir_,
        "/run --progress_every=0 2>", dir_, "/worker-", rank, ".log")));
  }
  EXPECT_EQ(ExitCode(workers[1]), 0)
      << testutil::ReadFile(dir_ + "/worker-1.log");
  const int code = ExitCode(workers[0]);
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
