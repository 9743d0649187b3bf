// End-to-end: the shardps-data binary writes data sets that OpenDataset
// accepts and that decode to the source's samples.
#include <gtest/gtest.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "loader/dataset.h"
#include "loader/idx_file.h"
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
  // Sample i sits in shard i % 4 at position i / 4; check some of shard 1.
  IdxArray images =
      *ReadIdx(absl::StrCat(kFashionMnist, "/t10k-images-idx3-ubyte.gz"), 3);
  IdxArray labels =
      *ReadIdx(absl::StrCat(kFashionMnist, "/t10k-labels-idx1-ubyte.gz"), 1);
  auto reader = *RecordReader::Open(test->ShardPath(1));
  std::string payload;
  for (int pos : {0, 7, 2499}) {
    const int i = pos * 4 + 1;
    ASSERT_TRUE(reader->ReadAt(test->indexes[1].offsets[pos], &payload).ok());
    std::vector<float> x(784);
    int32_t label;
    ASSERT_TRUE(
        DecodeSample(test->manifest, payload, "", x.data(), &label).ok());
    EXPECT_EQ(label, static_cast<unsigned char>(labels.bytes[i]));
    for (int p = 0; p < 784; ++p) {
      ASSERT_FLOAT_EQ(
          x[p], static_cast<unsigned char>(images.bytes[i * 784 + p]) / 255.0f);
    }
  }
}

}  // namespace
}  // namespace loader
