// The training loop against in-process servers: every batch of the
// partition is a step, the model learns, max_steps stops early, and a
// worker that rejoins from its saved position finishes the run without
// doing a step twice.
#include "worker/train/trainer.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_split.h"
#include "ps/client/client.h"
#include "ps/wire/value_codec.h"
#include "util/data.h"
#include "util/files.h"
#include "util/log.h"
#include "util/servers.h"

namespace worker {
namespace {

// A convolution, a dense layer and the classifier on 4x4 images of 3
// classes: 4*4+4 + 36*8+8 + 8*3+3 parameters.
constexpr char kTinyCnn[] = "cnn:4x4x1-c4k2-f8-3";
constexpr uint64_t kTinyCnnParams = 4u * 4 + 4 + 36u * 8 + 8 + 8u * 3 + 3;

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

  std::unique_ptr<ps::Client> Connect(uint32_t worker = 0,
                                      ps::WireEncodings encodings = {}) {
    ps::ClientOptions co;
    co.server_addrs = addrs_;
    co.worker = worker;
    co.job = "test";
    co.pull_encoding = encodings.pull;
    co.push_encoding = encodings.push;
    absl::StatusOr<std::unique_ptr<ps::Client>> c = ps::Client::Connect(co);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }

  // Rank 0 of 2: 900 records, 29 batches of 32 (the last of 4).
  // Rank `rank` of two workers training kTinyCnn on `table` (and a run
  // directory of that name) under `mode`, with --overlap=`overlap`.
  TrainerOptions TinyCnnWorker(int rank, shardps::ConsistencyMode mode,
                               const std::string& overlap,
                               const std::string& table) {
    TrainerOptions o = Options();
    o.model = kTinyCnn;
    o.rank = rank;
    o.consistency.set_mode(mode);
    o.consistency.set_num_workers(2);
    o.consistency.set_straggler_timeout_seconds(30);
    o.overlap = overlap;
    o.table = table;
    o.run_dir = tmp_.path() + "/" + table + std::to_string(rank);
    return o;
  }

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
  o.model = kTinyCnn;
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

// The model table `table` of `o` as the servers hold it now.
std::vector<float> ModelOnServers(ps::Client& client, const TrainerOptions& o,
                                  uint64_t params) {
  std::vector<float> values(params);
  EXPECT_TRUE(client.Pull(o.table, 0, params, values.data()).ok());
  return values;
}

TEST_F(TrainerTest, OverlappedLayersTrainTheSameModelAsTheBaseline) {
  // One worker, async: a layer's exchange brings exactly what the whole
  // model's pull would, so both loops make the same updates, bit for bit.
  TrainerOptions o = Options();
  o.model = "cnn:4x4x1-c4k2-p1-f8-3";
  o.world = 1;
  o.epochs = 2;
  o.checkpoint_every = 7;  // drains the exchanges now and then
  std::unique_ptr<ps::Client> client = Connect();
  std::vector<std::vector<float>> models;
  std::vector<shardps::WorkerSummary> summaries;
  for (const char* overlap : {"none", "layer"}) {
    o.overlap = overlap;
    o.table = std::string("model-") + overlap;
    o.run_dir = tmp_.path() + "/" + overlap;
    ASSERT_EQ(mkdir(o.run_dir.c_str(), 0755), 0);
    absl::StatusOr<shardps::WorkerSummary> s = Train(*client, o, absl::Now());
    ASSERT_TRUE(s.ok()) << overlap << ": " << s.status();
    summaries.push_back(*s);
    models.push_back(ModelOnServers(*client, o, s->model_params()));
  }
  EXPECT_EQ(summaries[1].overlap(), "layer");
  EXPECT_EQ(summaries[1].steps(), 2 * 57u);
  EXPECT_EQ(summaries[1].steps(), summaries[0].steps());
  EXPECT_EQ(summaries[1].first_epoch_loss(), summaries[0].first_epoch_loss());
  EXPECT_EQ(summaries[1].last_epoch_loss(), summaries[0].last_epoch_loss());
  EXPECT_EQ(summaries[1].test_accuracy(), summaries[0].test_accuracy());
  EXPECT_EQ(models[1], models[0]);
  // Two layers with parameters: two PushPulls per step and server, and no
  // Push. The server with the small first layer's keys gets its calls too.
  absl::StatusOr<std::vector<shardps::StatsResponse>> stats = client->Stats();
  ASSERT_TRUE(stats.ok());
  uint64_t push_pulls = 0, pushes = 0;
  for (const shardps::StatsResponse& server : *stats) {
    push_pulls += server.push_pull_requests();
    pushes += server.push_requests();
  }
  EXPECT_EQ(pushes, 2 * 57u * 2);  // the baseline's, one per server
  EXPECT_GE(push_pulls, 2 * 57u * 2);
}

TEST_F(TrainerTest, OverlappedLayersShowTheirExchangesInTheTrace) {
  TrainerOptions o = Options();
  o.model = kTinyCnn;
  o.world = 1;
  o.epochs = 1;
  o.overlap = "layer";
  ps::TraceOptions to;
  to.path = tmp_.path() + "/trace.json";
  absl::StatusOr<std::unique_ptr<ps::Tracer>> tracer = ps::Tracer::Open(to);
  ASSERT_TRUE(tracer.ok()) << tracer.status();
  o.tracer = tracer->get();
  std::unique_ptr<ps::Client> client = Connect();
  ASSERT_TRUE(Train(*client, o, absl::Now()).ok());
  ASSERT_TRUE((*tracer)->Flush().ok());
  const std::string trace = testutil::ReadFile(to.path);
  // One exchange per layer with parameters (the convolution and two dense
  // layers) and step, 57 steps, each span naming its layer.
  auto count = [&](const std::string& text) {
    size_t n = 0;
    for (size_t at = trace.find(text); at != std::string::npos;
         at = trace.find(text, at + 1)) {
      ++n;
    }
    return n;
  };
  EXPECT_EQ(count("\"name\":\"exchange\""), 3 * 57u) << trace.substr(0, 400);
  EXPECT_GE(count("\"layer\":0"), 57u);
  EXPECT_GT(count("\"name\":\"compute\""), 0u);
}

TEST_F(TrainerTest, OverlappedLayersLearnWithEveryCompressionAndUnderSsp) {
  // Each layer's exchange encodes its gradient and decodes its values on
  // its own (1-bit keeps a residual per key across the layers' calls).
  for (const char* compression : {"fp16", "bf16", "onebit"}) {
    TrainerOptions o = Options();
    o.model = kTinyCnn;
    o.world = 1;
    o.epochs = 8;
    o.overlap = "layer";
    o.compression = compression;
    o.table = std::string("compressed-") + compression;
    o.run_dir = tmp_.path() + "/" + o.table;
    ASSERT_EQ(mkdir(o.run_dir.c_str(), 0755), 0);
    std::unique_ptr<ps::Client> client =
        Connect(0, *ps::EncodingsFor(compression));
    absl::StatusOr<shardps::WorkerSummary> s = Train(*client, o, absl::Now());
    ASSERT_TRUE(s.ok()) << compression << ": " << s.status();
    EXPECT_GE(s->test_accuracy(),
              testutil::LearnedAccuracy(tmp_.path() + "/data"))
        << compression;
  }
  // Two workers under ssp:1, each exchanging its layers as it goes.
  std::vector<std::thread> workers;
  for (int rank = 0; rank < 2; ++rank) {
    workers.emplace_back([&, rank] {
      TrainerOptions o =
          TinyCnnWorker(rank, shardps::CONSISTENCY_SSP, "layer", "ssp");
      o.epochs = 8;
      o.consistency.set_staleness(1);
      ASSERT_EQ(mkdir(o.run_dir.c_str(), 0755), 0);
      std::unique_ptr<ps::Client> client = Connect(rank);
      absl::StatusOr<shardps::WorkerSummary> s = Train(*client, o, absl::Now());
      ASSERT_TRUE(s.ok()) << "rank " << rank << ": " << s.status();
      EXPECT_EQ(s->steps(), 8 * 29u);
      // The loss, not one snapshot's accuracy: this tiny CNN's test
      // accuracy at rank 0's epoch ends swings between 0.45 and 0.78 under
      // ssp with or without overlap (the MLP's does not).
      EXPECT_LT(s->last_epoch_loss(), 0.75 * s->first_epoch_loss())
          << "rank " << rank;
    });
  }
  for (std::thread& t : workers) t.join();
}

TEST_F(TrainerTest, OverlappedLayersUnderSyncMatchTheBaseline) {
  // Two workers under BSP: every clock applies the average of both
  // gradients, which each worker then reads, with or without overlap.
  std::vector<std::vector<float>> models;
  for (const char* overlap : {"none", "layer"}) {
    std::vector<std::thread> workers;
    for (int rank = 0; rank < 2; ++rank) {
      workers.emplace_back([&, rank] {
        TrainerOptions o =
            TinyCnnWorker(rank, shardps::CONSISTENCY_SYNC, overlap,
                          std::string("sync-") + overlap);
        o.max_steps = 20;
        ASSERT_EQ(mkdir(o.run_dir.c_str(), 0755), 0);
        std::unique_ptr<ps::Client> client = Connect(rank);
        absl::StatusOr<shardps::WorkerSummary> s =
            Train(*client, o, absl::Now());
        ASSERT_TRUE(s.ok())
            << overlap << " rank " << rank << ": " << s.status();
        EXPECT_EQ(s->steps(), 20u);
      });
    }
    for (std::thread& t : workers) t.join();
    TrainerOptions o = Options();
    o.table = std::string("sync-") + overlap;
    std::unique_ptr<ps::Client> client = Connect();
    ps::TableOptions table;
    table.name = o.table;
    table.num_params = kTinyCnnParams;
    ASSERT_TRUE(client->OpenTable(table, absl::Seconds(5)).ok());
    models.push_back(ModelOnServers(*client, o, kTinyCnnParams));
  }
  EXPECT_EQ(models[1], models[0]);
}

}  // namespace
}  // namespace worker
