#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "loader/loader.h"

namespace loader {
namespace {

class SequentialLoader final : public Loader {
 public:
  SequentialLoader(const Dataset& dataset, const LoaderOptions& options)
      : Loader(dataset, options) {
    batch_.features.resize(static_cast<size_t>(options.batch_size) * features_);
    batch_.labels.resize(options.batch_size);
    batch_.ids.resize(static_cast<size_t>(options.batch_size) * fields_);
  }

  absl::Status StartEpoch(int epoch) override {
    if (!loaded_) {
      if (absl::Status s = ReadEverything(); !s.ok()) return s;
      loaded_ = true;
    }
    Shuffle(epoch);
    next_ = 0;
    return absl::OkStatus();
  }

  absl::StatusOr<const Batch*> Next() override {
    if (next_ >= order_.size()) return nullptr;
    const size_t n =
        std::min<size_t>(options_.batch_size, order_.size() - next_);
    for (size_t i = 0; i < n; ++i) {
      const uint64_t local = order_[next_ + i] - partition_.begin;
      std::copy_n(&features_store_[local * features_], features_,
                  &batch_.features[i * features_]);
      batch_.labels[i] = labels_store_[local];
      std::copy_n(ids_store_.data() + local * fields_, fields_,
                  batch_.ids.data() + i * fields_);
    }
    batch_.size = static_cast<int>(n);
    next_ += n;
    return &batch_;
  }

  size_t ReadyBatches() override {
    const size_t left = order_.size() - next_;
    return (left + options_.batch_size - 1) / options_.batch_size;
  }

 private:
  // The whole data set, shard after shard, in one thread and in blocks of
  // about kBlockBytes: every record is read and checked; this worker's
  // partition is decoded and kept.
  absl::Status ReadEverything() {
    features_store_.resize(partition_size() * features_);
    labels_store_.resize(partition_size());
    ids_store_.resize(partition_size() * fields_);
    std::string block;
    uint64_t id = 0;
    for (size_t k = 0; k < dataset_.indexes.size(); ++k) {
      const absl::Time start = absl::Now();
      const RecordReader reader(dataset_.files[k]);
      const RecordIndex& index = dataset_.indexes[k];
      size_t first = 0;
      while (first < index.offsets.size()) {
        size_t last = first + 1;
        while (last < index.offsets.size() &&
               index.offsets[last] - index.offsets[first] < kBlockBytes) {
          ++last;
        }
        const uint64_t end =
            last < index.offsets.size() ? index.offsets[last] : index.data_size;
        absl::Status s = reader.ReadRecords(
            &index.offsets[first], last - first, end, &block,
            [&](uint64_t offset, absl::string_view payload) {
              const uint64_t this_id = id++;
              if (this_id < partition_.begin || this_id >= partition_.end) {
                return absl::OkStatus();
              }
              const uint64_t local = this_id - partition_.begin;
              return Decode(
                  reader, offset, payload, &features_store_[local * features_],
                  &labels_store_[local], ids_store_.data() + local * fields_);
            });
        if (!s.ok()) return s;
        first = last;
      }
      if (options_.on_read) options_.on_read(start, absl::Now());
    }
    return absl::OkStatus();
  }

  static constexpr uint64_t kBlockBytes = 4 << 20;

  bool loaded_ = false;
  std::vector<float> features_store_;
  std::vector<int32_t> labels_store_;
  std::vector<uint64_t> ids_store_;
  size_t next_ = 0;
  Batch batch_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Loader>> MakeSequentialLoader(
    const Dataset& dataset, const LoaderOptions& options) {
  if (absl::Status s = CheckLoaderOptions(options, /*prefetch=*/false);
      !s.ok()) {
    return s;
  }
  return std::make_unique<SequentialLoader>(dataset, options);
}

}  // namespace loader
