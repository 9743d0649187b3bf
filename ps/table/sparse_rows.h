// SparseRows: one server's shard of a sparse table (DESIGN.md, "Sparse
// tables"): rows of `dim` floats keyed by any uint64 id, each created on
// first touch from the table's seeded initializer (FillInitialRow: a
// function of the seed and the id alone), with per-row optimizer state, at
// most max_rows rows. Rows live in blocks of kBlockRows, each with its own
// Updater (ps/table/updater.h), so that a row's optimizer state sits at
// the same place in its block's state arrays as its values in the block.
//
// Every call checks everything before it changes anything: a refused call
// (a gradient of the wrong size, a non-finite value, an unknown id on a
// pull that does not create, the row limit) leaves the rows as they were.
//
// Thread-safety: all methods may be called concurrently; one mutex guards
// the rows (pulls of existing rows share it).
#ifndef SHARDPS_PS_TABLE_SPARSE_ROWS_H_
#define SHARDPS_PS_TABLE_SPARSE_ROWS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "proto/shardps.pb.h"
#include "ps/table/huge_page_allocator.h"
#include "ps/table/updater.h"
#include "ps/wire/float_pieces.h"

namespace ps {

struct SparseRowsOptions {
  uint32_t dim = 0;       // floats per row, >= 1
  uint64_t max_rows = 0;  // rows this shard may hold, >= 1
  shardps::InitConfig init;
  shardps::OptimizerConfig optimizer;
};

class SparseRows {
 public:
  static constexpr uint32_t kBlockRows = 4096;

  // INVALID_ARGUMENT for a dim or max_rows of 0, or an initializer or
  // optimizer no dense table would take either.
  static absl::StatusOr<std::unique_ptr<SparseRows>> Create(
      SparseRowsOptions options);
  SparseRows(const SparseRows&) = delete;
  SparseRows& operator=(const SparseRows&) = delete;

  uint32_t dim() const { return options_.dim; }
  uint64_t num_rows() const;

  // Writes row ids[i] to out[i * dim, (i + 1) * dim). A row not yet held is
  // created when `create`; otherwise the call is NOT_FOUND naming the first
  // such id, and creates nothing. After an error `out` holds no promise.
  absl::Status Pull(absl::Span<const uint64_t> ids, bool create, float* out);

  // Applies grads[i * dim, (i + 1) * dim) to row ids[i] at learning rate
  // lr * lr_scale, creating rows on first touch; the gradients of an id
  // that appears more than once are summed and applied once.
  absl::Status Push(absl::Span<const uint64_t> ids, UnalignedFloats grads,
                    float lr_scale);

  // Every row as a checkpoint keeps it (TableCheckpoint.rows in
  // proto/checkpoint.proto): the ids (2 floats' bits each), the values, then
  // each optimizer state array, in one row order.
  void Save(std::vector<std::vector<float>>* arrays) const;
  // Puts saved rows into this empty table. INVALID_ARGUMENT, leaving it
  // empty, for arrays of the wrong count or sizes, an id saved twice, or
  // more rows than max_rows.
  absl::Status Load(const std::vector<std::vector<float>>& arrays);
  // Replaces every row with saved ones (a replica taking its primary's
  // state): the saved rows are built aside, as Load checks them, and swapped
  // in at once, so a concurrent pull sees all old rows or all new ones.
  // Load's errors, changing nothing. Both sets of rows are held meanwhile.
  absl::Status Replace(const std::vector<std::vector<float>>& arrays);

 private:
  struct Block {
    std::vector<float, HugePageAllocator<float>> values;  // kBlockRows * dim
    std::unique_ptr<Updater> updater;
  };
  static constexpr uint64_t kNotHeld = ~uint64_t{0};
  // An index_ entry holds the row's index in its low kRowBits bits and,
  // above them, the epoch_ of the last push that looked the row up: a
  // repeated id is found in the same lookup, without a second pass.
  static constexpr int kRowBits = 40;
  static constexpr uint64_t kRowMask = (uint64_t{1} << kRowBits) - 1;
  static constexpr uint32_t kLastEpoch = (uint32_t{1} << (64 - kRowBits)) - 1;
  static uint64_t RowIndex(uint64_t entry) { return entry & kRowMask; }

  explicit SparseRows(SparseRowsOptions options)
      : options_(std::move(options)) {}
  // Finds each id's row, into slots_ (kNotHeld for rows not held yet);
  // the number of those ids. With `repeated`, stamps each held row with a
  // new epoch_ and sets *repeated when one is found twice.
  size_t FindRows(absl::Span<const uint64_t> ids, bool* repeated = nullptr)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Rows for `ids` not held yet, once each (fresh_); RESOURCE_EXHAUSTED when
  // they would pass max_rows.
  absl::Status CheckRoom(absl::Span<const uint64_t> ids)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves to the next epoch_, clearing every stamp when the stamps' bits
  // run out.
  void NextEpoch() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Push when ids repeat: their gradients summed first.
  absl::Status PushSummed(absl::Span<const uint64_t> ids, UnalignedFloats grads,
                          float lr_scale) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The row of `id`, created (with its block) if it is not held yet.
  float* RowOf(uint64_t id, uint64_t* index) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Appends an empty block (values zero, optimizer state as at the start).
  void AddBlock() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  float* Values(uint64_t index) ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void PrefetchRow(uint64_t index) ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void Apply(uint64_t index, float* row, UnalignedFloats grad, float lr_scale)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const SparseRowsOptions options_;
  mutable absl::Mutex mu_;
  // Id -> row index, on huge pages: calls look ids up all over it.
  absl::flat_hash_map<uint64_t, uint64_t, absl::Hash<uint64_t>,
                      std::equal_to<uint64_t>,
                      HugePageAllocator<std::pair<const uint64_t, uint64_t>>>
      index_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> ids_ ABSL_GUARDED_BY(mu_);  // of each row index
  std::vector<Block> blocks_ ABSL_GUARDED_BY(mu_);
  uint32_t epoch_ ABSL_GUARDED_BY(mu_) = 0;
  // Scratch reused by every call that holds mu_ exclusively: each id's row
  // (FindRows), ids not held yet (CheckRoom); a summed push's distinct ids
  // in first-seen order, their positions and summed gradients.
  std::vector<uint64_t> slots_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<uint64_t> fresh_ ABSL_GUARDED_BY(mu_);
  std::vector<uint64_t> order_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, uint32_t> distinct_ ABSL_GUARDED_BY(mu_);
  std::vector<float> summed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ps

#endif  // SHARDPS_PS_TABLE_SPARSE_ROWS_H_
