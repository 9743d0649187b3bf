// Mlp is a multilayer perceptron over one flat parameter vector: dense
// layers (cblas_sgemm) with ReLU between them and softmax cross-entropy on
// top. Layer l has weights W_l [in x out] (row-major) and bias b_l [out],
// laid out as "W0", "b0", "W1", "b1", ... by layout().
//
// The model holds no parameters itself: every call takes the flat vector, so
// a worker can run it directly on what it pulled from the parameter servers,
// and gradients land straight in one flat buffer ready to push.
//
// Thread-safety: an Mlp is immutable and may be shared; a Workspace belongs
// to one thread at a time.
#ifndef SHARDPS_MODEL_MLP_H_
#define SHARDPS_MODEL_MLP_H_

#include <cstdint>
#include <vector>

#include "model/model_spec.h"
#include "model/param_layout.h"

namespace model {

class Mlp {
 public:
  explicit Mlp(MlpSpec spec);

  const ParamLayout& layout() const { return layout_; }
  uint64_t num_params() const { return layout_.num_params(); }
  int input_width() const { return spec_.widths.front(); }
  int num_classes() const { return spec_.widths.back(); }
  int num_layers() const { return static_cast<int>(spec_.widths.size()) - 1; }

  // How each tensor starts, for a parameter server to fill in on its own
  // (keys [begin, end) of the flat vector).
  struct TensorInit {
    enum class Kind { kZeros, kNormal, kUniform };
    uint64_t begin = 0;
    uint64_t end = 0;
    Kind kind = Kind::kZeros;
    float scale = 0;  // normal: standard deviation; uniform: half-width
  };
  // He-normal for weights followed by ReLU, Glorot-uniform for the output
  // layer's, zeros for biases.
  std::vector<TensorInit> InitPlan() const;

  // Seeded initial values following InitPlan(): He-normal weights for layers
  // followed by ReLU, Glorot-uniform for the output layer, zero biases.
  void Initialize(uint64_t seed, float* params) const;

  // Activations and deltas for batches of up to max_batch rows, allocated
  // once so that training steps allocate nothing.
  class Workspace {
   public:
    int max_batch() const { return max_batch_; }

   private:
    friend class Mlp;
    int max_batch_ = 0;
    std::vector<std::vector<float>> activations;  // per layer, batch x out
    std::vector<std::vector<float>> deltas;       // per layer, batch x out
    std::vector<float> ones;                      // max_batch ones
  };
  Workspace MakeWorkspace(int max_batch) const;

  // One forward and backward pass over `batch` rows of x (batch x
  // input_width) with labels in [0, num_classes). Writes the gradient of the
  // mean loss into grad[0, num_params()) and returns the mean loss. Requires
  // batch <= ws->max_batch().
  float TrainStep(const float* params, const float* x, const int32_t* labels,
                  int batch, float* grad, Workspace* ws) const;

  // Forward pass only: the number of rows whose arg-max matches the label;
  // adds the rows' summed loss to *loss_sum when it is not null.
  int Evaluate(const float* params, const float* x, const int32_t* labels,
               int batch, Workspace* ws, double* loss_sum) const;

 private:
  // Fills ws->activations; the last layer's holds the logits.
  void Forward(const float* params, const float* x, int batch,
               Workspace* ws) const;

  MlpSpec spec_;
  ParamLayout layout_;
  std::vector<size_t> weight_slot_;  // layer -> index in layout_
  std::vector<size_t> bias_slot_;
};

}  // namespace model

#endif  // SHARDPS_MODEL_MLP_H_
