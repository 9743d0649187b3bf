#include "model/dense_layer.h"

#include <gtest/gtest.h>

#include "model/gradient_check.h"

namespace model {
namespace {

TEST(DenseLayerTest, ComputesInTimesWeightsPlusBias) {
  ParamLayout layout;
  DenseLayer layer(/*in=*/2, /*units=*/3, /*relu=*/false, 0, &layout);
  ASSERT_EQ(layout.num_params(), 9u);
  // W = [[1, 2, 3], [4, 5, 6]], b = [0.5, -1, 0].
  const std::vector<float> params = {1, 2, 3, 4, 5, 6, 0.5f, -1, 0};
  const std::vector<float> x = {1, 1, 2, -1};
  std::vector<float> out(6);
  layer.Forward(params.data(), x.data(), 2, out.data(), {});
  EXPECT_EQ(out, (std::vector<float>{5.5f, 6, 9, -1.5f, -2, 0}));
}

TEST(DenseLayerTest, ReluZeroesNegativeOutputs) {
  ParamLayout layout;
  DenseLayer layer(2, 3, /*relu=*/true, 0, &layout);
  const std::vector<float> params = {1, 2, 3, 4, 5, 6, 0.5f, -1, 0};
  const std::vector<float> x = {2, -1};
  std::vector<float> out(3);
  layer.Forward(params.data(), x.data(), 1, out.data(), {});
  EXPECT_EQ(out, (std::vector<float>{0, 0, 0}));
}

TEST(DenseLayerTest, GradientMatchesFiniteDifferences) {
  for (bool relu : {false, true}) {
    SCOPED_TRACE(relu ? "relu" : "linear");
    ParamLayout layout;
    layout.Add("before", 5);  // the layer's keys need not start at 0
    DenseLayer layer(6, 4, relu, 0, &layout);
    EXPECT_EQ(layer.params_begin(), 5u);
    EXPECT_EQ(layer.params_end(), layout.num_params());
    ExpectGradientsMatchFiniteDifferences(layer, RandomVector(3 * 6, 1), 3,
                                          RandomVector(layout.num_params(), 2),
                                          3);
  }
}

}  // namespace
}  // namespace model
