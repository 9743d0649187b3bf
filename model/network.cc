#include "model/network.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"
#include "model/conv_layer.h"
#include "model/dense_layer.h"
#include "model/max_pool_layer.h"

namespace model {
namespace {

constexpr int64_t kEvaluationWorkspaceFloats = int64_t{16} << 20;  // 64 MiB
// Beyond these a spec is a typo, not a model: a table's keys are counted
// in 32 bits (proto/summary.proto), and one sample's activations stay
// within 1 GiB.
constexpr uint64_t kMaxParams = (uint64_t{1} << 32) - 1;
constexpr int64_t kMaxSampleFloats = int64_t{1} << 28;

// Softmax cross-entropy of `batch` rows of logits: writes the gradient of
// the mean loss with respect to the logits, (softmax - onehot) / batch, and
// returns the summed loss.
double SoftmaxLoss(const float* logits, const int32_t* labels, int batch,
                   int classes, float* delta) {
  double loss = 0;
  const float scale = 1.0f / static_cast<float>(batch);
  for (int r = 0; r < batch; ++r) {
    const float* z = logits + r * classes;
    float* d = delta + r * classes;
    const float top = *std::max_element(z, z + classes);
    float sum = 0;
    for (int c = 0; c < classes; ++c) {
      d[c] = std::exp(z[c] - top);
      sum += d[c];
    }
    const int label = labels[r];
    loss += std::log(sum) - (z[label] - top);
    const float inv = 1.0f / sum;
    for (int c = 0; c < classes; ++c) d[c] *= inv * scale;
    d[label] -= scale;
  }
  return loss;
}

// Why layer `spec` cannot follow a layer whose output is `at`; empty when
// it can.
std::string MisfitOf(const LayerSpec& spec, Shape at) {
  if (spec.kind == LayerSpec::Kind::kDense) return "";
  if (spec.kernel <= at.height && spec.kernel <= at.width) return "";
  return absl::StrCat(
      spec.kind == LayerSpec::Kind::kConv ? "a kernel" : "a window", " of ",
      spec.kernel, " does not fit its input of ", ShapeString(at));
}

}  // namespace

absl::StatusOr<Network> Network::Create(const ModelSpec& spec,
                                        std::optional<Shape> data_input) {
  auto bad = [&spec](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("model spec '", spec.text, "': ", why));
  };
  if (!spec.input.has_value() && !data_input.has_value()) {
    return bad(
        "names no input shape (e.g. cnn:28x28x1-...) and no data set "
        "gives one");
  }
  Network net;
  net.input_ = spec.input.has_value() ? *spec.input : *data_input;
  net.classes_ = spec.classes();
  Shape at = net.input_;
  int index = 0;  // of layers with parameters, naming their tensors
  for (size_t l = 0; l < spec.layers.size(); ++l) {
    const LayerSpec& s = spec.layers[l];
    if (std::string why = MisfitOf(s, at); !why.empty()) {
      return bad(absl::StrCat("layer ", l + 1, ": ", why));
    }
    std::unique_ptr<Layer> layer;
    switch (s.kind) {
      case LayerSpec::Kind::kDense:
        layer = std::make_unique<DenseLayer>(at.size(), s.units, s.relu,
                                             index++, &net.layout_);
        break;
      case LayerSpec::Kind::kConv:
        layer = std::make_unique<ConvLayer>(at, s.units, s.kernel, index++,
                                            &net.layout_);
        break;
      case LayerSpec::Kind::kMaxPool:
        layer = std::make_unique<MaxPoolLayer>(at, s.kernel);
        break;
    }
    at = layer->output_shape();
    net.layers_.push_back(std::move(layer));
    if (net.layout_.num_params() > kMaxParams || at.size() > kMaxSampleFloats) {
      return bad(absl::StrCat("layer ", l + 1, " brings it to ",
                              net.layout_.num_params(), " parameters and ",
                              at.size(), " outputs per sample (at most ",
                              kMaxParams, " and ", kMaxSampleFloats, ")"));
    }
  }
  return net;
}

absl::StatusOr<Network> Network::FromSpec(absl::string_view spec) {
  absl::StatusOr<ModelSpec> parsed = ParseModelSpec(spec);
  if (!parsed.ok()) return parsed.status();
  return Create(*parsed, std::nullopt);
}

std::vector<TensorInit> Network::InitPlan() const {
  std::vector<TensorInit> plan;
  for (const std::unique_ptr<Layer>& layer : layers_) {
    layer->AppendInitPlan(&plan);
  }
  return plan;
}

void Network::Initialize(uint64_t seed, float* params) const {
  std::mt19937_64 gen(seed);
  for (const TensorInit& t : InitPlan()) {
    float* out = params + t.begin;
    const uint64_t n = t.end - t.begin;
    if (t.kind == TensorInit::Kind::kNormal) {
      std::normal_distribution<float> dist(0.0f, t.scale);
      for (uint64_t i = 0; i < n; ++i) out[i] = dist(gen);
    } else if (t.kind == TensorInit::Kind::kUniform) {
      std::uniform_real_distribution<float> dist(-t.scale, t.scale);
      for (uint64_t i = 0; i < n; ++i) out[i] = dist(gen);
    } else {
      std::fill(out, out + n, 0.0f);
    }
  }
}

Network::Workspace Network::MakeWorkspace(int max_batch) const {
  Workspace ws;
  ws.max_batch_ = max_batch;
  int64_t ones = 0;
  for (const std::unique_ptr<Layer>& layer : layers_) {
    const int64_t n = max_batch * layer->output_shape().size();
    ws.activations.emplace_back(n);
    ws.deltas.emplace_back(n);
    ws.scratch.emplace_back(layer->ScratchFloats(max_batch));
    ones = std::max(ones, layer->OnesNeeded(max_batch));
  }
  ws.ones.assign(ones, 1.0f);
  return ws;
}

int64_t Network::WorkspaceFloats(int max_batch) const {
  int64_t floats = 0, ones = 0;
  for (const std::unique_ptr<Layer>& layer : layers_) {
    floats += 2 * max_batch * layer->output_shape().size() +
              layer->ScratchFloats(max_batch);
    ones = std::max(ones, layer->OnesNeeded(max_batch));
  }
  return floats + ones;
}

int Network::EvaluationBatch() const {
  const int64_t per_sample = std::max<int64_t>(1, WorkspaceFloats(1));
  return static_cast<int>(
      std::clamp<int64_t>(kEvaluationWorkspaceFloats / per_sample, 1, 1000));
}

LayerScratch Network::ScratchOf(int l, Workspace* ws) const {
  return {ws->scratch[l].data(), ws->ones.data()};
}

void Network::Forward(const float* params, const float* x, int batch,
                      Workspace* ws, LayerObserver* observer) const {
  const float* input = x;
  for (int l = 0; l < num_layers(); ++l) {
    if (observer != nullptr && layers_[l]->has_params()) {
      observer->BeforeForward(l);
    }
    float* out = ws->activations[l].data();
    layers_[l]->Forward(params, input, batch, out, ScratchOf(l, ws));
    input = out;
  }
}

float Network::TrainStep(const float* params, const float* x,
                         const int32_t* labels, int batch, float* grad,
                         Workspace* ws, LayerObserver* observer,
                         float* dx) const {
  assert(batch <= ws->max_batch());
  Forward(params, x, batch, ws, observer);
  const int last = num_layers() - 1;
  const double loss = SoftmaxLoss(ws->activations[last].data(), labels, batch,
                                  classes_, ws->deltas[last].data());
  for (int l = last; l >= 0; --l) {
    const float* in = l == 0 ? x : ws->activations[l - 1].data();
    float* din = l == 0 ? dx : ws->deltas[l - 1].data();
    layers_[l]->Backward(params, in, ws->activations[l].data(),
                         ws->deltas[l].data(), batch, din, grad,
                         ScratchOf(l, ws));
    if (observer != nullptr && layers_[l]->has_params()) {
      observer->AfterBackward(l);
    }
  }
  return static_cast<float>(loss / batch);
}

int Network::Evaluate(const float* params, const float* x,
                      const int32_t* labels, int batch, Workspace* ws,
                      double* loss_sum) const {
  int correct = 0;
  for (int first = 0; first < batch; first += ws->max_batch()) {
    const int n = std::min(ws->max_batch(), batch - first);
    Forward(params, x + first * input_width(), n, ws);
    const float* logits = ws->activations[num_layers() - 1].data();
    for (int r = 0; r < n; ++r) {
      const float* z = logits + r * classes_;
      const int label = labels[first + r];
      const int best = static_cast<int>(std::max_element(z, z + classes_) - z);
      if (best == label) ++correct;
      if (loss_sum != nullptr) {
        const float top = z[best];
        double sum = 0;
        for (int c = 0; c < classes_; ++c) sum += std::exp(z[c] - top);
        *loss_sum += std::log(sum) - (z[label] - top);
      }
    }
  }
  return correct;
}

void Network::Probabilities(const float* params, const float* x, int batch,
                            Workspace* ws, float* probs) const {
  for (int first = 0; first < batch; first += ws->max_batch()) {
    const int n = std::min(ws->max_batch(), batch - first);
    Forward(params, x + first * input_width(), n, ws);
    const float* logits = ws->activations[num_layers() - 1].data();
    for (int r = 0; r < n; ++r) {
      const float* z = logits + r * classes_;
      float* p = probs + (first + r) * classes_;
      const float top = *std::max_element(z, z + classes_);
      float sum = 0;
      for (int c = 0; c < classes_; ++c) sum += p[c] = std::exp(z[c] - top);
      for (int c = 0; c < classes_; ++c) p[c] /= sum;
    }
  }
}

}  // namespace model
