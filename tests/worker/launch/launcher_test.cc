// shardps-launch on this host: a complete run's summary, and that every
// failure (a worker that fails, servers that never become healthy, Ctrl-C)
// stops every process, exits non-zero and still records what happened.
#include "worker/launch/launcher.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "ps/base/child_process.h"
#include "ps/base/json_file.h"
#include "ps/base/program.h"
#include "ps/base/server_process.h"
#include "util/data.h"
#include "util/etcd.h"
#include "util/files.h"
#include "util/launch.h"
#include "util/processes.h"
#include "util/tls.h"
#include "worker/launch/run_record.h"

namespace worker {
namespace {

class LauncherTest : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(testutil::MakeSyntheticData(
                  dir_ + "/data",
                  "--samples 6000 --features 16 --classes 3 --shards 2"),
              0);
  }

  absl::Status Launch(const std::vector<std::string>& args) {
    return testutil::RunLaunch(args, dir_ + "/launch.log");
  }

  testutil::ScopedTempDir tmp_{"shardps-launch"};
  const std::string dir_ = tmp_.path();
};

TEST_F(LauncherTest, LocalRunWritesACompleteSummary) {
  const std::string run = dir_ + "/run";
  absl::Status s = Launch({"--servers=2", "--workers=3", "--loader=sequential",
                           "--run_dir=" + run, "--data=" + dir_ + "/data", "--",
                           "--model=mlp:16-8-3", "--batch=32", "--epochs=2"});
  ASSERT_TRUE(s.ok()) << s << testutil::ReadFile(dir_ + "/launch.log");
  const shardps::RunSummary sum = testutil::ReadRunSummary(run);
  EXPECT_TRUE(sum.ok()) << sum.error();
  EXPECT_EQ(sum.cluster(), "local");
  EXPECT_EQ(sum.servers(), 2);
  EXPECT_EQ(sum.workers(), 3);
  EXPECT_EQ(sum.loader(), "sequential");
  ASSERT_EQ(sum.per_worker_size(), 3);
  double max_init = 0;
  for (int r = 0; r < 3; ++r) {
    const shardps::WorkerSummary& w = sum.per_worker(r);
    EXPECT_EQ(w.rank(), r);
    EXPECT_EQ(w.world(), 3);
    EXPECT_EQ(w.loader(), "sequential");  // the launcher's switch reached it
    EXPECT_EQ(w.partition_records(), 1800u);  // 5400 training samples / 3
    EXPECT_EQ(w.samples(), 2 * 1800u);
    EXPECT_GT(w.pull_seconds(), 0);
    max_init = std::max(max_init, w.init_seconds());
  }
  // The figures are derived from these as run_record_test works out by
  // hand; here: the run filled them in from its workers.
  EXPECT_DOUBLE_EQ(sum.init_seconds(), max_init);
  EXPECT_GT(sum.samples_per_second(), 0);
  EXPECT_GT(sum.overall_samples_per_second(), 0);
  EXPECT_GT(sum.epoch_seconds(), 0);
  const double learned = testutil::LearnedAccuracy(dir_ + "/data");
  EXPECT_GE(sum.test_accuracy(), learned);
  // The final model, evaluated once every worker finished.
  EXPECT_GE(sum.final_test_accuracy(), learned);
  EXPECT_GT(sum.cpu_seconds(), 0);
  ASSERT_EQ(sum.processes_size(), 6);  // 2 servers, 3 workers, the evaluation
  EXPECT_EQ(sum.processes(5).name(), "evaluate");
  for (const shardps::ProcessRecord& p : sum.processes()) {
    EXPECT_EQ(p.status(), "ok") << p.name();
    EXPECT_FALSE(testutil::ReadFile(p.log()).empty()) << p.log();
  }
  EXPECT_EQ(sum.worker_args(0), "--model=mlp:16-8-3");
  testutil::ExpectNoProcessLeft(sum);
}

TEST_F(LauncherTest, OverlapReachesEveryWorkerOnlyAsTheLaunchersFlag) {
  const std::string run = dir_ + "/overlap";
  absl::Status s =
      Launch({"--servers=2", "--workers=2", "--overlap=layer",
              "--run_dir=" + run, "--data=" + dir_ + "/data", "--",
              "--model=cnn:4x4x1-c4k2-f8-3", "--batch=32", "--epochs=3"});
  ASSERT_TRUE(s.ok()) << s << testutil::ReadFile(dir_ + "/launch.log");
  const shardps::RunSummary sum = testutil::ReadRunSummary(run);
  EXPECT_TRUE(sum.ok()) << sum.error();
  EXPECT_EQ(sum.overlap(), "layer");
  ASSERT_EQ(sum.per_worker_size(), 2);
  for (const shardps::WorkerSummary& w : sum.per_worker()) {
    EXPECT_EQ(w.overlap(), "layer");
  }
  EXPECT_GE(sum.final_test_accuracy(),
            testutil::LearnedAccuracy(dir_ + "/data"));
  // The steps went as PushPulls, to both servers, and none as a Push.
  ASSERT_EQ(sum.per_server_size(), 2);
  for (const shardps::ServerSummary& server : sum.per_server()) {
    uint64_t push_pulls = 0, pushes = 0;
    for (const shardps::MethodStats& m : server.methods()) {
      if (m.method() == "PushPull") push_pulls = m.requests();
      if (m.method() == "Push") pushes = m.requests();
    }
    EXPECT_GT(push_pulls, 0u) << server.address();
    EXPECT_EQ(pushes, 0u) << server.address();
  }
  // After --, where the launcher's own --overlap=none would silently win,
  // it is refused by name.
  s = Launch({"--servers=1", "--workers=1", "--run_dir=" + dir_ + "/refused",
              "--data=" + dir_ + "/data", "--", "--overlap=layer"});
  EXPECT_FALSE(s.ok());
  EXPECT_NE(testutil::ReadFile(dir_ + "/launch.log")
                .find("worker flag --overlap=layer after -- is the "
                      "launcher's own: give --overlap before --"),
            std::string::npos)
      << testutil::ReadFile(dir_ + "/launch.log");
}

TEST_F(LauncherTest, AReplicatedRunTrainsThroughThePrimaries) {
  if (!testutil::HaveEtcd()) {
    GTEST_SKIP() << testutil::kEtcd
                 << " is missing (deploy/install-deps.sh installs etcd-server)";
  }
  const std::string run = dir_ + "/run";
  absl::Status s = Launch({"--servers=2", "--replicas=2", "--workers=2",
                           "--run_dir=" + run, "--data=" + dir_ + "/data", "--",
                           "--model=mlp:16-8-3", "--batch=32", "--epochs=2"});
  ASSERT_TRUE(s.ok()) << s << testutil::ReadFile(dir_ + "/launch.log");
  const shardps::RunSummary sum = testutil::ReadRunSummary(run);
  EXPECT_TRUE(sum.ok()) << sum.error();
  EXPECT_EQ(sum.servers(), 2);
  const double learned = testutil::LearnedAccuracy(dir_ + "/data");
  EXPECT_GE(sum.final_test_accuracy(), learned);
  // 4 servers (2 shards x 2 replicas), 2 workers, the evaluation.
  ASSERT_EQ(sum.processes_size(), 7);
  std::set<std::string> names;
  for (const shardps::ProcessRecord& p : sum.processes()) {
    EXPECT_EQ(p.status(), "ok") << p.name();
    names.insert(p.name());
  }
  for (const char* name :
       {"server-0-r0", "server-1-r0", "server-0-r1", "server-1-r1"}) {
    EXPECT_EQ(names.count(name), 1u) << name;
  }
  // Statistics came from the shards' primaries, and the backups had every
  // push: their logs show they caught up and were forwarded to.
  ASSERT_EQ(sum.per_server_size(), 2);
  for (const shardps::ServerSummary& server : sum.per_server()) {
    EXPECT_FALSE(server.address().empty());
  }
  EXPECT_NE(testutil::ReadFile(run + "/server-0-r1.log").find("caught up"),
            std::string::npos);
  EXPECT_NE(testutil::ReadFile(run + "/server-0-r0.log").find("primary"),
            std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(run + "/etcd.log"));
  // The replicas' own token, written for the servers only.
  EXPECT_EQ(
      std::filesystem::status(run + "/replication.token").permissions(),
      std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  testutil::ExpectNoProcessLeft(sum);
  // Elsewhere than this host, not yet.
  s = Launch({"--servers=1", "--replicas=2", "--cluster=ssh",
              "--run_dir=" + dir_ + "/ssh", "--data=" + dir_ + "/data"});
  EXPECT_FALSE(s.ok());
  EXPECT_NE(testutil::ReadFile(dir_ + "/launch.log").find("--replicas > 1"),
            std::string::npos)
      << testutil::ReadFile(dir_ + "/launch.log");
}

TEST_F(LauncherTest, AReplicatedRunOutlivesItsEtcd) {
  if (!testutil::HaveEtcd()) {
    GTEST_SKIP() << testutil::kEtcd
                 << " is missing (deploy/install-deps.sh installs etcd-server)";
  }
  // etcd dies once training runs: training goes on with the primaries it
  // has, and the final evaluation, a process started after etcd died,
  // starts with the primaries the launcher knows.
  const std::string run = dir_ + "/run";
  std::unique_ptr<ps::ChildProcess> p = testutil::StartLaunch(
      {"--servers=2", "--replicas=2", "--workers=2", "--run_dir=" + run,
       "--data=" + dir_ + "/data", "--", "--model=mlp:16-8-3", "--batch=32",
       "--max_steps=400", "--emulate_compute_ms=5"},
      dir_ + "/launch.log");
  ASSERT_NE(p, nullptr);
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  // Its header and a first step.
  auto steps = [&] {
    const std::string csv = testutil::ReadFile(run + "/metrics-0.csv");
    return std::count(csv.begin(), csv.end(), '\n');
  };
  while (absl::Now() < deadline && steps() < 2) {
    absl::SleepFor(absl::Milliseconds(20));  // polling interval
  }
  // (etc[d]: the pattern must not match the shell running pkill.)
  auto [code, out] =
      testutil::Shell("pkill -KILL -f 'data-dir=" + run + "/etc[d]'");
  ASSERT_EQ(code, 0) << "no etcd to kill: " << out;
  const absl::Status s = p->Wait(absl::Now() + absl::Seconds(120));
  ASSERT_TRUE(s.ok()) << s << testutil::ReadFile(dir_ + "/launch.log");
  const shardps::RunSummary sum = testutil::ReadRunSummary(run);
  EXPECT_TRUE(sum.ok()) << sum.error();
  EXPECT_GE(sum.final_test_accuracy(), 0.0)
      << testutil::ReadFile(run + "/evaluate.log");
  EXPECT_NE(testutil::ReadFile(run + "/evaluate.log")
                .find("starting with the primaries given"),
            std::string::npos)
      << testutil::ReadFile(run + "/evaluate.log");
  testutil::ExpectNoProcessLeft(sum);
}

TEST_F(LauncherTest, AMutualTlsRunRecordsEveryServer) {
  // Servers serve mutual TLS (--server_flags); the launcher's --tls_* are
  // the client side's: its own health checks and statistics and every
  // worker's.
  if (!testutil::HaveOpenssl()) GTEST_SKIP() << "openssl missing";
  ASSERT_TRUE(testutil::MakeTestCertificates(dir_).ok());
  const std::string run = dir_ + "/tls";
  absl::Status s = Launch(
      {"--servers=2", "--workers=2", "--run_dir=" + run,
       "--data=" + dir_ + "/data",
       absl::StrCat("--server_flags=--tls_cert=", dir_,
                    "/server.pem --tls_key=", dir_,
                    "/server.key --tls_ca=", dir_, "/ca.pem"),
       "--tls_ca=" + dir_ + "/ca.pem", "--tls_cert=" + dir_ + "/client.pem",
       "--tls_key=" + dir_ + "/client.key", "--", "--model=mlp:16-8-3",
       "--batch=32", "--max_steps=10"});
  ASSERT_TRUE(s.ok()) << s << testutil::ReadFile(dir_ + "/launch.log");
  const shardps::RunSummary sum = testutil::ReadRunSummary(run);
  ASSERT_TRUE(sum.ok()) << sum.error();
  ASSERT_EQ(sum.per_server_size(), 2);
  for (const shardps::ServerSummary& server : sum.per_server()) {
    uint64_t pushes = 0;
    for (const shardps::MethodStats& m : server.methods()) {
      if (m.method() == "Push") pushes = m.requests();
    }
    EXPECT_EQ(pushes, 20u);  // 2 workers x 10 steps, over TLS
  }
  EXPECT_GT(sum.final_test_accuracy(), 0);  // the evaluation got through too
}

TEST_F(LauncherTest, SyncRunKeepsEveryWorkerOnTheSameClock) {
  const std::string run = dir_ + "/run";
  absl::Status s = Launch({"--servers=2", "--workers=3", "--consistency=sync",
                           "--optimizer=adam", "--run_dir=" + run,
                           "--data=" + dir_ + "/data", "--",
                           "--model=mlp:16-8-3", "--batch=32", "--epochs=2",
                           "--lr=0.03", "--straggler_timeout_s=20"});
  ASSERT_TRUE(s.ok()) << s << testutil::ReadFile(dir_ + "/launch.log");
  const shardps::RunSummary sum = testutil::ReadRunSummary(run);
  ASSERT_TRUE(sum.ok()) << sum.error();
  EXPECT_EQ(sum.consistency(), "sync");
  EXPECT_NE(sum.optimizer().find("name: \"adam\""), std::string::npos)
      << sum.optimizer();
  ASSERT_EQ(sum.per_worker_size(), 3);
  // Under a barrier every rank does the smallest partition's steps.
  uint32_t smallest = sum.per_worker(0).partition_records();
  for (const shardps::WorkerSummary& w : sum.per_worker()) {
    smallest = std::min(smallest, w.partition_records());
  }
  for (const shardps::WorkerSummary& w : sum.per_worker()) {
    EXPECT_EQ(w.steps(), 2 * ((smallest + 31) / 32)) << w.rank();
  }
  // mlp:16-8-3 has 163 parameters: each step pulls and pushes 652 bytes of
  // float32, plus a few dozen bytes of message headers per shard.
  EXPECT_GE(sum.bytes_per_step(), 2 * 652);
  EXPECT_LT(sum.bytes_per_step(), 2 * 652 + 200);
  // And it learned: Adam on the averaged gradients of the three workers.
  EXPECT_GE(sum.final_test_accuracy(),
            testutil::LearnedAccuracy(dir_ + "/data"));
}

TEST_F(LauncherTest, TraceMergesEveryProcessesSpansOnOneClock) {
  const std::string run = dir_ + "/run";
  const int64_t before = absl::ToUnixMicros(absl::Now());
  absl::Status s = Launch({"--servers=2", "--workers=2", "--trace",
                           "--run_dir=" + run, "--data=" + dir_ + "/data", "--",
                           "--model=mlp:16-8-3", "--batch=32", "--epochs=1"});
  ASSERT_TRUE(s.ok()) << s << testutil::ReadFile(dir_ + "/launch.log");
  const int64_t after = absl::ToUnixMicros(absl::Now());
  google::protobuf::Struct trace;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(
                  testutil::ReadFile(run + "/trace.json"), &trace)
                  .ok());
  std::set<std::string> spans, processes;
  for (const google::protobuf::Value& v :
       trace.fields().at("traceEvents").list_value().values()) {
    const auto& e = v.struct_value().fields();
    if (e.at("name").string_value() == "process_name") {
      processes.insert(
          e.at("args").struct_value().fields().at("name").string_value());
    }
    if (e.at("ph").string_value() != "X") continue;
    spans.insert(e.at("name").string_value());
    // Every process's clock is the same realtime clock.
    EXPECT_GE(e.at("ts").number_value(), before) << e.at("name").string_value();
    EXPECT_LE(e.at("ts").number_value() + e.at("dur").number_value(), after);
  }
  EXPECT_EQ(processes,
            (std::set<std::string>{"server-0", "server-1", "worker-0",
                                   "worker-1", "evaluate"}));
  for (const char* kind :
       {"init", "open_data", "create_table", "read", "wait_for_data", "pull",
        "compute", "push", "evaluate", "pull_rpc", "push_rpc", "handle_pull",
        "handle_push"}) {
    EXPECT_EQ(spans.count(kind), 1u) << kind << " missing";
  }
}

TEST_F(LauncherTest, ReportBreaksDownEveryWorkerAndServer) {
  const std::string run = dir_ + "/run";
  absl::Status s =
      Launch({"--servers=2", "--workers=2", "--run_dir=" + run,
              "--data=" + dir_ + "/data", "--", "--model=mlp:16-8-3",
              "--batch=32", "--epochs=1", "--shared_memory=false"});
  ASSERT_TRUE(s.ok()) << s << testutil::ReadFile(dir_ + "/launch.log");
  const shardps::RunSummary sum = testutil::ReadRunSummary(run);
  // Every server answered one pull and one push per worker step (the model
  // fits one chunk), plus the evaluations' pulls; over TCP, so the values
  // are in the messages' bytes.
  uint64_t steps = 0;
  for (const shardps::WorkerSummary& w : sum.per_worker()) steps += w.steps();
  ASSERT_EQ(sum.per_server_size(), 2);
  for (const shardps::ServerSummary& server : sum.per_server()) {
    SCOPED_TRACE(server.index());
    EXPECT_GT(server.uptime_seconds(), 0);
    std::map<std::string, shardps::MethodStats> methods;
    for (const shardps::MethodStats& m : server.methods()) {
      methods[m.method()] = m;
    }
    EXPECT_EQ(methods["Push"].requests(), steps);
    EXPECT_EQ(methods["Push"].errors(), 0u);
    EXPECT_GT(methods["Push"].seconds(), 0);
    // Each of the 163 keys split in two: at least 64 floats per push.
    EXPECT_GT(methods["Push"].bytes_received(), steps * 4 * 64);
    EXPECT_GE(methods["Pull"].requests(), steps);
    EXPECT_EQ(methods["CreateTable"].requests(), 2u);
  }

  auto [code, out] = testutil::Shell(std::string(SHARDPS_SOURCE_DIR) +
                                     "/experiments/report.py " + run);
  ASSERT_EQ(code, 0) << out;
  const std::string table = testutil::ReadFile(run + "/report.md");
  EXPECT_NE(out.find(table), std::string::npos) << "printed as written";
  // A row per process whose total is its own time: a worker's is its
  // initialisation plus its training.
  for (int r = 0; r < 2; ++r) {
    const shardps::WorkerSummary& w = sum.per_worker(r);
    const std::string row = absl::StrCat("| worker-", w.rank(), " | ");
    const size_t at = table.find(row);
    ASSERT_NE(at, std::string::npos) << table;
    const std::string line = table.substr(at, table.find('\n', at) - at);
    const std::string total =
        line.substr(line.rfind("| ", line.size() - 3) + 2);
    double shown = 0;
    ASSERT_TRUE(absl::SimpleAtod(absl::StripSuffix(total, " |"), &shown))
        << line;
    EXPECT_NEAR(shown, w.init_seconds() + w.train_seconds(), 0.01) << line;
  }
  for (const char* row : {"| server-0 | ", "| server-1 | "}) {
    EXPECT_NE(table.find(row), std::string::npos) << row << table;
  }
  const std::string png = testutil::ReadFile(run + "/report.png");
  ASSERT_GT(png.size(), 8u);
  EXPECT_EQ(png.substr(0, 8), "\x89PNG\r\n\x1a\n");

  // A directory without a summary: an error naming the file.
  std::tie(code, out) = testutil::Shell(std::string(SHARDPS_SOURCE_DIR) +
                                        "/experiments/report.py " + dir_);
  EXPECT_NE(code, 0);
  EXPECT_NE(out.find(dir_ + "/summary.json"), std::string::npos) << out;
}

TEST_F(LauncherTest, FailingWorkerStopsEverythingAndExitsNonZero) {
  const std::string run = dir_ + "/run";
  // 16 features in the data, 5 in the model: every worker refuses to start.
  absl::Status s =
      Launch({"--servers=2", "--workers=2", "--run_dir=" + run,
              "--data=" + dir_ + "/data", "--", "--model=mlp:5-3"});
  EXPECT_FALSE(s.ok());
  const shardps::RunSummary sum = testutil::ReadRunSummary(run);
  EXPECT_FALSE(sum.ok());
  EXPECT_NE(sum.error().find("worker-"), std::string::npos) << sum.error();
  EXPECT_NE(sum.error().find("takes 5 features"), std::string::npos)
      << sum.error();
  testutil::ExpectNoProcessLeft(sum);
  EXPECT_NE(testutil::ReadFile(dir_ + "/launch.log").find("FAILED"),
            std::string::npos);
}

TEST_F(LauncherTest, UnhealthyServersHitTheDeadlineWithAClearMessage) {
  // A "server" that reports a port nothing listens on, then idles.
  const std::string fake = dir_ + "/fake-server.sh";
  testutil::WriteFile(fake,
                      absl::StrCat("#!/bin/sh\nfor a in \"$@\"; do case $a in "
                                   "--port_file=*) echo ",
                                   testutil::FreeLoopbackPort(),
                                   " > ${a#*=} ;; esac; done\n"
                                   "exec sleep 600\n"));
  ASSERT_EQ(chmod(fake.c_str(), 0755), 0);
  LaunchOptions o;
  o.run_dir = dir_ + "/run";
  o.server_binary = fake;
  o.worker_binary = ps::SiblingBinary("shardps-worker");
  o.server_hosts.resize(1);
  o.worker_hosts.resize(1);
  o.ready_timeout = absl::Seconds(2);
  const absl::Time start = absl::Now();
  absl::StatusOr<shardps::RunSummary> sum =
      worker::Launch(o, [](absl::Duration d) {
        absl::SleepFor(d);
        return false;
      });
  ASSERT_TRUE(sum.ok()) << sum.status();
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
  EXPECT_FALSE(sum->ok());
  EXPECT_NE(sum->error().find("servers not healthy within 2s"),
            std::string::npos)
      << sum->error();
  testutil::ExpectNoProcessLeft(*sum);
}

TEST_F(LauncherTest, StopSignalEndsTheRunWithoutOrphans) {
  const std::string run = dir_ + "/run";
  std::unique_ptr<ps::ChildProcess> p = testutil::StartLaunch(
      {"--servers=1", "--workers=2", "--run_dir=" + run,
       "--data=" + dir_ + "/data", "--", "--model=mlp:16-8-3", "--epochs=1000",
       "--batch=8"},
      dir_ + "/launch.log");
  ASSERT_NE(p, nullptr);
  // Stop it once both workers are training.
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (absl::Now() < deadline &&
         (testutil::ReadFile(run + "/metrics-0.csv").size() < 200 ||
          testutil::ReadFile(run + "/metrics-1.csv").size() < 200)) {
    absl::SleepFor(absl::Milliseconds(50));
  }
  kill(p->pid(), SIGINT);
  absl::Status s = p->Wait(absl::Now() + absl::Seconds(30));
  EXPECT_FALSE(s.ok());
  EXPECT_FALSE(absl::IsDeadlineExceeded(s)) << "the launcher did not stop";
  const shardps::RunSummary sum = testutil::ReadRunSummary(run);
  EXPECT_FALSE(sum.ok());
  EXPECT_NE(sum.error().find("stopped by a signal"), std::string::npos)
      << sum.error();
  testutil::ExpectNoProcessLeft(sum);
}

}  // namespace
}  // namespace worker
