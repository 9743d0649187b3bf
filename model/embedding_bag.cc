#include "model/embedding_bag.h"

#include <algorithm>

namespace model {

void EmbeddingBag::Forward(const float* rows, int batch, float* out) const {
  const int64_t bags = int64_t{batch} * fields_;
  for (int64_t f = 0; f < bags; ++f) {
    const float* row = rows + f * bag_ * dim_;
    float* sum = out + f * dim_;
    std::copy(row, row + dim_, sum);
    for (int k = 1; k < bag_; ++k) {
      row += dim_;
      for (int j = 0; j < dim_; ++j) sum[j] += row[j];
    }
  }
}

void EmbeddingBag::Backward(const float* dout, int batch, float* drows) const {
  const int64_t bags = int64_t{batch} * fields_;
  for (int64_t f = 0; f < bags; ++f) {
    const float* g = dout + f * dim_;
    for (int k = 0; k < bag_; ++k) {
      std::copy(g, g + dim_, drows + (f * bag_ + k) * dim_);
    }
  }
}

}  // namespace model
