// Checkpoint files: a round trip keeps every table whole; torn, damaged or
// truncated files are refused by name and offset; files of format 1 are
// still read.
#include "ps/table/checkpoint.h"

#include <gtest/gtest.h>
#include <zlib.h>

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "ps/table/table_registry.h"
#include "util/files.h"
#include "util/table.h"

namespace ps {
namespace {

using testutil::CreateIn;
using testutil::PushValue;
using testutil::ReadFile;
using testutil::ScopedTempDir;
using testutil::TableSpec;
using testutil::Values;
using testutil::WriteFile;

// A registry with two tables that have seen pushes from two workers.
void Fill(TableRegistry& registry) {
  Table* big = CreateIn(registry, TableSpec("big", 3'000'000));
  Table* small = CreateIn(registry, TableSpec("small", 100));
  ASSERT_TRUE(PushValue(big, 0, 11, 1, 1.0f).ok());
  ASSERT_TRUE(PushValue(big, 1, 22, 1, -2.0f).ok());
  ASSERT_TRUE(PushValue(big, 0, 11, 2, 0.25f).ok());
  ASSERT_TRUE(PushValue(small, 1, 22, 2, 4.0f).ok());
}

std::string WriteSnapshotOf(TableRegistry& registry, const std::string& dir) {
  std::vector<TableSnapshot> snapshot;
  registry.Snapshot(&snapshot);
  const std::string path = dir + "/checkpoint";
  absl::Status s = WriteCheckpoint(path, "j", snapshot);
  EXPECT_TRUE(s.ok()) << s;
  return path;
}

std::string WriteFilled(const std::string& dir) {
  TableRegistry registry("j");
  Fill(registry);
  return WriteSnapshotOf(registry, dir);
}

TEST(CheckpointTest, RoundTripRestoresEveryTable) {
  ScopedTempDir dir;
  TableRegistry original("j");
  Fill(original);
  const std::string path = WriteSnapshotOf(original, dir.path());
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));

  absl::StatusOr<Checkpoint> read = ReadCheckpoint(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->job, "j");
  TableRegistry restored("j");
  for (TableSnapshot& t : read->tables) {
    ASSERT_TRUE(restored.Restore(std::move(t)).ok());
  }
  for (const char* name : {"big", "small"}) {
    SCOPED_TRACE(name);
    Table* before = *original.Find("j", name);
    Table* after = *restored.Find("j", name);
    EXPECT_EQ(Values(after), Values(before));
    EXPECT_EQ(after->version(), before->version());
    EXPECT_GT(after->version(), 0u);
  }
  // The ledger came along: a push the checkpoint holds is a duplicate.
  absl::StatusOr<PushOutcome> replay =
      PushValue(*restored.Find("j", "big"), 0, 11, 2, 0.25f);
  ASSERT_TRUE(replay.ok());
  EXPECT_TRUE(replay->duplicate);
}

TEST(CheckpointTest, DamagedOrTruncatedFilesAreRefusedWithTheOffset) {
  ScopedTempDir dir;
  const std::string path = WriteFilled(dir.path());
  const std::string good = ReadFile(path);
  ASSERT_GT(good.size(), 6'000'000u);  // half of 3M floats
  struct Damage {
    const char* what;
    std::string bytes;
  };
  std::vector<Damage> cases;
  for (size_t at :
       {size_t{9}, size_t{30}, size_t{3'000'000}, good.size() - 2}) {
    std::string flipped = good;
    flipped[at] ^= 0x40;
    cases.push_back({"a flipped byte", flipped});
  }
  for (size_t keep :
       {size_t{0}, size_t{5}, size_t{40}, size_t{2'500'000}, good.size() - 1}) {
    cases.push_back({"a truncated file", good.substr(0, keep)});
  }
  cases.push_back({"trailing bytes", good + "x"});
  for (const Damage& d : cases) {
    SCOPED_TRACE(absl::StrCat(d.what, ", ", d.bytes.size(), " bytes"));
    WriteFile(path, d.bytes);
    absl::StatusOr<Checkpoint> read = ReadCheckpoint(path);
    ASSERT_EQ(read.status().code(), absl::StatusCode::kDataLoss)
        << read.status();
    EXPECT_NE(read.status().message().find(path), std::string::npos)
        << read.status();
    EXPECT_NE(read.status().message().find("at byte"), std::string::npos)
        << read.status();
  }
  WriteFile(path, good);
  EXPECT_TRUE(ReadCheckpoint(path).ok());
}

TEST(CheckpointTest, AFailedWriteLeavesThePreviousCheckpointWhole) {
  ScopedTempDir dir;
  const std::string path = WriteFilled(dir.path());
  const std::string before = ReadFile(path);
  // The temporary file cannot be created where a directory stands.
  std::filesystem::create_directory(path + ".tmp");
  TableRegistry registry("j");
  CreateIn(registry, TableSpec("other", 10));
  std::vector<TableSnapshot> snapshot;
  registry.Snapshot(&snapshot);
  absl::Status s = WriteCheckpoint(path, "j", snapshot);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find(path + ".tmp"), std::string::npos) << s;
  EXPECT_NE(s.message().find("Is a directory"), std::string::npos) << s;
  EXPECT_EQ(ReadFile(path), before);
}

// Rewrites the header block (the first after the 8-byte magic) of the
// checkpoint at `path` with `edit` applied.
template <typename Edit>
void EditHeader(const std::string& path, Edit edit) {
  std::string bytes = ReadFile(path);
  uint64_t length;
  std::memcpy(&length, bytes.data() + 8, 8);
  shardps::CheckpointHeader header;
  ASSERT_TRUE(header.ParseFromString(bytes.substr(20, length)));
  edit(&header);
  const std::string encoded = header.SerializeAsString();
  const uint64_t new_length = encoded.size();
  const uint32_t crc = static_cast<uint32_t>(
      crc32_z(crc32_z(0, nullptr, 0),
              reinterpret_cast<const Bytef*>(encoded.data()), encoded.size()));
  std::string block(12, '\0');
  std::memcpy(block.data(), &new_length, 8);
  std::memcpy(block.data() + 8, &crc, 4);
  WriteFile(path,
            bytes.substr(0, 8) + block + encoded + bytes.substr(20 + length));
}

TEST(CheckpointTest, FormatOneWithStringModesIsReadIntoTheEnums) {
  // Format 1 wrote ConsistencyConfig's mode and straggler policy as strings
  // in fields 1 and 5.
  ScopedTempDir dir;
  TableRegistry registry("j");
  shardps::CreateTableRequest spec = TableSpec("bsp", 100);
  shardps::ConsistencyConfig* c = spec.mutable_consistency();
  c->set_mode(shardps::CONSISTENCY_SSP);
  c->set_staleness(2);
  c->set_num_workers(3);
  c->set_straggler_timeout_seconds(60);
  c->set_straggler_policy(shardps::STRAGGLER_DROP);
  CreateIn(registry, spec);
  const std::string path = WriteSnapshotOf(registry, dir.path());
  auto to_format_one = [](const char* mode, const char* policy) {
    return [=](shardps::CheckpointHeader* h) {
      h->set_format_version(1);
      shardps::ConsistencyConfig* old =
          h->mutable_tables(0)->mutable_spec()->mutable_consistency();
      old->clear_mode();
      old->clear_straggler_policy();
      auto* unknown = old->GetReflection()->MutableUnknownFields(old);
      unknown->AddLengthDelimited(1, mode);
      unknown->AddLengthDelimited(5, policy);
    };
  };
  EditHeader(path, to_format_one("ssp", "drop"));
  absl::StatusOr<Checkpoint> read = ReadCheckpoint(path);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_EQ(read->tables[0].meta.spec().consistency().ShortDebugString(),
            spec.consistency().ShortDebugString());
  TableRegistry restored("j");
  EXPECT_TRUE(restored.Restore(std::move(read->tables[0])).ok());

  WriteSnapshotOf(registry, dir.path());
  EditHeader(path, to_format_one("bsp", "drop"));
  read = ReadCheckpoint(path);
  EXPECT_EQ(read.status().code(), absl::StatusCode::kDataLoss) << read.status();
  EXPECT_NE(read.status().message().find("'bsp'"), std::string::npos)
      << read.status();
}

}  // namespace
}  // namespace ps
