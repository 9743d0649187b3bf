#include "model/model_spec.h"

#include <gtest/gtest.h>

namespace model {
namespace {

using Kind = LayerSpec::Kind;

TEST(ModelSpecTest, AnMlpIsDenseLayersOnAFlatInput) {
  absl::StatusOr<ModelSpec> s = ParseModelSpec("mlp:784-256-10");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->input, (Shape{1, 1, 784}));
  ASSERT_EQ(s->layers.size(), 2u);
  EXPECT_EQ(s->layers[0].kind, Kind::kDense);
  EXPECT_EQ(s->layers[0].units, 256);
  EXPECT_TRUE(s->layers[0].relu);
  EXPECT_EQ(s->layers[1].units, 10);
  EXPECT_FALSE(s->layers[1].relu);
  EXPECT_EQ(s->classes(), 10);
}

TEST(ModelSpecTest, ACnnNamesItsLayersAndMayNameItsInput) {
  absl::StatusOr<ModelSpec> s =
      ParseModelSpec("cnn:c32k5-p2-c64k3-p2-f1024-10");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE(s->input.has_value());
  ASSERT_EQ(s->layers.size(), 6u);
  EXPECT_EQ(s->layers[0].kind, Kind::kConv);
  EXPECT_EQ(s->layers[0].units, 32);
  EXPECT_EQ(s->layers[0].kernel, 5);
  EXPECT_EQ(s->layers[1].kind, Kind::kMaxPool);
  EXPECT_EQ(s->layers[1].kernel, 2);
  EXPECT_EQ(s->layers[2].kernel, 3);
  EXPECT_EQ(s->layers[4].kind, Kind::kDense);
  EXPECT_EQ(s->layers[4].units, 1024);
  EXPECT_TRUE(s->layers[4].relu);
  EXPECT_EQ(s->layers[5].kind, Kind::kDense);
  EXPECT_FALSE(s->layers[5].relu);
  EXPECT_EQ(s->classes(), 10);

  EXPECT_EQ(ParseModelSpec("cnn:32x32x3-c8k3-10")->input, (Shape{32, 32, 3}));
  EXPECT_EQ(ParseModelSpec("cnn:28x28-f64-10")->input, (Shape{28, 28, 1}));
}

TEST(ModelSpecTest, RejectsWithTheSpecAndTheReason) {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {"rnn:1-2", "unknown model kind"},
      {"mlp:", "width '' is not"},
      {"mlp:784", "needs an input and a class count"},
      {"mlp:784-x-10", "width 'x'"},
      {"mlp:784--10", "width ''"},
      {"mlp:784-0-10", "width '0'"},
      {"mlp:784-1", "at least 2 classes"},
      {"cnn:", "at least one layer"},
      {"cnn:10", "at least one layer"},
      {"cnn:c32-10", "layer 'c32'"},
      {"cnn:c32k0-10", "layer 'c32k0'"},
      {"cnn:c32k99-10", "layer 'c32k99'"},
      {"cnn:q3-10", "layer 'q3'"},
      {"cnn:f64-c8k3-10", "comes after a dense layer"},
      {"cnn:c8k3-p2-1", "'1' is not a class count"},
      {"cnn:c8k3-p2", "'p2' is not a class count"},
  };
  for (const auto& [bad, why] : cases) {
    absl::StatusOr<ModelSpec> r = ParseModelSpec(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(absl::StrCat("'", bad, "'")),
              absl::string_view::npos)
        << r.status();
    EXPECT_NE(r.status().message().find(why), absl::string_view::npos)
        << bad << ": " << r.status();
  }
}

}  // namespace
}  // namespace model
