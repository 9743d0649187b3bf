// shardps-data criteo-synthetic in-process: Criteo's schema, Zipf ids per
// field, a known generator AUC, the same bytes from the same seed, and bad
// options named.
#include "loader/criteo_synthetic.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "loader/data_tool.h"
#include "loader/dataset.h"
#include "loader/loader.h"
#include "util/files.h"
#include "util/log.h"

namespace loader {
namespace {

DataToolOptions Criteo(const std::string& out, uint64_t seed) {
  DataToolOptions o;
  o.command = "criteo-synthetic";
  o.out = out;
  o.samples = 20000;
  o.vocabulary = 50;
  o.test_fraction = 0.25;
  o.shards = 3;
  o.seed = seed;
  return o;
}

TEST(CriteoSyntheticTest, WritesCriteosSchemaWithZipfIdsAndTheGeneratorsAuc) {
  testutil::ScopedTempDir dir;
  testutil::RecordingLog log;
  DataToolOptions o = Criteo(dir.path(), 3);
  o.log = &log;
  ASSERT_TRUE(RunDataTool(o).ok());
  absl::StatusOr<Dataset> train = OpenDataset(dir.path() + "/train");
  ASSERT_TRUE(train.ok()) << train.status();
  absl::StatusOr<Dataset> test = OpenDataset(dir.path() + "/test");
  ASSERT_TRUE(test.ok()) << test.status();
  const shardps::DatasetManifest& m = train->manifest;
  EXPECT_EQ(m.records(), 15000u);
  EXPECT_EQ(test->manifest.records(), 5000u);
  EXPECT_EQ(FeatureCount(m), 13u);
  EXPECT_EQ(m.feature_type(), "float32");
  EXPECT_EQ(m.classes(), 2u);
  EXPECT_EQ(m.categorical_fields(), 26u);
  EXPECT_EQ(m.categorical_ids(), 26u * 50);
  // About one click in four, and a hidden model well above chance.
  const double clicks = static_cast<double>(m.class_records(1)) / m.records();
  EXPECT_GT(clicks, 0.15);
  EXPECT_LT(clicks, 0.4);
  for (const Dataset* d : {&*train, &*test}) {
    EXPECT_GT(d->manifest.generator_auc(), 0.75);
    EXPECT_LT(d->manifest.generator_auc(), 0.95);
  }
  EXPECT_TRUE(log.Has("the generator's own AUC"));

  // Every id lies in its field's range, and each field's id 0 (rank 1 of
  // the Zipf law) is its most common, well above a uniform share.
  LoaderOptions lo;
  lo.batch_size = 1000;
  absl::StatusOr<std::unique_ptr<Loader>> loader =
      MakeSequentialLoader(*train, lo);
  ASSERT_TRUE(loader.ok()) << loader.status();
  ASSERT_TRUE((*loader)->StartEpoch(0).ok());
  std::vector<std::vector<uint64_t>> counts(26, std::vector<uint64_t>(50));
  uint64_t samples = 0;
  for (;;) {
    absl::StatusOr<const Batch*> b = (*loader)->Next();
    ASSERT_TRUE(b.ok()) << b.status();
    if (*b == nullptr) break;
    for (int i = 0; i < (*b)->size; ++i, ++samples) {
      for (int f = 0; f < 26; ++f) {
        const uint64_t id = (*b)->ids[i * 26 + f];
        ASSERT_GE(id, f * 50u);
        ASSERT_LT(id, (f + 1) * 50u);
        ++counts[f][id - f * 50];
      }
    }
  }
  EXPECT_EQ(samples, 15000u);
  for (int f = 0; f < 26; ++f) {
    EXPECT_EQ(std::max_element(counts[f].begin(), counts[f].end()) -
                  counts[f].begin(),
              0)
        << "field " << f;
    EXPECT_GT(counts[f][0], 5 * samples / 50) << "field " << f;
  }
}

TEST(CriteoSyntheticTest, ASeedAlwaysGivesTheSameBytes) {
  testutil::ScopedTempDir dir;
  for (const char* sub : {"/a", "/b", "/c"}) {
    ASSERT_TRUE(
        RunDataTool(Criteo(dir.path() + sub, sub[1] == 'c' ? 9 : 8)).ok());
  }
  const std::string shard = "/train/shard-00001.rec";
  const std::string a = testutil::ReadFile(dir.path() + "/a" + shard);
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(testutil::ReadFile(dir.path() + "/b" + shard), a);
  EXPECT_NE(testutil::ReadFile(dir.path() + "/c" + shard), a);
}

TEST(CriteoSyntheticTest, BadOptionsAreNamed) {
  testutil::ScopedTempDir dir;
  DataToolOptions o = Criteo(dir.path(), 1);
  o.zipf = 0.9;
  absl::Status s = RunDataTool(o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--zipf > 1"), std::string::npos) << s;
  o = Criteo(dir.path(), 1);
  o.vocabulary = 1;
  EXPECT_EQ(RunDataTool(o).code(), absl::StatusCode::kInvalidArgument);
  o = Criteo(dir.path(), 1);
  o.samples = 3;
  o.test_fraction = 0.3;  // one test sample: no AUC without both labels
  s = RunDataTool(o);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("use more --samples"), std::string::npos) << s;
}

}  // namespace
}  // namespace loader
