#include "ps/client/row_buckets.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"
#include "ps/wire/float_pieces.h"

namespace ps {
namespace {

// The most slots a bucket's filter of ids has (two bitmaps of 512 KiB):
// larger buckets share slots more, and more of their ids go to the map.
constexpr size_t kMaxFilterSlots = size_t{1} << 22;

}  // namespace

RowBuckets::RowBuckets(absl::Span<const uint64_t> ids,
                       const RowPartition& partition, size_t rows_per_call) {
  const int shards = partition.num_shards();
  // Each id's shard (none kept for one shard: all are on shard 0).
  std::vector<uint32_t> shard_of(shards > 1 ? ids.size() : 0);
  std::vector<size_t> per_shard(shards, 0);
  per_shard[0] = shards > 1 ? 0 : ids.size();
  for (size_t i = 0; i < shard_of.size(); ++i) {
    shard_of[i] = partition.ShardOf(ids[i]);
    ++per_shard[shard_of[i]];
  }
  // Enough buckets that one bucket's ids, repeats and all, fill about 7/8
  // of a call: a bucket's size varies by chance, and one a little over a
  // call would need a second, small call.
  first_group_.push_back(0);
  for (int s = 0; s < shards; ++s) {
    count_.push_back((per_shard[s] * 8 + rows_per_call * 7 - 1) /
                     (rows_per_call * 7));
    first_group_.push_back(first_group_.back() + count_.back());
  }
  std::vector<uint32_t> group_of(ids.size());
  begin_.assign(first_group_.back() + 1, 0);
  const absl::Hash<uint64_t> hash;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int s = shards > 1 ? shard_of[i] : 0;
    // The hash scaled onto [0, count) without a division (Lemire).
    const size_t bucket = static_cast<size_t>(
        (static_cast<unsigned __int128>(hash(ids[i])) * count_[s]) >> 64);
    group_of[i] = first_group_[s] + bucket;
    ++begin_[group_of[i] + 1];
  }
  for (size_t g = 1; g < begin_.size(); ++g) begin_[g] += begin_[g - 1];
  std::vector<size_t> next(begin_.begin(), begin_.end() - 1);
  order_.resize(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) order_[next[group_of[i]]++] = i;
}

absl::Span<const uint32_t> RowBuckets::Positions(int shard,
                                                 size_t bucket) const {
  const size_t g = first_group_[shard] + bucket;
  return absl::MakeConstSpan(order_).subspan(begin_[g],
                                             begin_[g + 1] - begin_[g]);
}

DistinctIds Deduplicate(absl::Span<const uint64_t> ids,
                        absl::Span<const uint32_t> positions) {
  const size_t n = positions.size();
  DistinctIds out;
  out.index.resize(n);
  out.ids.reserve(n);
  out.first.reserve(n);
  // Most ids of a call are usually distinct: a first pass marks each id's
  // hash in a filter of about 32 slots per id (two bitmaps: seen once,
  // seen again), and an id alone in its slot is known to be new without a
  // map. Only ids that share a slot, repeats and a few percent of others,
  // go through the map.
  const absl::Hash<uint64_t> hash;
  size_t slots = size_t{64} << 6;
  while (slots < 32 * n && slots < kMaxFilterSlots) slots *= 2;
  const uint64_t mask = slots - 1;
  std::vector<uint64_t> once(slots / 64), again(slots / 64);
  size_t seconds = 0;  // ids that found their slot taken
  for (size_t j = 0; j < n; ++j) {
    const uint64_t slot = hash(ids[positions[j]]) & mask;
    const uint64_t bit = uint64_t{1} << (slot % 64);
    const uint64_t taken = once[slot / 64] & bit;
    seconds += taken != 0;
    again[slot / 64] |= taken;
    once[slot / 64] |= bit;
  }
  // At most two ids per id that found its slot taken go to the map.
  absl::flat_hash_map<uint64_t, uint32_t> shared;
  shared.reserve(std::min(n, 2 * seconds));
  for (size_t j = 0; j < n; ++j) {
    const uint64_t id = ids[positions[j]];
    const uint64_t slot = hash(id) & mask;
    const bool alone = (again[slot / 64] >> (slot % 64) & 1) == 0;
    uint32_t k = out.ids.size();
    if (!alone) {
      auto [it, fresh] = shared.try_emplace(id, k);
      if (!fresh) {
        out.repeats.push_back(j);
        out.index[j] = it->second;
        continue;
      }
    }
    out.ids.push_back(id);
    out.first.push_back(positions[j]);
    out.index[j] = k;
  }
  return out;
}

BucketRows SumBucket(absl::Span<const uint64_t> ids,
                     absl::Span<const uint32_t> positions, const float* grads,
                     uint32_t dim) {
  DistinctIds distinct = Deduplicate(ids, positions);
  BucketRows out;
  out.rows.resize(distinct.ids.size());
  for (size_t k = 0; k < out.rows.size(); ++k) {
    out.rows[k] = grads + uint64_t{distinct.first[k]} * dim;
  }
  // Per distinct id, where its sum starts in `sums` (kNone: no repeat).
  constexpr size_t kNone = ~size_t{0};
  std::vector<size_t> sum_at(distinct.repeats.empty() ? 0 : out.rows.size(),
                             kNone);
  for (uint32_t j : distinct.repeats) {
    const uint32_t k = distinct.index[j];
    if (sum_at[k] == kNone) {
      sum_at[k] = out.sums.size();
      out.sums.insert(out.sums.end(), out.rows[k], out.rows[k] + dim);
    }
    float* sum = &out.sums[sum_at[k]];
    const float* grad = grads + uint64_t{positions[j]} * dim;
    for (uint32_t c = 0; c < dim; ++c) sum[c] += grad[c];
  }
  for (size_t k = 0; k < sum_at.size(); ++k) {
    if (sum_at[k] != kNone) out.rows[k] = &out.sums[sum_at[k]];
  }
  out.ids = std::move(distinct.ids);
  return out;
}

absl::StatusOr<std::vector<std::vector<BucketRows>>> SumAllBuckets(
    absl::Span<const uint64_t> ids, const RowBuckets& buckets,
    const float* grads, uint32_t dim) {
  std::vector<std::vector<BucketRows>> summed(buckets.count().size());
  for (size_t s = 0; s < summed.size(); ++s) {
    for (size_t b = 0; b < buckets.count()[s]; ++b) {
      summed[s].push_back(SumBucket(ids, buckets.Positions(s, b), grads, dim));
      const std::vector<float>& sums = summed[s].back().sums;
      if (!AllFinite(UnalignedFloats(sums.data(), sums.size()))) {
        return absl::InvalidArgumentError(
            "the summed gradients of a repeated id overflow to infinity: "
            "nothing was sent");
      }
    }
  }
  return summed;
}

}  // namespace ps
