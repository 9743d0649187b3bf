// shardps-worker --bench: the model's steps and the loader's epoch, each
// measured and printed as one line; bad options are named.
#include "worker/train/self_bench.h"

#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "absl/strings/str_cat.h"
#include "util/data.h"
#include "util/files.h"

namespace worker {
namespace {

constexpr char kNumber[] = "([0-9.]+)";

TEST(SelfBenchTest, ModelStepsPrintTheirRateAndLayerProfile) {
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
  const std::string layer =
      absl::StrCat(R"(\{"params":([0-9]+),"forward_at_ms":)", kNumber,
                   R"(,"gradient_at_ms":)", kNumber, R"(\})");
  ASSERT_TRUE(std::regex_match(
      out, m,
      std::regex(absl::StrCat(
          R"(\{"mode":"model","model":"mlp:16-8-3","batch":32,)",
          R"("blas_threads":1,"samples_per_s":([0-9]+),"step_ms":)", kNumber,
          R"(,"layers":\[)", layer, ",", layer, R"(\]\}\n)"))))
      << out;
  EXPECT_GT(std::stod(m[1]), 1000) << out;  // a tiny model, thousands/s
  // 16 x 8 + 8 and 8 x 3 + 3 parameters. The first layer reads its own
  // first and writes its gradient last; everything inside the step.
  EXPECT_EQ(m[3], "136");
  EXPECT_EQ(m[6], "27");
  const double step = std::stod(m[2]);
  const double forward[] = {std::stod(m[4]), std::stod(m[7])};
  const double gradient[] = {std::stod(m[5]), std::stod(m[8])};
  EXPECT_GT(step, 0);
  EXPECT_LE(forward[0], forward[1]);
  EXPECT_LT(forward[1], gradient[1]);
  EXPECT_LE(gradient[1], gradient[0]);
  EXPECT_LE(gradient[0], step);
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
