// The training loop against in-process servers: every batch of the
// partition is a step, the model learns, max_steps stops early, and a
// worker that rejoins from its saved position finishes the run without
// doing a step twice.
#include "worker/train/trainer.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "ps/client/client.h"
#include "util/data.h"
#include "util/files.h"
#include "util/log.h"
#include "util/servers.h"

namespace worker {
namespace {

class TrainerTest : public testing::Test {
 protected:
  void SetUp() override {
    // 2000 samples: 1800 to train on, 200 to test.
    ASSERT_EQ(testutil::MakeSyntheticData(
                  tmp_.path() + "/data",
                  "--samples 2000 --features 16 --classes 3 --shards 2"),
              0);
    servers_ = testutil::StartLocalServers(2, "test", &addrs_);
    ASSERT_EQ(servers_.size(), 2u);
  }

  std::unique_ptr<ps::Client> Connect() {
    ps::ClientOptions co;
    co.server_addrs = addrs_;
    co.job = "test";
    absl::StatusOr<std::unique_ptr<ps::Client>> c = ps::Client::Connect(co);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }

  // Rank 0 of 2: 900 records, 29 batches of 32 (the last of 4).
  TrainerOptions Options() {
    TrainerOptions to;
    to.model = "mlp:16-8-3";
    to.data = tmp_.path() + "/data";
    to.batch = 32;
    to.epochs = 2;
    to.world = 2;
    to.run_dir = tmp_.path();
    to.progress_every = 0;
    to.log = &log_;
    return to;
  }

  // Data lines of RUN_DIR/metrics-0.csv.
  std::vector<std::string> StepLines() {
    std::vector<std::string> lines =
        absl::StrSplit(testutil::ReadFile(tmp_.path() + "/metrics-0.csv"), '\n',
                       absl::SkipEmpty());
    EXPECT_FALSE(lines.empty());
    if (!lines.empty()) lines.erase(lines.begin());  // the header
    return lines;
  }

  testutil::ScopedTempDir tmp_{"shardps-trainer"};
  std::vector<std::string> addrs_;
  std::vector<std::unique_ptr<ps::Server>> servers_;
  testutil::RecordingLog log_;
};

TEST_F(TrainerTest, EveryBatchIsAStepAndTheModelLearns) {
  std::unique_ptr<ps::Client> client = Connect();
  absl::StatusOr<shardps::WorkerSummary> s =
      Train(*client, Options(), absl::Now());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->partition_records(), 900u);
  EXPECT_EQ(s->steps(), 58u);      // 2 epochs of 29
  EXPECT_EQ(s->samples(), 1800u);  // every record twice
  EXPECT_EQ(StepLines().size(), 58u);
  EXPECT_LT(s->last_epoch_loss(), 0.9 * s->first_epoch_loss())
      << s->ShortDebugString();
  EXPECT_EQ(s->consistency(), "async");
  // One push per step and server, and nothing else.
  absl::StatusOr<std::vector<shardps::StatsResponse>> stats = client->Stats();
  ASSERT_TRUE(stats.ok());
  for (const shardps::StatsResponse& server : *stats) {
    EXPECT_EQ(server.push_requests(), 58u);
  }
}

TEST_F(TrainerTest, TheModelLearnsWellAboveChance) {
  // Eight epochs of the 900 records (two leave the model half-trained).
  std::unique_ptr<ps::Client> client = Connect();
  TrainerOptions o = Options();
  o.epochs = 8;
  absl::StatusOr<shardps::WorkerSummary> s = Train(*client, o, absl::Now());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->steps(), 8 * 29u);
  // Seed 1's test set is 66% one class; this reaches 0.87.
  EXPECT_GE(s->test_accuracy(),
            testutil::LearnedAccuracy(tmp_.path() + "/data"));
}

TEST_F(TrainerTest, ARejoiningWorkerFinishesWithoutRepeatingAStep) {
  TrainerOptions first = Options();
  first.max_steps = 40;  // stops in epoch 1, at batch 11
  first.checkpoint_every = 5;
  {
    std::unique_ptr<ps::Client> client = Connect();
    absl::StatusOr<shardps::WorkerSummary> s =
        Train(*client, first, absl::Now());
    ASSERT_TRUE(s.ok()) << s.status();
    EXPECT_EQ(s->steps(), 40u);
  }
  TrainerOptions rejoin = Options();
  rejoin.resume = true;
  std::unique_ptr<ps::Client> client = Connect();
  absl::StatusOr<shardps::WorkerSummary> s =
      Train(*client, rejoin, absl::Now());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->steps(), 58u);
  EXPECT_EQ(s->samples(), 1800u);
  EXPECT_TRUE(log_.Has("resuming from"));
  const std::vector<std::string> lines = StepLines();
  ASSERT_EQ(lines.size(), 58u);
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::vector<std::string> f = absl::StrSplit(lines[i], ',');
    ASSERT_GE(f.size(), 2u);
    EXPECT_EQ(f[1], std::to_string(i)) << lines[i];  // steps 0..57, once each
  }
  // The servers got each of the 58 steps' pushes once, from the two
  // processes together.
  absl::StatusOr<std::vector<shardps::StatsResponse>> stats = client->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ((*stats)[0].push_requests(), 58u);
}

TEST_F(TrainerTest, ARejoinOfAnotherConfigurationIsRefusedByName) {
  TrainerOptions first = Options();
  first.max_steps = 5;
  first.checkpoint_every = 5;
  std::unique_ptr<ps::Client> client = Connect();
  ASSERT_TRUE(Train(*client, first, absl::Now()).ok());
  TrainerOptions other = Options();
  other.resume = true;
  other.batch = 64;
  absl::Status s = Train(*client, other, absl::Now()).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_NE(s.message().find("worker-0.checkpoint.json is of another "
                             "configuration"),
            std::string::npos)
      << s;
}

TEST_F(TrainerTest, AModelThatDoesNotFitTheDataSaysBoth) {
  TrainerOptions to = Options();
  to.model = "mlp:10-8-3";
  std::unique_ptr<ps::Client> client = Connect();
  absl::Status s = Train(*client, to, absl::Now()).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("takes 10 features and 3 classes"),
            std::string::npos)
      << s;
  EXPECT_NE(s.message().find("has 16 and 3"), std::string::npos) << s;
  // A convolution on the data set's flat 16 features has no image to run on.
  to.model = "cnn:c4k3-3";
  s = Train(*client, to, absl::Now()).status();
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
  EXPECT_NE(s.message().find("a kernel of 3 does not fit its input of 16"),
            std::string::npos)
      << s;
}

TEST_F(TrainerTest, AConvolutionalModelTrainsOnTheServers) {
  // The 16 features read as a 4 x 4 image: a 2 x 2 convolution of 4 filters,
  // a dense layer of 8, softmax over 3.
  TrainerOptions o = Options();
  o.model = "cnn:4x4x1-c4k2-f8-3";
  o.epochs = 8;
  std::unique_ptr<ps::Client> client = Connect();
  absl::StatusOr<shardps::WorkerSummary> s = Train(*client, o, absl::Now());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->steps(), 8 * 29u);
  EXPECT_EQ(s->model(), o.model);
  EXPECT_EQ(s->model_params(), 4u * 4 + 4 + 36u * 8 + 8 + 8u * 3 + 3);
  EXPECT_LT(s->last_epoch_loss(), 0.9 * s->first_epoch_loss())
      << s->ShortDebugString();
  EXPECT_GE(s->test_accuracy(),
            testutil::LearnedAccuracy(tmp_.path() + "/data"));
}

}  // namespace
}  // namespace worker
