#include "loader/data_tool.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "loader/criteo_synthetic.h"
#include "loader/dataset.h"
#include "loader/idx_file.h"
#include "ps/base/file_io.h"
#include "ps/base/log.h"

namespace loader {

namespace {

absl::Status ConvertFashionMnistSplit(const DataToolOptions& o,
                                      const std::string& prefix,
                                      const std::string& out) {
  const std::string& source = o.source;
  absl::StatusOr<IdxArray> images =
      ReadIdx(absl::StrCat(source, "/", prefix, "-images-idx3-ubyte.gz"), 3);
  if (!images.ok()) return images.status();
  absl::StatusOr<IdxArray> labels =
      ReadIdx(absl::StrCat(source, "/", prefix, "-labels-idx1-ubyte.gz"), 1);
  if (!labels.ok()) return labels.status();
  if (images->dims[0] != labels->dims[0]) {
    return absl::DataLossError(absl::StrCat(prefix, ": ", images->dims[0],
                                            " images but ", labels->dims[0],
                                            " labels"));
  }
  if (absl::Status s = ps::CreateDirectories(out); !s.ok()) return s;
  shardps::DatasetManifest manifest;
  manifest.set_name(absl::StrCat("fashion-mnist-", prefix));
  manifest.add_feature_shape(images->dims[1]);
  manifest.add_feature_shape(images->dims[2]);
  manifest.set_feature_type("uint8");
  manifest.set_classes(10);
  absl::StatusOr<std::unique_ptr<DatasetWriter>> writer =
      DatasetWriter::Create(out, manifest, o.shards);
  if (!writer.ok()) return writer.status();
  const size_t pixels = size_t{images->dims[1]} * images->dims[2];
  for (uint32_t i = 0; i < images->dims[0]; ++i) {
    const int label = static_cast<unsigned char>(labels->bytes[i]);
    if (absl::Status s = (*writer)->Add(
            label, absl::string_view(images->bytes).substr(i * pixels, pixels));
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = (*writer)->Finish(); !s.ok()) return s;
  ps::Logf(o.log, "%s: %d samples in %d shards", out, images->dims[0],
           o.shards);
  return absl::OkStatus();
}

// A fixed random network D -> 32 ReLU -> C that labels the synthetic data.
class Teacher {
 public:
  // Draws the weights from `normal` and `gen`, which go on to draw the
  // samples (so a seed always gives the same data set).
  Teacher(int features, int classes, std::mt19937_64& gen,
          std::normal_distribution<float>& normal)
      : features_(features),
        classes_(classes),
        w1_(static_cast<size_t>(features) * kHidden),
        w2_(static_cast<size_t>(kHidden) * classes) {
    for (float& w : w1_) {
      w = normal(gen) / std::sqrt(static_cast<float>(features));
    }
    for (float& w : w2_) w = normal(gen);
  }

  int Label(const std::vector<float>& x) const {
    float hidden[kHidden];
    for (int h = 0; h < kHidden; ++h) {
      float sum = 0;
      for (int d = 0; d < features_; ++d) sum += x[d] * w1_[d * kHidden + h];
      hidden[h] = std::max(sum, 0.0f);
    }
    int best = 0;
    float best_logit = 0;
    for (int c = 0; c < classes_; ++c) {
      float sum = 0;
      for (int h = 0; h < kHidden; ++h)
        sum += hidden[h] * w2_[h * classes_ + c];
      if (c == 0 || sum > best_logit) {
        best = c;
        best_logit = sum;
      }
    }
    return best;
  }

 private:
  static constexpr int kHidden = 32;
  const int features_;
  const int classes_;
  std::vector<float> w1_, w2_;
};

// Labels come from a fixed random teacher network (D -> 32 ReLU -> C) on
// Gaussian inputs, so the task is learnable but not linearly trivial.
absl::Status WriteSynthetic(const DataToolOptions& o) {
  const int64_t samples = o.samples;
  const int features = o.features, classes = o.classes;
  const double test_fraction = o.test_fraction;
  if (samples < 1 || features < 1 || classes < 2 || test_fraction < 0 ||
      test_fraction >= 1) {
    return absl::InvalidArgumentError(
        "synthetic needs --samples >= 1, --features >= 1, --classes >= 2 and "
        "--test_fraction in [0, 1)");
  }
  std::mt19937_64 gen(o.seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const Teacher teacher(features, classes, gen, normal);
  shardps::DatasetManifest manifest;
  manifest.set_name("synthetic");
  manifest.add_feature_shape(features);
  manifest.set_feature_type("float32");
  manifest.set_classes(classes);
  const int64_t test = static_cast<int64_t>(samples * test_fraction);
  std::vector<std::unique_ptr<DatasetWriter>> writers;
  for (const char* split : {"train", "test"}) {
    const std::string dir = absl::StrCat(o.out, "/", split);
    if (absl::Status s = ps::CreateDirectories(dir); !s.ok()) return s;
    manifest.set_name(absl::StrCat("synthetic-", split));
    absl::StatusOr<std::unique_ptr<DatasetWriter>> w =
        DatasetWriter::Create(dir, manifest, o.shards);
    if (!w.ok()) return w.status();
    writers.push_back(*std::move(w));
  }
  std::vector<float> x(features);
  for (int64_t i = 0; i < samples; ++i) {
    for (float& v : x) v = normal(gen);
    const int label = teacher.Label(x);
    DatasetWriter& w = *writers[i < samples - test ? 0 : 1];
    if (absl::Status s = w.Add(
            label, absl::string_view(reinterpret_cast<const char*>(x.data()),
                                     x.size() * sizeof(float)));
        !s.ok()) {
      return s;
    }
  }
  for (auto& w : writers) {
    if (absl::Status s = w->Finish(); !s.ok()) return s;
  }
  ps::Logf(o.log,
           "%s: %d train + %d test samples, %d features, %d classes, %d "
           "shards each",
           o.out, samples - test, test, features, classes, o.shards);
  return absl::OkStatus();
}

}  // namespace

absl::Status RunDataTool(const DataToolOptions& o) {
  if (o.command != "fashion-mnist" && o.command != "synthetic" &&
      o.command != "criteo-synthetic") {
    return absl::InvalidArgumentError(
        "give one command: fashion-mnist, synthetic or criteo-synthetic (see "
        "--help)");
  }
  if (o.out.empty()) return absl::InvalidArgumentError("--out is required");
  if (o.shards < 1) return absl::InvalidArgumentError("--shards must be >= 1");
  if (absl::Status s = ps::CreateDirectories(o.out); !s.ok()) return s;
  if (o.command == "synthetic") return WriteSynthetic(o);
  if (o.command == "criteo-synthetic") return WriteCriteoSynthetic(o);
  if (absl::Status s = ConvertFashionMnistSplit(o, "train", o.out + "/train");
      !s.ok()) {
    return s;
  }
  return ConvertFashionMnistSplit(o, "t10k", o.out + "/test");
}

}  // namespace loader
