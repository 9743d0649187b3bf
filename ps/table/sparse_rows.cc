#include "ps/table/sparse_rows.h"

#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "ps/table/initializer.h"
#include "ps/wire/table_spec.h"

namespace ps {

absl::StatusOr<std::unique_ptr<SparseRows>> SparseRows::Create(
    SparseRowsOptions options) {
  if (options.dim == 0) {
    return absl::InvalidArgumentError("a sparse table needs dim >= 1");
  }
  if (options.max_rows == 0) {
    return absl::InvalidArgumentError("a sparse table needs max_rows >= 1");
  }
  if (absl::Status s = ValidateInit(options.init); !s.ok()) return s;
  if (absl::Status s = ValidateOptimizer(options.optimizer); !s.ok()) return s;
  return std::unique_ptr<SparseRows>(new SparseRows(std::move(options)));
}

uint64_t SparseRows::num_rows() const {
  absl::ReaderMutexLock lock(&mu_);
  return index_.size();
}

absl::Status SparseRows::CheckRoom(absl::Span<const uint64_t> ids) {
  fresh_.clear();
  for (uint64_t id : ids) {
    if (!index_.contains(id)) fresh_.insert(id);
  }
  const uint64_t fresh = fresh_.size();
  if (index_.size() + fresh > options_.max_rows) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the call would create ", fresh, " rows, but the table holds ",
        index_.size(), " of at most ", options_.max_rows,
        " on this server (max_rows)"));
  }
  return absl::OkStatus();
}

float* SparseRows::Values(uint64_t index) {
  return blocks_[index / kBlockRows].values.data() +
         (index % kBlockRows) * options_.dim;
}

float* SparseRows::RowOf(uint64_t id, uint64_t* index) {
  auto [it, fresh] = index_.try_emplace(id, index_.size());
  *index = it->second;
  float* row;
  if (fresh) {
    if (*index / kBlockRows == blocks_.size()) {
      const uint64_t floats = uint64_t{kBlockRows} * options_.dim;
      // Validated by Create: the optimizer builds.
      blocks_.push_back({std::vector<float>(floats),
                         *MakeUpdater(options_.optimizer, floats)});
    }
    row = Values(*index);
    FillInitialRow(options_.init, id, options_.dim, row);
  } else {
    row = Values(*index);
  }
  return row;
}

absl::Status SparseRows::Pull(absl::Span<const uint64_t> ids, bool create,
                              float* out) {
  const uint32_t dim = options_.dim;
  {
    absl::ReaderMutexLock lock(&mu_);
    bool all_held = true;
    for (uint64_t id : ids) {
      if (!index_.contains(id)) {
        all_held = false;
        if (!create) {
          return absl::NotFoundError(absl::StrCat(
              "row ", id, " does not exist (this pull does not create rows)"));
        }
        break;
      }
    }
    if (all_held) {
      for (size_t i = 0; i < ids.size(); ++i) {
        std::memcpy(out + i * dim, Values(index_.at(ids[i])),
                    dim * sizeof(float));
      }
      return absl::OkStatus();
    }
  }
  absl::MutexLock lock(&mu_);
  if (absl::Status s = CheckRoom(ids); !s.ok()) return s;
  for (size_t i = 0; i < ids.size(); ++i) {
    uint64_t index;
    std::memcpy(out + i * dim, RowOf(ids[i], &index), dim * sizeof(float));
  }
  return absl::OkStatus();
}

absl::Status SparseRows::Push(absl::Span<const uint64_t> ids,
                              UnalignedFloats grads, float lr_scale) {
  const uint32_t dim = options_.dim;
  if (grads.size() != ids.size() * dim) {
    return absl::InvalidArgumentError(
        absl::StrCat(ids.size(), " ids of dim ", dim, " need ",
                     ids.size() * dim, " gradient floats, got ", grads.size()));
  }
  if (!AllFinite(grads)) {
    return absl::InvalidArgumentError(
        "the row gradients hold a NaN or an infinity");
  }
  absl::MutexLock lock(&mu_);
  if (absl::Status s = CheckRoom(ids); !s.ok()) return s;
  // Sum the gradients of repeated ids, in first-seen order.
  distinct_.clear();
  summed_.clear();
  order_.clear();
  for (size_t i = 0; i < ids.size(); ++i) {
    auto [it, fresh] = distinct_.try_emplace(ids[i], order_.size());
    if (fresh) {
      order_.push_back(ids[i]);
      summed_.resize(summed_.size() + dim, 0.0f);
    }
    float* sum = summed_.data() + uint64_t{it->second} * dim;
    for (uint32_t j = 0; j < dim; ++j) sum[j] += grads[i * dim + j];
  }
  // Sums of finite values may still overflow to infinity.
  if (!AllFinite(UnalignedFloats(summed_.data(), summed_.size()))) {
    return absl::InvalidArgumentError(
        "the summed gradients of a repeated id overflow to infinity");
  }
  for (size_t k = 0; k < order_.size(); ++k) {
    uint64_t index;
    float* row = RowOf(order_[k], &index);
    blocks_[index / kBlockRows].updater->Apply(
        (index % kBlockRows) * dim, row,
        UnalignedFloats(summed_.data() + k * dim, dim), lr_scale);
  }
  return absl::OkStatus();
}

}  // namespace ps
