// ParamLayout lays a model's tensors back to back in one flat float32 key
// space [0, P): the table the parameter servers shard by key range. Each
// tensor knows its [offset, offset + size) there, so a worker can pull the
// whole model as one range and read any tensor in place.
//
// Thread-safety: immutable once built; safe to share.
#ifndef SHARDPS_MODEL_PARAM_LAYOUT_H_
#define SHARDPS_MODEL_PARAM_LAYOUT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace model {

struct TensorSlot {
  std::string name;
  uint64_t offset = 0;
  uint64_t rows = 0;
  uint64_t cols = 1;
  uint64_t size() const { return rows * cols; }
};

class ParamLayout {
 public:
  // Appends a rows x cols tensor (row-major) right after the previous one and
  // returns its index.
  size_t Add(std::string name, uint64_t rows, uint64_t cols = 1);

  const std::vector<TensorSlot>& tensors() const { return tensors_; }
  const TensorSlot& tensor(size_t i) const { return tensors_[i]; }
  // Total parameters P: the tensors cover [0, P) exactly.
  uint64_t num_params() const { return num_params_; }
  // nullptr when no tensor has that name.
  const TensorSlot* Find(absl::string_view name) const;

 private:
  std::vector<TensorSlot> tensors_;
  uint64_t num_params_ = 0;
};

}  // namespace model

#endif  // SHARDPS_MODEL_PARAM_LAYOUT_H_
