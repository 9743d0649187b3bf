// shardps-launch --cluster=ssh against two real sshd instances that the
// test starts on loopback ports with a key it makes: servers and workers
// run through ssh, their logs stream back, the run succeeds and leaves its
// summary; a failing worker stops every remote process. Needs root (sshd)
// and Debian's openssh-server.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "ps/base/child_process.h"
#include "util/data.h"
#include "util/files.h"
#include "util/launch.h"
#include "util/processes.h"

namespace {

class SshLaunchTest : public testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "sshd needs root (CI runs as root)";
    if (access("/usr/sbin/sshd", X_OK) != 0 || access("/usr/bin/ssh", X_OK)) {
      GTEST_SKIP() << "openssh-server missing (deploy/install-deps.sh)";
    }
    ASSERT_EQ(chmod(dir_.c_str(), 0755), 0);
    mkdir("/run/sshd", 0755);  // sshd's privilege separation directory
    auto [code, out] =
        testutil::Shell("ssh-keygen -q -t ed25519 -N '' -f " + dir_ +
                        "/host_key && ssh-keygen -q -t ed25519 -N '' -f " +
                        dir_ + "/client_key && cp " + dir_ +
                        "/client_key.pub " + dir_ + "/authorized_keys");
    ASSERT_EQ(code, 0) << out;
    std::string hostfile = "# two hosts: sshd on two loopback ports\n";
    for (int i = 0; i < 2; ++i) {
      const int port = testutil::FreeLoopbackPort();
      const std::string conf = absl::StrCat(dir_, "/sshd-", i, ".conf");
      testutil::WriteFile(
          conf,
          absl::StrCat("Port ", port, "\nListenAddress 127.0.0.1\nHostKey ",
                       dir_, "/host_key\nAuthorizedKeysFile ", dir_,
                       "/authorized_keys\nPermitRootLogin "
                       "prohibit-password\nStrictModes no\nUsePAM no\n"
                       "PidFile ",
                       dir_, "/sshd-", i, ".pid\n"));
      auto p = ps::ChildProcess::Start(
          absl::StrCat("sshd-", i), {"/usr/sbin/sshd", "-D", "-e", "-f", conf},
          absl::StrCat(dir_, "/sshd-", i, ".log"));
      ASSERT_TRUE(p.ok()) << p.status();
      sshd_.push_back(*std::move(p));
      const absl::Time deadline = absl::Now() + absl::Seconds(10);
      while (!testutil::Connects(port) && absl::Now() < deadline) {
        absl::SleepFor(absl::Milliseconds(20));
      }
      ASSERT_TRUE(testutil::Connects(port))
          << testutil::ReadFile(absl::StrCat(dir_, "/sshd-", i, ".log"));
      hostfile += absl::StrCat("root@127.0.0.1:", port, "\n");
    }
    testutil::WriteFile(dir_ + "/hosts", hostfile);
    ASSERT_EQ(testutil::MakeSyntheticData(
                  dir_ + "/data",
                  "--samples 6000 --features 16 --classes 3 --shards 2"),
              0);
  }

  std::vector<std::string> Args(const std::string& run) {
    return {"--cluster=ssh",
            "--hostfile=" + dir_ + "/hosts",
            "--ssh_args=-i " + dir_ +
                "/client_key -o StrictHostKeyChecking=no -o "
                "UserKnownHostsFile=/dev/null -o LogLevel=ERROR",
            absl::StrCat("--ssh_base_port=", testutil::FreePortRun(4)),
            "--servers=2",
            "--workers=2",
            "--run_dir=" + run,
            "--data=" + dir_ + "/data",
            "--"};
  }

  // No shardps process of this test is left on the "remote" hosts.
  void ExpectNothingLeft() {
    EXPECT_NE(
        testutil::Shell("pgrep -f 'shardps-(serve[r]|worke[r]).*" + dir_ + "'")
            .first,
        0);
    EXPECT_NE(testutil::Shell("pgrep -f 'shardps-serve[r].*--job=ssh" +
                              std::to_string(getpid()) + "'")
                  .first,
              0);
  }

  testutil::ScopedTempDir tmp_{"shardps-ssh"};
  const std::string dir_ = tmp_.path();
  std::vector<std::unique_ptr<ps::ChildProcess>> sshd_;
};

TEST_F(SshLaunchTest, TrainsOnTheHostfileHosts) {
  const std::string run = dir_ + "/run";
  std::vector<std::string> args = Args(run);
  args.insert(args.begin(), "--job=ssh" + std::to_string(getpid()));
  for (const char* a : {"--model=mlp:16-8-3", "--batch=32", "--epochs=2"}) {
    args.push_back(a);
  }
  absl::Status s =
      testutil::RunLaunch(args, dir_ + "/launch.log", absl::Seconds(120));
  ASSERT_TRUE(s.ok()) << s << "\n" << testutil::ReadFile(dir_ + "/launch.log");
  const shardps::RunSummary sum = testutil::ReadRunSummary(run);
  EXPECT_TRUE(sum.ok()) << sum.error();
  ASSERT_EQ(sum.per_worker_size(), 2);
  for (const shardps::WorkerSummary& w : sum.per_worker()) {
    EXPECT_EQ(w.samples(), 2 * 2700u);  // 5400 training samples / 2
  }
  EXPECT_GE(sum.final_test_accuracy(),
            testutil::LearnedAccuracy(dir_ + "/data"));
  // Servers got their fixed ports on the hosts and stopped cleanly; their
  // output came back through ssh.
  for (int i = 0; i < 2; ++i) {
    const std::string log =
        testutil::ReadFile(absl::StrCat(run, "/server-", i, ".log"));
    EXPECT_NE(log.find("shardps-pid "), std::string::npos) << log;
    EXPECT_NE(log.find("listening on 0.0.0.0:"), std::string::npos) << log;
    EXPECT_NE(log.find("stopped"), std::string::npos) << log;
    EXPECT_EQ(sum.processes(i).status(), "ok") << sum.processes(i).status();
  }
  // Workers too ran through ssh on their hosts.
  for (int r = 0; r < 2; ++r) {
    const std::string log =
        testutil::ReadFile(absl::StrCat(run, "/worker-", r, ".log"));
    EXPECT_NE(log.find("shardps-pid "), std::string::npos) << log;
    EXPECT_NE(log.find("done"), std::string::npos) << log;
  }
  ExpectNothingLeft();
}

TEST_F(SshLaunchTest, RunsPythonWorkersOnTheHostfileHosts) {
  if (access(SHARDPS_BINARY_DIR "/python/shardps/__init__.py", R_OK) != 0) {
    GTEST_SKIP() << "the shardps Python package was not built (pybind11-dev)";
  }
  const std::string run = dir_ + "/run";
  std::vector<std::string> args = Args(run);
  args.insert(args.begin(),
              {"--job=sshpy" + std::to_string(getpid()), "--consistency=sync",
               "--worker_script=" SHARDPS_SOURCE_DIR
               "/tests/python/regression_worker.py"});
  args.push_back("--steps=7");
  absl::Status s =
      testutil::RunLaunch(args, dir_ + "/launch.log", absl::Seconds(120));
  ASSERT_TRUE(s.ok()) << s << "\n" << testutil::ReadFile(dir_ + "/launch.log");
  const shardps::RunSummary sum = testutil::ReadRunSummary(run);
  EXPECT_TRUE(sum.ok()) << sum.error();
  ASSERT_EQ(sum.per_worker_size(), 2);
  for (const shardps::WorkerSummary& w : sum.per_worker()) {
    EXPECT_EQ(w.steps(), 7u);
    EXPECT_EQ(w.consistency(), "sync");
  }
  for (int r = 0; r < 2; ++r) {
    const std::string log =
        testutil::ReadFile(absl::StrCat(run, "/worker-", r, ".log"));
    EXPECT_NE(log.find("shardps-pid "), std::string::npos) << log;
  }
  ExpectNothingLeft();
  EXPECT_NE(
      testutil::Shell("pgrep -f 'regression_worke[r].*" + dir_ + "'").first, 0);
}

TEST_F(SshLaunchTest, AFailingRemoteWorkerStopsEverything) {
  const std::string run = dir_ + "/run";
  std::vector<std::string> args = Args(run);
  args.insert(args.begin(), "--job=ssh" + std::to_string(getpid()));
  args.push_back("--model=mlp:5-3");  // the data has 16 features
  absl::Status s =
      testutil::RunLaunch(args, dir_ + "/launch.log", absl::Seconds(120));
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(absl::IsDeadlineExceeded(s));
  const shardps::RunSummary sum = testutil::ReadRunSummary(run);
  EXPECT_FALSE(sum.ok());
  EXPECT_NE(sum.error().find("takes 5 features"), std::string::npos)
      << sum.error();
  ExpectNothingLeft();
}

}  // namespace
