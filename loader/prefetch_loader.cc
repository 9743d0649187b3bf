#include <algorithm>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "loader/loader.h"

namespace loader {
namespace {

// Batch b of an epoch is assembled into ring slot b % prefetch_batches and
// handed out in order. Each batch is cut into one part per reader and
// readers claim parts in batch order, so all of them work on the earliest
// batch first: the first batch is ready after about one batch's read at the
// full parallelism, not after a single reader's. Readers run ahead of the
// consumer by at most the ring's size, so memory stays bounded and the
// batch the consumer holds is never overwritten.
class PrefetchLoader final : public Loader {
 public:
  PrefetchLoader(const Dataset& dataset, const LoaderOptions& options,
                 std::vector<std::unique_ptr<RecordReader>> readers)
      : Loader(dataset, options),
        files_(std::move(readers)),
        parts_(std::min(options.reader_threads, options.batch_size)),
        ring_(options.prefetch_batches),
        slot_batch_(options.prefetch_batches, -1),
        parts_done_(options.prefetch_batches, 0) {
    for (Batch& b : ring_) {
      b.features.resize(static_cast<size_t>(options.batch_size) * features_);
      b.labels.resize(options.batch_size);
      b.ids.resize(static_cast<size_t>(options.batch_size) * fields_);
    }
    for (int t = 0; t < options.reader_threads; ++t) {
      threads_.emplace_back([this] { ReaderLoop(); });
    }
  }

  ~PrefetchLoader() override {
    {
      absl::MutexLock lock(&mu_);
      stop_ = true;
    }
    for (std::thread& t : threads_) t.join();
  }

  absl::Status StartEpoch(int epoch) override {
    absl::MutexLock lock(&mu_);
    // Stop handing out work and let readers finish what they hold before
    // the order they read from changes.
    next_claim_ = num_batches_ * parts_;
    mu_.Await(absl::Condition(
        +[](int* busy) { return *busy == 0; }, &busy_readers_));
    if (!error_.ok()) return error_;
    Shuffle(epoch);
    const size_t b = options_.batch_size;
    num_batches_ = (order_.size() + b - 1) / b;
    next_claim_ = 0;
    current_ = 0;
    released_ = 0;
    std::fill(slot_batch_.begin(), slot_batch_.end(), -1);
    std::fill(parts_done_.begin(), parts_done_.end(), 0);
    return absl::OkStatus();
  }

  absl::StatusOr<const Batch*> Next() override {
    absl::MutexLock lock(&mu_);
    released_ = current_;  // the previous batch's slot may be refilled
    if (current_ >= num_batches_) return nullptr;
    const size_t slot = current_ % ring_.size();
    const int64_t want = static_cast<int64_t>(current_);
    auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return slot_batch_[slot] == want || !error_.ok();
    };
    mu_.Await(absl::Condition(&ready));
    if (slot_batch_[slot] != want) return error_;
    ++current_;
    return &ring_[slot];
  }

  size_t ReadyBatches() override {
    absl::MutexLock lock(&mu_);
    return std::count_if(slot_batch_.begin(), slot_batch_.end(),
                         [this](int64_t batch) ABSL_NO_THREAD_SAFETY_ANALYSIS {
                           return batch >= static_cast<int64_t>(current_);
                         });
  }

 private:
  bool HasWorkLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stop_ || (error_.ok() && next_claim_ < num_batches_ * parts_ &&
                     next_claim_ / parts_ < released_ + ring_.size());
  }

  void ReaderLoop() {
    std::string payload;
    while (true) {
      size_t unit;
      {
        absl::MutexLock lock(&mu_);
        mu_.Await(absl::Condition(this, &PrefetchLoader::HasWorkLocked));
        if (stop_) return;
        unit = next_claim_++;
        ++busy_readers_;
      }
      const size_t batch = unit / parts_;
      const absl::Time start = absl::Now();
      absl::Status status = Assemble(batch, unit % parts_, &payload);
      if (options_.on_read) options_.on_read(start, absl::Now());
      absl::MutexLock lock(&mu_);
      --busy_readers_;
      if (!status.ok()) {
        if (error_.ok()) error_ = status;
        continue;
      }
      const size_t slot = batch % ring_.size();
      if (++parts_done_[slot] == parts_) {
        parts_done_[slot] = 0;
        ring_[slot].size = static_cast<int>(BatchRows(batch));
        slot_batch_[slot] = static_cast<int64_t>(batch);
      }
    }
  }

  // Rows in batch `batch` of this epoch.
  size_t BatchRows(size_t batch) const {
    const size_t first = batch * options_.batch_size;
    return std::min<size_t>(options_.batch_size, order_.size() - first);
  }

  // Reads part `part` of batch `batch` into its ring slot.
  absl::Status Assemble(size_t batch, size_t part, std::string* payload) {
    Batch& out = ring_[batch % ring_.size()];
    const size_t first = batch * options_.batch_size;
    const size_t n = BatchRows(batch);
    for (size_t i = part * n / parts_; i < (part + 1) * n / parts_; ++i) {
      const Extent e = Locate(order_[first + i]);
      const RecordReader& file = *files_[e.shard];
      absl::Status s = file.ReadRecords(
          &e.offset, 1, e.end, payload,
          [&](uint64_t offset, absl::string_view record) {
            return Decode(file, offset, record, &out.features[i * features_],
                          &out.labels[i], out.ids.data() + i * fields_);
          });
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }

  const std::vector<std::unique_ptr<RecordReader>> files_;  // per shard
  const size_t parts_;  // of each batch, read by different readers
  std::vector<Batch> ring_;
  std::vector<std::thread> threads_;

  absl::Mutex mu_;
  std::vector<int64_t> slot_batch_ ABSL_GUARDED_BY(mu_);  // batch in slot
  std::vector<size_t> parts_done_ ABSL_GUARDED_BY(mu_);   // of its batch
  // Claims count parts: part p of batch b is claim b * parts_ + p.
  size_t num_batches_ ABSL_GUARDED_BY(mu_) = 0;
  size_t next_claim_ ABSL_GUARDED_BY(mu_) = 0;
  size_t current_ ABSL_GUARDED_BY(mu_) = 0;   // next batch to hand out
  size_t released_ ABSL_GUARDED_BY(mu_) = 0;  // batches the consumer left
  int busy_readers_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Loader>> MakePrefetchLoader(
    const Dataset& dataset, const LoaderOptions& options) {
  if (absl::Status s = CheckLoaderOptions(options, /*prefetch=*/true);
      !s.ok()) {
    return s;
  }
  // Only the shards this worker's partition touches are opened.
  const Partition part =
      PartitionFor(dataset.manifest.records(), options.rank, options.world);
  std::vector<std::unique_ptr<RecordReader>> files;
  uint64_t first = 0;
  for (size_t k = 0; k < dataset.indexes.size(); ++k) {
    const uint64_t last = first + dataset.indexes[k].offsets.size();
    if (first < part.end && part.begin < last) {
      files.push_back(std::make_unique<RecordReader>(dataset.files[k]));
    } else {
      files.push_back(nullptr);
    }
    first = last;
  }
  return std::make_unique<PrefetchLoader>(dataset, options, std::move(files));
}

}  // namespace loader
