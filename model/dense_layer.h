// DenseLayer: out = in * W + b (cblas_sgemm), then ReLU unless it feeds the
// softmax. W is [in x out] row-major ("W<index>"), b is [out]
// ("b<index>"); whatever shape comes in is read flat, which is the flatten
// between a convolutional stack and its classifier.
//
// Thread-safety: see model/layer.h.
#ifndef SHARDPS_MODEL_DENSE_LAYER_H_
#define SHARDPS_MODEL_DENSE_LAYER_H_

#include <vector>

#include "model/layer.h"
#include "model/param_layout.h"

namespace model {

class DenseLayer : public Layer {
 public:
  // Adds W and b to `layout`.
  DenseLayer(int64_t in, int units, bool relu, int index, ParamLayout* layout);

  Shape output_shape() const override { return Shape{1, 1, units_}; }
  // He-normal W before a ReLU, Glorot-uniform W before the softmax; zero b.
  void AppendInitPlan(std::vector<TensorInit>* plan) const override;
  int64_t OnesNeeded(int batch) const override { return batch; }
  void Forward(const float* params, const float* in, int batch, float* out,
               LayerScratch scratch) const override;
  void Backward(const float* params, const float* in, const float* out,
                float* dout, int batch, float* din, float* grad,
                LayerScratch scratch) const override;

 private:
  const int64_t in_;
  const int units_;
  const bool relu_;
};

}  // namespace model

#endif  // SHARDPS_MODEL_DENSE_LAYER_H_
