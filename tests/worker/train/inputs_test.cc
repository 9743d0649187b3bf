// A worker's inputs: its partition behind the chosen loader, the test set
// on rank 0 only, and under a barrier the steps of the smallest partition.
#include "worker/train/inputs.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "util/data.h"
#include "util/files.h"

namespace worker {
namespace {

class InputsTest : public testing::Test {
 protected:
  void SetUp() override {
    // 1111 samples with a 10% test split: 1000 to train on.
    ASSERT_EQ(testutil::MakeSyntheticData(
                  tmp_.path() + "/data",
                  "--samples 1111 --features 4 --classes 2 --shards 3"),
              0);
  }

  TrainerOptions Options(int rank, int world, int batch) {
    TrainerOptions o;
    o.model = "mlp:4-3-2";
    o.data = tmp_.path() + "/data";
    o.rank = rank;
    o.world = world;
    o.batch = batch;
    return o;
  }

  testutil::ScopedTempDir tmp_{"shardps-inputs"};
};

TEST_F(InputsTest, TheTestSetIsRankZerosOnly) {
  absl::StatusOr<std::unique_ptr<Inputs>> zero = OpenInputs(Options(0, 2, 10));
  ASSERT_TRUE(zero.ok()) << zero.status();
  EXPECT_NE((*zero)->test, nullptr);
  EXPECT_EQ((*zero)->batches->partition_size(), 500u);
  absl::StatusOr<std::unique_ptr<Inputs>> one = OpenInputs(Options(1, 2, 10));
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ((*one)->test, nullptr);
}

TEST_F(InputsTest, UnderABarrierEveryRankTakesTheSmallestPartitionsSteps) {
  // 1000 records over 3 ranks: 333, 333, 334. In batches of 111 rank 2
  // needs 4 steps, the others 3.
  TrainerOptions o = Options(2, 3, 111);
  absl::StatusOr<std::unique_ptr<Inputs>> in = OpenInputs(o);
  ASSERT_TRUE(in.ok()) << in.status();
  ASSERT_EQ((*in)->batches->partition_size(), 334u);
  EXPECT_EQ(StepsPerEpoch(o, **in), 4u);
  o.consistency.set_mode(shardps::CONSISTENCY_SYNC);
  EXPECT_EQ(StepsPerEpoch(o, **in), 3u);
}

TEST_F(InputsTest, AMissingTestSetIsNoAccuracyButADamagedOneIsAnError) {
  std::filesystem::remove_all(tmp_.path() + "/data/test");
  absl::StatusOr<std::unique_ptr<Inputs>> in = OpenInputs(Options(0, 1, 10));
  ASSERT_TRUE(in.ok()) << in.status();
  EXPECT_EQ((*in)->test, nullptr);
  std::filesystem::create_directories(tmp_.path() + "/data/test");
  testutil::WriteFile(tmp_.path() + "/data/test/manifest.txt", "garbage {");
  absl::Status s = OpenInputs(Options(0, 1, 10)).status();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("data/test/manifest.txt"), std::string::npos) << s;
}

TEST_F(InputsTest, MissingTrainingDataIsNamed) {
  TrainerOptions o = Options(0, 1, 10);
  o.data = tmp_.path() + "/nothing";
  absl::Status s = OpenInputs(o).status();
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_NE(s.message().find(tmp_.path() + "/nothing/train"), std::string::npos)
      << s;
}

}  // namespace
}  // namespace worker
