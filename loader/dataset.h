// A data set on disk: K record shards (loader/record_file.h), one index per
// shard, and DIR/manifest.txt (proto/dataset.proto) describing samples and
// shards. Each record holds one sample: an int32 label (little-endian)
// followed by the features in the manifest's feature_type, then the
// manifest's categorical_fields ids (uint64, little-endian).
//
// Thread-safety: DatasetWriter is for one thread; a Dataset is immutable
// after OpenDataset and may be shared.
#ifndef SHARDPS_LOADER_DATASET_H_
#define SHARDPS_LOADER_DATASET_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "loader/record_file.h"
#include "proto/dataset.pb.h"

namespace loader {

constexpr char kManifestFile[] = "manifest.txt";

// Features per sample (the product of feature_shape) and their encoded size.
uint64_t FeatureCount(const shardps::DatasetManifest& manifest);
uint64_t FeatureBytes(const shardps::DatasetManifest& manifest);

// Decodes one record into features[0, FeatureCount) (uint8 scaled to
// [0, 1]), *label and, when the manifest has categorical fields,
// ids[0, categorical_fields). DATA_LOSS naming `where` (file and offset)
// when the size or the label does not fit the manifest.
absl::Status DecodeSample(const shardps::DatasetManifest& manifest,
                          absl::string_view payload, absl::string_view where,
                          float* features, int32_t* label,
                          uint64_t* ids = nullptr);

class DatasetWriter {
 public:
  // `manifest` gives name, feature_shape, feature_type and classes; the
  // writer fills in the shards. `dir` must exist.
  static absl::StatusOr<std::unique_ptr<DatasetWriter>> Create(
      const std::string& dir, shardps::DatasetManifest manifest, int shards);
  DatasetWriter(const DatasetWriter&) = delete;
  DatasetWriter& operator=(const DatasetWriter&) = delete;

  // Sample i goes to shard i % K. `features` must be FeatureBytes() long,
  // `ids` hold the manifest's categorical_fields.
  absl::Status Add(int32_t label, absl::string_view features,
                   absl::Span<const uint64_t> ids = {});
  // Set before Finish: the data's generating model's AUC (criteo-synthetic).
  void set_generator_auc(double auc) { manifest_.set_generator_auc(auc); }
  // Closes the shards and writes their indexes and the manifest.
  absl::Status Finish();

 private:
  DatasetWriter(std::string dir, shardps::DatasetManifest manifest)
      : dir_(std::move(dir)), manifest_(std::move(manifest)) {}

  const std::string dir_;
  shardps::DatasetManifest manifest_;
  std::vector<std::unique_ptr<RecordWriter>> shards_;
  uint64_t added_ = 0;
  std::vector<uint64_t> class_records_;  // per label
  std::string record_;                   // reused encoding buffer
};

struct Dataset {
  std::string dir;
  shardps::DatasetManifest manifest;
  std::vector<RecordIndex> indexes;  // per shard, in manifest order
  // Per shard, the data file opened (and sized) by OpenDataset; loaders
  // read through these, so an HTTP data set is not opened twice.
  std::vector<std::shared_ptr<const RandomAccessFile>> files;

  std::string ShardPath(size_t shard) const;
};

// Reads the manifest and every index, without reading data, and checks that
// they agree with each other and with the shard files' sizes. `dir` is a
// local directory or an http:// URL of one (the files are then read with
// range requests). Errors name the file at fault.
absl::StatusOr<Dataset> OpenDataset(const std::string& dir);

}  // namespace loader

#endif  // SHARDPS_LOADER_DATASET_H_
