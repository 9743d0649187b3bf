// MaxPoolLayer: the maximum of each P x P window, stride P, per channel;
// rows and columns left over at the bottom and right edge are dropped (as
// PyTorch's MaxPool2d does). Backward routes each output's gradient to the
// first input of its window that equals the maximum, the one Forward chose.
//
// Thread-safety: see model/layer.h.
#ifndef SHARDPS_MODEL_MAX_POOL_LAYER_H_
#define SHARDPS_MODEL_MAX_POOL_LAYER_H_

#include "model/layer.h"

namespace model {

class MaxPoolLayer : public Layer {
 public:
  // Requires window <= input height and width.
  MaxPoolLayer(Shape input, int window);

  Shape output_shape() const override { return out_; }
  void Forward(const float* params, const float* in, int batch, float* out,
               LayerScratch scratch) const override;
  void Backward(const float* params, const float* in, const float* out,
                float* dout, int batch, float* din, float* grad,
                LayerScratch scratch) const override;

 private:
  // Offset in one input image of the window's top-left float for output
  // (oh, ow), channel 0.
  int64_t WindowStart(int oh, int ow) const;

  const Shape in_;
  const int window_;
  const Shape out_;
};

}  // namespace model

#endif  // SHARDPS_MODEL_MAX_POOL_LAYER_H_
