// Finite-difference checks of a Layer's Backward, shared by the layer tests:
// the loss is a fixed random weighting of the layer's outputs, so its
// gradient with respect to the outputs is that weighting, and every
// parameter and input gradient Backward writes is compared with central
// differences of the loss.
#ifndef SHARDPS_TESTS_MODEL_GRADIENT_CHECK_H_
#define SHARDPS_TESTS_MODEL_GRADIENT_CHECK_H_

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "model/layer.h"

namespace model {

// n standard-normal floats.
inline std::vector<float> RandomVector(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& f : v) f = normal(gen);
  return v;
}

// Runs `layer` on the `batch` samples of x with params (the whole flat
// vector), and checks its parameter and input gradients.
inline void ExpectGradientsMatchFiniteDifferences(const Layer& layer,
                                                  std::vector<float> x,
                                                  int batch,
                                                  std::vector<float> params,
                                                  uint32_t seed) {
  const int64_t outs = batch * layer.output_shape().size();
  const std::vector<float> weight = RandomVector(outs, seed);
  std::vector<float> scratch(layer.ScratchFloats(batch));
  const std::vector<float> ones(layer.OnesNeeded(batch), 1.0f);
  const LayerScratch s{scratch.data(), ones.data()};
  std::vector<float> out(outs);
  auto loss_at = [&](const std::vector<float>& p,
                     const std::vector<float>& xs) {
    layer.Forward(p.data(), xs.data(), batch, out.data(), s);
    double loss = 0;
    for (int64_t i = 0; i < outs; ++i) loss += double{weight[i]} * out[i];
    return loss;
  };
  loss_at(params, x);
  std::vector<float> dout = weight, grad(params.size(), 0.0f), din(x.size());
  layer.Backward(params.data(), x.data(), out.data(), dout.data(), batch,
                 din.data(), grad.data(), s);
  const float eps = 1e-2f;
  auto numeric = [&](std::vector<float>* v, size_t i, bool is_param) {
    const float keep = (*v)[i];
    (*v)[i] = keep + eps;
    const double plus = is_param ? loss_at(*v, x) : loss_at(params, *v);
    (*v)[i] = keep - eps;
    const double minus = is_param ? loss_at(*v, x) : loss_at(params, *v);
    (*v)[i] = keep;
    return (plus - minus) / (2.0 * eps);
  };
  for (uint64_t i = layer.params_begin(); i < layer.params_end(); ++i) {
    const double want = numeric(&params, i, true);
    EXPECT_NEAR(grad[i], want, 2e-3 + 0.02 * std::abs(want))
        << "parameter " << i;
  }
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = numeric(&x, i, false);
    EXPECT_NEAR(din[i], want, 2e-3 + 0.02 * std::abs(want)) << "input " << i;
  }
}

}  // namespace model

#endif  // SHARDPS_TESTS_MODEL_GRADIENT_CHECK_H_
