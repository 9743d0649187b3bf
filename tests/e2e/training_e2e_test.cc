// End-to-end training: two shardps-server processes and two shardps-worker
// processes on loopback train an MLP on a synthetic data set written by
// shardps-data, once with each loader.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "util/data.h"
#include "util/files.h"
#include "util/servers.h"
#include "util/workers.h"

namespace worker {
namespace {

class TrainingTest : public testing::TestWithParam<const char*> {
 protected:
  static double Field(const std::string& json, const std::string& key) {
    std::smatch m;
    const std::regex re("\"" + key + "\":(-?[0-9.]+)");
    return std::regex_search(json, m, re) ? std::stod(m[1]) : -1e9;
  }
  testutil::ScopedTempDir tmp_{"shardps-train"};
  const std::string dir_ = tmp_.path();
};

TEST_P(TrainingTest, TwoServersTwoWorkersLearn) {
  ASSERT_EQ(testutil::MakeSyntheticData(
                dir_ + "/data",
                "--samples 8000 --features 32 --classes 4 --shards 4 --seed 3"),
            0);
  std::vector<std::string> addrs;
  std::vector<std::unique_ptr<ps::ServerProcess>> servers =
      testutil::SpawnServers(2, dir_, "e2e", &addrs);
  ASSERT_EQ(servers.size(), 2u);
  std::vector<std::unique_ptr<ps::ChildProcess>> workers;
  for (int rank = 0; rank < 2; ++rank) {
    workers.push_back(testutil::StartWorker(
        addrs,
        {"--job=e2e", absl::StrCat("--rank=", rank), "--world=2",
         "--model=mlp:32-64-4", "--data=" + dir_ + "/data",
         absl::StrCat("--loader=", GetParam()), "--epochs=4", "--batch=32",
         "--lr=0.1", "--run_dir=" + dir_ + "/run", "--progress_every=0"},
        absl::StrCat(dir_, "/worker-", rank, ".log")));
    ASSERT_NE(workers.back(), nullptr);
  }
  for (int rank = 0; rank < 2; ++rank) {
    EXPECT_EQ(testutil::ExitCode(*workers[rank]), 0)
        << testutil::ReadFile(absl::StrCat(dir_, "/worker-", rank, ".log"));
  }
  for (int rank = 0; rank < 2; ++rank) {
    const std::string summary =
        testutil::ReadFile(absl::StrCat(dir_, "/run/summary-", rank, ".json"));
    // 7200 training samples split over 2 workers, batch 32: 113 steps an
    // epoch, 4 epochs.
    EXPECT_EQ(Field(summary, "steps"), 4 * 113) << summary;
    EXPECT_EQ(Field(summary, "samples"), 4 * 3600) << summary;
    // The loss falls on every worker and ends far below log(4) = 1.386,
    // the loss of a uniform guess over 4 classes. (Rank 1 starts a little
    // later, on a model rank 0 has already improved, so compare each worker
    // with itself and with chance rather than the two with each other.)
    EXPECT_LT(Field(summary, "last_epoch_loss"),
              Field(summary, "first_epoch_loss"))
        << summary;
    EXPECT_LT(Field(summary, "last_epoch_loss"), 0.6 * std::log(4.0))
        << summary;
    if (rank == 0) {  // the evaluating rank
      EXPECT_GE(Field(summary, "test_accuracy"),
                testutil::LearnedAccuracy(dir_ + "/data"))
          << summary;
    }
    EXPECT_GT(Field(summary, "init_seconds"), 0) << summary;
    const std::string metrics =
        testutil::ReadFile(absl::StrCat(dir_, "/run/metrics-", rank, ".csv"));
    EXPECT_EQ(metrics.rfind(
                  "epoch,step,batch,loss,read_ms,compute_ms,pull_ms,push_ms,"
                  "end_unix_s\n",
                  0),
              0u);
    EXPECT_EQ(std::count(metrics.begin(), metrics.end(), '\n'), 1 + 4 * 113);
  }
  // Four classes: chance is 25%.
  const double accuracy =
      Field(testutil::ReadFile(dir_ + "/run/summary-0.json"), "test_accuracy");
  EXPECT_GT(accuracy, 0.6);
  for (auto& s : servers) EXPECT_TRUE(s->Stop().ok());
}

INSTANTIATE_TEST_SUITE_P(BothLoaders, TrainingTest,
                         testing::Values("parallel", "sequential"));

}  // namespace
}  // namespace worker
