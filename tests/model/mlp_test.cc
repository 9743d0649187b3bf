#include "model/mlp.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace model {
namespace {

Mlp MakeMlp(const char* spec) { return Mlp(*ParseModelSpec(spec)); }

TEST(ParamLayoutTest, TensorsCoverTheKeySpaceExactly) {
  Mlp mlp = MakeMlp("mlp:784-256-256-10");
  const ParamLayout& layout = mlp.layout();
  EXPECT_EQ(layout.num_params(),
            784u * 256 + 256 + 256u * 256 + 256 + 256u * 10 + 10);
  uint64_t at = 0;
  for (const TensorSlot& t : layout.tensors()) {
    EXPECT_EQ(t.offset, at) << t.name;
    at += t.size();
  }
  EXPECT_EQ(at, layout.num_params());
  ASSERT_NE(layout.Find("W1"), nullptr);
  EXPECT_EQ(layout.Find("W1")->rows, 256u);
  EXPECT_EQ(layout.Find("b2")->size(), 10u);
  EXPECT_EQ(layout.Find("W9"), nullptr);
}

TEST(ModelSpecTest, ParsesAndRejectsWithReasons) {
  EXPECT_EQ(ParseModelSpec("mlp:784-256-10")->widths,
            (std::vector<int>{784, 256, 10}));
  for (const char* bad : {"cnn:1-2", "mlp:", "mlp:784", "mlp:784-x-10",
                          "mlp:784--10", "mlp:784-0-10", "mlp:784-1"}) {
    absl::StatusOr<MlpSpec> r = ParseModelSpec(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(bad), absl::string_view::npos)
        << r.status();
  }
}

TEST(MlpTest, InitializationIsSeededAndScaled) {
  Mlp mlp = MakeMlp("mlp:400-300-10");
  std::vector<float> a(mlp.num_params()), b(mlp.num_params()),
      c(mlp.num_params());
  mlp.Initialize(7, a.data());
  mlp.Initialize(7, b.data());
  mlp.Initialize(8, c.data());
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  // He: std of the first layer's weights is sqrt(2 / 400).
  const TensorSlot& w0 = *mlp.layout().Find("W0");
  double sq = 0;
  for (uint64_t i = 0; i < w0.size(); ++i)
    sq += a[w0.offset + i] * a[w0.offset + i];
  EXPECT_NEAR(std::sqrt(sq / w0.size()), std::sqrt(2.0 / 400), 0.005);
  // Glorot: the output layer stays within sqrt(6 / (300 + 10)).
  const TensorSlot& w1 = *mlp.layout().Find("W1");
  for (uint64_t i = 0; i < w1.size(); ++i) {
    ASSERT_LE(std::abs(a[w1.offset + i]), std::sqrt(6.0 / 310));
  }
  const TensorSlot& b0 = *mlp.layout().Find("b0");
  for (uint64_t i = 0; i < b0.size(); ++i) ASSERT_EQ(a[b0.offset + i], 0.0f);
}

TEST(MlpTest, GradientMatchesFiniteDifferences) {
  Mlp mlp = MakeMlp("mlp:5-7-6-3");
  const int batch = 4;
  std::mt19937 gen(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> params(mlp.num_params());
  mlp.Initialize(11, params.data());
  // Non-zero biases keep pre-activations away from the ReLU kink.
  for (float& p : params) p += 0.1f * normal(gen);
  std::vector<float> x(batch * 5);
  for (float& v : x) v = normal(gen);
  const std::vector<int32_t> labels = {0, 2, 1, 2};

  Mlp::Workspace ws = mlp.MakeWorkspace(batch);
  std::vector<float> grad(mlp.num_params());
  mlp.TrainStep(params.data(), x.data(), labels.data(), batch, grad.data(),
                &ws);
  std::vector<float> scratch(mlp.num_params());
  auto loss_at = [&](const std::vector<float>& p) {
    return mlp.TrainStep(p.data(), x.data(), labels.data(), batch,
                         scratch.data(), &ws);
  };
  const float eps = 1e-2f;
  for (uint64_t i = 0; i < params.size(); ++i) {
    std::vector<float> plus = params, minus = params;
    plus[i] += eps;
    minus[i] -= eps;
    const double numeric = (loss_at(plus) - loss_at(minus)) / (2.0 * eps);
    EXPECT_NEAR(grad[i], numeric, 2e-3 + 0.02 * std::abs(numeric))
        << "parameter " << i;
  }
}

TEST(MlpTest, SgdLearnsASeparableProblem) {
  // Three Gaussian blobs in 8 dimensions.
  Mlp mlp = MakeMlp("mlp:8-16-3");
  const int n = 300, batch = 30;
  std::mt19937 gen(5);
  std::normal_distribution<float> noise(0.0f, 0.5f);
  std::vector<float> x(n * 8);
  std::vector<int32_t> labels(n);
  for (int i = 0; i < n; ++i) {
    labels[i] = i % 3;
    for (int d = 0; d < 8; ++d) {
      x[i * 8 + d] = (d % 3 == labels[i] ? 2.0f : 0.0f) + noise(gen);
    }
  }
  std::vector<float> params(mlp.num_params()), grad(mlp.num_params());
  mlp.Initialize(1, params.data());
  Mlp::Workspace ws = mlp.MakeWorkspace(n);
  double before = 0, after = 0;
  mlp.Evaluate(params.data(), x.data(), labels.data(), n, &ws, &before);
  for (int epoch = 0; epoch < 20; ++epoch) {
    for (int s = 0; s < n; s += batch) {
      mlp.TrainStep(params.data(), &x[s * 8], &labels[s], batch, grad.data(),
                    &ws);
      for (size_t i = 0; i < params.size(); ++i) params[i] -= 0.1f * grad[i];
    }
  }
  const int correct =
      mlp.Evaluate(params.data(), x.data(), labels.data(), n, &ws, &after);
  EXPECT_LT(after, before / 4);
  EXPECT_GE(correct, n * 95 / 100);
}

}  // namespace
}  // namespace model
