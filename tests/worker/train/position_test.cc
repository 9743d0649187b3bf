// A worker's saved position: fresh without --resume or without a file,
// read back as saved, refused when of another configuration; a half line
// is cut from the step log before it is appended to.
#include "worker/train/position.h"

#include <gtest/gtest.h>

#include <string>

#include "util/files.h"
#include "util/log.h"

namespace worker {
namespace {

TrainerOptions Options(const std::string& run_dir, bool resume) {
  TrainerOptions o;
  o.run_dir = run_dir;
  o.rank = 3;
  o.world = 4;
  o.seed = 9;
  o.resume = resume;
  return o;
}

TEST(PositionTest, StartsFreshThenResumesWhereItWasSaved) {
  testutil::ScopedTempDir dir;
  testutil::RecordingLog log;
  absl::StatusOr<Position> fresh =
      Position::Start(Options(dir.path(), true), &log);
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  EXPECT_FALSE(fresh->resumed());
  EXPECT_TRUE(
      log.Has("no checkpoint " + dir.path() + "/worker-3.checkpoint.json"));
  ASSERT_TRUE(fresh->Save(2, 17, 120, 3840).ok());

  absl::StatusOr<Position> again =
      Position::Start(Options(dir.path(), true), &log);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->resumed());
  EXPECT_EQ(again->saved().epoch(), 2);
  EXPECT_EQ(again->saved().epoch_step(), 17u);
  EXPECT_EQ(again->saved().steps(), 120u);
  EXPECT_EQ(again->saved().samples(), 3840u);
  EXPECT_TRUE(log.Has("resuming from"));
  // Without --resume the saved position is not used.
  absl::StatusOr<Position> ignored =
      Position::Start(Options(dir.path(), false), &log);
  ASSERT_TRUE(ignored.ok());
  EXPECT_FALSE(ignored->resumed());
}

TEST(PositionTest, APositionOfAnotherConfigurationIsRefused) {
  testutil::ScopedTempDir dir;
  absl::StatusOr<Position> p =
      Position::Start(Options(dir.path(), true), nullptr);
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(p->Save(1, 0, 10, 320).ok());
  TrainerOptions other = Options(dir.path(), true);
  other.seed = 10;
  absl::Status s = Position::Start(other, nullptr).status();
  EXPECT_TRUE(absl::IsFailedPrecondition(s)) << s;
  EXPECT_NE(s.message().find("worker-3.checkpoint.json is of another"),
            std::string::npos)
      << s;
  testutil::WriteFile(dir.path() + "/worker-3.checkpoint.json", "{not json");
  s = Position::Start(Options(dir.path(), true), nullptr).status();
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
}

TEST(PositionTest, TruncateToLastLineCutsAPartialLineOnly) {
  testutil::ScopedTempDir dir;
  const std::string path = dir.path() + "/m.csv";
  EXPECT_TRUE(TruncateToLastLine(path).ok());  // no file: nothing to do
  testutil::WriteFile(path, "a,b\n1,2\n3,");
  ASSERT_TRUE(TruncateToLastLine(path).ok());
  EXPECT_EQ(testutil::ReadFile(path), "a,b\n1,2\n");
  ASSERT_TRUE(TruncateToLastLine(path).ok());
  EXPECT_EQ(testutil::ReadFile(path), "a,b\n1,2\n");
  testutil::WriteFile(path, "no newline");
  ASSERT_TRUE(TruncateToLastLine(path).ok());
  EXPECT_EQ(testutil::ReadFile(path), "");
}

}  // namespace
}  // namespace worker
