#include "model/dense_layer.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>

namespace model {

DenseLayer::DenseLayer(int64_t in, int units, bool relu, int index,
                       ParamLayout* layout)
    : in_(in), units_(units), relu_(relu) {
  AddWeightsAndBias(layout, index, in, units);
}

void DenseLayer::AppendInitPlan(std::vector<TensorInit>* plan) const {
  TensorInit w{params_begin(), bias_offset(), TensorInit::Kind::kNormal, 0};
  const double fan_in = static_cast<double>(in_);
  if (relu_) {
    w.scale = static_cast<float>(std::sqrt(2.0 / fan_in));
  } else {
    w.kind = TensorInit::Kind::kUniform;
    w.scale = static_cast<float>(std::sqrt(6.0 / (fan_in + units_)));
  }
  plan->push_back(w);
  plan->push_back(
      {bias_offset(), bias_offset() + units_, TensorInit::Kind::kZeros, 0});
}

void DenseLayer::Forward(const float* params, const float* in, int batch,
                         float* out, LayerScratch) const {
  const float* w = params + params_begin();
  const float* b = params + bias_offset();
  // out = in * W + b: broadcast the bias, then accumulate the product.
  for (int r = 0; r < batch; ++r) std::copy(b, b + units_, out + r * units_);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, batch, units_, in_,
              1.0f, in, in_, w, units_, 1.0f, out, units_);
  if (relu_) ApplyRelu(static_cast<int64_t>(batch) * units_, out);
}

void DenseLayer::Backward(const float* params, const float* in,
                          const float* out, float* dout, int batch, float* din,
                          float* grad, LayerScratch scratch) const {
  if (relu_) MaskByRelu(out, static_cast<int64_t>(batch) * units_, dout);
  // dW = in^T * dout; db = column sums of dout.
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, in_, units_, batch, 1.0f,
              in, in_, dout, units_, 0.0f, grad + params_begin(), units_);
  cblas_sgemv(CblasRowMajor, CblasTrans, batch, units_, 1.0f, dout, units_,
              scratch.ones, 1, 0.0f, grad + bias_offset(), 1);
  if (din != nullptr) {
    // din = dout * W^T.
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, batch, in_, units_,
                1.0f, dout, units_, params + params_begin(), units_, 0.0f, din,
                in_);
  }
}

}  // namespace model
