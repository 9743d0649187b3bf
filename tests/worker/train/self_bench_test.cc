// shardps-worker --bench: the model's steps and the loader's epoch, each
// measured and printed as one line; bad options are named.
#include "worker/train/self_bench.h"

#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "util/data.h"
#include "util/files.h"

namespace worker {
namespace {

TEST(SelfBenchTest, ModelStepsPrintTheirRate) {
  ModelBenchOptions o;
  o.model = "mlp:16-8-3";
  o.batch = 32;
  o.length = absl::Milliseconds(100);
  o.json = true;
  testing::internal::CaptureStdout();
  absl::Status s = RunModelBench(o);
  const std::string out = testing::internal::GetCapturedStdout();
  ASSERT_TRUE(s.ok()) << s;
  std::smatch m;
  ASSERT_TRUE(std::regex_match(
      out, m,
      std::regex(R"(\{"mode":"model","model":"mlp:16-8-3","batch":32,)"
                 R"("blas_threads":1,"samples_per_s":([0-9]+)\}\n)")))
      << out;
  EXPECT_GT(std::stod(m[1]), 1000) << out;  // a tiny model, thousands/s
  o.batch = 0;
  EXPECT_TRUE(absl::IsInvalidArgument(RunModelBench(o)));
  o.batch = 32;
  o.model = "cnn:1";
  EXPECT_FALSE(RunModelBench(o).ok());
}

TEST(SelfBenchTest, AnEpochThroughTheLoaderCountsEveryRecord) {
  testutil::ScopedTempDir dir;
  ASSERT_EQ(
      testutil::MakeSyntheticData(
          dir.path(), "--samples 1000 --features 8 --classes 2 --shards 3"),
      0);
  for (const char* loader : {"parallel", "sequential"}) {
    LoaderBenchOptions o;
    o.data = dir.path() + "/train";
    o.loader = loader;
    o.batch = 64;
    testing::internal::CaptureStdout();
    absl::Status s = RunLoaderBench(o);
    const std::string out = testing::internal::GetCapturedStdout();
    ASSERT_TRUE(s.ok()) << s;
    EXPECT_NE(out.find(std::string("{\"mode\":\"loader\",\"loader\":\"") +
                       loader + "\",\"records\":900,"),
              std::string::npos)
        << out;
  }
  LoaderBenchOptions missing;
  missing.data = dir.path() + "/nothing";
  absl::Status s = RunLoaderBench(missing);
  EXPECT_TRUE(absl::IsNotFound(s)) << s;
}

}  // namespace
}  // namespace worker
