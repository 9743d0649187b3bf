// Model spec strings name a network on the command line:
//   mlp:784-256-256-10                   input width, hidden widths..., classes
//   cnn:c32k5-p2-c64k5-p2-f1024-10       layers..., classes
//   cnn:28x28x1-c32k5-p2-f1024-10        the same with its input shape named
// In a cnn spec, cFkK is a K x K convolution with F filters (stride 1, no
// padding) followed by ReLU, pP a P x P max pooling of stride P, fN a dense
// layer of N units followed by ReLU (it flattens what comes before), and the
// last number the classes (a dense layer into softmax). Without an input
// shape a cnn takes the data set's.
//
// Thread-safety: pure functions and plain values.
#ifndef SHARDPS_MODEL_MODEL_SPEC_H_
#define SHARDPS_MODEL_MODEL_SPEC_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace model {

// One sample's features, channels last (height x width x channels,
// row-major); a flat vector of n features is 1 x 1 x n.
struct Shape {
  int height = 1;
  int width = 1;
  int channels = 1;
  int64_t size() const {
    return static_cast<int64_t>(height) * width * channels;
  }
  bool operator==(const Shape& o) const {
    return height == o.height && width == o.width && channels == o.channels;
  }
};

// "28x28x1"; a flat shape is its size alone.
std::string ShapeString(const Shape& shape);

struct LayerSpec {
  enum class Kind { kDense, kConv, kMaxPool };
  Kind kind = Kind::kDense;
  int units = 0;   // dense: outputs; conv: filters
  int kernel = 0;  // conv: kernel side; pool: window side (and stride)
  bool relu = true;
};

struct ModelSpec {
  std::string text;               // as given
  std::optional<Shape> input;     // absent: the data set's
  std::vector<LayerSpec> layers;  // the last is the dense layer into softmax
  int classes() const { return layers.back().units; }
};

// INVALID_ARGUMENT naming the spec and what is wrong with it.
absl::StatusOr<ModelSpec> ParseModelSpec(absl::string_view spec);

}  // namespace model

#endif  // SHARDPS_MODEL_MODEL_SPEC_H_
