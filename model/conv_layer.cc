#include "model/conv_layer.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>

namespace model {

ConvLayer::ConvLayer(Shape input, int filters, int kernel, int index,
                     ParamLayout* layout)
    : in_(input),
      kernel_(kernel),
      out_{input.height - kernel + 1, input.width - kernel + 1, filters},
      patch_(static_cast<int64_t>(kernel) * kernel * input.channels) {
  AddWeightsAndBias(layout, index, patch_, filters);
}

void ConvLayer::AppendInitPlan(std::vector<TensorInit>* plan) const {
  plan->push_back({params_begin(), bias_offset(), TensorInit::Kind::kNormal,
                   static_cast<float>(std::sqrt(2.0 / patch_))});
  plan->push_back({bias_offset(), bias_offset() + out_.channels,
                   TensorInit::Kind::kZeros, 0});
}

void ConvLayer::Im2Col(const float* in, int batch, float* cols) const {
  const int64_t run = static_cast<int64_t>(kernel_) * in_.channels;
  for (int n = 0; n < batch; ++n) {
    const float* image = in + n * in_.size();
    for (int oh = 0; oh < out_.height; ++oh) {
      for (int ow = 0; ow < out_.width; ++ow) {
        for (int kh = 0; kh < kernel_; ++kh) {
          const float* src =
              image +
              (static_cast<int64_t>(oh + kh) * in_.width + ow) * in_.channels;
          cols = std::copy(src, src + run, cols);
        }
      }
    }
  }
}

void ConvLayer::Col2Im(const float* cols, int batch, float* din) const {
  const int64_t run = static_cast<int64_t>(kernel_) * in_.channels;
  std::fill(din, din + batch * in_.size(), 0.0f);
  for (int n = 0; n < batch; ++n) {
    float* image = din + n * in_.size();
    for (int oh = 0; oh < out_.height; ++oh) {
      for (int ow = 0; ow < out_.width; ++ow) {
        for (int kh = 0; kh < kernel_; ++kh) {
          float* dst =
              image +
              (static_cast<int64_t>(oh + kh) * in_.width + ow) * in_.channels;
          for (int64_t i = 0; i < run; ++i) dst[i] += cols[i];
          cols += run;
        }
      }
    }
  }
}

void ConvLayer::Forward(const float* params, const float* in, int batch,
                        float* out, LayerScratch scratch) const {
  const int64_t rows = Rows(batch);
  const int filters = out_.channels;
  Im2Col(in, batch, scratch.own);
  const float* b = params + bias_offset();
  for (int64_t r = 0; r < rows; ++r)
    std::copy(b, b + filters, out + r * filters);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, filters, patch_,
              1.0f, scratch.own, patch_, params + params_begin(), filters, 1.0f,
              out, filters);
  ApplyRelu(rows * filters, out);
}

void ConvLayer::Backward(const float* params, const float* in, const float* out,
                         float* dout, int batch, float* din, float* grad,
                         LayerScratch scratch) const {
  const int64_t rows = Rows(batch);
  const int filters = out_.channels;
  MaskByRelu(out, rows * filters, dout);
  // dW = cols^T * dout over every output position; db = column sums.
  cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, patch_, filters, rows,
              1.0f, scratch.own, patch_, dout, filters, 0.0f,
              grad + params_begin(), filters);
  cblas_sgemv(CblasRowMajor, CblasTrans, rows, filters, 1.0f, dout, filters,
              scratch.ones, 1, 0.0f, grad + bias_offset(), 1);
  if (din == nullptr) return;
  // The patches' gradient, dout * W^T, replaces the patches, then each is
  // added back where it came from.
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, patch_, filters,
              1.0f, dout, filters, params + params_begin(), filters, 0.0f,
              scratch.own, patch_);
  Col2Im(scratch.own, batch, din);
}

}  // namespace model
