#include "ps/table/shard_store.h"

#include <algorithm>
#include <cassert>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ps {

ShardStore::ShardStore(KeyRange range, std::unique_ptr<Updater> updater,
                       std::vector<float> initial, uint64_t version)
    : range_(range),
      updater_(std::move(updater)),
      values_(std::move(initial)),
      stripes_((range.size() + kStripeFloats - 1) / kStripeFloats),
      version_(version) {
  assert(values_.size() == range_.size());
}

absl::Status ShardStore::CheckKeys(KeyRange keys) const {
  if (keys.begin >= keys.end) {
    return absl::InvalidArgumentError(absl::StrCat(
        "empty or inverted key range [", keys.begin, ", ", keys.end, ")"));
  }
  if (!range_.Contains(keys)) {
    return absl::InvalidArgumentError(
        absl::StrCat("key range [", keys.begin, ", ", keys.end,
                     ") is outside this shard's range [", range_.begin, ", ",
                     range_.end, ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> ShardStore::Pull(KeyRange keys, float* out) const {
  if (absl::Status s = CheckKeys(keys); !s.ok()) return s;
  const uint64_t version = this->version();
  ForEachStripe(keys, [&](uint64_t stripe, uint64_t begin, uint64_t end) {
    absl::ReaderMutexLock lock(&stripes_[stripe]);
    std::memcpy(out, &values_[begin], (end - begin) * sizeof(float));
    out += end - begin;
  });
  return version;
}

absl::StatusOr<uint64_t> ShardStore::Push(KeyRange keys,
                                          FloatPieces& gradient) {
  if (absl::Status s = CheckPush(keys, gradient); !s.ok()) return s;
  return ApplyChecked(keys, gradient);
}

absl::Status ShardStore::CheckPush(KeyRange keys, FloatPieces& gradient,
                                   absl::string_view what) const {
  if (absl::Status s = CheckKeys(keys); !s.ok()) return s;
  if (gradient.byte_size() != keys.size() * sizeof(float)) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " has ", gradient.byte_size(), " bytes but key range [",
        keys.begin, ", ", keys.end, ") needs ", keys.size() * sizeof(float)));
  }
  // Validate everything before touching anything: a rejected push must leave
  // the table as it was.
  gradient.Reset();
  if (!gradient.RestAllFinite()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " for key range [",
                                                   keys.begin, ", ", keys.end,
                                                   ") contains NaN or Inf"));
  }
  return absl::OkStatus();
}

uint64_t ShardStore::ApplyChecked(KeyRange keys, FloatPieces& gradient,
                                  float lr_scale) {
  gradient.Reset();
  ForEachStripe(keys, [&](uint64_t stripe, uint64_t begin, uint64_t end) {
    absl::MutexLock lock(&stripes_[stripe]);
    gradient.ForEachRun(end - begin, [&](UnalignedFloats run) {
      updater_->Apply(begin, &values_[begin], run, lr_scale);
      begin += run.size();
    });
  });
  return version_.fetch_add(1, std::memory_order_acq_rel) + 1;
}

uint64_t ShardStore::AssignChecked(KeyRange keys, FloatPieces& values) {
  values.Reset();
  ForEachStripe(keys, [&](uint64_t stripe, uint64_t begin, uint64_t end) {
    absl::MutexLock lock(&stripes_[stripe]);
    values.Read(&values_[begin], end - begin);
  });
  return version_.fetch_add(1, std::memory_order_acq_rel) + 1;
}

void ShardStore::SaveArrays(std::vector<std::vector<float>>* arrays) const {
  const std::vector<absl::Span<float>> state = updater_->state();
  arrays->resize(1 + state.size());
  (*arrays)[0].assign(values_.begin(), values_.end());
  for (size_t i = 0; i < state.size(); ++i) {
    (*arrays)[1 + i].assign(state[i].begin(), state[i].end());
  }
}

absl::Status ShardStore::CheckArrays(
    absl::Span<const std::vector<float>> arrays) const {
  const size_t expected = 1 + updater_->state().size();
  if (arrays.size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        arrays.size(), " arrays; values and optimizer state are ", expected));
  }
  for (const std::vector<float>& array : arrays) {
    if (array.size() != range_.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("an array of ", array.size(), " values for the ",
                       range_.size(), " keys of this shard"));
    }
  }
  return absl::OkStatus();
}

void ShardStore::LoadArrays(absl::Span<const std::vector<float>> arrays,
                            uint64_t version) {
  const std::vector<absl::Span<float>> state = updater_->state();
  ForEachStripe(range_, [&](uint64_t stripe, uint64_t begin, uint64_t end) {
    absl::MutexLock lock(&stripes_[stripe]);
    std::copy(arrays[0].begin() + begin, arrays[0].begin() + end,
              values_.begin() + begin);
    for (size_t i = 0; i < state.size(); ++i) {
      std::copy(arrays[1 + i].begin() + begin, arrays[1 + i].begin() + end,
                state[i].begin() + begin);
    }
  });
  version_.store(version, std::memory_order_release);
}

}  // namespace ps
