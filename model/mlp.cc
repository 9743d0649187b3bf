#include "model/mlp.h"

#include <cblas.h>

#include <algorithm>
#include <cassert>
#include <cmath>
#include <random>

#include "absl/strings/str_cat.h"

namespace model {

Mlp::Mlp(MlpSpec spec) : spec_(std::move(spec)) {
  for (int l = 0; l < num_layers(); ++l) {
    weight_slot_.push_back(layout_.Add(absl::StrCat("W", l), spec_.widths[l],
                                       spec_.widths[l + 1]));
    bias_slot_.push_back(
        layout_.Add(absl::StrCat("b", l), spec_.widths[l + 1]));
  }
}

std::vector<Mlp::TensorInit> Mlp::InitPlan() const {
  std::vector<TensorInit> plan;
  for (int l = 0; l < num_layers(); ++l) {
    const TensorSlot& w = layout_.tensor(weight_slot_[l]);
    const double fan_in = static_cast<double>(w.rows);
    const double fan_out = static_cast<double>(w.cols);
    TensorInit init;
    init.begin = w.offset;
    init.end = w.offset + w.size();
    if (l + 1 < num_layers()) {
      init.kind = TensorInit::Kind::kNormal;
      init.scale = static_cast<float>(std::sqrt(2.0 / fan_in));
    } else {
      init.kind = TensorInit::Kind::kUniform;
      init.scale = static_cast<float>(std::sqrt(6.0 / (fan_in + fan_out)));
    }
    plan.push_back(init);
    const TensorSlot& b = layout_.tensor(bias_slot_[l]);
    plan.push_back(
        {b.offset, b.offset + b.size(), TensorInit::Kind::kZeros, 0});
  }
  return plan;
}

void Mlp::Initialize(uint64_t seed, float* params) const {
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

Mlp::Workspace Mlp::MakeWorkspace(int max_batch) const {
  Workspace ws;
  ws.max_batch_ = max_batch;
  for (int l = 0; l < num_layers(); ++l) {
    const size_t n = static_cast<size_t>(max_batch) * spec_.widths[l + 1];
    ws.activations.emplace_back(n);
    ws.deltas.emplace_back(n);
  }
  ws.ones.assign(max_batch, 1.0f);
  return ws;
}

void Mlp::Forward(const float* params, const float* x, int batch,
                  Workspace* ws) const {
  const float* input = x;
  for (int l = 0; l < num_layers(); ++l) {
    const int in = spec_.widths[l];
    const int out = spec_.widths[l + 1];
    const float* w = params + layout_.tensor(weight_slot_[l]).offset;
    const float* b = params + layout_.tensor(bias_slot_[l]).offset;
    float* a = ws->activations[l].data();
    // a = input * W + b: broadcast the bias, then accumulate the product.
    for (int r = 0; r < batch; ++r) std::copy(b, b + out, a + r * out);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, batch, out, in, 1.0f,
                input, in, w, out, 1.0f, a, out);
    if (l + 1 < num_layers()) {
      for (int i = 0; i < batch * out; ++i) a[i] = std::max(a[i], 0.0f);
    }
    input = a;
  }
}

float Mlp::TrainStep(const float* params, const float* x, const int32_t* labels,
                     int batch, float* grad, Workspace* ws) const {
  assert(batch <= ws->max_batch());
  Forward(params, x, batch, ws);
  const int last = num_layers() - 1;
  const int classes = num_classes();

  // Softmax cross-entropy; delta = (softmax - onehot) / batch.
  double loss = 0;
  const float* logits = ws->activations[last].data();
  float* delta = ws->deltas[last].data();
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

  for (int l = last; l >= 0; --l) {
    const int in = spec_.widths[l];
    const int out = spec_.widths[l + 1];
    const float* input = l == 0 ? x : ws->activations[l - 1].data();
    const float* d = ws->deltas[l].data();
    float* gw = grad + layout_.tensor(weight_slot_[l]).offset;
    float* gb = grad + layout_.tensor(bias_slot_[l]).offset;
    // dW = input^T * delta; db = column sums of delta.
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, in, out, batch, 1.0f,
                input, in, d, out, 0.0f, gw, out);
    cblas_sgemv(CblasRowMajor, CblasTrans, batch, out, 1.0f, d, out,
                ws->ones.data(), 1, 0.0f, gb, 1);
    if (l > 0) {
      // delta_prev = (delta * W^T) masked by where the ReLU was active.
      const float* w = params + layout_.tensor(weight_slot_[l]).offset;
      float* prev = ws->deltas[l - 1].data();
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, batch, in, out, 1.0f,
                  d, out, w, out, 0.0f, prev, in);
      const float* a = ws->activations[l - 1].data();
      // Branch-free so that it vectorizes.
      for (int i = 0; i < batch * in; ++i) {
        prev[i] = a[i] > 0.0f ? prev[i] : 0.0f;
      }
    }
  }
  return static_cast<float>(loss / batch);
}

int Mlp::Evaluate(const float* params, const float* x, const int32_t* labels,
                  int batch, Workspace* ws, double* loss_sum) const {
  assert(batch <= ws->max_batch());
  Forward(params, x, batch, ws);
  const int classes = num_classes();
  const float* logits = ws->activations[num_layers() - 1].data();
  int correct = 0;
  for (int r = 0; r < batch; ++r) {
    const float* z = logits + r * classes;
    const int best = static_cast<int>(std::max_element(z, z + classes) - z);
    if (best == labels[r]) ++correct;
    if (loss_sum != nullptr) {
      const float top = z[best];
      double sum = 0;
      for (int c = 0; c < classes; ++c) sum += std::exp(z[c] - top);
      *loss_sum += std::log(sum) - (z[labels[r]] - top);
    }
  }
  return correct;
}

}  // namespace model
