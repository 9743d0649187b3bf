#include "model/max_pool_layer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>

#include "model/gradient_check.h"

namespace model {
namespace {

TEST(MaxPoolLayerTest, TakesEachWindowsMaximumAndDropsTheEdge) {
  // One 5 x 5 image of one channel, 2 x 2 windows: the fifth row and
  // column fall outside every window.
  MaxPoolLayer pool(Shape{5, 5, 1}, 2);
  EXPECT_EQ(pool.output_shape(), (Shape{2, 2, 1}));
  std::vector<float> x(25);
  std::iota(x.begin(), x.end(), 0.0f);
  x[24] = 100;  // bottom-right corner, in no window
  std::vector<float> out(4);
  pool.Forward(nullptr, x.data(), 1, out.data(), {});
  EXPECT_EQ(out, (std::vector<float>{6, 8, 16, 18}));

  std::vector<float> dout = {1, 2, 3, 4}, din(25, -1.0f);
  pool.Backward(nullptr, x.data(), out.data(), dout.data(), 1, din.data(),
                nullptr, {});
  std::vector<float> want(25, 0.0f);
  want[6] = 1;
  want[8] = 2;
  want[16] = 3;
  want[18] = 4;
  EXPECT_EQ(din, want);
}

TEST(MaxPoolLayerTest, PoolsEachChannelOnItsOwn) {
  // A 2 x 2 image of two channels: channel 0 peaks top-left, channel 1
  // bottom-right.
  MaxPoolLayer pool(Shape{2, 2, 2}, 2);
  const std::vector<float> x = {9, 0, 1, 1, 2, 3, 4, 7};
  std::vector<float> out(2);
  pool.Forward(nullptr, x.data(), 1, out.data(), {});
  EXPECT_EQ(out, (std::vector<float>{9, 7}));
}

TEST(MaxPoolLayerTest, TiesGoToTheFirstMaximum) {
  MaxPoolLayer pool(Shape{2, 2, 1}, 2);
  const std::vector<float> x = {1, 5, 5, 5};
  std::vector<float> out(1), dout = {2}, din(4);
  pool.Forward(nullptr, x.data(), 1, out.data(), {});
  pool.Backward(nullptr, x.data(), out.data(), dout.data(), 1, din.data(),
                nullptr, {});
  EXPECT_EQ(din, (std::vector<float>{0, 2, 0, 0}));
}

TEST(MaxPoolLayerTest, GradientMatchesFiniteDifferences) {
  // Distinct values 0.1 apart, shuffled: no perturbation of 0.01 changes a
  // window's maximum.
  const Shape in{6, 4, 3};
  const int batch = 2;
  std::vector<float> x(batch * in.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.1f * static_cast<float>(i);
  std::shuffle(x.begin(), x.end(), std::mt19937(9));
  MaxPoolLayer pool(in, 2);
  ExpectGradientsMatchFiniteDifferences(pool, x, batch, {}, 10);
}

}  // namespace
}  // namespace model
