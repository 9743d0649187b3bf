// Atomic files, port files and JSON files: whole or not at all, read back
// as written, and errors that name the file.
#include "ps/base/atomic_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "proto/summary.pb.h"
#include "ps/base/json_file.h"
#include "ps/base/port_file.h"
#include "util/files.h"

namespace ps {
namespace {

TEST(AtomicFileTest, ReplacesWholeAndLeavesNoTemporary) {
  testutil::ScopedTempDir dir;
  const std::string path = dir.path() + "/f";
  ASSERT_TRUE(WriteFileAtomically(path, "first").ok());
  ASSERT_TRUE(WriteFileAtomically(path, "second, longer").ok());
  EXPECT_EQ(testutil::ReadFile(path), "second, longer");
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
}

TEST(AtomicFileTest, AFailedRenameKeepsTheOldFileAndNamesBoth) {
  testutil::ScopedTempDir dir;
  const std::string path = dir.path() + "/d";
  std::filesystem::create_directories(path + "/inside");  // not replaceable
  absl::Status s = WriteFileAtomically(path, "text");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot rename " + path + ".tmp to " + path),
            std::string::npos)
      << s;
  EXPECT_TRUE(std::filesystem::is_directory(path + "/inside"));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  s = WriteFileAtomically(dir.path() + "/missing/f", "text");
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
  EXPECT_NE(s.message().find(dir.path() + "/missing/f.tmp"), std::string::npos)
      << s;
}

TEST(PortFileTest, HoldsAPortOrSaysItDoesNot) {
  testutil::ScopedTempDir dir;
  const std::string path = dir.path() + "/s.port";
  EXPECT_TRUE(absl::IsNotFound(ReadPortFile(path).status()));
  ASSERT_TRUE(WritePortFile(path, 7070).ok());
  EXPECT_EQ(testutil::ReadFile(path), "7070\n");
  absl::StatusOr<int> port = ReadPortFile(path);
  ASSERT_TRUE(port.ok());
  EXPECT_EQ(*port, 7070);
  for (const char* bad : {"", "x", "0", "65536", "-1"}) {
    testutil::WriteFile(path, bad);
    absl::Status s = ReadPortFile(path).status();
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << bad;
    EXPECT_NE(s.message().find(path + " does not hold a port"),
              std::string::npos);
  }
}

TEST(JsonFileTest, RoundTripsWithEveryFieldAndIgnoresUnknownOnes) {
  testutil::ScopedTempDir dir;
  const std::string path = dir.path() + "/w.json";
  shardps::WorkerCheckpoint saved;
  saved.set_rank(2);
  saved.set_model("mlp:4-2");
  ASSERT_TRUE(WriteJsonFile(saved, path).ok());
  const std::string text = testutil::ReadFile(path);
  EXPECT_NE(text.find("\"rank\":2"), std::string::npos) << text;
  EXPECT_NE(text.find("\"steps\":\"0\""), std::string::npos) << text;  // zeros
  shardps::WorkerCheckpoint back;
  ASSERT_TRUE(ReadJsonFile(path, &back).ok());
  EXPECT_EQ(back.ShortDebugString(), saved.ShortDebugString());
  testutil::WriteFile(path, R"({"rank": 5, "from_a_newer_build": 1})");
  ASSERT_TRUE(ReadJsonFile(path, &back).ok());
  EXPECT_EQ(back.rank(), 5);
  testutil::WriteFile(path, R"({"rank": "five"})");
  absl::Status s = ReadJsonFile(path, &back);
  EXPECT_TRUE(absl::IsDataLoss(s)) << s;
  EXPECT_NE(s.message().find(path + ": not a shardps.WorkerCheckpoint"),
            std::string::npos)
      << s;
  EXPECT_TRUE(absl::IsNotFound(ReadJsonFile(path + "x", &back)));
}

}  // namespace
}  // namespace ps
