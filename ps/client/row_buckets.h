// RowBuckets: a sparse call's ids (Client::PullRows, PushRows) cut by
// shard, then within each shard by a hash of the id into buckets of about
// one call's rows. An id and all its repeats fall into the same bucket, so
// each bucket is de-duplicated on its own (DistinctIds), by the thread that
// sends it, while other buckets' calls are already on the wire; and a
// bucket's filter and map of ids are small enough to stay in the core's
// cache. SumBucket makes a push bucket's rows from the caller's gradients.
//
// Thread-safety: immutable after construction.
#ifndef SHARDPS_PS_CLIENT_ROW_BUCKETS_H_
#define SHARDPS_PS_CLIENT_ROW_BUCKETS_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ps/wire/row_partition.h"

namespace ps {

class RowBuckets {
 public:
  // Requires rows_per_call >= 1 and fewer than 2^32 ids.
  RowBuckets(absl::Span<const uint64_t> ids, const RowPartition& partition,
             size_t rows_per_call);
  RowBuckets(const RowBuckets&) = delete;
  RowBuckets& operator=(const RowBuckets&) = delete;

  // Per shard, its number of buckets (0 for a shard none of the ids is
  // on).
  const std::vector<size_t>& count() const { return count_; }
  // The caller's positions of the ids in `shard`'s bucket `bucket`, in
  // their order in the call.
  absl::Span<const uint32_t> Positions(int shard, size_t bucket) const;

 private:
  std::vector<size_t> count_;
  std::vector<size_t> first_group_;  // per shard, its first bucket's group
  std::vector<size_t> begin_;        // per group, where it starts in order_
  std::vector<uint32_t> order_;      // positions, grouped
};

// A bucket's ids without repeats: ids[k] in first-seen order, first[k] the
// caller's position of its first occurrence; for the bucket's j-th
// position, index[j] is its k; repeats lists the j whose id came before.
struct DistinctIds {
  std::vector<uint64_t> ids;
  std::vector<uint32_t> first;
  std::vector<uint32_t> index;
  std::vector<uint32_t> repeats;
};
DistinctIds Deduplicate(absl::Span<const uint64_t> ids,
                        absl::Span<const uint32_t> positions);

// A push bucket's distinct ids and their gradients: rows[k][0, dim) for
// ids[k], in the caller's gradients (no copy of the whole push) or, for an
// id that repeats, in `sums`, where its gradients are added up in the
// caller's order so that it travels once. Moves keep `rows` valid; a copy
// would not, so there is none.
struct BucketRows {
  BucketRows() = default;
  BucketRows(BucketRows&&) = default;
  BucketRows& operator=(BucketRows&&) = default;
  BucketRows(const BucketRows&) = delete;
  BucketRows& operator=(const BucketRows&) = delete;

  std::vector<uint64_t> ids;
  std::vector<const float*> rows;
  std::vector<float> sums;
};
BucketRows SumBucket(absl::Span<const uint64_t> ids,
                     absl::Span<const uint32_t> positions, const float* grads,
                     uint32_t dim);

// Every bucket of every shard summed ([shard][bucket]), for a push whose
// sums might overflow; INVALID_ARGUMENT when one does.
absl::StatusOr<std::vector<std::vector<BucketRows>>> SumAllBuckets(
    absl::Span<const uint64_t> ids, const RowBuckets& buckets,
    const float* grads, uint32_t dim);

}  // namespace ps

#endif  // SHARDPS_PS_CLIENT_ROW_BUCKETS_H_
