#include "ps/table/sparse_rows.h"

#include <algorithm>
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

namespace {

// Rows and index entries of a call are scattered over the table, so each
// is a cache miss: asking for the ones kAhead places on hides that wait.
constexpr size_t kAhead = 24;

}  // namespace

void SparseRows::PrefetchRow(uint64_t index) {
  // Every line the row touches: a row whose size is no multiple of a line
  // starts inside one.
  const uintptr_t row = reinterpret_cast<uintptr_t>(Values(index));
  const uintptr_t end = row + options_.dim * sizeof(float);
  for (uintptr_t line = row & ~uintptr_t{kCacheLineBytes - 1}; line < end;
       line += kCacheLineBytes) {
    __builtin_prefetch(reinterpret_cast<const void*>(line));
  }
}

size_t SparseRows::FindRows(absl::Span<const uint64_t> ids, bool* repeated) {
  slots_.resize(ids.size());
  if (repeated != nullptr) NextEpoch();
  const uint64_t stamp = uint64_t{epoch_} << kRowBits;
  size_t not_held = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i + kAhead < ids.size()) index_.prefetch(ids[i + kAhead]);
    auto it = index_.find(ids[i]);
    if (it == index_.end()) {
      slots_[i] = kNotHeld;
      ++not_held;
      continue;
    }
    uint64_t& entry = it->second;
    slots_[i] = RowIndex(entry);
    if (repeated != nullptr) {
      if ((entry & ~kRowMask) == stamp) *repeated = true;
      entry = RowIndex(entry) | stamp;
    }
  }
  return not_held;
}

void SparseRows::NextEpoch() {
  if (epoch_ < kLastEpoch) {
    ++epoch_;
    return;
  }
  for (auto& [id, entry] : index_) entry = RowIndex(entry);
  epoch_ = 1;
}

absl::Status SparseRows::CheckRoom(absl::Span<const uint64_t> ids) {
  fresh_.clear();
  for (size_t i = 0; i < ids.size(); ++i) {
    if (slots_[i] == kNotHeld) fresh_.insert(ids[i]);
  }
  const uint64_t fresh = fresh_.size();
  // Row indexes have kRowBits bits (a trillion rows, more than memory
  // holds).
  const uint64_t most = std::min(options_.max_rows, kRowMask + 1);
  if (index_.size() + fresh > most) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "the call would create ", fresh, " rows, but the table holds ",
        index_.size(), " of at most ", most, " on this server (max_rows)"));
  }
  return absl::OkStatus();
}

float* SparseRows::Values(uint64_t index) {
  return blocks_[index / kBlockRows].values.data() +
         (index % kBlockRows) * options_.dim;
}

void SparseRows::Apply(uint64_t index, float* row, UnalignedFloats grad,
                       float lr_scale) {
  blocks_[index / kBlockRows].updater->Apply(
      (index % kBlockRows) * options_.dim, row, grad, lr_scale);
}

void SparseRows::AddBlock() {
  const uint64_t floats = uint64_t{kBlockRows} * options_.dim;
  // Validated by Create: the optimizer builds.
  blocks_.push_back({std::vector<float, HugePageAllocator<float>>(floats),
                     *MakeUpdater(options_.optimizer, floats)});
}

float* SparseRows::RowOf(uint64_t id, uint64_t* index) {
  auto [it, fresh] = index_.try_emplace(id, index_.size());
  *index = RowIndex(it->second);
  float* row;
  if (fresh) {
    if (*index / kBlockRows == blocks_.size()) AddBlock();
    ids_.push_back(id);
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
    for (size_t i = 0; i < ids.size() && all_held; ++i) {
      if (i + kAhead < ids.size()) index_.prefetch(ids[i + kAhead]);
      auto it = index_.find(ids[i]);
      if (it != index_.end()) {
        std::memcpy(out + i * dim, Values(RowIndex(it->second)),
                    dim * sizeof(float));
        continue;
      }
      if (!create) {
        return absl::NotFoundError(
            absl::StrCat("row ", ids[i],
                         " does not exist (this pull does not create rows)"));
      }
      all_held = false;
    }
    if (all_held) return absl::OkStatus();
  }
  absl::MutexLock lock(&mu_);
  FindRows(ids);
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
  bool repeated = false;
  const size_t not_held = FindRows(ids, &repeated);
  if (absl::Status s = CheckRoom(ids); !s.ok()) return s;
  if (repeated || fresh_.size() != not_held) {
    return PushSummed(ids, grads, lr_scale);
  }
  // Every id once (clients de-duplicate): each gradient applies as it is.
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i + kAhead < ids.size() && slots_[i + kAhead] != kNotHeld) {
      PrefetchRow(slots_[i + kAhead]);
    }
    uint64_t index = slots_[i];
    float* row = index == kNotHeld ? RowOf(ids[i], &index) : Values(index);
    Apply(index, row, grads.Sub(i * dim, dim), lr_scale);
  }
  return absl::OkStatus();
}

absl::Status SparseRows::PushSummed(absl::Span<const uint64_t> ids,
                                    UnalignedFloats grads, float lr_scale) {
  const uint32_t dim = options_.dim;
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
    Apply(index, row, UnalignedFloats(summed_.data() + k * dim, dim), lr_scale);
  }
  return absl::OkStatus();
}

void SparseRows::Save(std::vector<std::vector<float>>* arrays) const {
  absl::ReaderMutexLock lock(&mu_);
  const uint64_t rows = ids_.size(), dim = options_.dim;
  const int states = OptimizerStateArrays(options_.optimizer);
  arrays->assign(2 + states, {});
  (*arrays)[0].resize(2 * rows);
  std::memcpy((*arrays)[0].data(), ids_.data(), rows * sizeof(uint64_t));
  for (int a = 1; a < 2 + states; ++a) (*arrays)[a].reserve(rows * dim);
  for (uint64_t b = 0; b < blocks_.size(); ++b) {
    const uint64_t n =
        std::min<uint64_t>(kBlockRows, rows - b * kBlockRows) * dim;
    const Block& block = blocks_[b];
    (*arrays)[1].insert((*arrays)[1].end(), block.values.begin(),
                        block.values.begin() + n);
    const std::vector<absl::Span<float>> state = block.updater->state();
    for (int k = 0; k < states; ++k) {
      (*arrays)[2 + k].insert((*arrays)[2 + k].end(), state[k].begin(),
                              state[k].begin() + n);
    }
  }
}

absl::Status SparseRows::Load(const std::vector<std::vector<float>>& arrays) {
  const uint64_t dim = options_.dim;
  const size_t states = OptimizerStateArrays(options_.optimizer);
  if (arrays.size() != 2 + states || arrays[0].size() % 2 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        arrays.size(), " saved arrays; ids, values and this optimizer's ",
        states, " state arrays are ", 2 + states));
  }
  const uint64_t rows = arrays[0].size() / 2;
  for (size_t a = 1; a < arrays.size(); ++a) {
    if (arrays[a].size() != rows * dim) {
      return absl::InvalidArgumentError(
          absl::StrCat("a saved array of ", arrays[a].size(), " values for ",
                       rows, " rows of dim ", dim));
    }
  }
  if (rows > options_.max_rows) {
    return absl::InvalidArgumentError(absl::StrCat(
        rows, " saved rows, more than max_rows ", options_.max_rows));
  }
  absl::MutexLock lock(&mu_);
  if (!index_.empty()) {
    return absl::FailedPreconditionError("rows load into an empty table only");
  }
  ids_.resize(rows);
  std::memcpy(ids_.data(), arrays[0].data(), rows * sizeof(uint64_t));
  index_.reserve(rows);
  for (uint64_t i = 0; i < rows; ++i) {
    if (!index_.try_emplace(ids_[i], i).second) {
      const uint64_t id = ids_[i];
      index_.clear();
      ids_.clear();
      return absl::InvalidArgumentError(
          absl::StrCat("row ", id, " is saved twice"));
    }
  }
  for (uint64_t b = 0; b * kBlockRows < rows; ++b) {
    AddBlock();
    const uint64_t first = b * kBlockRows * dim;
    const uint64_t n =
        std::min<uint64_t>(kBlockRows, rows - b * kBlockRows) * dim;
    Block& block = blocks_.back();
    std::copy_n(arrays[1].begin() + first, n, block.values.begin());
    const std::vector<absl::Span<float>> state = block.updater->state();
    for (size_t k = 0; k < states; ++k) {
      std::copy_n(arrays[2 + k].begin() + first, n, state[k].begin());
    }
  }
  return absl::OkStatus();
}

absl::Status SparseRows::Replace(
    const std::vector<std::vector<float>>& arrays) {
  absl::StatusOr<std::unique_ptr<SparseRows>> saved = Create(options_);
  if (!saved.ok()) return saved.status();
  if (absl::Status s = (*saved)->Load(arrays); !s.ok()) return s;
  SparseRows& from = **saved;
  absl::MutexLock lock(&mu_);
  absl::MutexLock unshared(&from.mu_);  // never contended: it is local
  index_.swap(from.index_);
  ids_.swap(from.ids_);
  blocks_.swap(from.blocks_);
  std::swap(epoch_, from.epoch_);
  return absl::OkStatus();
}

}  // namespace ps
