// The click trainer refuses, by flag, what it does not do and data it
// cannot train on, before it touches the servers.
#include "worker/train/click_trainer.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "util/data.h"
#include "util/files.h"

namespace worker {
namespace {

class ClickTrainerTest : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(testutil::MakeSyntheticData(
                  tmp_.path() + "/dense",
                  "--samples 200 --features 4 --classes 2 --shards 1"),
              0);
    ps::ClientOptions c;
    c.server_addrs = {"127.0.0.1:1"};  // never reached
    c.job = "click";
    absl::StatusOr<std::unique_ptr<ps::Client>> client = ps::Client::Connect(c);
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }

  TrainerOptions Options() {
    TrainerOptions o;
    o.model = "dlrm:4-8";
    o.data = tmp_.path() + "/dense";
    o.run_dir = tmp_.path() + "/run";
    return o;
  }

  absl::Status Train(const TrainerOptions& o) {
    return TrainClickModel(*client_, o, absl::Now()).status();
  }

  testutil::ScopedTempDir tmp_{"shardps-click-trainer"};
  std::unique_ptr<ps::Client> client_;
};

TEST_F(ClickTrainerTest, FlagsItDoesNotTakeAreRefusedByName) {
  TrainerOptions o = Options();
  o.overlap = "layer";
  absl::Status s = Train(o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "does not take --overlap")) << s;
  o = Options();
  o.lr_schedule = "cosine";
  EXPECT_TRUE(absl::StrContains(Train(o).message(), "--lr_schedule"));
  o = Options();
  o.consistency.set_mode(shardps::CONSISTENCY_SYNC);
  EXPECT_TRUE(absl::StrContains(Train(o).message(), "async only"));
  o = Options();
  o.resume = true;
  EXPECT_TRUE(absl::StrContains(Train(o).message(), "--resume"));
}

TEST_F(ClickTrainerTest, DataWithoutCategoricalFieldsIsNamed) {
  absl::Status s = Train(Options());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StrContains(s.message(), "0 categorical fields")) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "/dense/train")) << s;
  TrainerOptions o = Options();
  o.model = "dlrm:4";
  s = Train(o);
  EXPECT_TRUE(absl::StrContains(s.message(), "at least one hidden layer")) << s;
}

}  // namespace
}  // namespace worker
