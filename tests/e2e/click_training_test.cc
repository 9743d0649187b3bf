// A DLRM-style click model trained for real: shardps-data criteo-synthetic
// writes Criteo-schema data from a hidden model whose own AUC is known, and
// shardps-launch (2 servers, 2 workers) trains dlrm:8-32 on it, the
// embedding rows in a sparse table; the final model must come within 0.01
// of the generator's AUC, with hash or range sharding of the rows, and
// with each shard replicated on two servers.
#include <gtest/gtest.h>

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "proto/summary.pb.h"
#include "ps/base/program.h"
#include "util/etcd.h"
#include "util/files.h"
#include "util/launch.h"
#include "util/processes.h"

namespace {

struct ClickSetup {
  const char* row_sharding;
  int replicas;  // servers per shard
};

// As ctest lists the runs: "hash, 2 replicas".
void PrintTo(const ClickSetup& setup, std::ostream* os) {
  *os << setup.row_sharding << ", " << setup.replicas
      << (setup.replicas == 1 ? " replica" : " replicas");
}

class ClickTrainingTest : public testing::TestWithParam<ClickSetup> {
 protected:
  static void SetUpTestSuite() {
    data_ = std::make_unique<testutil::ScopedTempDir>("shardps-criteo");
    auto [code, out] = testutil::RunCommand(
        {ps::SiblingBinary("shardps-data"), "criteo-synthetic", "--out",
         data_->path(), "--samples=440000", "--test_fraction=0.0909",
         "--vocabulary=100", "--shards=2", "--seed=2"},
        absl::Seconds(120));
    ASSERT_EQ(code, 0) << out;
  }
  static void TearDownTestSuite() { data_.reset(); }

  static inline std::unique_ptr<testutil::ScopedTempDir> data_;
  testutil::ScopedTempDir dir_{"shardps-click"};
};

TEST_P(ClickTrainingTest, ReachesTheGeneratorsAucWithinOneHundredth) {
  const ClickSetup setup = GetParam();
  if (setup.replicas > 1 && !testutil::HaveEtcd()) {
    GTEST_SKIP() << testutil::kEtcd
                 << " is missing (deploy/install-deps.sh installs etcd-server)";
  }
  const std::string run = dir_.path() + "/run";
  const std::string log = dir_.path() + "/launch.log";
  absl::Status s = testutil::RunLaunch(
      {"--servers=2", "--workers=2", "--run_dir=" + run,
       absl::StrCat("--replicas=", setup.replicas), "--data=" + data_->path(),
       "--", "--model=dlrm:8-32", "--epochs=3", "--batch=256",
       "--optimizer=adagrad", "--lr=0.3",
       absl::StrCat("--row_sharding=", setup.row_sharding)},
      log);
  ASSERT_TRUE(s.ok()) << s << testutil::ReadFile(log);
  if (setup.replicas > 1) {
    // The second replica of each shard joined as its backup.
    for (int shard = 0; shard < 2; ++shard) {
      const std::string backup =
          testutil::ReadFile(absl::StrCat(run, "/server-", shard, "-r1.log"));
      EXPECT_NE(backup.find("catching up from"), std::string::npos) << backup;
    }
  }
  const shardps::RunSummary sum = testutil::ReadRunSummary(run);
  ASSERT_TRUE(sum.ok()) << sum.error();
  // The generator's AUC on the test split, from the manifest (0.866 for
  // seed 2); the final model reached 0.860 when this was written.
  EXPECT_GT(sum.generator_auc(), 0.8);
  EXPECT_GE(sum.final_test_auc(), sum.generator_auc() - 0.01)
      << "generator " << sum.generator_auc();
  EXPECT_LE(sum.final_test_auc(), sum.generator_auc() + 0.01);
  EXPECT_TRUE(testutil::ReadFile(log).find("test AUC") != std::string::npos);
  // Both tables are on both servers, and the rows were spread over them.
  ASSERT_EQ(sum.per_worker_size(), 2);
  for (const shardps::WorkerSummary& w : sum.per_worker()) {
    EXPECT_EQ(w.model(), "dlrm:8-32");
    EXPECT_GT(w.steps(), 3 * 200000 / 256 - 3);  // 3 epochs of its half
    EXPECT_LT(w.last_epoch_loss(), w.first_epoch_loss());
  }
  testutil::ExpectNoProcessLeft(sum);
}

INSTANTIATE_TEST_SUITE_P(Sharding, ClickTrainingTest,
                         testing::Values(ClickSetup{"hash", 1},
                                         ClickSetup{"range", 1},
                                         ClickSetup{"hash", 2}));

}  // namespace
