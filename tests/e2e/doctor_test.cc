// shardps-doctor through the binaries: on four shardps-server processes it
// prints a ready line per server, writes the JSON report and exits 0; with
// one missing it names that server and exits 1; with --wait_s it waits for
// a server started late but not for a refused job; a bad flag exits 2.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "proto/summary.pb.h"
#include "ps/base/json_file.h"
#include "ps/base/program.h"
#include "ps/base/server_process.h"
#include "util/processes.h"
#include "util/servers.h"

namespace {

class DoctorTest : public testing::Test {
 protected:
  void SetUp() override {
    servers_ = testutil::SpawnServers(4, dir_.path(), "doc", &addrs_);
    ASSERT_EQ(servers_.size(), 4u);
  }

  // shardps-doctor on addrs_ with `flags`: exit code and output.
  std::pair<int, std::string> Doctor(std::vector<std::string> flags = {}) {
    std::vector<std::string> argv = {
        ps::SiblingBinary("shardps-doctor"),
        "--server_addrs=" + absl::StrJoin(addrs_, ",")};
    argv.insert(argv.end(), flags.begin(), flags.end());
    return testutil::RunCommand(argv, absl::Seconds(60));
  }

  testutil::ScopedTempDir dir_{"shardps-doctor"};
  std::vector<std::unique_ptr<ps::ServerProcess>> servers_;
  std::vector<std::string> addrs_;
};

TEST_F(DoctorTest, AHealthyClusterExitsZeroWithAReport) {
  const std::string report_path = dir_.path() + "/check.json";
  auto [code, output] = Doctor({"--job=doc", "--report=" + report_path});
  EXPECT_EQ(code, 0) << output;
  for (int s = 0; s < 4; ++s) {
    EXPECT_TRUE(absl::StrContains(
        output, absl::StrCat("shard ", s, "  ", addrs_[s], "  ready  ")))
        << output;
  }
  EXPECT_TRUE(absl::StrContains(output, "4 of 4 servers ready")) << output;
  shardps::ClusterCheckReport report;
  ASSERT_TRUE(ps::ReadJsonFile(report_path, &report).ok());
  EXPECT_TRUE(report.ok());
  EXPECT_EQ(report.servers_ready(), 4u);
  EXPECT_EQ(report.servers(3).address(), addrs_[3]);
}

TEST_F(DoctorTest, AMissingServerIsNamedAndExitsOne) {
  ASSERT_TRUE(servers_[2]->Stop().ok());
  auto [code, output] = Doctor({"--job=doc"});
  EXPECT_EQ(code, 1) << output;
  EXPECT_TRUE(absl::StrContains(
      output, absl::StrCat("shard 2  ", addrs_[2],
                           "  FAILED at connect: connection refused")))
      << output;
  EXPECT_TRUE(absl::StrContains(output, "3 of 4 servers ready")) << output;
}

TEST_F(DoctorTest, WaitsForAServerStartedLate) {
  const int port = servers_[1]->port();
  ASSERT_TRUE(servers_[1]->Stop().ok());
  std::unique_ptr<ps::ChildProcess> doctor =
      testutil::StartProcess("shardps-doctor",
                             {ps::SiblingBinary("shardps-doctor"),
                              "--server_addrs=" + absl::StrJoin(addrs_, ","),
                              "--job=doc", "--wait_s=60"},
                             dir_.path() + "/doctor.log");
  absl::SleepFor(absl::Seconds(5));  // the late start the test is about
  ps::ServerProcessOptions o;
  o.binary = ps::SiblingBinary("shardps-server");
  o.run_dir = dir_.path();
  o.name = "late";
  o.port = port;
  o.extra_args = {"--job=doc"};
  absl::StatusOr<std::unique_ptr<ps::ServerProcess>> late =
      ps::ServerProcess::Spawn(o);
  ASSERT_TRUE(late.ok()) << late.status();
  ASSERT_TRUE(doctor->Wait(absl::Now() + absl::Seconds(30)).ok());
  const std::string output = testutil::ReadFile(dir_.path() + "/doctor.log");
  EXPECT_EQ(doctor->exit_code(), 0) << output;
  EXPECT_TRUE(
      absl::StrContains(output, absl::StrCat("3 of 4 servers ready, waiting")))
      << output;
  EXPECT_TRUE(absl::StrContains(output, "4 of 4 servers ready")) << output;
}

TEST_F(DoctorTest, ARefusedJobIsNotWaitedFor) {
  const absl::Time start = absl::Now();
  auto [code, output] = Doctor({"--job=other", "--wait_s=60"});
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  EXPECT_EQ(code, 1) << output;
  EXPECT_TRUE(absl::StrContains(
      output, absl::StrCat("shard 0  ", addrs_[0], "  FAILED at job: ")))
      << output;
}

TEST_F(DoctorTest, ABadFlagExitsTwoNamingIt) {
  addrs_ = {"not-an-address"};
  auto [code, output] = Doctor();
  EXPECT_EQ(code, 2) << output;
  EXPECT_TRUE(absl::StrContains(output, "--server_addrs")) << output;
}

// shardps-launch --check: the same check on the servers it starts.
class LaunchCheckTest : public testing::Test {
 protected:
  std::pair<int, std::string> LaunchCheck(const std::string& server_flags) {
    return testutil::RunCommand(
        {ps::SiblingBinary("shardps-launch"), "--check", "--servers=4",
         "--run_dir=" + dir_.path(), "--server_flags=" + server_flags},
        absl::Seconds(120));
  }
  testutil::ScopedTempDir dir_{"shardps-launch-check"};
};

TEST_F(LaunchCheckTest, FourHealthyServersPass) {
  auto [code, output] = LaunchCheck("");
  EXPECT_EQ(code, 0) << output;
  EXPECT_TRUE(absl::StrContains(output, "4 of 4 servers ready")) << output;
  EXPECT_TRUE(absl::StrContains(output, "check passed: 4 servers ready"))
      << output;
  shardps::ClusterCheckReport report;
  ASSERT_TRUE(ps::ReadJsonFile(dir_.path() + "/check.json", &report).ok());
  EXPECT_TRUE(report.ok());
  EXPECT_EQ(report.servers_ready(), 4u);
}

TEST_F(LaunchCheckTest, ServersOfAnotherJobAreEachNamed) {
  auto [code, output] = LaunchCheck("--job=elsewhere");
  EXPECT_EQ(code, 1) << output;
  for (int s = 0; s < 4; ++s) {
    EXPECT_TRUE(absl::StrContains(output, absl::StrCat("shard ", s))) << output;
  }
  EXPECT_TRUE(absl::StrContains(output, "0 of 4 servers ready")) << output;
  EXPECT_TRUE(absl::StrContains(output, "reached a server of job 'elsewhere'"))
      << output;
}

}  // namespace
