#include "loader/record_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "util/files.h"

namespace loader {
namespace {

class RecordFileTest : public testing::Test {
 protected:
  void SetUp() override {
    data_ = dir_ + "/shard-0.rec";
    index_ = dir_ + "/shard-0.idx";
  }

  // Writes records of sizes 0, 1, ..., n-1 (bytes i*7) and their index.
  std::vector<std::string> WriteRecords(int n) {
    std::vector<std::string> payloads;
    auto writer = *RecordWriter::Create(data_);
    for (int i = 0; i < n; ++i) {
      std::string p(i * 13, '\0');
      for (size_t k = 0; k < p.size(); ++k) p[k] = static_cast<char>(k * 7 + i);
      EXPECT_TRUE(writer->Append(p).ok());
      payloads.push_back(p);
    }
    EXPECT_TRUE(writer->Close().ok());
    EXPECT_TRUE(WriteIndex(index_, writer->offsets(), writer->size()).ok());
    return payloads;
  }

  static std::string ReadFile(const std::string& path) {
    return testutil::ReadFile(path);
  }
  static void WriteFile(const std::string& path, const std::string& bytes) {
    testutil::WriteFile(path, bytes);
  }
  void FlipByte(const std::string& path, uint64_t offset) {
    std::string bytes = ReadFile(path);
    bytes[offset] ^= 0x20;
    WriteFile(path, bytes);
  }

  void ExpectDataLoss(const absl::Status& s, absl::string_view needle) {
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    EXPECT_NE(s.message().find(needle), absl::string_view::npos) << s;
  }

  testutil::ScopedTempDir tmp_{"shardps-records"};
  const std::string dir_ = tmp_.path();
  std::string data_, index_;
};

TEST_F(RecordFileTest, RoundTripThroughIndexAndSequentially) {
  const std::vector<std::string> payloads = WriteRecords(50);
  absl::StatusOr<RecordIndex> index = ReadIndex(index_);
  ASSERT_TRUE(index.ok()) << index.status();
  ASSERT_EQ(index->offsets.size(), 50u);
  auto reader = *RecordReader::Open(data_);
  EXPECT_EQ(reader->file_size(), index->data_size);
  std::string payload;
  // Random access, backwards.
  for (int i = 49; i >= 0; --i) {
    ASSERT_TRUE(reader->ReadAt(index->offsets[i], &payload).ok());
    ASSERT_EQ(payload, payloads[i]) << i;
  }
  // Sequential, following the returned offsets.
  uint64_t at = 0;
  for (int i = 0; i < 50; ++i) {
    absl::StatusOr<uint64_t> next = reader->ReadAt(at, &payload);
    ASSERT_TRUE(next.ok()) << next.status();
    ASSERT_EQ(payload, payloads[i]);
    at = *next;
  }
  EXPECT_EQ(at, reader->file_size());
}

TEST_F(RecordFileTest, ReadRecordsScansABlockAndChecksItAgainstTheIndex) {
  const std::vector<std::string> payloads = WriteRecords(30);
  const RecordIndex index = *ReadIndex(index_);
  auto reader = *RecordReader::Open(data_);
  std::string block;
  std::vector<std::string> seen;
  ASSERT_TRUE(reader
                  ->ReadRecords(&index.offsets[10], 20, index.data_size, &block,
                                [&](uint64_t offset, absl::string_view p) {
                                  EXPECT_EQ(offset,
                                            index.offsets[10 + seen.size()]);
                                  seen.emplace_back(p);
                                  return absl::OkStatus();
                                })
                  .ok());
  EXPECT_EQ(seen,
            std::vector<std::string>(payloads.begin() + 10, payloads.end()));

  // An end that does not match the records' framing is bad data, not a
  // silently shorter payload.
  absl::Status s = reader->ReadRecords(
      &index.offsets[3], 2, index.offsets[5] - 1, &block,
      [](uint64_t, absl::string_view) { return absl::OkStatus(); });
  ExpectDataLoss(s, absl::StrCat(data_, ": record at byte offset ",
                                 index.offsets[4], " claims"));
  // The callback's error stops the scan.
  int calls = 0;
  s = reader->ReadRecords(&index.offsets[0], 5, index.offsets[5], &block,
                          [&](uint64_t, absl::string_view) {
                            return ++calls == 2 ? absl::CancelledError("stop")
                                                : absl::OkStatus();
                          });
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(calls, 2);
}

TEST_F(RecordFileTest, CorruptPayloadNamesFileAndOffset) {
  WriteRecords(10);
  const RecordIndex index = *ReadIndex(index_);
  // A byte inside record 5's payload.
  FlipByte(data_, index.offsets[5] + 12 + 3);
  auto reader = *RecordReader::Open(data_);
  std::string payload;
  ExpectDataLoss(reader->ReadAt(index.offsets[5], &payload).status(),
                 absl::StrCat(data_, ": corrupt record payload at byte offset ",
                              index.offsets[5]));
  // Its neighbours are intact.
  EXPECT_TRUE(reader->ReadAt(index.offsets[4], &payload).ok());
  EXPECT_TRUE(reader->ReadAt(index.offsets[6], &payload).ok());
}

TEST_F(RecordFileTest, CorruptLengthAndPayloadCrcAreCaught) {
  WriteRecords(10);
  const RecordIndex index = *ReadIndex(index_);
  FlipByte(data_, index.offsets[3] + 1);  // inside the length
  FlipByte(data_, index.offsets[8] - 1);  // record 7's payload CRC
  auto reader = *RecordReader::Open(data_);
  std::string payload;
  ExpectDataLoss(
      reader->ReadAt(index.offsets[3], &payload).status(),
      absl::StrCat("corrupt record length at byte offset ", index.offsets[3]));
  ExpectDataLoss(reader->ReadAt(index.offsets[7], &payload).status(),
                 "corrupt record payload");
}

TEST_F(RecordFileTest, TruncatedFileIsCaught) {
  WriteRecords(10);
  const RecordIndex index = *ReadIndex(index_);
  std::string bytes = ReadFile(data_);
  WriteFile(data_, bytes.substr(0, index.offsets[9] + 20));
  auto reader = *RecordReader::Open(data_);
  std::string payload;
  ExpectDataLoss(reader->ReadAt(index.offsets[9], &payload).status(),
                 absl::StrCat(data_, ": truncated record at byte offset ",
                              index.offsets[9] + 12));
  WriteFile(data_, bytes.substr(0, index.offsets[9] + 5));
  reader = *RecordReader::Open(data_);
  ExpectDataLoss(reader->ReadAt(index.offsets[9], &payload).status(),
                 "truncated record header");
}

TEST_F(RecordFileTest, BadIndexesAreCaught) {
  WriteRecords(10);
  const std::string good = ReadFile(index_);
  std::string bad = good;
  bad[0] = 'X';
  WriteFile(index_, bad);
  ExpectDataLoss(ReadIndex(index_).status(), "wrong magic");
  bad = good;
  bad[40] ^= 1;  // an offset
  WriteFile(index_, bad);
  ExpectDataLoss(ReadIndex(index_).status(), "CRC mismatch");
  WriteFile(index_, good.substr(0, good.size() - 9));
  ExpectDataLoss(ReadIndex(index_).status(), index_);
  WriteFile(index_, good.substr(0, 10));
  ExpectDataLoss(ReadIndex(index_).status(), "truncated index");
}

TEST_F(RecordFileTest, MissingFilesAreNotFoundByName) {
  absl::Status s = RecordReader::Open(dir_ + "/nope.rec").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(s.message().find("nope.rec"), std::string::npos) << s;
  s = ReadIndex(dir_ + "/nope.idx").status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace loader
