#include "ps/client/row_buckets.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/hash/hash.h"

namespace ps {
namespace {

// Ids ahead of the one being de-duplicated whose map slot is prefetched.
constexpr size_t kAhead = 16;

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
  DistinctIds out;
  out.index.resize(positions.size());
  out.ids.reserve(positions.size());
  out.first.reserve(positions.size());
  absl::flat_hash_map<uint64_t, uint32_t> seen;
  seen.reserve(positions.size());
  for (size_t j = 0; j < positions.size(); ++j) {
    if (j + kAhead < positions.size())
      seen.prefetch(ids[positions[j + kAhead]]);
    const uint64_t id = ids[positions[j]];
    auto [it, fresh] = seen.try_emplace(id, out.ids.size());
    if (fresh) {
      out.ids.push_back(id);
      out.first.push_back(positions[j]);
    } else {
      out.repeats.push_back(j);
    }
    out.index[j] = it->second;
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

}  // namespace ps
