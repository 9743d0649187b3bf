#include "loader/loader.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"

namespace loader {

Partition PartitionFor(uint64_t records, int rank, int world) {
  const uint64_t r = static_cast<uint64_t>(rank);
  const uint64_t w = static_cast<uint64_t>(world);
  return {records * r / w, records * (r + 1) / w};
}

absl::Status CheckLoaderOptions(const LoaderOptions& options, bool prefetch) {
  if (options.batch_size < 1 || options.world < 1 || options.rank < 0 ||
      options.rank >= options.world) {
    return absl::InvalidArgumentError(absl::StrCat(
        "loader needs batch_size >= 1 and 0 <= rank < world, got batch_size ",
        options.batch_size, ", rank ", options.rank, ", world ",
        options.world));
  }
  if (prefetch &&
      (options.reader_threads < 1 || options.prefetch_batches < 2)) {
    return absl::InvalidArgumentError(
        "the parallel loader needs reader_threads >= 1 and prefetch_batches "
        ">= 2");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Loader>> MakeLoader(
    absl::string_view kind, const Dataset& dataset,
    const LoaderOptions& options) {
  if (kind == "sequential") return MakeSequentialLoader(dataset, options);
  if (kind == "parallel") return MakePrefetchLoader(dataset, options);
  return absl::InvalidArgumentError(
      absl::StrCat("--loader=", kind, " is not sequential or parallel"));
}

Loader::Loader(const Dataset& dataset, const LoaderOptions& options)
    : dataset_(dataset),
      options_(options),
      features_(FeatureCount(dataset.manifest)),
      fields_(dataset.manifest.categorical_fields()),
      partition_(PartitionFor(dataset.manifest.records(), options.rank,
                              options.world)) {
  uint64_t id = 0;
  for (const RecordIndex& index : dataset_.indexes) {
    first_id_.push_back(id);
    id += index.offsets.size();
  }
  order_.resize(partition_size());
}

void Loader::Shuffle(int epoch) {
  std::iota(order_.begin(), order_.end(), partition_.begin);
  std::seed_seq seq{static_cast<uint32_t>(options_.seed),
                    static_cast<uint32_t>(options_.seed >> 32),
                    static_cast<uint32_t>(epoch),
                    static_cast<uint32_t>(options_.rank)};
  std::mt19937_64 gen(seq);
  std::shuffle(order_.begin(), order_.end(), gen);
}

Loader::Extent Loader::Locate(uint64_t id) const {
  const size_t shard = static_cast<size_t>(
      std::upper_bound(first_id_.begin(), first_id_.end(), id) -
      first_id_.begin() - 1);
  const RecordIndex& index = dataset_.indexes[shard];
  const uint64_t i = id - first_id_[shard];
  const uint64_t end =
      i + 1 < index.offsets.size() ? index.offsets[i + 1] : index.data_size;
  return {shard, index.offsets[i], end};
}

absl::Status Loader::Decode(const RecordReader& file, uint64_t offset,
                            absl::string_view payload, float* features,
                            int32_t* label, uint64_t* ids) const {
  absl::Status s =
      DecodeSample(dataset_.manifest, payload, "", features, label, ids);
  if (s.ok()) return s;
  return absl::DataLossError(
      absl::StrCat(file.path(), " at byte offset ", offset, s.message()));
}

}  // namespace loader
