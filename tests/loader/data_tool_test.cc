// End-to-end: the shardps-data binary writes data sets that OpenDataset
// accepts and that decode to the source's samples.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "loader/dataset.h"
#include "ps/base/program.h"
#include "util/files.h"
#include "util/processes.h"

namespace loader {
namespace {

constexpr char kFashionMnist[] = "/usr/share/datasets/fashion-mnist";

class DataToolTest : public testing::Test {
 protected:
  int Run(const std::string& args) {
    return testutil::Shell(
               absl::StrCat(ps::SiblingBinary("shardps-data"), " ", args))
        .first;
  }
  testutil::ScopedTempDir tmp_{"shardps-data"};
  const std::string dir_ = tmp_.path();
};

TEST_F(DataToolTest, SyntheticSetsOpenAndHoldEverySample) {
  ASSERT_EQ(Run(absl::StrCat("synthetic --out ", dir_,
                             " --samples 1000 --features 12 --classes 5"
                             " --shards 3 --seed 9")),
            0);
  absl::StatusOr<Dataset> train = OpenDataset(dir_ + "/train");
  absl::StatusOr<Dataset> test = OpenDataset(dir_ + "/test");
  ASSERT_TRUE(train.ok()) << train.status();
  ASSERT_TRUE(test.ok()) << test.status();
  EXPECT_EQ(train->manifest.records() + test->manifest.records(), 1000u);
  EXPECT_EQ(test->manifest.records(), 100u);
  EXPECT_EQ(FeatureCount(train->manifest), 12u);
  // The teacher uses every class.
  std::vector<int> counts(5, 0);
  std::string payload;
  std::vector<float> x(12);
  for (size_t k = 0; k < train->indexes.size(); ++k) {
    auto reader = *RecordReader::Open(train->ShardPath(k));
    for (uint64_t offset : train->indexes[k].offsets) {
      ASSERT_TRUE(reader->ReadAt(offset, &payload).ok());
      int32_t label;
      ASSERT_TRUE(
          DecodeSample(train->manifest, payload, "", x.data(), &label).ok());
      ++counts[label];
    }
  }
  for (int c = 0; c < 5; ++c) EXPECT_GT(counts[c], 0) << "class " << c;
  EXPECT_NE(Run("synthetic --out " + dir_ + " --classes 1"), 0);
  EXPECT_NE(Run("bogus --out " + dir_), 0);
}

TEST_F(DataToolTest, FashionMnistConvertsExactly) {
  struct stat st;
  if (stat(kFashionMnist, &st) != 0) {
    GTEST_SKIP() << kFashionMnist
                 << " is missing: install the Debian package "
                    "dataset-fashion-mnist (deploy/install-deps.sh does)";
  }
  ASSERT_EQ(Run(absl::StrCat("fashion-mnist --out ", dir_, " --shards 4")), 0);
  absl::StatusOr<Dataset> train = OpenDataset(dir_ + "/train");
  absl::StatusOr<Dataset> test = OpenDataset(dir_ + "/test");
  ASSERT_TRUE(train.ok()) << train.status();
  ASSERT_TRUE(test.ok()) << test.status();
  EXPECT_EQ(train->manifest.records(), 60000u);
  EXPECT_EQ(test->manifest.records(), 10000u);
  // Fashion-MNIST's test set has 1,000 images of each class.
  EXPECT_EQ(std::vector<uint64_t>(test->manifest.class_records().begin(),
                                  test->manifest.class_records().end()),
            std::vector<uint64_t>(10, 1000));
  // The source read independently of the project's IDX reader: gzip, then
  // the IDX layout by hand (big-endian magic 0x0803 and 10000 x 28 x 28
  // after 16 bytes of header; 0x0801 and 10000 labels after 8).
  const std::string images = dir_ + "/t10k-images", labels = dir_ + "/labels";
  ASSERT_EQ(
      testutil::Shell(absl::StrCat("gzip -dc ", kFashionMnist,
                                   "/t10k-images-idx3-ubyte.gz > ", images,
                                   " && gzip -dc ", kFashionMnist,
                                   "/t10k-labels-idx1-ubyte.gz > ", labels))
          .first,
      0);
  const std::string pixels = testutil::ReadFile(images);
  const std::string label_bytes = testutil::ReadFile(labels);
  ASSERT_EQ(pixels.size(), 16u + 10000 * 784);
  ASSERT_EQ(pixels.substr(0, 16),
            std::string("\0\0\x08\x03\0\0\x27\x10\0\0\0\x1c\0\0\0\x1c", 16));
  ASSERT_EQ(label_bytes.size(), 8u + 10000);
  ASSERT_EQ(label_bytes.substr(0, 8),
            std::string("\0\0\x08\x01\0\0\x27\x10", 8));
  // Sample i sits in shard i % 4 at position i / 4: every one of them.
  std::string payload;
  std::vector<float> x(784);
  for (int shard = 0; shard < 4; ++shard) {
    auto reader = *RecordReader::Open(test->ShardPath(shard));
    ASSERT_EQ(test->indexes[shard].offsets.size(), 2500u);
    for (int pos = 0; pos < 2500; ++pos) {
      const int i = pos * 4 + shard;
      ASSERT_TRUE(
          reader->ReadAt(test->indexes[shard].offsets[pos], &payload).ok());
      int32_t label;
      ASSERT_TRUE(
          DecodeSample(test->manifest, payload, "", x.data(), &label).ok());
      ASSERT_EQ(label, static_cast<unsigned char>(label_bytes[8 + i]))
          << "sample " << i;
      for (int p = 0; p < 784; ++p) {
        ASSERT_FLOAT_EQ(
            x[p], static_cast<unsigned char>(pixels[16 + i * 784 + p]) / 255.0f)
            << "sample " << i << " pixel " << p;
      }
    }
  }
}

}  // namespace
}  // namespace loader
