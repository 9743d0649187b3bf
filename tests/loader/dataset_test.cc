#include "loader/dataset.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "util/files.h"

namespace loader {
namespace {

class DatasetTest : public testing::Test {
 protected:
  void SetUp() override {
    spec_.set_name("tiny");
    spec_.add_feature_shape(2);
    spec_.add_feature_shape(3);
    spec_.set_feature_type("uint8");
    spec_.set_classes(4);
  }

  // 10 samples over 3 shards; sample i has label i % 4 and pixels i + k.
  void Write(int n = 10) {
    auto writer = *DatasetWriter::Create(dir_, spec_, 3);
    for (int i = 0; i < n; ++i) {
      std::string pixels(6, '\0');
      for (int k = 0; k < 6; ++k) pixels[k] = static_cast<char>(i * 10 + k);
      ASSERT_TRUE(writer->Add(i % 4, pixels).ok());
    }
    ASSERT_TRUE(writer->Finish().ok());
  }

  std::string Read(const std::string& name) {
    return testutil::ReadFile(dir_ + "/" + name);
  }
  void Write(const std::string& name, const std::string& bytes) {
    testutil::WriteFile(dir_ + "/" + name, bytes);
  }

  testutil::ScopedTempDir tmp_{"shardps-dataset"};
  const std::string dir_ = tmp_.path();
  shardps::DatasetManifest spec_;
};

TEST_F(DatasetTest, EverySampleRoundTrips) {
  Write();
  absl::StatusOr<Dataset> ds = OpenDataset(dir_);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->manifest.records(), 10u);
  // Labels 0..3 of samples 0..9: 0, 4, 8 | 1, 5, 9 | 2, 6 | 3, 7.
  EXPECT_EQ(std::vector<uint64_t>(ds->manifest.class_records().begin(),
                                  ds->manifest.class_records().end()),
            (std::vector<uint64_t>{3, 3, 2, 2}));
  ASSERT_EQ(ds->indexes.size(), 3u);
  EXPECT_EQ(ds->indexes[0].offsets.size(), 4u);  // samples 0, 3, 6, 9
  std::vector<bool> seen(10, false);
  std::string payload;
  float features[6];
  for (size_t k = 0; k < 3; ++k) {
    auto reader = *RecordReader::Open(ds->ShardPath(k));
    for (uint64_t offset : ds->indexes[k].offsets) {
      ASSERT_TRUE(reader->ReadAt(offset, &payload).ok());
      int32_t label;
      ASSERT_TRUE(
          DecodeSample(ds->manifest, payload, "x", features, &label).ok());
      const int i = static_cast<int>(features[0] * 255.0f + 0.5f) / 10;
      EXPECT_EQ(label, i % 4);
      EXPECT_FLOAT_EQ(features[5], (i * 10 + 5) / 255.0f);
      EXPECT_FALSE(seen[i]);
      seen[i] = true;
    }
  }
  EXPECT_EQ(std::count(seen.begin(), seen.end(), true), 10);
}

TEST_F(DatasetTest, ManifestAndShardsMustAgree) {
  Write();
  const std::string manifest = Read(kManifestFile);
  // The manifest claims another record count.
  Write(kManifestFile,
        absl::StrReplaceAll(manifest, {{"records: 10", "records: 11"}}));
  absl::Status s = OpenDataset(dir_).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find("manifest says 11"), std::string::npos) << s;
  // Per-class counts that do not add up to the records.
  Write(kManifestFile, absl::StrReplaceAll(manifest, {{"class_records: 2\n",
                                                       "class_records: 1\n"}}));
  s = OpenDataset(dir_).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find(kManifestFile), std::string::npos) << s;
  EXPECT_NE(s.message().find("class_records lists 4 classes of 8 records"),
            std::string::npos)
      << s;
  // A manifest from before class_records existed is still read.
  Write(kManifestFile,
        absl::StrReplaceAll(manifest, {{"class_records: 3\n", ""},
                                       {"class_records: 2\n", ""}}));
  EXPECT_TRUE(OpenDataset(dir_).ok());
  Write(kManifestFile, manifest);

  // A shard cut short.
  const std::string shard = Read("shard-00001.rec");
  Write("shard-00001.rec", shard.substr(0, shard.size() - 3));
  s = OpenDataset(dir_).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find("shard-00001.rec disagrees"), std::string::npos)
      << s;

  // A shard gone.
  std::remove((dir_ + "/shard-00002.rec").c_str());
  Write("shard-00001.rec", shard);
  s = OpenDataset(dir_).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound) << s;
  EXPECT_NE(s.message().find("shard-00002.rec"), std::string::npos) << s;

  // A manifest that is not one.
  Write(kManifestFile, "feature_shape: [oops");
  s = OpenDataset(dir_).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(s.message().find(kManifestFile), std::string::npos) << s;
  EXPECT_NE(s.message().find("line 1 column"), std::string::npos) << s;
  std::remove((dir_ + "/" + kManifestFile).c_str());
  EXPECT_EQ(OpenDataset(dir_).status().code(), absl::StatusCode::kNotFound);
}

TEST_F(DatasetTest, SamplesThatDoNotFitTheManifestAreRefused) {
  float features[6];
  int32_t label;
  std::string payload(4 + 6, '\0');
  payload[0] = 7;  // label 7 of 4 classes
  absl::Status s =
      DecodeSample(spec_, payload, "f.rec at byte offset 40", features, &label);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("f.rec at byte offset 40: label 7"),
            std::string::npos)
      << s;
  s = DecodeSample(spec_, payload.substr(0, 9), "g", features, &label);
  EXPECT_NE(s.message().find("9 bytes"), std::string::npos) << s;

  auto writer = *DatasetWriter::Create(dir_, spec_, 1);
  EXPECT_FALSE(writer->Add(0, "short").ok());
  EXPECT_FALSE(writer->Add(4, "sixsix").ok());
  shardps::DatasetManifest bad = spec_;
  bad.set_feature_type("int7");
  EXPECT_FALSE(DatasetWriter::Create(dir_, bad, 1).ok());
}

TEST_F(DatasetTest, CategoricalIdsRoundTripAndMustMatchTheManifest) {
  spec_.set_categorical_fields(2);
  {
    auto writer = *DatasetWriter::Create(dir_, spec_, 1);
    const std::vector<uint64_t> ids = {7, uint64_t{1} << 60};
    EXPECT_FALSE(writer->Add(1, "sixsix").ok());         // no ids
    EXPECT_FALSE(writer->Add(1, "sixsix", {{7}}).ok());  // one of two
    ASSERT_TRUE(writer->Add(1, "sixsix", ids).ok());
    ASSERT_TRUE(writer->Finish().ok());
  }
  absl::StatusOr<Dataset> ds = OpenDataset(dir_);
  ASSERT_TRUE(ds.ok()) << ds.status();
  EXPECT_EQ(ds->manifest.categorical_fields(), 2u);
  auto reader = *RecordReader::Open(ds->ShardPath(0));
  std::string payload;
  ASSERT_TRUE(reader->ReadAt(ds->indexes[0].offsets[0], &payload).ok());
  EXPECT_EQ(payload.size(), 4u + 6 + 16);
  float features[6];
  int32_t label;
  uint64_t ids[2];
  ASSERT_TRUE(
      DecodeSample(ds->manifest, payload, "x", features, &label, ids).ok());
  EXPECT_EQ(label, 1);
  EXPECT_EQ(ids[0], 7u);
  EXPECT_EQ(ids[1], uint64_t{1} << 60);
  // A record without its ids is named as too short.
  const absl::Status s =
      DecodeSample(ds->manifest, payload.substr(0, 10),
                   "h.rec at byte offset 0", features, &label, ids);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("the manifest says 26"), std::string::npos) << s;
}

}  // namespace
}  // namespace loader
