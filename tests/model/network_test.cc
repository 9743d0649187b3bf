#include "model/network.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "model/gradient_check.h"

namespace model {
namespace {

Network Build(const char* spec) {
  absl::StatusOr<Network> net = Network::FromSpec(spec);
  EXPECT_TRUE(net.ok()) << net.status();
  return *std::move(net);
}

TEST(NetworkTest, TensorsCoverTheKeySpaceExactly) {
  Network mlp = Build("mlp:784-256-256-10");
  EXPECT_EQ(mlp.num_params(),
            784u * 256 + 256 + 256u * 256 + 256 + 256u * 10 + 10);
  Network cnn = Build("cnn:28x28x1-c32k5-p2-c64k5-p2-f1024-10");
  // 28 -> conv 24 -> pool 12 -> conv 8 -> pool 4: 4 * 4 * 64 = 1024 inputs
  // to the dense layer.
  EXPECT_EQ(cnn.num_params(), 25u * 32 + 32 + 800u * 64 + 64 + 1024u * 1024 +
                                  1024 + 1024u * 10 + 10);
  for (const Network* net : {&mlp, &cnn}) {
    uint64_t at = 0;
    for (const TensorSlot& t : net->layout().tensors()) {
      EXPECT_EQ(t.offset, at) << t.name;
      at += t.size();
    }
    EXPECT_EQ(at, net->num_params());
    // Layers own consecutive key ranges, first layer first.
    uint64_t end = 0;
    for (int l = 0; l < net->num_layers(); ++l) {
      const Layer& layer = net->layer(l);
      if (layer.params_end() == layer.params_begin()) continue;
      EXPECT_EQ(layer.params_begin(), end) << "layer " << l;
      end = layer.params_end();
    }
    EXPECT_EQ(end, net->num_params());
  }
  EXPECT_EQ(mlp.layout().Find("W1")->rows, 256u);
  EXPECT_EQ(mlp.layout().Find("b2")->size(), 10u);
  EXPECT_EQ(mlp.layout().Find("W9"), nullptr);
  EXPECT_EQ(cnn.layout().Find("W1")->rows, 800u);  // 5 x 5 x 32 patches
  EXPECT_EQ(cnn.layout().Find("W2")->rows, 1024u);
}

TEST(NetworkTest, ACnnTakesTheDataSetsShapeUnlessItNamesOne) {
  ModelSpec spec = *ParseModelSpec("cnn:c4k3-p2-10");
  absl::StatusOr<Network> net = Network::Create(spec, Shape{8, 8, 3});
  ASSERT_TRUE(net.ok()) << net.status();
  EXPECT_EQ(net->input_shape(), (Shape{8, 8, 3}));
  EXPECT_EQ(net->layer(1).output_shape(), (Shape{3, 3, 4}));
  absl::StatusOr<Network> none = Network::Create(spec, std::nullopt);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("names no input shape"),
            absl::string_view::npos)
      << none.status();
  spec = *ParseModelSpec("cnn:6x6x1-c4k3-10");
  EXPECT_EQ(Network::Create(spec, Shape{8, 8, 3})->input_shape(),
            (Shape{6, 6, 1}));
}

TEST(NetworkTest, RefusesAKernelOrWindowLargerThanItsInput) {
  for (const char* bad : {"cnn:4x4x1-c2k5-10", "cnn:8x8x1-c2k5-p5-10",
                          "cnn:12x12-c2k5-p2-c2k5-10"}) {
    absl::StatusOr<Network> net = Network::FromSpec(bad);
    ASSERT_FALSE(net.ok()) << bad;
    EXPECT_EQ(net.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(net.status().message().find("does not fit its input"),
              absl::string_view::npos)
        << net.status();
    EXPECT_NE(net.status().message().find(bad), absl::string_view::npos);
  }
}

TEST(NetworkTest, RefusesASpecTooLargeToBeAModel) {
  // 2^20 x 2^20 weights, and a 2^40-pixel image: refused before anything
  // is allocated.
  for (const char* huge :
       {"mlp:1048576-1048576-10", "cnn:1048576x1048576x1-c1k1-10"}) {
    absl::StatusOr<Network> net = Network::FromSpec(huge);
    ASSERT_FALSE(net.ok()) << huge;
    EXPECT_EQ(net.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(net.status().message().find(huge), absl::string_view::npos);
    EXPECT_NE(net.status().message().find("at most"), absl::string_view::npos)
        << net.status();
  }
}

TEST(NetworkTest, InitializationIsSeededAndScaled) {
  Network net = Build("cnn:20x20x1-c50k3-f300-10");
  std::vector<float> a(net.num_params()), b(net.num_params()),
      c(net.num_params());
  net.Initialize(7, a.data());
  net.Initialize(7, b.data());
  net.Initialize(8, c.data());
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);
  auto rms = [&](const TensorSlot& t) {
    double sq = 0;
    for (uint64_t i = 0; i < t.size(); ++i) {
      sq += a[t.offset + i] * a[t.offset + i];
    }
    return std::sqrt(sq / t.size());
  };
  // He: a convolution's fan-in is its patch (3 x 3 x 1), a dense layer's
  // its input (18 x 18 x 50).
  EXPECT_NEAR(rms(*net.layout().Find("W0")), std::sqrt(2.0 / 9), 0.03);
  EXPECT_NEAR(rms(*net.layout().Find("W1")), std::sqrt(2.0 / 16200), 1e-4);
  // Glorot: the output layer stays within sqrt(6 / (300 + 10)).
  const TensorSlot& w2 = *net.layout().Find("W2");
  for (uint64_t i = 0; i < w2.size(); ++i) {
    ASSERT_LE(std::abs(a[w2.offset + i]), std::sqrt(6.0 / 310));
  }
  for (const char* bias : {"b0", "b1", "b2"}) {
    const TensorSlot& t = *net.layout().Find(bias);
    for (uint64_t i = 0; i < t.size(); ++i) ASSERT_EQ(a[t.offset + i], 0.0f);
  }
}

// Every parameter's gradient of the mean softmax loss, against central
// differences of the loss with steps of eps.
void ExpectNetworkGradientMatches(const Network& net, int batch, float eps) {
  std::vector<float> params(net.num_params());
  net.Initialize(11, params.data());
  // Non-zero biases keep pre-activations away from the ReLU kink.
  const std::vector<float> noise = RandomVector(params.size(), 12);
  for (size_t i = 0; i < params.size(); ++i) params[i] += 0.1f * noise[i];
  const std::vector<float> x = RandomVector(batch * net.input_width(), 13);
  std::vector<int32_t> labels(batch);
  for (int i = 0; i < batch; ++i) labels[i] = (3 * i + 1) % net.num_classes();
  Network::Workspace ws = net.MakeWorkspace(batch);
  std::vector<float> grad(net.num_params());
  net.TrainStep(params.data(), x.data(), labels.data(), batch, grad.data(),
                &ws);
  std::vector<float> scratch(net.num_params());
  auto loss_at = [&](const std::vector<float>& p) {
    return net.TrainStep(p.data(), x.data(), labels.data(), batch,
                         scratch.data(), &ws);
  };
  for (uint64_t i = 0; i < params.size(); ++i) {
    std::vector<float> plus = params, minus = params;
    plus[i] += eps;
    minus[i] -= eps;
    const double numeric = (loss_at(plus) - loss_at(minus)) / (2.0 * eps);
    EXPECT_NEAR(grad[i], numeric, 2e-3 + 0.02 * std::abs(numeric))
        << "parameter " << i;
  }
}

TEST(NetworkTest, MlpGradientMatchesFiniteDifferences) {
  ExpectNetworkGradientMatches(Build("mlp:5-7-6-3"), 4, 1e-2f);
}

TEST(NetworkTest, CnnGradientMatchesFiniteDifferences) {
  // Convolution, pooling, a second convolution, dense layers: every path
  // from the loss back to the first layer's weights. A small step: a
  // first-layer weight moves every position of the image, and a larger step
  // would carry some across a ReLU's kink or change a window's maximum.
  ExpectNetworkGradientMatches(Build("cnn:9x9x2-c3k3-p2-c4k2-f5-3"), 3, 1e-3f);
}

// Records the observer's calls; at each AfterBackward, keeps a copy of the
// layer's gradient and scribbles over its parameters, which the rest of
// the step must not read.
class ScribblingObserver : public LayerObserver {
 public:
  ScribblingObserver(const Network& net, float* params, const float* grad)
      : net_(net), params_(params), grad_(grad) {}
  void BeforeForward(int layer) override {
    events_.push_back("F" + std::to_string(layer));
  }
  void AfterBackward(int layer) override {
    events_.push_back("B" + std::to_string(layer));
    const Layer& l = net_.layer(layer);
    grads_.emplace_back(grad_ + l.params_begin(), grad_ + l.params_end());
    for (uint64_t i = l.params_begin(); i < l.params_end(); ++i) {
      params_[i] = 1e6f;
    }
  }
  std::vector<std::string> events_;
  std::vector<std::vector<float>> grads_;  // in AfterBackward's order

 private:
  const Network& net_;
  float* const params_;
  const float* const grad_;
};

TEST(NetworkTest, AnObserverSeesEachLayerBeforeItReadsAndAfterItsGradient) {
  Network net = Build("cnn:8x8x1-c4k3-p2-f5-3");
  const int batch = 4;
  std::vector<float> params(net.num_params());
  net.Initialize(5, params.data());
  const std::vector<float> x = RandomVector(batch * 64, 6);
  const std::vector<int32_t> labels = {0, 1, 2, 1};
  Network::Workspace ws = net.MakeWorkspace(batch);
  std::vector<float> want(net.num_params()), grad(net.num_params());
  const float loss = net.TrainStep(params.data(), x.data(), labels.data(),
                                   batch, want.data(), &ws);
  ScribblingObserver observer(net, params.data(), grad.data());
  EXPECT_EQ(net.TrainStep(params.data(), x.data(), labels.data(), batch,
                          grad.data(), &ws, &observer),
            loss);
  // Layer 1 (pooling) has no parameters.
  EXPECT_EQ(observer.events_,
            (std::vector<std::string>{"F0", "F2", "F3", "B3", "B2", "B0"}));
  // Each layer's gradient was final when announced, and nothing read the
  // parameters scribbled over after it.
  EXPECT_EQ(grad, want);
  const int layers[] = {3, 2, 0};
  for (int i = 0; i < 3; ++i) {
    const Layer& l = net.layer(layers[i]);
    EXPECT_EQ(observer.grads_[i],
              std::vector<float>(want.begin() + l.params_begin(),
                                 want.begin() + l.params_end()))
        << "layer " << layers[i];
  }
}

TEST(NetworkTest, EvaluatesInChunksOfTheWorkspace) {
  Network net = Build("cnn:8x8x1-c4k3-p2-6");
  const int n = 37;
  std::vector<float> params(net.num_params());
  net.Initialize(3, params.data());
  const std::vector<float> x = RandomVector(n * 64, 4);
  std::vector<int32_t> labels(n);
  for (int i = 0; i < n; ++i) labels[i] = i % 6;
  Network::Workspace whole = net.MakeWorkspace(n), small = net.MakeWorkspace(5);
  double whole_loss = 0, small_loss = 0;
  const int right = net.Evaluate(params.data(), x.data(), labels.data(), n,
                                 &whole, &whole_loss);
  EXPECT_EQ(net.Evaluate(params.data(), x.data(), labels.data(), n, &small,
                         &small_loss),
            right);
  EXPECT_NEAR(small_loss, whole_loss, 1e-4 * whole_loss);
}

TEST(NetworkTest, EvaluationBatchKeepsTheWorkspaceSmall) {
  EXPECT_EQ(Build("mlp:784-256-256-10").EvaluationBatch(), 1000);
  Network cnn = Build("cnn:28x28x1-c32k5-p2-c64k5-p2-f1024-10");
  const int b = cnn.EvaluationBatch();
  EXPECT_LT(b, 1000);
  EXPECT_LE(cnn.WorkspaceFloats(b), int64_t{16} << 20);
  EXPECT_GT(cnn.WorkspaceFloats(b + 1), int64_t{16} << 20);
}

// Three Gaussian blobs in 8 dimensions.
TEST(NetworkTest, SgdLearnsASeparableProblem) {
  Network mlp = Build("mlp:8-16-3");
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
  Network::Workspace ws = mlp.MakeWorkspace(n);
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

// 8 x 8 images holding one horizontal or one vertical bar at a random place,
// with noise: a task about the shape, not where it is, which a small
// convolution learns.
TEST(NetworkTest, SgdLearnsBarOrientationWithAConvolution) {
  Network cnn = Build("cnn:8x8x1-c6k3-p2-2");
  const int n = 400, batch = 20;
  std::mt19937 gen(6);
  std::normal_distribution<float> noise(0.0f, 0.2f);
  std::vector<float> x(n * 64);
  std::vector<int32_t> labels(n);
  for (int i = 0; i < n; ++i) {
    labels[i] = i % 2;
    const int at = static_cast<int>(gen() % 8);
    for (int p = 0; p < 64; ++p) {
      const int row = p / 8, col = p % 8;
      const bool on = labels[i] == 0 ? row == at : col == at;
      x[i * 64 + p] = (on ? 1.0f : 0.0f) + noise(gen);
    }
  }
  std::vector<float> params(cnn.num_params()), grad(cnn.num_params());
  cnn.Initialize(2, params.data());
  Network::Workspace ws = cnn.MakeWorkspace(batch);
  for (int epoch = 0; epoch < 15; ++epoch) {
    for (int s = 0; s < n; s += batch) {
      cnn.TrainStep(params.data(), &x[s * 64], &labels[s], batch, grad.data(),
                    &ws);
      for (size_t i = 0; i < params.size(); ++i) params[i] -= 0.1f * grad[i];
    }
  }
  EXPECT_GE(
      cnn.Evaluate(params.data(), x.data(), labels.data(), n, &ws, nullptr),
      n * 95 / 100);
}

}  // namespace
}  // namespace model
