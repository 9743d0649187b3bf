// The data tool in-process: a seed always gives the same bytes, the output
// directory is created with its parents, and bad requests are named.
#include <gtest/gtest.h>

#include <string>

#include "loader/data_tool.h"
#include "loader/dataset.h"
#include "util/files.h"
#include "util/log.h"

namespace loader {
namespace {

DataToolOptions Synthetic(const std::string& out, uint64_t seed) {
  DataToolOptions o;
  o.command = "synthetic";
  o.out = out;
  o.samples = 300;
  o.features = 6;
  o.classes = 3;
  o.shards = 2;
  o.seed = seed;
  return o;
}

TEST(DataToolUnitTest, ASeedAlwaysGivesTheSameBytes) {
  testutil::ScopedTempDir dir;
  testutil::RecordingLog log;
  DataToolOptions a = Synthetic(dir.path() + "/a/deeper/still", 4);
  a.log = &log;
  ASSERT_TRUE(RunDataTool(a).ok());  // parents created
  ASSERT_TRUE(RunDataTool(Synthetic(dir.path() + "/b", 4)).ok());
  ASSERT_TRUE(RunDataTool(Synthetic(dir.path() + "/c", 5)).ok());
  absl::StatusOr<Dataset> opened = OpenDataset(a.out + "/train");
  ASSERT_TRUE(opened.ok()) << opened.status();
  const std::string first = testutil::ReadFile(opened->ShardPath(0));
  ASSERT_FALSE(first.empty());
  const std::string file = opened->ShardPath(0).substr(a.out.size());
  EXPECT_EQ(testutil::ReadFile(dir.path() + "/b" + file), first);
  EXPECT_NE(testutil::ReadFile(dir.path() + "/c" + file), first);
  EXPECT_TRUE(log.Has("270 train + 30 test samples, 6 features, 3 classes"));
}

TEST(DataToolUnitTest, BadRequestsAreNamed) {
  testutil::ScopedTempDir dir;
  DataToolOptions o = Synthetic(dir.path() + "/x", 1);
  o.command = "imagenet";
  EXPECT_NE(RunDataTool(o).message().find(
                "fashion-mnist, synthetic or criteo-synthetic"),
            std::string::npos);
  o = Synthetic("", 1);
  EXPECT_EQ(RunDataTool(o).message(), "--out is required");
  o = Synthetic(dir.path() + "/x", 1);
  o.classes = 1;
  EXPECT_NE(RunDataTool(o).message().find("--classes >= 2"), std::string::npos);
  testutil::WriteFile(dir.path() + "/file", "x");
  o = Synthetic(dir.path() + "/file/out", 1);
  absl::Status s = RunDataTool(o);
  EXPECT_EQ(s.message(), "cannot create directory " + dir.path() +
                             "/file/out: Not a directory");
  o.command = "fashion-mnist";
  o.out = dir.path() + "/fm";
  o.source = dir.path() + "/no-idx-files";
  s = RunDataTool(o);
  EXPECT_NE(s.message().find(dir.path() + "/no-idx-files/train-images"),
            std::string::npos)
      << s;
}

}  // namespace
}  // namespace loader
