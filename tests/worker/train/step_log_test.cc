// The per-step metrics file: a header, one line per step with its phase
// times in milliseconds; a rejoining worker appends after cutting a line a
// kill left unfinished.
#include "worker/train/step_log.h"

#include <gtest/gtest.h>

#include <string>

#include "util/files.h"

namespace worker {
namespace {

StepTimes Times(int read, int pull, int compute, int push) {
  return {absl::Milliseconds(read), absl::Milliseconds(pull),
          absl::Milliseconds(compute), absl::Milliseconds(push)};
}

TEST(StepLogTest, WritesAHeaderAndALinePerStep) {
  testutil::ScopedTempDir dir;
  const std::string path = dir.path() + "/metrics-0.csv";
  absl::StatusOr<std::unique_ptr<StepLog>> log = StepLog::Open(path, false);
  ASSERT_TRUE(log.ok()) << log.status();
  ASSERT_TRUE((*log)
                  ->Append(0, 0, 32, 1.5f, Times(1, 2, 3, 4),
                           absl::FromUnixMillis(1700000000250))
                  .ok());
  // Flushed with each line: a reader sees it while the log is open.
  EXPECT_EQ(testutil::ReadFile(path),
            "epoch,step,batch,loss,read_ms,compute_ms,pull_ms,push_ms,"
            "end_unix_s\n"
            "0,0,32,1.50000,1.000,3.000,2.000,4.000,1700000000.250000\n");
}

TEST(StepLogTest, AppendingDropsAnUnfinishedLineAndKeepsTheRest) {
  testutil::ScopedTempDir dir;
  const std::string path = dir.path() + "/metrics-0.csv";
  testutil::WriteFile(path, "header\n0,0,32,1.0,1,1,1,1,1\n0,1,3");
  absl::StatusOr<std::unique_ptr<StepLog>> log = StepLog::Open(path, true);
  ASSERT_TRUE(log.ok()) << log.status();
  ASSERT_TRUE(
      (*log)
          ->Append(0, 1, 32, 0.5f, Times(0, 0, 0, 0), absl::FromUnixSeconds(1))
          .ok());
  EXPECT_EQ(testutil::ReadFile(path),
            "header\n0,0,32,1.0,1,1,1,1,1\n"
            "0,1,32,0.50000,0.000,0.000,0.000,0.000,1.000000\n");
}

TEST(StepLogTest, AnUnwritablePathIsNamed) {
  testutil::ScopedTempDir dir;
  absl::Status s =
      StepLog::Open(dir.path() + "/missing/metrics-0.csv", false).status();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(dir.path() + "/missing/metrics-0.csv"),
            std::string::npos)
      << s;
}

}  // namespace
}  // namespace worker
