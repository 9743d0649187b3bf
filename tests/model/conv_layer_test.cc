#include "model/conv_layer.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "model/gradient_check.h"

namespace model {
namespace {

// The convolution written out directly from its definition, channels last:
// out[n][i][j][f] = relu(b[f] + sum over (di, dj, c) of
//                        in[n][i + di][j + dj][c] * W[(di * K + dj) * C +
//                        c][f]).
std::vector<float> DirectConvolution(const std::vector<float>& in, Shape s,
                                     int batch, const float* w, const float* b,
                                     int k, int filters) {
  const int oh = s.height - k + 1, ow = s.width - k + 1;
  std::vector<float> out;
  for (int n = 0; n < batch; ++n) {
    for (int i = 0; i < oh; ++i) {
      for (int j = 0; j < ow; ++j) {
        for (int f = 0; f < filters; ++f) {
          double sum = b[f];
          for (int di = 0; di < k; ++di) {
            for (int dj = 0; dj < k; ++dj) {
              for (int c = 0; c < s.channels; ++c) {
                const float x =
                    in[((n * s.height + i + di) * s.width + j + dj) *
                           s.channels +
                       c];
                sum += x * w[((di * k + dj) * s.channels + c) * filters + f];
              }
            }
          }
          out.push_back(std::max(0.0f, static_cast<float>(sum)));
        }
      }
    }
  }
  return out;
}

TEST(ConvLayerTest, ShapesAndKeys) {
  ParamLayout layout;
  ConvLayer conv(Shape{28, 28, 1}, 32, 5, 0, &layout);
  EXPECT_EQ(conv.output_shape(), (Shape{24, 24, 32}));
  EXPECT_EQ(layout.Find("W0")->rows, 25u);
  EXPECT_EQ(layout.Find("W0")->cols, 32u);
  EXPECT_EQ(layout.Find("b0")->size(), 32u);
  EXPECT_EQ(conv.params_end() - conv.params_begin(), 25u * 32 + 32);
}

TEST(ConvLayerTest, MatchesTheDirectConvolution) {
  const Shape in{5, 4, 2};
  const int batch = 2, k = 3, filters = 3;
  ParamLayout layout;
  ConvLayer conv(in, filters, k, 0, &layout);
  const std::vector<float> params = RandomVector(layout.num_params(), 4);
  const std::vector<float> x = RandomVector(batch * in.size(), 5);
  std::vector<float> scratch(conv.ScratchFloats(batch));
  std::vector<float> out(batch * conv.output_shape().size());
  conv.Forward(params.data(), x.data(), batch, out.data(),
               {scratch.data(), nullptr});
  const std::vector<float> want =
      DirectConvolution(x, in, batch, params.data(),
                        params.data() + layout.Find("b0")->offset, k, filters);
  ASSERT_EQ(out.size(), want.size());
  int positive = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    EXPECT_NEAR(out[i], want[i], 1e-5f) << "output " << i;
    positive += want[i] > 0;
  }
  // Both sides of the ReLU are exercised.
  EXPECT_GT(positive, 0);
  EXPECT_LT(positive, static_cast<int>(out.size()));
}

TEST(ConvLayerTest, GradientMatchesFiniteDifferences) {
  const Shape in{5, 6, 2};
  ParamLayout layout;
  layout.Add("before", 3);
  ConvLayer conv(in, 3, 3, 1, &layout);
  ExpectGradientsMatchFiniteDifferences(conv, RandomVector(2 * in.size(), 6), 2,
                                        RandomVector(layout.num_params(), 7),
                                        8);
}

}  // namespace
}  // namespace model
