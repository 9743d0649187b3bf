// Layer is one stage of a Network: it reads a batch of input samples and
// writes a batch of outputs, both row-major (sample after sample, each
// channels last), and owns a contiguous range of the network's flat
// parameter vector (ParamLayout), which it takes on every call rather than
// holding: a worker runs it on what it pulled and writes gradients straight
// into the buffer it pushes.
//
// Thread-safety: a Layer is immutable; the buffers passed in belong to the
// caller's thread.
#ifndef SHARDPS_MODEL_LAYER_H_
#define SHARDPS_MODEL_LAYER_H_

#include <cstdint>
#include <vector>

#include "model/model_spec.h"
#include "model/param_layout.h"

namespace model {

// How a tensor starts, for a parameter server to fill in on its own (keys
// [begin, end) of the flat vector).
struct TensorInit {
  enum class Kind { kZeros, kNormal, kUniform };
  uint64_t begin = 0;
  uint64_t end = 0;
  Kind kind = Kind::kZeros;
  float scale = 0;  // normal: standard deviation; uniform: half-width
};

// Buffers a layer may use during one step, sized by the Network from
// ScratchFloats() and OnesNeeded().
struct LayerScratch {
  float* own = nullptr;         // ScratchFloats(batch) floats, this layer's
  const float* ones = nullptr;  // OnesNeeded(batch) ones, shared
};

class Layer {
 public:
  virtual ~Layer() = default;

  virtual Shape output_shape() const = 0;
  // Keys [begin, end) of the flat vector this layer reads; empty for a
  // layer without parameters.
  uint64_t params_begin() const { return params_begin_; }
  uint64_t params_end() const { return params_end_; }
  bool has_params() const { return params_end_ > params_begin_; }

  // Appends how this layer's tensors start.
  virtual void AppendInitPlan(std::vector<TensorInit>* plan) const {}
  // Floats of scratch kept from Forward to Backward for `batch` samples.
  virtual int64_t ScratchFloats(int batch) const { return 0; }
  virtual int64_t OnesNeeded(int batch) const { return 0; }

  // out[batch x output_shape().size()] from in[batch x input size].
  virtual void Forward(const float* params, const float* in, int batch,
                       float* out, LayerScratch scratch) const = 0;
  // Given Forward's in and out and the loss's gradient with respect to out
  // (dout, which it may overwrite), writes this layer's parameter gradient
  // into grad (the whole flat vector: its own keys only) and, when din is
  // not null, the gradient with respect to in.
  virtual void Backward(const float* params, const float* in, const float* out,
                        float* dout, int batch, float* din, float* grad,
                        LayerScratch scratch) const = 0;

 protected:
  // Adds "W<index>", [rows x units] row-major, and "b<index>", [units], to
  // `layout`: this layer's keys.
  void AddWeightsAndBias(ParamLayout* layout, int index, uint64_t rows,
                         int units);
  uint64_t bias_offset() const { return bias_offset_; }

 private:
  uint64_t params_begin_ = 0, params_end_ = 0, bias_offset_ = 0;
};

// Zeroes dout where the ReLU that produced out was inactive; branch-free so
// that it vectorizes.
void MaskByRelu(const float* out, int64_t n, float* dout);
// out = max(out, 0).
void ApplyRelu(int64_t n, float* out);

}  // namespace model

#endif  // SHARDPS_MODEL_LAYER_H_
