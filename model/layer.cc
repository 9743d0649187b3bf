#include "model/layer.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace model {

void Layer::AddWeightsAndBias(ParamLayout* layout, int index, uint64_t rows,
                              int units) {
  params_begin_ =
      layout->tensor(layout->Add(absl::StrCat("W", index), rows, units)).offset;
  bias_offset_ =
      layout->tensor(layout->Add(absl::StrCat("b", index), units)).offset;
  params_end_ = bias_offset_ + units;
}

void MaskByRelu(const float* out, int64_t n, float* dout) {
  for (int64_t i = 0; i < n; ++i) dout[i] = out[i] > 0.0f ? dout[i] : 0.0f;
}

void ApplyRelu(int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = std::max(out[i], 0.0f);
}

}  // namespace model
