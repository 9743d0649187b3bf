// ConvLayer: a K x K convolution with F filters, stride 1, no padding,
// followed by ReLU, done as one matrix product per batch: the input's K x K
// patches are copied into the rows of a matrix (im2col, channels last, so a
// patch row is K runs of K x C contiguous floats) and multiplied by W,
// [K*K*C x F] row-major ("W<index>"), giving the output channels last with no
// transpose; b is [F] ("b<index>"). Backward reuses the patch matrix for the
// weights' gradient and then for the input's, scattered back (col2im).
//
// Thread-safety: see model/layer.h.
#ifndef SHARDPS_MODEL_CONV_LAYER_H_
#define SHARDPS_MODEL_CONV_LAYER_H_

#include <vector>

#include "model/layer.h"
#include "model/param_layout.h"

namespace model {

class ConvLayer : public Layer {
 public:
  // Requires kernel <= input height and width. Adds W and b to `layout`.
  ConvLayer(Shape input, int filters, int kernel, int index,
            ParamLayout* layout);

  Shape output_shape() const override { return out_; }
  // He-normal W (fan-in K*K*C), zero b.
  void AppendInitPlan(std::vector<TensorInit>* plan) const override;
  int64_t ScratchFloats(int batch) const override {
    return Rows(batch) * patch_;
  }
  int64_t OnesNeeded(int batch) const override { return Rows(batch); }
  void Forward(const float* params, const float* in, int batch, float* out,
               LayerScratch scratch) const override;
  void Backward(const float* params, const float* in, const float* out,
                float* dout, int batch, float* din, float* grad,
                LayerScratch scratch) const override;

 private:
  // Output positions of a batch: the patch matrix's rows.
  int64_t Rows(int batch) const {
    return static_cast<int64_t>(batch) * out_.height * out_.width;
  }
  void Im2Col(const float* in, int batch, float* cols) const;
  void Col2Im(const float* cols, int batch, float* din) const;

  const Shape in_;
  const int kernel_;
  const Shape out_;
  const int64_t patch_;  // K * K * C
};

}  // namespace model

#endif  // SHARDPS_MODEL_CONV_LAYER_H_
