#include "model/param_layout.h"

namespace model {

size_t ParamLayout::Add(std::string name, uint64_t rows, uint64_t cols) {
  TensorSlot slot;
  slot.name = std::move(name);
  slot.offset = num_params_;
  slot.rows = rows;
  slot.cols = cols;
  num_params_ += slot.size();
  tensors_.push_back(std::move(slot));
  return tensors_.size() - 1;
}

const TensorSlot* ParamLayout::Find(absl::string_view name) const {
  for (const TensorSlot& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

}  // namespace model
