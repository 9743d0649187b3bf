// What a run leaves in its directory, read back: step logs, worker
// summaries and the rates derived from them, and the Prometheus targets.
#include "worker/launch/run_record.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "ps/base/json_file.h"
#include "util/files.h"

namespace worker {
namespace {

TEST(RunRecordTest, CountsOnlyTheWindowWhereAllWorkersTrain) {
  // Worker 0 steps at t = 10..20, worker 1 (starting late) at 14..24; both
  // train in (14, 20]: worker 0's steps ending at 15..20 (6 x 8 samples)
  // and worker 1's at 15..20 (6 x 4 samples) over 6 s.
  std::vector<StepEnd> w0, w1;
  for (int t = 10; t <= 20; ++t) w0.emplace_back(t, 8);
  for (int t = 14; t <= 24; ++t) w1.emplace_back(t, 4);
  EXPECT_DOUBLE_EQ(SteadySamplesPerSecond({w0, w1}), (6 * 8 + 6 * 4) / 6.0);
  // One worker: its whole span after the first step.
  EXPECT_DOUBLE_EQ(SteadySamplesPerSecond({w0}), 10 * 8 / 10.0);
  // Windows that do not overlap, or a worker without steps: no figure.
  std::vector<StepEnd> late = {{30, 1}, {31, 1}};
  EXPECT_EQ(SteadySamplesPerSecond({w0, late}), 0);
  EXPECT_EQ(SteadySamplesPerSecond({w0, {}}), 0);
}

TEST(RunRecordTest, StepLogsAreReadLineByLine) {
  testutil::ScopedTempDir dir;
  const std::string path = dir.path() + "/metrics-0.csv";
  EXPECT_EQ(StepsLogged(path), 0);  // not written yet
  testutil::WriteFile(path,
                      "epoch,step,batch,loss,read_ms,compute_ms,pull_ms,"
                      "push_ms,end_unix_s\n"
                      "0,0,32,1.0,1,1,1,1,100.5\n"
                      "0,1,16,1.0,1,1,1,1,101.25\n"
                      "0,2,16,1.0,1,1,1");  // cut short by a kill
  EXPECT_EQ(StepsLogged(path), 2);
  EXPECT_EQ(StepEnds(path), (std::vector<StepEnd>{{100.5, 32}, {101.25, 16}}));
}

TEST(RunRecordTest, WorkerSummariesMakeTheRunsFigures) {
  testutil::ScopedTempDir dir;
  for (int r = 0; r < 2; ++r) {
    shardps::WorkerSummary w;
    w.set_rank(r);
    w.set_init_seconds(1.0 + r);
    w.set_train_seconds(10.0 - r);
    w.set_steps(100);
    w.set_samples(3200);
    w.set_partition_records(3200);
    w.set_pull_bytes(1000 * 100);
    w.set_push_bytes(1000 * 100);
    w.set_test_accuracy(r == 0 ? 0.75 : -1);
    w.set_consistency("sync");
    ASSERT_TRUE(ps::WriteJsonFile(
                    w, dir.path() + "/summary-" + std::to_string(r) + ".json")
                    .ok());
  }
  shardps::RunSummary run;
  AddWorkerSummaries(dir.path(), 3, &run);  // worker 2 failed: no summary
  EXPECT_EQ(run.per_worker_size(), 2);
  EXPECT_EQ(run.init_seconds(), 2.0);    // the slowest
  EXPECT_EQ(run.train_seconds(), 10.0);  // the longest
  EXPECT_EQ(run.test_accuracy(), 0.75);  // rank 0's
  EXPECT_EQ(run.consistency(), "sync");
  EXPECT_EQ(run.bytes_per_step(), 2000.0);
  EXPECT_EQ(run.overall_samples_per_second(), 6400 / 10.0);
  // No step logs: the steady rate falls back to the overall one.
  EXPECT_EQ(run.samples_per_second(), 640.0);
  EXPECT_EQ(run.epoch_seconds(), 6400 / 640.0);
}

TEST(RunRecordTest, TheSteadyRateComesFromTheStepLogs) {
  // Two workers of 1000 records each: worker 0 ends steps of 10 samples at
  // t = 100..110, worker 1 at 104..114 (started late). Both train in
  // (104, 110]: 6 steps of each, 120 samples in 6 s, 20 samples/s; an epoch
  // of 2000 records takes 100 s at that rate. Overall: 220 samples over
  // the longest train_seconds, 14 s.
  testutil::ScopedTempDir dir;
  for (int r = 0; r < 2; ++r) {
    std::string csv =
        "epoch,step,batch,loss,read_ms,compute_ms,pull_ms,push_ms,"
        "end_unix_s\n";
    for (int t = 0; t <= 10; ++t) {
      csv += "0," + std::to_string(t) + ",10,1.0,1,1,1,1," +
             std::to_string(100 + 4 * r + t) + "\n";
    }
    testutil::WriteFile(dir.path() + "/metrics-" + std::to_string(r) + ".csv",
                        csv);
    shardps::WorkerSummary w;
    w.set_rank(r);
    w.set_train_seconds(r == 0 ? 10.0 : 14.0);
    w.set_steps(11);
    w.set_samples(110);
    w.set_partition_records(1000);
    ASSERT_TRUE(ps::WriteJsonFile(
                    w, dir.path() + "/summary-" + std::to_string(r) + ".json")
                    .ok());
  }
  shardps::RunSummary run;
  AddWorkerSummaries(dir.path(), 2, &run);
  EXPECT_DOUBLE_EQ(run.samples_per_second(), 20.0);
  EXPECT_DOUBLE_EQ(run.epoch_seconds(), 100.0);
  EXPECT_DOUBLE_EQ(run.overall_samples_per_second(), 220 / 14.0);
}

TEST(RunRecordTest, MetricsTargetsAreFileSdGroupsPerProcess) {
  testutil::ScopedTempDir dir;
  const std::string path = dir.path() + "/prometheus-targets.json";
  HostSlot a, b;
  a.address = "10.0.0.1";
  b.address = "10.0.0.2";
  ASSERT_TRUE(WriteMetricsTargets(path, "job \"q\"", 9100, {a, b}, {b}).ok());
  google::protobuf::ListValue groups;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(
                  testutil::ReadFile(path), &groups)
                  .ok())
      << testutil::ReadFile(path);
  ASSERT_EQ(groups.values_size(), 3);
  const auto& worker = groups.values(2).struct_value().fields();
  EXPECT_EQ(worker.at("targets").list_value().values(0).string_value(),
            "10.0.0.2:9102");  // base + servers + rank
  const auto& labels = worker.at("labels").struct_value().fields();
  EXPECT_EQ(labels.at("role").string_value(), "worker");
  EXPECT_EQ(labels.at("process").string_value(), "worker-0");
  EXPECT_EQ(labels.at("shardps_job").string_value(), "job \"q\"");
  EXPECT_EQ(groups.values(1)
                .struct_value()
                .fields()
                .at("targets")
                .list_value()
                .values(0)
                .string_value(),
            "10.0.0.2:9101");
}

TEST(RunRecordTest, CpuTimesMoveForward) {
  const CpuTimes a = ReadCpuTimes();
  EXPECT_GT(a.total, 0);
  EXPECT_LE(a.busy, a.total);
}

}  // namespace
}  // namespace worker
