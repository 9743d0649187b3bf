#include "loader/idx_file.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <string>

namespace loader {
namespace {

class IdxFileTest : public testing::Test {
 protected:
  void SetUp() override {
    char name[] = "/tmp/shardps-idx-XXXXXX";
    const int fd = mkstemp(name);
    ASSERT_GE(fd, 0);
    close(fd);
    path_ = name;
  }
  void TearDown() override { unlink(path_.c_str()); }

  void WriteGz(const std::string& bytes) {
    gzFile f = gzopen(path_.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(gzwrite(f, bytes.data(), bytes.size()),
              static_cast<int>(bytes.size()));
    gzclose(f);
  }

  // 2 images of 2x3 pixels.
  static std::string Images() {
    std::string b = {0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 3};
    for (int i = 0; i < 12; ++i) b.push_back(static_cast<char>(i * 20));
    return b;
  }

  std::string path_;
};

TEST_F(IdxFileTest, ReadsDimensionsAndBytes) {
  WriteGz(Images());
  absl::StatusOr<IdxArray> a = ReadIdx(path_, 3);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->dims, (std::vector<uint32_t>{2, 2, 3}));
  ASSERT_EQ(a->bytes.size(), 12u);
  EXPECT_EQ(static_cast<unsigned char>(a->bytes[11]), 220);
}

TEST_F(IdxFileTest, BadFilesNameTheProblemAndOffset) {
  WriteGz(Images());
  absl::Status s = ReadIdx(path_, 1).status();  // a labels file was expected
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("wrong magic 0x00000803 at byte offset 0"),
            std::string::npos)
      << s;
  WriteGz(Images().substr(0, 20));
  s = ReadIdx(path_, 3).status();
  EXPECT_NE(s.message().find("truncated data at byte offset 20"),
            std::string::npos)
      << s;
  EXPECT_NE(s.message().find(path_), std::string::npos) << s;
  WriteGz(Images() + "xx");
  s = ReadIdx(path_, 3).status();
  EXPECT_NE(
      s.message().find("unexpected bytes after the data at byte offset 28"),
      std::string::npos)
      << s;
  EXPECT_EQ(ReadIdx("/nonexistent/x.gz", 3).status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace loader
