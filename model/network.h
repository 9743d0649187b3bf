// Network is a model made of Layers (dense, convolution, max pooling) run
// one after another on one flat parameter vector, with softmax
// cross-entropy on top. The network holds no parameters itself: every call
// takes the flat vector, so a worker runs it directly on what it pulled
// from the parameter servers, and gradients land straight in one flat
// buffer ready to push. Tensors are laid out layer after layer ("W0", "b0",
// "W1", ...; model/param_layout.h), so layer l's keys are one contiguous
// range, the unit a worker can pull and push on its own.
//
// Thread-safety: a Network is immutable and may be shared (it moves but
// does not copy); a Workspace belongs to one thread at a time.
#ifndef SHARDPS_MODEL_NETWORK_H_
#define SHARDPS_MODEL_NETWORK_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/statusor.h"
#include "model/layer.h"
#include "model/model_spec.h"
#include "model/param_layout.h"

namespace model {

// Told, during a training step, when each layer with parameters is about
// to read them and when it has written its gradient: what a worker needs to
// fetch a layer's parameters just before forward uses them and to send its
// gradient as soon as backward has it (wait-free backpropagation).
class LayerObserver {
 public:
  virtual ~LayerObserver() = default;
  // Before layer l's forward reads params[l's range).
  virtual void BeforeForward(int layer) = 0;
  // After layer l's backward wrote grad[l's range) and read params[l's
  // range) for the last time in this step.
  virtual void AfterBackward(int layer) = 0;
};

class Network {
 public:
  // Builds `spec` for samples of the spec's own input shape or, when it
  // names none, of `data_input` (the data set's). INVALID_ARGUMENT naming
  // the spec when neither gives a shape, a kernel or window does not fit
  // what reaches it, or it needs 2^32 parameters or more or more than 2^28
  // outputs of one layer per sample.
  static absl::StatusOr<Network> Create(const ModelSpec& spec,
                                        std::optional<Shape> data_input);
  // Parses `spec` and builds it on the input it names (every mlp does).
  static absl::StatusOr<Network> FromSpec(absl::string_view spec);

  Network(Network&&) = default;
  Network& operator=(Network&&) = default;

  const ParamLayout& layout() const { return layout_; }
  uint64_t num_params() const { return layout_.num_params(); }
  Shape input_shape() const { return input_; }
  int64_t input_width() const { return input_.size(); }
  int num_classes() const { return classes_; }
  int num_layers() const { return static_cast<int>(layers_.size()); }
  const Layer& layer(int l) const { return *layers_[l]; }

  // How each tensor starts, for the parameter servers to fill in: He-normal
  // weights for layers followed by ReLU, Glorot-uniform for the one into
  // the softmax, zero biases.
  std::vector<TensorInit> InitPlan() const;
  // Seeded initial values following InitPlan().
  void Initialize(uint64_t seed, float* params) const;

  // Activations, gradients and scratch for batches of up to max_batch
  // samples, allocated once so that training steps allocate nothing.
  class Workspace {
   public:
    int max_batch() const { return max_batch_; }

   private:
    friend class Network;
    int max_batch_ = 0;
    std::vector<std::vector<float>> activations;  // per layer, batch x out
    std::vector<std::vector<float>> deltas;       // per layer, batch x out
    std::vector<std::vector<float>> scratch;      // per layer
    std::vector<float> ones;
  };
  Workspace MakeWorkspace(int max_batch) const;
  // Floats a workspace of max_batch samples holds.
  int64_t WorkspaceFloats(int max_batch) const;
  // The largest batch <= 1000 whose workspace stays within 64 MiB (at least
  // 1): what to evaluate a test set with.
  int EvaluationBatch() const;

  // One forward and backward pass over `batch` samples of x (batch x
  // input_width()) with labels in [0, num_classes()). Writes the gradient of
  // the mean loss into grad[0, num_params()) and returns the mean loss.
  // Requires batch <= ws->max_batch(). `observer`, when given, is told of
  // each layer with parameters (LayerObserver). `dx`, when given, gets the
  // gradient of the mean loss with respect to x (batch x input_width()):
  // what a layer in front of the network, an embedding, learns from.
  float TrainStep(const float* params, const float* x, const int32_t* labels,
                  int batch, float* grad, Workspace* ws,
                  LayerObserver* observer = nullptr, float* dx = nullptr) const;

  // Forward passes only, ws->max_batch() samples at a time: the number of
  // samples whose arg-max matches the label; adds their summed loss to
  // *loss_sum when it is not null.
  int Evaluate(const float* params, const float* x, const int32_t* labels,
               int batch, Workspace* ws, double* loss_sum) const;
  // Forward passes only, ws->max_batch() samples at a time: each sample's
  // softmax probabilities into probs[batch x num_classes()].
  void Probabilities(const float* params, const float* x, int batch,
                     Workspace* ws, float* probs) const;

 private:
  Network() = default;
  // Fills ws->activations; the last layer's holds the logits.
  void Forward(const float* params, const float* x, int batch, Workspace* ws,
               LayerObserver* observer = nullptr) const;
  LayerScratch ScratchOf(int l, Workspace* ws) const;

  Shape input_;
  int classes_ = 0;
  ParamLayout layout_;
  std::vector<std::unique_ptr<Layer>> layers_;
};

}  // namespace model

#endif  // SHARDPS_MODEL_NETWORK_H_
