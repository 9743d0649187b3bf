// ShardStore holds one server's key range of one table and applies pushes to
// it.
//
// Concurrency: the range is cut into stripes of kStripeFloats keys, each with
// its own reader/writer lock, so pushes to different stripes run in parallel
// and a push never waits on a global mutex. A pull copies each stripe under
// its lock: every stripe of the result is a state between whole pushes
// ("block-consistent"), while different stripes may reflect different
// numbers of pushes, as asynchronous SGD allows.
//
// Thread-safety: all methods are safe to call concurrently, except that
// SaveArrays must not overlap a push (the table's snapshot lock, in
// ps/table/table_registry.h, keeps them apart).
#ifndef SHARDPS_PS_TABLE_SHARD_STORE_H_
#define SHARDPS_PS_TABLE_SHARD_STORE_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "ps/table/updater.h"
#include "ps/wire/float_pieces.h"
#include "ps/wire/range_partition.h"

namespace ps {

class ShardStore {
 public:
  static constexpr uint64_t kStripeFloats = 4096;  // 16 KiB per lock

  // Takes ownership of `updater`. `initial` fills the values of `range`;
  // its size must be range.size(). `version` is the number of pushes the
  // values already reflect (non-zero when restored from a checkpoint).
  ShardStore(KeyRange range, std::unique_ptr<Updater> updater,
             std::vector<float> initial, uint64_t version = 0);

  ShardStore(const ShardStore&) = delete;
  ShardStore& operator=(const ShardStore&) = delete;

  KeyRange range() const { return range_; }
  // Pushes applied so far.
  uint64_t version() const { return version_.load(std::memory_order_acquire); }

  // Copies the values of `keys` into out[0, keys.size()) and returns the
  // version seen before the copy. INVALID_ARGUMENT when `keys` is empty,
  // inverted or not inside range().
  absl::StatusOr<uint64_t> Pull(KeyRange keys, float* out) const;

  // Applies `gradient` (keys.size() float32) to `keys` and returns the new
  // version. INVALID_ARGUMENT, with nothing changed, when `keys` is bad as
  // for Pull, the byte length is not 4 * keys.size(), or a value is NaN/Inf.
  absl::StatusOr<uint64_t> Push(KeyRange keys, FloatPieces& gradient);

  // Push in two halves, for callers that act between validating a push and
  // applying it: CheckPush returns Push's errors without changing anything
  // (naming the payload `what`); ApplyChecked applies a push CheckPush
  // accepted, at the optimizer's learning rate times `lr_scale`, and
  // returns the version.
  absl::Status CheckPush(KeyRange keys, FloatPieces& gradient,
                         absl::string_view what = "gradient") const;
  uint64_t ApplyChecked(KeyRange keys, FloatPieces& gradient,
                        float lr_scale = 1.0f);
  // Replaces the values of `keys` with `values`, which CheckPush accepted,
  // keeping the optimizer's state; returns the version (one more).
  uint64_t AssignChecked(KeyRange keys, FloatPieces& values);

  // Copies the values into arrays[0] and the updater's per-key state arrays
  // into arrays[1...], resizing `arrays` (its buffers are reused).
  void SaveArrays(std::vector<std::vector<float>>* arrays) const;
  // INVALID_ARGUMENT unless `arrays` is what SaveArrays would give: values
  // and the updater's state arrays, each of range().size().
  absl::Status CheckArrays(absl::Span<const std::vector<float>> arrays) const;
  // Replaces values and state with `arrays` (CheckArrays accepted them) and
  // the version with `version`, stripe by stripe under the stripes' locks;
  // the caller keeps pushes out meanwhile (the table's snapshot lock).
  void LoadArrays(absl::Span<const std::vector<float>> arrays,
                  uint64_t version);

  // INVALID_ARGUMENT unless `keys` is a non-empty range inside range().
  absl::Status CheckKeys(KeyRange keys) const;

 private:
  // Calls fn(stripe, begin, end) for each stripe's part of `keys`, in key
  // order, as offsets [begin, end) into values_; fn takes the stripe's lock.
  template <typename Fn>
  void ForEachStripe(KeyRange keys, Fn&& fn) const {
    uint64_t at = keys.begin - range_.begin;
    const uint64_t stop = keys.end - range_.begin;
    while (at < stop) {
      const uint64_t stripe = at / kStripeFloats;
      const uint64_t end = std::min(stop, (stripe + 1) * kStripeFloats);
      fn(stripe, at, end);
      at = end;
    }
  }

  const KeyRange range_;
  const std::unique_ptr<Updater> updater_;
  std::vector<float> values_;  // values_[k - range_.begin] is key k
  mutable std::vector<absl::Mutex> stripes_;
  std::atomic<uint64_t> version_{0};
};

}  // namespace ps

#endif  // SHARDPS_PS_TABLE_SHARD_STORE_H_
