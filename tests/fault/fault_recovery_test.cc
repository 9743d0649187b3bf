// A server killed with SIGKILL in the middle of real training (2 servers,
// 2 workers, checkpoints every 0.1 s) and restarted in place: the workers
// ride out the outage, the run finishes with the accuracy of a fault-free
// run, and the push counts show that nothing was applied twice.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "ps/base/program.h"
#include "ps/base/server_process.h"
#include "ps/client/client.h"
#include "ps/table/checkpoint.h"
#include "util/data.h"
#include "util/files.h"
#include "util/workers.h"

namespace worker {
namespace {

constexpr int kEpochs = 30;
// 16000 samples, 25% held out (4000 test samples: 0.025 points each), over
// 2 workers in batches of 64.
constexpr int kStepsPerEpoch = 94;
constexpr char kJob[] = "faults";

double Field(const std::string& json, const std::string& key) {
  std::smatch m;
  const std::regex re("\"" + key + "\":(-?[0-9.]+)");
  return std::regex_search(json, m, re) ? std::stod(m[1]) : -1e9;
}

// Lines of a worker's metrics CSV after the header, as end_unix_s values.
std::vector<double> StepEndTimes(const std::string& path) {
  std::vector<double> times;
  const std::string csv = testutil::ReadFile(path);
  std::vector<absl::string_view> lines = absl::StrSplit(csv, '\n');
  for (size_t i = 1; i < lines.size(); ++i) {
    std::vector<absl::string_view> cols = absl::StrSplit(lines[i], ',');
    double t;
    if (cols.size() == 9 && absl::SimpleAtod(cols[8], &t)) times.push_back(t);
  }
  return times;
}

class FaultRecoveryTest : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(
        testutil::MakeSyntheticData(data_,
                                    "--samples 16000 --test_fraction 0.25 "
                                    "--features 32 --classes 4 --shards 4 "
                                    "--seed 5"),
        0);
  }

  std::unique_ptr<ps::ServerProcess> StartServer(const std::string& run,
                                                 int index, int port) {
    ps::ServerProcessOptions o;
    o.binary = ps::SiblingBinary("shardps-server");
    o.run_dir = run;
    o.name = absl::StrCat("server-", index, port == 0 ? "" : "-restarted");
    o.port = port;
    o.extra_args = {absl::StrCat("--job=", kJob),
                    absl::StrCat("--checkpoint_dir=", run, "/ckpt-", index),
                    "--checkpoint_every=0.1"};
    absl::StatusOr<std::unique_ptr<ps::ServerProcess>> s =
        ps::ServerProcess::Spawn(o);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *std::move(s) : nullptr;
  }

  // Two fresh servers for `run`; their addresses go to *addrs.
  std::vector<std::unique_ptr<ps::ServerProcess>> StartServers(
      const std::string& run, std::vector<std::string>* addrs) {
    std::vector<std::unique_ptr<ps::ServerProcess>> servers;
    addrs->clear();
    for (int i = 0; i < 2; ++i) {
      servers.push_back(StartServer(run, i, 0));
      if (servers.back() == nullptr) return {};
      addrs->push_back(servers.back()->address());
    }
    return servers;
  }

  // Worker `rank` of `run`; `extra` a flag of its own (its log is then
  // worker-RANK-FLAG.log).
  std::unique_ptr<ps::ChildProcess> StartWorker(
      const std::string& run, int rank, const std::vector<std::string>& addrs,
      const std::string& extra = "") {
    std::vector<std::string> flags = {absl::StrCat("--job=", kJob),
                                      absl::StrCat("--rank=", rank),
                                      "--world=2",
                                      "--model=mlp:32-64-4",
                                      "--data=" + data_,
                                      "--loader=parallel",
                                      absl::StrCat("--epochs=", kEpochs),
                                      "--batch=64",
                                      "--lr=0.02",
                                      "--seed=7",
                                      "--retry_give_up_s=60",
                                      "--run_dir=" + run,
                                      "--progress_every=0",
                                      "--checkpoint_every_steps=20"};
    if (!extra.empty()) flags.push_back(extra);
    return testutil::StartWorker(
        addrs, flags,
        absl::StrCat(run, "/worker-", rank,
                     extra.empty() ? "" : extra.substr(1), ".log"));
  }

  // Waits for each worker to end, expecting a clean exit.
  void WaitWorkers(
      const std::vector<std::unique_ptr<ps::ChildProcess>>& workers) {
    for (const auto& w : workers) {
      ASSERT_NE(w, nullptr);
      EXPECT_EQ(testutil::ExitCode(*w), 0) << testutil::ReadFile(w->log_path());
    }
  }

  // Each server's table version, restored version and duplicate count.
  std::vector<shardps::StatsResponse> Stats(
      const std::vector<std::string>& addrs) {
    ps::ClientOptions o;
    o.server_addrs = addrs;
    o.job = kJob;
    absl::StatusOr<std::unique_ptr<ps::Client>> client = ps::Client::Connect(o);
    EXPECT_TRUE(client.ok());
    absl::StatusOr<std::vector<shardps::StatsResponse>> stats =
        (*client)->Stats();
    EXPECT_TRUE(stats.ok()) << stats.status();
    return stats.ok() ? *stats : std::vector<shardps::StatsResponse>{};
  }

  // Accuracy of the final model, once every worker is done (rank 0's own
  // figure is of the model when it finished, and after an outage the
  // workers need not finish together).
  double FinalAccuracy(const std::string& run,
                       const std::vector<std::string>& addrs) {
    std::vector<std::unique_ptr<ps::ChildProcess>> evaluate;
    evaluate.push_back(StartWorker(run, 0, addrs, "--evaluate_only"));
    WaitWorkers(evaluate);
    return Field(testutil::ReadFile(run + "/evaluation.json"), "test_accuracy");
  }

  static uint64_t Steps(const std::string& run) {
    uint64_t steps = 0;
    for (int rank = 0; rank < 2; ++rank) {
      steps += Field(
          testutil::ReadFile(absl::StrCat(run, "/summary-", rank, ".json")),
          "steps");
    }
    return steps;
  }

  testutil::ScopedTempDir tmp_{"shardps-faults"};
  const std::string data_ = tmp_.path() + "/data";
};

TEST_F(FaultRecoveryTest, KilledServerIsRestoredAndTrainingFinishes) {
  // The fault-free reference.
  const std::string clean = tmp_.path() + "/clean";
  ASSERT_TRUE(std::filesystem::create_directories(clean));
  std::vector<std::string> addrs;
  std::vector<std::unique_ptr<ps::ServerProcess>> servers =
      StartServers(clean, &addrs);
  ASSERT_EQ(servers.size(), 2u);
  std::vector<std::unique_ptr<ps::ChildProcess>> workers;
  workers.push_back(StartWorker(clean, 0, addrs));
  workers.push_back(StartWorker(clean, 1, addrs));
  WaitWorkers(workers);
  const double clean_accuracy = FinalAccuracy(clean, addrs);
  for (auto& s : servers) EXPECT_TRUE(s->Stop().ok());

  // The same run, with server 1 killed after the first epochs.
  const std::string faulty = tmp_.path() + "/faulty";
  ASSERT_TRUE(std::filesystem::create_directories(faulty));
  servers = StartServers(faulty, &addrs);
  ASSERT_EQ(servers.size(), 2u);
  workers.clear();
  workers.push_back(StartWorker(faulty, 0, addrs));
  workers.push_back(StartWorker(faulty, 1, addrs));
  // Kill a third of the way in, once server 1 has a checkpoint of the table.
  const absl::Time give_up = absl::Now() + absl::Seconds(120);
  auto ready_to_kill = [&] {
    return StepEndTimes(faulty + "/metrics-0.csv").size() >=
               kStepsPerEpoch * kEpochs / 3 &&
           testutil::ReadFile(faulty + "/server-1.log")
                   .find("checkpoint of 1 tables") != std::string::npos;
  };
  while (!ready_to_kill() && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(10));  // polling interval
  }
  ASSERT_TRUE(ready_to_kill());
  const int port = servers[1]->port();
  servers[1]->Kill();
  const absl::Time killed = absl::Now();
  // The version of the last checkpoint written, read from the file: the
  // server may have renamed a newer one into place and been killed before
  // it logged it.
  absl::StatusOr<ps::Checkpoint> on_disk =
      ps::ReadCheckpoint(faulty + "/ckpt-1/checkpoint");
  ASSERT_TRUE(on_disk.ok()) << on_disk.status();
  ASSERT_EQ(on_disk->tables.size(), 1u);
  const uint64_t last_checkpoint = on_disk->tables[0].meta.version();
  // Back once every worker has hit the outage (logged a retry for it).
  auto both_waiting = [&] {
    for (int rank = 0; rank < 2; ++rank) {
      const std::string log =
          testutil::ReadFile(absl::StrCat(faulty, "/worker-", rank, ".log"));
      if (log.find("retry in") == std::string::npos) return false;
    }
    return true;
  };
  while (!both_waiting() && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(10));  // polling interval
  }
  ASSERT_TRUE(both_waiting());
  const double restart_begin_s =
      absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
  servers[1] = StartServer(faulty, 1, port);
  ASSERT_NE(servers[1], nullptr);
  const absl::Time restored = absl::Now();
  WaitWorkers(workers);

  // Recovery: the first step any worker finished after the restart.
  double first_after = 1e300;
  for (int rank = 0; rank < 2; ++rank) {
    for (double t :
         StepEndTimes(absl::StrCat(faulty, "/metrics-", rank, ".csv"))) {
      if (t > absl::ToDoubleSeconds(restored - absl::UnixEpoch())) {
        first_after = std::min(first_after, t);
      }
    }
  }
  const std::vector<double> end0 = StepEndTimes(faulty + "/metrics-0.csv");
  const std::vector<double> end1 = StepEndTimes(faulty + "/metrics-1.csv");
  const double kill_s = absl::ToDoubleSeconds(killed - absl::UnixEpoch());
  auto first_after_kill = [&](const std::vector<double>& t) {
    return *std::upper_bound(t.begin(), t.end(), kill_s + 0.001) - kill_s;
  };
  std::printf(
      "worker 0 resumed %.2f s, worker 1 %.2f s after the kill; they "
      "finished %.2f s apart\n",
      first_after_kill(end0), first_after_kill(end1),
      end0.back() - end1.back());
  const double restart_s = absl::ToDoubleSeconds(restored - killed);
  const double resumed_s = first_after - kill_s;
  std::printf(
      "recovery: restarted server serving %.2f s after the kill (once both "
      "workers were retrying), training resumed %.2f s after the kill\n",
      restart_s, resumed_s);
  RecordProperty("restart_seconds", absl::StrCat(restart_s));
  RecordProperty("resume_seconds", absl::StrCat(resumed_s));
  EXPECT_LT(resumed_s, 15);
  const std::string log = testutil::ReadFile(servers[1]->log_path());
  ASSERT_NE(log.find("restored 1 tables"), std::string::npos)
      << log << "\nbefore the kill:\n"
      << testutil::ReadFile(faulty + "/server-1.log");

  const double faulty_accuracy = FinalAccuracy(faulty, addrs);
  std::printf(
      "final model accuracy: fault-free %.4f, with the kill %.4f (rank 0 at "
      "its end: %.4f and %.4f)\n",
      clean_accuracy, faulty_accuracy,
      Field(testutil::ReadFile(clean + "/summary-0.json"), "test_accuracy"),
      Field(testutil::ReadFile(faulty + "/summary-0.json"), "test_accuracy"));
  EXPECT_GT(clean_accuracy, 0.6);
  EXPECT_NEAR(faulty_accuracy, clean_accuracy, 0.01);

  // Each step pushes one piece to each server. The server that lived
  // applied exactly one per step, retries included; the restarted one
  // resumed from its latest checkpoint and applied the pushes since, never
  // more than were made: it lost only those between that checkpoint and
  // the kill.
  const uint64_t steps = Steps(faulty);
  EXPECT_EQ(steps, uint64_t{2} * kEpochs * kStepsPerEpoch);
  std::vector<shardps::StatsResponse> stats = Stats(addrs);
  ASSERT_EQ(stats.size(), 2u);
  ASSERT_EQ(stats[0].tables_size(), 1);
  ASSERT_EQ(stats[1].tables_size(), 1);
  EXPECT_EQ(stats[0].tables(0).version(), steps);
  const shardps::TableStats& restarted = stats[1].tables(0);
  // The latest checkpoint, as written.
  EXPECT_EQ(restarted.restored_version(), last_checkpoint);
  EXPECT_GT(last_checkpoint, 0u);
  ASSERT_LE(restarted.version(), steps);
  const uint64_t lost = steps - restarted.version();
  // What it lost is known to within the workers' steps in flight at the
  // kill: every step that ended before the restart had its push
  // acknowledged by the killed server (no step ends while a server is
  // down), and each of the two workers had at most one push acknowledged
  // but its step not yet ended, and at most one applied (so maybe in the
  // checkpoint) but not acknowledged.
  const int64_t ended_before_kill =
      (std::lower_bound(end0.begin(), end0.end(), restart_begin_s) -
       end0.begin()) +
      (std::lower_bound(end1.begin(), end1.end(), restart_begin_s) -
       end1.begin());
  const int64_t acknowledged_after_checkpoint =
      ended_before_kill - static_cast<int64_t>(last_checkpoint);
  EXPECT_GE(static_cast<int64_t>(lost), acknowledged_after_checkpoint);
  EXPECT_LE(static_cast<int64_t>(lost), acknowledged_after_checkpoint + 4);
  std::printf(
      "pushes: %lu steps (%ld ended before the kill); restarted server "
      "restored version %lu, ends at %lu (lost %lu since its last "
      "checkpoint); duplicates acknowledged %lu + %lu\n",
      steps, ended_before_kill, restarted.restored_version(),
      restarted.version(), lost, stats[0].duplicate_pushes(),
      stats[1].duplicate_pushes());
  for (auto& s : servers) EXPECT_TRUE(s->Stop().ok());
}

// Asynchronous training goes on without a dead worker, and the worker
// rejoins from its own checkpoint (epoch and position) when restarted.
TEST_F(FaultRecoveryTest, KilledWorkerRejoinsFromItsCheckpoint) {
  const std::string run = tmp_.path() + "/rejoin";
  ASSERT_TRUE(std::filesystem::create_directories(run));
  std::vector<std::string> addrs;
  std::vector<std::unique_ptr<ps::ServerProcess>> servers =
      StartServers(run, &addrs);
  ASSERT_EQ(servers.size(), 2u);
  std::vector<std::unique_ptr<ps::ChildProcess>> rank0;
  rank0.push_back(StartWorker(run, 0, addrs));
  std::unique_ptr<ps::ChildProcess> rank1 = StartWorker(run, 1, addrs);
  ASSERT_NE(rank1, nullptr);
  const size_t kill_after = kStepsPerEpoch * kEpochs / 3;
  const absl::Time give_up = absl::Now() + absl::Seconds(120);
  while (StepEndTimes(run + "/metrics-1.csv").size() < kill_after &&
         absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(10));  // polling interval
  }
  ASSERT_GE(StepEndTimes(run + "/metrics-1.csv").size(), kill_after);
  rank1->Kill();
  const size_t done_before = StepEndTimes(run + "/metrics-1.csv").size();
  // Rank 0 finishes on its own.
  WaitWorkers(rank0);
  EXPECT_EQ(Field(testutil::ReadFile(run + "/summary-0.json"), "steps"),
            kStepsPerEpoch * kEpochs);

  // Rank 1 rejoins where its checkpoint says, not at the start.
  std::unique_ptr<ps::ChildProcess> again =
      StartWorker(run, 1, addrs, "--resume");
  ASSERT_NE(again, nullptr);
  const int rejoined = testutil::ExitCode(*again);
  const std::string log = testutil::ReadFile(again->log_path());
  ASSERT_EQ(rejoined, 0) << log;
  EXPECT_NE(log.find("resuming from"), std::string::npos) << log;
  const std::string summary = testutil::ReadFile(run + "/summary-1.json");
  EXPECT_EQ(Field(summary, "steps"), kStepsPerEpoch * kEpochs) << summary;
  // Only the steps after its last checkpoint (every 20) were done twice.
  const size_t trained = StepEndTimes(run + "/metrics-1.csv").size();
  std::printf(
      "worker 1: %zu steps before the kill, %zu trained in all for "
      "%d planned\n",
      done_before, trained, kStepsPerEpoch * kEpochs);
  EXPECT_GE(trained, size_t{kStepsPerEpoch} * kEpochs);
  EXPECT_LE(trained, size_t{kStepsPerEpoch} * kEpochs + 20);
  // Both workers' pushes reached the servers: one per step, the redone
  // ones included (plus, at most, the push of a step killed before its
  // metrics line).
  std::vector<shardps::StatsResponse> stats = Stats(addrs);
  ASSERT_EQ(stats.size(), 2u);
  ASSERT_EQ(stats[0].tables_size(), 1);
  EXPECT_GE(stats[0].tables(0).version(), kStepsPerEpoch * kEpochs + trained);
  EXPECT_LE(stats[0].tables(0).version(),
            kStepsPerEpoch * kEpochs + trained + 1);
  for (auto& s : servers) EXPECT_TRUE(s->Stop().ok());
}

}  // namespace
}  // namespace worker
