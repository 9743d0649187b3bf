#include "loader/dataset.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <fstream>
#include <numeric>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"

namespace loader {
namespace {

absl::Status CheckSampleSpec(const shardps::DatasetManifest& m) {
  if (m.feature_type() != "uint8" && m.feature_type() != "float32") {
    return absl::InvalidArgumentError(absl::StrCat(
        "feature_type '", m.feature_type(), "' is not uint8 or float32"));
  }
  if (m.feature_shape().empty() || FeatureCount(m) == 0 || m.classes() < 2) {
    return absl::InvalidArgumentError(
        "a data set needs a non-empty feature shape and at least 2 classes");
  }
  return absl::OkStatus();
}

// Keeps the parser's first complaint for our error message instead of
// letting protobuf log it.
class FirstError : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (first_.empty()) {
      first_ = absl::StrCat("line ", line + 1, " column ", column + 1, ": ",
                            message);
    }
  }
  const std::string& first() const { return first_; }

 private:
  std::string first_;
};

constexpr int kOpenThreads = 8;

// Opens one shard's data file and reads its index, checking that the
// manifest, the index and the file's size agree.
absl::Status OpenShard(const std::string& dir, const std::string& manifest,
                       const shardps::ShardFile& shard,
                       std::shared_ptr<HttpConnections> connections,
                       std::shared_ptr<const RandomAccessFile>* file_out,
                       RecordIndex* index_out) {
  const std::string data = absl::StrCat(dir, "/", shard.data_file());
  absl::StatusOr<std::unique_ptr<RandomAccessFile>> file =
      OpenFile(data, connections);
  if (!file.ok()) {
    if (!absl::IsNotFound(file.status())) return file.status();
    return absl::NotFoundError(
        absl::StrCat("shard ", data, " named in ", manifest, " is missing"));
  }
  absl::StatusOr<RecordIndex> index =
      ReadIndex(absl::StrCat(dir, "/", shard.index_file()), connections);
  if (!index.ok()) return index.status();
  const uint64_t size = (*file)->size();
  if (size != shard.bytes() || size != index->data_size ||
      index->offsets.size() != shard.records()) {
    return absl::DataLossError(absl::StrCat(
        data, " disagrees with ", manifest, " or its index: file has ", size,
        " bytes (manifest ", shard.bytes(), ", index ", index->data_size,
        "), index has ", index->offsets.size(), " records (manifest ",
        shard.records(), ")"));
  }
  *index_out = *std::move(index);
  *file_out = *std::move(file);
  return absl::OkStatus();
}

}  // namespace

uint64_t FeatureCount(const shardps::DatasetManifest& manifest) {
  uint64_t n = 1;
  for (uint32_t d : manifest.feature_shape()) n *= d;
  return n;
}

uint64_t FeatureBytes(const shardps::DatasetManifest& manifest) {
  return FeatureCount(manifest) * (manifest.feature_type() == "uint8" ? 1 : 4);
}

absl::Status DecodeSample(const shardps::DatasetManifest& manifest,
                          absl::string_view payload, absl::string_view where,
                          float* features, int32_t* label, uint64_t* ids) {
  const uint64_t fields = manifest.categorical_fields();
  const uint64_t want = 4 + FeatureBytes(manifest) + fields * sizeof(uint64_t);
  if (payload.size() != want) {
    return absl::DataLossError(
        absl::StrCat(where, ": sample has ", payload.size(),
                     " bytes, the manifest says ", want));
  }
  std::memcpy(label, payload.data(), 4);
  if (*label < 0 || static_cast<uint32_t>(*label) >= manifest.classes()) {
    return absl::DataLossError(absl::StrCat(
        where, ": label ", *label, " is not in [0, ", manifest.classes(), ")"));
  }
  const char* bytes = payload.data() + 4;
  const uint64_t n = FeatureCount(manifest);
  if (manifest.feature_type() == "uint8") {
    const uint8_t* pixels = reinterpret_cast<const uint8_t*>(bytes);
    for (uint64_t i = 0; i < n; ++i) features[i] = pixels[i] * (1.0f / 255.0f);
  } else {
    std::memcpy(features, bytes, n * sizeof(float));
  }
  if (fields > 0 && ids != nullptr) {
    std::memcpy(ids, bytes + FeatureBytes(manifest), fields * sizeof(uint64_t));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<DatasetWriter>> DatasetWriter::Create(
    const std::string& dir, shardps::DatasetManifest manifest, int shards) {
  if (absl::Status s = CheckSampleSpec(manifest); !s.ok()) return s;
  if (shards < 1) return absl::InvalidArgumentError("shards must be >= 1");
  manifest.clear_shards();
  manifest.set_records(0);
  std::unique_ptr<DatasetWriter> writer(
      new DatasetWriter(dir, std::move(manifest)));
  for (int k = 0; k < shards; ++k) {
    shardps::ShardFile* shard = writer->manifest_.add_shards();
    shard->set_data_file(absl::StrFormat("shard-%05d.rec", k));
    shard->set_index_file(absl::StrFormat("shard-%05d.idx", k));
    absl::StatusOr<std::unique_ptr<RecordWriter>> file =
        RecordWriter::Create(absl::StrCat(dir, "/", shard->data_file()));
    if (!file.ok()) return file.status();
    writer->shards_.push_back(*std::move(file));
  }
  return writer;
}

absl::Status DatasetWriter::Add(int32_t label, absl::string_view features,
                                absl::Span<const uint64_t> ids) {
  if (features.size() != FeatureBytes(manifest_) || label < 0 ||
      static_cast<uint32_t>(label) >= manifest_.classes() ||
      ids.size() != manifest_.categorical_fields()) {
    return absl::InvalidArgumentError(
        absl::StrCat("sample ", added_, ": ", features.size(),
                     " feature bytes, label ", label, " and ", ids.size(),
                     " categorical ids do not fit the manifest"));
  }
  record_.assign(reinterpret_cast<const char*>(&label), 4);
  record_.append(features.data(), features.size());
  record_.append(reinterpret_cast<const char*>(ids.data()),
                 ids.size() * sizeof(uint64_t));
  if (absl::Status s = shards_[added_ % shards_.size()]->Append(record_);
      !s.ok()) {
    return s;
  }
  ++added_;
  if (class_records_.empty()) class_records_.assign(manifest_.classes(), 0);
  ++class_records_[label];
  return absl::OkStatus();
}

absl::Status DatasetWriter::Finish() {
  for (size_t k = 0; k < shards_.size(); ++k) {
    shardps::ShardFile* shard = manifest_.mutable_shards(k);
    if (absl::Status s = shards_[k]->Close(); !s.ok()) return s;
    shard->set_records(shards_[k]->offsets().size());
    shard->set_bytes(shards_[k]->size());
    if (absl::Status s =
            WriteIndex(absl::StrCat(dir_, "/", shard->index_file()),
                       shards_[k]->offsets(), shards_[k]->size());
        !s.ok()) {
      return s;
    }
  }
  manifest_.set_records(added_);
  class_records_.resize(manifest_.classes(), 0);
  manifest_.mutable_class_records()->Assign(class_records_.begin(),
                                            class_records_.end());
  std::string text;
  google::protobuf::TextFormat::PrintToString(manifest_, &text);
  const std::string path = absl::StrCat(dir_, "/", kManifestFile);
  std::ofstream out(path, std::ios::trunc);
  out << text;
  out.close();
  if (!out) return absl::UnavailableError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

std::string Dataset::ShardPath(size_t shard) const {
  return absl::StrCat(dir, "/", manifest.shards(shard).data_file());
}

absl::StatusOr<Dataset> OpenDataset(const std::string& dir) {
  Dataset ds;
  ds.dir = dir;
  const std::string path = absl::StrCat(dir, "/", kManifestFile);
  // One connection cache for all of the data set's files (for http://).
  std::shared_ptr<HttpConnections> connections =
      IsUrl(dir) ? NewHttpConnections() : nullptr;
  absl::StatusOr<std::string> text = ReadWholeFile(path, connections);
  if (!text.ok()) {
    if (!absl::IsNotFound(text.status())) return text.status();
    return absl::NotFoundError(absl::StrCat("no manifest at ", path));
  }
  FirstError errors;
  google::protobuf::TextFormat::Parser parser;
  parser.RecordErrorsTo(&errors);
  if (!parser.ParseFromString(*text, &ds.manifest)) {
    return absl::DataLossError(absl::StrCat(
        path, ": not a DatasetManifest in text format (", errors.first(), ")"));
  }
  if (absl::Status s = CheckSampleSpec(ds.manifest); !s.ok()) {
    return absl::DataLossError(absl::StrCat(path, ": ", s.message()));
  }
  // Shards are opened and their indexes read concurrently: on remote
  // storage each is a few round trips of waiting.
  const int k = ds.manifest.shards_size();
  std::vector<absl::Status> statuses(k);
  ds.indexes.resize(k);
  ds.files.resize(k);
  std::vector<std::thread> openers;
  const int threads = IsUrl(dir) ? std::min(k, kOpenThreads) : 1;
  std::atomic<int> next{0};
  auto open_shards = [&] {
    for (int i = next++; i < k; i = next++) {
      statuses[i] = OpenShard(dir, path, ds.manifest.shards(i), connections,
                              &ds.files[i], &ds.indexes[i]);
    }
  };
  for (int t = 1; t < threads; ++t) openers.emplace_back(open_shards);
  open_shards();
  for (std::thread& t : openers) t.join();
  uint64_t total = 0;
  for (int i = 0; i < k; ++i) {
    if (!statuses[i].ok()) return statuses[i];
    total += ds.manifest.shards(i).records();
  }
  if (total != ds.manifest.records()) {
    return absl::DataLossError(absl::StrCat(path, ": shards hold ", total,
                                            " records but the manifest says ",
                                            ds.manifest.records()));
  }
  const auto& per_class = ds.manifest.class_records();
  if (!per_class.empty()) {
    const uint64_t labelled =
        std::accumulate(per_class.begin(), per_class.end(), uint64_t{0});
    if (static_cast<uint32_t>(per_class.size()) != ds.manifest.classes() ||
        labelled != ds.manifest.records()) {
      return absl::DataLossError(absl::StrCat(
          path, ": class_records lists ", per_class.size(), " classes of ",
          labelled, " records but the manifest has ", ds.manifest.classes(),
          " classes of ", ds.manifest.records()));
    }
  }
  return ds;
}

}  // namespace loader
