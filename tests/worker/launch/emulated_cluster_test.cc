// shardps-launch --cluster=emulated: real processes in network namespaces
// with capped links and an nginx storage host. Checks that teardown leaves
// nothing behind (also after a failure), and the direction of both of the
// paper's effects on a short A/B: sequential init grows with N while the
// parallel loader's does not, and with capped server links 4 servers give
// more throughput than 1. Needs root (CI runs as root).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "proto/summary.pb.h"
#include "ps/base/json_file.h"
#include "util/data.h"
#include "util/etcd.h"
#include "util/files.h"
#include "util/launch.h"
#include "util/nginx_server.h"
#include "util/processes.h"

namespace worker {
namespace {

std::string Output(const std::string& command) {
  return testutil::Shell(command).second;
}

int Lines(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

class EmulatedClusterTest : public testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) {
      GTEST_SKIP() << "the emulated cluster needs root for network "
                      "namespaces and tc (CI runs as root)";
    }
    if (!testutil::HaveNginx() || access("/usr/bin/ip", X_OK) != 0) {
      GTEST_SKIP() << "needs nginx and iproute2 (deploy/install-deps.sh)";
    }
    // 6000 samples of 784 float features: ~19 MB to read per full pass.
    ASSERT_EQ(testutil::MakeSyntheticData(
                  dir_ + "/data",
                  "--samples 6500 --features 784 --classes 10 --shards 4"),
              0);
  }

  enum class Outcome { kOk, kFails, kInterrupted };

  // One emulated run; its summary. `name` names the run directory. With
  // kInterrupted the launcher gets SIGINT once rank 0 has trained a step.
  shardps::RunSummary Run(const std::string& name, int servers, int workers,
                          const std::string& loader,
                          const std::vector<std::string>& worker_args,
                          Outcome expect = Outcome::kOk,
                          const std::vector<std::string>& launch_args = {}) {
    const std::string run = absl::StrCat(dir_, "/", name);
    const std::string host_links = Output("ip -o link show");
    std::unique_ptr<ps::ChildProcess> p = testutil::StartLaunch(
        [&] {
          std::vector<std::string> a = {"--cluster=emulated",
                                        absl::StrCat("--servers=", servers),
                                        absl::StrCat("--workers=", workers),
                                        "--loader=" + loader,
                                        "--run_dir=" + run,
                                        "--server_link=100mbit",
                                        "--worker_link=1gbit",
                                        "--storage_link=160mbit"};
          a.insert(a.end(), launch_args.begin(), launch_args.end());
          // --check needs no data: the storage host then serves none.
          if (std::find(a.begin(), a.end(), "--check") == a.end()) {
            a.push_back("--data=" + dir_ + "/data");
          }
          a.push_back("--");
          a.insert(a.end(), worker_args.begin(), worker_args.end());
          return a;
        }(),
        run + ".log");
    EXPECT_NE(p, nullptr);
    const std::string prefix = absl::StrCat("sps", p->pid(), "-");
    if (expect == Outcome::kInterrupted) {
      const absl::Time deadline = absl::Now() + absl::Seconds(60);
      while (absl::Now() < deadline &&
             Lines(testutil::ReadFile(run + "/metrics-0.csv")) < 2) {
        absl::SleepFor(absl::Milliseconds(50));
      }
      kill(p->pid(), SIGINT);
    }
    absl::Status s = p->Wait(absl::Now() + absl::Seconds(300));
    EXPECT_EQ(s.ok(), expect == Outcome::kOk)
        << s << "\n"
        << testutil::ReadFile(run + ".log");
    // Nothing of the cluster is left: no namespace (and with them no
    // interface), the machine's own interfaces as before, no process, no
    // nginx configuration.
    EXPECT_EQ(Output("ip -o link show"), host_links);
    const std::string netns = Output("ip netns list");
    EXPECT_EQ(netns.find(prefix), std::string::npos) << netns;
    const std::string procs = Output("ps -eo args");
    EXPECT_EQ(
        procs.find("shardps-emucluster/" + prefix.substr(0, prefix.size() - 1)),
        std::string::npos)
        << procs;
    EXPECT_NE(access(("/run/shardps-emucluster/" +
                      prefix.substr(0, prefix.size() - 1))
                         .c_str(),
                     F_OK),
              0);
    shardps::RunSummary sum = testutil::ReadRunSummary(run);
    testutil::ExpectNoProcessLeft(sum);
    return sum;
  }

  testutil::ScopedTempDir tmp_{"shardps-emulated"};
  const std::string dir_ = tmp_.path();
};

TEST_F(EmulatedClusterTest, TeardownLeavesNothingAfterSuccessFailureAndCtrlC) {
  const shardps::RunSummary ok =
      Run("ok", 2, 2, "parallel",
          {"--model=mlp:784-32-10", "--batch=32", "--max_steps=10"});
  EXPECT_TRUE(ok.ok()) << ok.error();
  EXPECT_EQ(ok.cluster(), "emulated");
  EXPECT_EQ(ok.links().at("server"), "100mbit");
  // Servers and workers ran on their own emulated hosts.
  EXPECT_EQ(ok.processes(0).host().rfind("10.213.1.1:", 0), 0u)
      << ok.processes(0).host();
  EXPECT_EQ(ok.processes(3).host(), "10.213.2.2");
  // ... and their traffic crossed their hosts' capped links: each worker
  // host's eth0 sent at least the pushes that worker made.
  ASSERT_EQ(ok.per_worker_size(), 2);
  int worker_links = 0;
  for (const shardps::LinkStats& link : ok.link_stats()) {
    if (link.host().rfind("w", 0) != 0 || link.device() != "eth0") continue;
    const int rank = std::stoi(link.host().substr(1));
    ASSERT_LT(rank, 2) << link.host();
    EXPECT_GE(link.sent_bytes(), ok.per_worker(rank).push_bytes())
        << link.host();
    EXPECT_GT(ok.per_worker(rank).push_bytes(), 0) << link.host();
    ++worker_links;
  }
  EXPECT_EQ(worker_links, 2);
  const shardps::RunSummary failed =
      Run("failed", 1, 2, "parallel", {"--model=mlp:5-3"}, Outcome::kFails);
  EXPECT_FALSE(failed.ok());
  EXPECT_NE(failed.error().find("takes 5 features"), std::string::npos)
      << failed.error();
  const shardps::RunSummary stopped =
      Run("stopped", 2, 2, "parallel",
          {"--model=mlp:784-32-10", "--batch=32", "--epochs=1000"},
          Outcome::kInterrupted);
  EXPECT_FALSE(stopped.ok());
  EXPECT_NE(stopped.error().find("stopped by a signal"), std::string::npos)
      << stopped.error();
}

TEST_F(EmulatedClusterTest, ShortABShowsBothEffectsInTheRightDirection) {
  // Compute is emulated (20 ms per step) so that four workers fit on the
  // machine's cores; the parameter bytes still cross the capped links.
  const std::vector<std::string> args = {
      "--model=mlp:784-64-10", "--batch=32", "--max_steps=25",
      "--emulate_compute_ms=20", "--progress_every=0"};
  const shardps::RunSummary base1 = Run("base1", 1, 1, "sequential", args);
  const shardps::RunSummary base4 = Run("base4", 1, 4, "sequential", args);
  const shardps::RunSummary fix1 = Run("fix1", 4, 1, "parallel", args);
  const shardps::RunSummary fix4 = Run("fix4", 4, 4, "parallel", args);
  for (const auto* s : {&base1, &base4, &fix1, &fix4}) {
    ASSERT_TRUE(s->ok()) << s->error();
    EXPECT_EQ(s->emulated_compute_ms(), 20);
  }
  // Sequential reading of the whole data set from shared storage: four
  // workers share the storage link, so init grows with N.
  EXPECT_GT(base4.init_seconds(), 2.5 * base1.init_seconds())
      << base1.init_seconds() << " -> " << base4.init_seconds();
  // The parallel loader reads one batch before the first step.
  EXPECT_LT(fix4.init_seconds(), 0.5 * base4.init_seconds());
  EXPECT_LT(fix4.init_seconds(), 1.5 * fix1.init_seconds() + 0.3)
      << fix1.init_seconds() << " -> " << fix4.init_seconds();
  // One capped server link is the bottleneck for four workers; four
  // servers split the traffic.
  EXPECT_GT(fix4.samples_per_second(), 1.5 * base4.samples_per_second())
      << base4.samples_per_second() << " vs " << fix4.samples_per_second();
}

// --check from the control host across the emulated network: four servers
// on their own hosts all ready; servers of another job each named.
TEST_F(EmulatedClusterTest, CheckNamesEveryServerAcrossTheNetwork) {
  const shardps::RunSummary ok =
      Run("check", 4, 1, "parallel", {}, Outcome::kOk, {"--check"});
  ASSERT_TRUE(ok.ok()) << ok.error();
  shardps::ClusterCheckReport report;
  ASSERT_TRUE(ps::ReadJsonFile(dir_ + "/check/check.json", &report).ok());
  EXPECT_TRUE(report.ok());
  ASSERT_EQ(report.servers_size(), 4);
  for (int s = 0; s < 4; ++s) {
    EXPECT_TRUE(report.servers(s).ready()) << report.servers(s).problem();
    EXPECT_EQ(report.servers(s).address().rfind(
                  absl::StrCat("10.213.1.", s + 1, ":"), 0),
              0u)
        << report.servers(s).address();
  }
  const shardps::RunSummary other =
      Run("check-job", 4, 1, "parallel", {}, Outcome::kFails,
          {"--check", "--server_flags=--job=elsewhere"});
  EXPECT_NE(other.error().find("the cluster check found a problem: shard 0 "
                               "at 10.213.1.1:"),
            std::string::npos)
      << other.error();
  ASSERT_TRUE(ps::ReadJsonFile(dir_ + "/check-job/check.json", &report).ok());
  EXPECT_EQ(report.servers_ready(), 0u);
  for (const shardps::ServerCheck& server : report.servers()) {
    EXPECT_EQ(server.stage(), "job") << server.problem();
    EXPECT_NE(server.problem().find("reached a server of job 'elsewhere'"),
              std::string::npos)
        << server.problem();
  }
}

TEST_F(EmulatedClusterTest,
       ReplicasRunOnTheirOwnHostsWithEtcdOnTheControlHost) {
  if (!testutil::HaveEtcd()) {
    GTEST_SKIP() << testutil::kEtcd
                 << " is missing (deploy/install-deps.sh installs etcd-server)";
  }
  const shardps::RunSummary sum =
      Run("replicated", 2, 2, "parallel",
          {"--model=mlp:784-32-10", "--batch=32", "--max_steps=20"},
          Outcome::kOk, {"--replicas=2"});
  ASSERT_TRUE(sum.ok()) << sum.error();
  // Process p is replica p / 2 of shard p % 2, each on its own server host.
  std::set<std::string> hosts;
  for (int p = 0; p < 4; ++p) {
    const shardps::ProcessRecord& server = sum.processes(p);
    EXPECT_EQ(server.name(), absl::StrCat("server-", p % 2, "-r", p / 2));
    EXPECT_EQ(server.host().rfind(absl::StrCat("10.213.1.", p + 1, ":"), 0), 0u)
        << server.host();
    hosts.insert(server.host());
  }
  EXPECT_EQ(hosts.size(), 4u);
  // etcd ran on the control host, and every backup copied its shard's
  // state from the primary across the emulated network before serving.
  const std::string run = dir_ + "/replicated";
  const std::string launch_log = testutil::ReadFile(run + ".log");
  EXPECT_NE(launch_log.find("etcd at http://10.213.0.1:"), std::string::npos)
      << launch_log;
  for (int shard = 0; shard < 2; ++shard) {
    const std::string log =
        testutil::ReadFile(absl::StrCat(run, "/server-", shard, "-r1.log"));
    EXPECT_NE(log.find(absl::StrCat("caught up from 10.213.1.", shard + 1)),
              std::string::npos)
        << log;
  }
}

}  // namespace
}  // namespace worker
