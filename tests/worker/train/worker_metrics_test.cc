// A worker's Prometheus metrics agree with its own summary of the run.
#include "worker/train/worker_metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "ps/client/client.h"
#include "ps/client/client_metrics.h"
#include "util/data.h"
#include "util/files.h"
#include "util/metrics_text.h"
#include "util/servers.h"
#include "worker/train/trainer.h"

namespace worker {
namespace {

using testutil::SeriesValue;

TEST(WorkerMetricsTest, StepsPhasesAndLoaderAgreeWithTheSummary) {
  testutil::ScopedTempDir tmp("shardps-worker-metrics");
  ASSERT_EQ(testutil::MakeSyntheticData(
                tmp.path() + "/data",
                "--samples 2000 --features 16 --classes 3 --shards 2"),
            0);
  std::vector<std::string> addrs;
  auto servers = testutil::StartLocalServers(2, "test", &addrs);
  ASSERT_EQ(servers.size(), 2u);
  prometheus::Registry registry;
  ps::ClientMetrics client_metrics(registry, 2);
  WorkerMetrics metrics(registry);
  ps::ClientOptions co;
  co.server_addrs = addrs;
  co.job = "test";
  co.metrics = &client_metrics;
  absl::StatusOr<std::unique_ptr<ps::Client>> client = ps::Client::Connect(co);
  ASSERT_TRUE(client.ok()) << client.status();

  TrainerOptions to;
  to.model = "mlp:16-8-3";
  to.data = tmp.path() + "/data";
  to.batch = 32;
  to.epochs = 2;
  to.run_dir = tmp.path();
  to.prefetch_batches = 4;
  to.progress_every = 0;
  to.metrics = &metrics;
  absl::StatusOr<shardps::WorkerSummary> summary =
      Train(**client, to, absl::Now());
  ASSERT_TRUE(summary.ok()) << summary.status();
  ASSERT_GT(summary->steps(), 0u);

  const std::string page = testutil::RegistryText(registry);
  const double steps = static_cast<double>(summary->steps());
  EXPECT_EQ(SeriesValue(page, "shardps_worker_steps_total"), steps);
  EXPECT_EQ(SeriesValue(page, "shardps_worker_samples_total"),
            static_cast<double>(summary->samples()));
  EXPECT_EQ(SeriesValue(page, "shardps_worker_epoch"), 1);
  EXPECT_GT(SeriesValue(page, "shardps_worker_loss"), 0);
  const std::pair<const char*, double> phases[] = {
      {"wait_for_data", summary->read_seconds()},
      {"pull", summary->pull_seconds()},
      {"compute", summary->compute_seconds()},
      {"push", summary->push_seconds()}};
  for (const auto& [phase, seconds] : phases) {
    SCOPED_TRACE(phase);
    EXPECT_EQ(
        SeriesValue(page,
                    absl::StrCat(R"(shardps_worker_step_seconds_count{phase=")",
                                 phase, R"("})")),
        steps);
    EXPECT_NEAR(
        SeriesValue(page,
                    absl::StrCat(R"(shardps_worker_step_seconds_sum{phase=")",
                                 phase, R"("})")),
        seconds, 1e-6);
  }
  EXPECT_NEAR(SeriesValue(page, "shardps_loader_stall_seconds_total"),
              summary->read_seconds(), 1e-6);
  // Every read of the partition was seen (2 epochs of parts of batches).
  EXPECT_GE(SeriesValue(page, "shardps_loader_read_seconds_count"), steps);
  const double depth = SeriesValue(page, "shardps_loader_queue_depth");
  EXPECT_GE(depth, 0);
  EXPECT_LE(depth, 4);
  // One pull and one push per step and shard (each fits one chunk), plus
  // rank 0's pull before each epoch's evaluation.
  for (int shard = 0; shard < 2; ++shard) {
    EXPECT_EQ(
        SeriesValue(
            page,
            absl::StrCat(R"(shardps_client_rpcs_total{method="Push",shard=")",
                         shard, R"("})")),
        steps);
    EXPECT_EQ(
        SeriesValue(
            page,
            absl::StrCat(R"(shardps_client_rpcs_total{method="Pull",shard=")",
                         shard, R"("})")),
        steps + to.epochs);
  }
}

}  // namespace
}  // namespace worker
