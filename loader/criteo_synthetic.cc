#include "loader/criteo_synthetic.h"

#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "absl/random/zipf_distribution.h"
#include "absl/strings/str_cat.h"
#include "loader/auc.h"
#include "loader/dataset.h"
#include "ps/base/file_io.h"
#include "ps/base/log.h"

namespace loader {
namespace {

// About one click in four, as in Criteo's data; the logit's spread puts
// the hidden model's own AUC near 0.8.
constexpr float kBias = -1.4f;
constexpr float kDenseWeightScale = 0.3f;
constexpr float kIdWeightScale = 0.35f;

// The hidden model's weights, drawn first from the seed.
struct HiddenModel {
  std::vector<float> dense;  // kCriteoDenseFeatures
  std::vector<float> ids;    // kCriteoCategoricalFields * vocabulary

  float Logit(const float* x, const uint64_t* ids_of_sample) const {
    float z = kBias;
    for (int j = 0; j < kCriteoDenseFeatures; ++j) z += dense[j] * x[j];
    for (int f = 0; f < kCriteoCategoricalFields; ++f) {
      z += ids[ids_of_sample[f]];
    }
    return z;
  }
};

absl::Status CheckOptions(const DataToolOptions& o) {
  if (o.samples < 2 || o.test_fraction <= 0 || o.test_fraction >= 1 ||
      o.vocabulary < 2 || !(o.zipf > 1) || !std::isfinite(o.zipf)) {
    return absl::InvalidArgumentError(
        "criteo-synthetic needs --samples >= 2, --test_fraction in (0, 1), "
        "--vocabulary >= 2 and --zipf > 1");
  }
  if (o.vocabulary > (uint64_t{1} << 32)) {
    return absl::InvalidArgumentError("--vocabulary must be <= 2^32");
  }
  return absl::OkStatus();
}

// One split being written, and its samples' true click probabilities.
struct Split {
  std::unique_ptr<DatasetWriter> writer;
  std::vector<float> probabilities;
  std::vector<int32_t> labels;
};

}  // namespace

absl::Status WriteCriteoSynthetic(const DataToolOptions& o) {
  if (absl::Status s = CheckOptions(o); !s.ok()) return s;
  std::mt19937_64 gen(o.seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  HiddenModel model;
  for (int j = 0; j < kCriteoDenseFeatures; ++j) {
    model.dense.push_back(kDenseWeightScale * normal(gen));
  }
  model.ids.resize(kCriteoCategoricalFields * o.vocabulary);
  for (float& w : model.ids) w = kIdWeightScale * normal(gen);

  shardps::DatasetManifest manifest;
  manifest.add_feature_shape(kCriteoDenseFeatures);
  manifest.set_feature_type("float32");
  manifest.set_classes(2);
  manifest.set_categorical_fields(kCriteoCategoricalFields);
  manifest.set_categorical_ids(kCriteoCategoricalFields * o.vocabulary);
  const int64_t test =
      std::max<int64_t>(1, static_cast<int64_t>(o.samples * o.test_fraction));
  Split splits[2];
  const char* names[] = {"train", "test"};
  for (int k = 0; k < 2; ++k) {
    const std::string dir = absl::StrCat(o.out, "/", names[k]);
    if (absl::Status s = ps::CreateDirectories(dir); !s.ok()) return s;
    manifest.set_name(absl::StrCat("criteo-synthetic-", names[k]));
    absl::StatusOr<std::unique_ptr<DatasetWriter>> w =
        DatasetWriter::Create(dir, manifest, o.shards);
    if (!w.ok()) return w.status();
    splits[k].writer = *std::move(w);
  }
  absl::zipf_distribution<uint64_t> zipf(o.vocabulary - 1, o.zipf);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  float x[kCriteoDenseFeatures];
  uint64_t ids[kCriteoCategoricalFields];
  for (int64_t i = 0; i < o.samples; ++i) {
    for (float& v : x) v = normal(gen);
    for (int f = 0; f < kCriteoCategoricalFields; ++f) {
      ids[f] = f * o.vocabulary + zipf(gen);
    }
    const float p = 1.0f / (1.0f + std::exp(-model.Logit(x, ids)));
    const int32_t label = uniform(gen) < p ? 1 : 0;
    Split& split = splits[i < o.samples - test ? 0 : 1];
    split.probabilities.push_back(p);
    split.labels.push_back(label);
    if (absl::Status s = split.writer->Add(
            label,
            absl::string_view(reinterpret_cast<const char*>(x), sizeof x), ids);
        !s.ok()) {
      return s;
    }
  }
  double aucs[2];
  for (int k = 0; k < 2; ++k) {
    absl::StatusOr<double> auc = Auc(splits[k].probabilities, splits[k].labels);
    if (!auc.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "criteo-synthetic ", names[k], " split: ", auc.status().message(),
          " (use more --samples)"));
    }
    aucs[k] = *auc;
    splits[k].writer->set_generator_auc(*auc);
    if (absl::Status s = splits[k].writer->Finish(); !s.ok()) return s;
  }
  ps::Logf(o.log,
           "%s: %d train + %d test samples in Criteo's schema (13 dense, 26 "
           "categorical fields of %d ids, Zipf %.2f); the generator's own AUC "
           "is %.4f on train, %.4f on test",
           o.out, o.samples - test, test, o.vocabulary, o.zipf, aucs[0],
           aucs[1]);
  return absl::OkStatus();
}

}  // namespace loader
