// Checkpointer: restores the latest checkpoint of its directory, deletes a
// torn write, refuses a foreign, damaged or shared directory, and writes
// periodically.
#include "ps/server/checkpointer.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "ps/table/checkpoint.h"
#include "util/files.h"
#include "util/table.h"

namespace ps {
namespace {

using testutil::CreateIn;
using testutil::PushValue;
using testutil::ReadFile;
using testutil::ScopedTempDir;
using testutil::TableSpec;
using testutil::WriteFile;

// DIR/checkpoint of job "j" holding table "big" at version 3 and "small" at
// version 1.
std::string WriteFilled(const std::string& dir) {
  TableRegistry registry("j");
  Table* big = CreateIn(registry, TableSpec("big", 3000));
  Table* small = CreateIn(registry, TableSpec("small", 100));
  EXPECT_TRUE(PushValue(big, 0, 11, 1, 1.0f).ok());
  EXPECT_TRUE(PushValue(big, 1, 22, 1, -2.0f).ok());
  EXPECT_TRUE(PushValue(big, 0, 11, 2, 0.25f).ok());
  EXPECT_TRUE(PushValue(small, 1, 22, 2, 4.0f).ok());
  std::vector<TableSnapshot> snapshot;
  registry.Snapshot(&snapshot);
  const std::string path = dir + "/checkpoint";
  EXPECT_TRUE(WriteCheckpoint(path, "j", snapshot).ok());
  return path;
}

TEST(CheckpointerTest, RestoresTheLatestAndDeletesATornWrite) {
  ScopedTempDir dir;
  const std::string path = WriteFilled(dir.path());
  WriteFile(path + ".tmp", "half a checkpoint");
  TableRegistry registry("j");
  absl::StatusOr<std::unique_ptr<Checkpointer>> cp =
      Checkpointer::Open({dir.path()}, &registry);
  ASSERT_TRUE(cp.ok()) << cp.status();
  EXPECT_TRUE((*cp)->restored());
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_EQ((*registry.Find("j", "big"))->version(), 3u);
  // A write replaces it with the current state.
  ASSERT_TRUE(PushValue(*registry.Find("j", "small"), 0, 11, 1, 1.0f).ok());
  ASSERT_TRUE((*cp)->WriteNow().ok());
  EXPECT_EQ((*cp)->written(), 1u);
  absl::StatusOr<Checkpoint> read = ReadCheckpoint(path);
  ASSERT_TRUE(read.ok());
  uint64_t versions = 0;
  for (const TableSnapshot& t : read->tables) versions += t.meta.version();
  EXPECT_EQ(versions, 5u);
}

TEST(CheckpointerTest, RefusesAForeignDamagedOrSharedDirectory) {
  ScopedTempDir dir;
  const std::string path = WriteFilled(dir.path());
  {
    TableRegistry other_job("k");
    absl::StatusOr<std::unique_ptr<Checkpointer>> cp =
        Checkpointer::Open({dir.path()}, &other_job);
    EXPECT_EQ(cp.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(cp.status().message().find("belongs to job 'j'"),
              std::string::npos)
        << cp.status();
  }
  {
    TableRegistry registry("j");
    absl::StatusOr<std::unique_ptr<Checkpointer>> first =
        Checkpointer::Open({dir.path()}, &registry);
    ASSERT_TRUE(first.ok()) << first.status();
    TableRegistry second_registry("j");
    absl::StatusOr<std::unique_ptr<Checkpointer>> second =
        Checkpointer::Open({dir.path()}, &second_registry);
    EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(second.status().message().find("in use by another server"),
              std::string::npos)
        << second.status();
  }
  std::string bytes = ReadFile(path);
  bytes[bytes.size() / 2] ^= 1;
  WriteFile(path, bytes);
  TableRegistry registry("j");
  absl::StatusOr<std::unique_ptr<Checkpointer>> cp =
      Checkpointer::Open({dir.path()}, &registry);
  EXPECT_EQ(cp.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(cp.status().message().find("refusing to start"), std::string::npos)
      << cp.status();
}

TEST(CheckpointerTest, CreatesItsDirectoryWithParentsOrSaysWhyNot) {
  ScopedTempDir dir;
  TableRegistry registry("j");
  const std::string nested = dir.path() + "/a/b/ckpt";
  absl::StatusOr<std::unique_ptr<Checkpointer>> cp =
      Checkpointer::Open({nested}, &registry);
  ASSERT_TRUE(cp.ok()) << cp.status();
  EXPECT_TRUE(std::filesystem::is_directory(nested));
  WriteFile(dir.path() + "/file", "x");
  TableRegistry other("j");
  absl::Status s =
      Checkpointer::Open({dir.path() + "/file/ckpt"}, &other).status();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(dir.path() + "/file/ckpt"), std::string::npos)
      << s;
  EXPECT_NE(s.message().find("Not a directory"), std::string::npos) << s;
}

TEST(CheckpointerTest, WritesPeriodically) {
  ScopedTempDir dir;
  TableRegistry registry("j");
  CreateIn(registry, TableSpec("w", 1000));
  absl::StatusOr<std::unique_ptr<Checkpointer>> cp =
      Checkpointer::Open({dir.path(), absl::Milliseconds(50)}, &registry);
  ASSERT_TRUE(cp.ok());
  (*cp)->StartPeriodic();
  const absl::Time give_up = absl::Now() + absl::Seconds(20);
  while ((*cp)->written() < 3 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(10));  // polling interval
  }
  (*cp)->StopPeriodic();
  EXPECT_GE((*cp)->written(), 3u);
  EXPECT_TRUE(ReadCheckpoint((*cp)->path()).ok());
}

}  // namespace
}  // namespace ps
