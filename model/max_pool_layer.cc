#include "model/max_pool_layer.h"

#include <algorithm>

namespace model {

MaxPoolLayer::MaxPoolLayer(Shape input, int window)
    : in_(input),
      window_(window),
      out_{input.height / window, input.width / window, input.channels} {}

int64_t MaxPoolLayer::WindowStart(int oh, int ow) const {
  return (static_cast<int64_t>(oh) * window_ * in_.width + ow * window_) *
         in_.channels;
}

void MaxPoolLayer::Forward(const float*, const float* in, int batch, float* out,
                           LayerScratch) const {
  const int c = in_.channels;
  const int64_t row = static_cast<int64_t>(in_.width) * c;
  for (int n = 0; n < batch; ++n) {
    const float* image = in + n * in_.size();
    for (int oh = 0; oh < out_.height; ++oh) {
      for (int ow = 0; ow < out_.width; ++ow, out += c) {
        const float* window = image + WindowStart(oh, ow);
        std::copy(window, window + c, out);
        for (int i = 0; i < window_; ++i) {
          for (int j = 0; j < window_; ++j) {
            const float* at = window + i * row + j * c;
            for (int k = 0; k < c; ++k) out[k] = std::max(out[k], at[k]);
          }
        }
      }
    }
  }
}

void MaxPoolLayer::Backward(const float*, const float* in, const float* out,
                            float* dout, int batch, float* din, float*,
                            LayerScratch) const {
  if (din == nullptr) return;
  const int c = in_.channels;
  const int64_t row = static_cast<int64_t>(in_.width) * c;
  std::fill(din, din + batch * in_.size(), 0.0f);
  for (int n = 0; n < batch; ++n) {
    const float* image = in + n * in_.size();
    float* dimage = din + n * in_.size();
    for (int oh = 0; oh < out_.height; ++oh) {
      for (int ow = 0; ow < out_.width; ++ow, out += c, dout += c) {
        const int64_t start = WindowStart(oh, ow);
        for (int k = 0; k < c; ++k) {
          // The first position in Forward's order holding the maximum.
          int64_t best = start + k;
          for (int i = 0; i < window_ && image[best] != out[k]; ++i) {
            for (int j = 0; j < window_; ++j) {
              best = start + i * row + j * c + k;
              if (image[best] == out[k]) break;
            }
          }
          dimage[best] += dout[k];
        }
      }
    }
  }
}

}  // namespace model
