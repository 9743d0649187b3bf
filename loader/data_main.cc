// shardps-data: writes sharded data sets (loader/dataset.h).
//   shardps-data fashion-mnist --out DIR --shards K
//   shardps-data synthetic --out DIR --samples N --features D --classes C
//                          --shards K --seed S
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "loader/dataset.h"
#include "loader/idx_file.h"
#include "ps/program.h"

ABSL_FLAG(std::string, out, "", "Output directory (created if missing).");
ABSL_FLAG(int, shards, 4, "Record shards per data set.");
ABSL_FLAG(std::string, source, "/usr/share/datasets/fashion-mnist",
          "fashion-mnist: directory with the four IDX .gz files (Debian "
          "package dataset-fashion-mnist).");
ABSL_FLAG(int64_t, samples, 10000, "synthetic: number of samples.");
ABSL_FLAG(int, features, 64, "synthetic: features per sample.");
ABSL_FLAG(int, classes, 10, "synthetic: number of classes.");
ABSL_FLAG(uint64_t, seed, 1, "synthetic: seed of the teacher and the data.");
ABSL_FLAG(double, test_fraction, 0.1,
          "synthetic: share of samples written to the test set.");

namespace {

absl::Status MakeDir(const std::string& dir) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return absl::UnavailableError(absl::StrCat("cannot create ", dir));
  }
  return absl::OkStatus();
}

absl::Status ConvertFashionMnistSplit(const std::string& source,
                                      const std::string& prefix,
                                      const std::string& out, int shards) {
  absl::StatusOr<loader::IdxArray> images = loader::ReadIdx(
      absl::StrCat(source, "/", prefix, "-images-idx3-ubyte.gz"), 3);
  if (!images.ok()) return images.status();
  absl::StatusOr<loader::IdxArray> labels = loader::ReadIdx(
      absl::StrCat(source, "/", prefix, "-labels-idx1-ubyte.gz"), 1);
  if (!labels.ok()) return labels.status();
  if (images->dims[0] != labels->dims[0]) {
    return absl::DataLossError(absl::StrCat(prefix, ": ", images->dims[0],
                                            " images but ", labels->dims[0],
                                            " labels"));
  }
  if (absl::Status s = MakeDir(out); !s.ok()) return s;
  shardps::DatasetManifest manifest;
  manifest.set_name(absl::StrCat("fashion-mnist-", prefix));
  manifest.add_feature_shape(images->dims[1]);
  manifest.add_feature_shape(images->dims[2]);
  manifest.set_feature_type("uint8");
  manifest.set_classes(10);
  absl::StatusOr<std::unique_ptr<loader::DatasetWriter>> writer =
      loader::DatasetWriter::Create(out, manifest, shards);
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
  absl::FPrintF(stderr, "shardps-data: %s: %d samples in %d shards\n", out,
                images->dims[0], shards);
  return absl::OkStatus();
}

// Labels come from a fixed random teacher network (D -> 32 ReLU -> C) on
// Gaussian inputs, so the task is learnable but not linearly trivial.
absl::Status WriteSynthetic(const std::string& out, int64_t samples,
                            int features, int classes, int shards,
                            uint64_t seed, double test_fraction) {
  if (samples < 1 || features < 1 || classes < 2 || test_fraction < 0 ||
      test_fraction >= 1) {
    return absl::InvalidArgumentError(
        "synthetic needs --samples >= 1, --features >= 1, --classes >= 2 and "
        "--test_fraction in [0, 1)");
  }
  constexpr int kHidden = 32;
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> w1(static_cast<size_t>(features) * kHidden),
      w2(static_cast<size_t>(kHidden) * classes);
  for (float& w : w1) w = normal(gen) / std::sqrt(static_cast<float>(features));
  for (float& w : w2) w = normal(gen);
  if (absl::Status s = MakeDir(out); !s.ok()) return s;
  shardps::DatasetManifest manifest;
  manifest.set_name("synthetic");
  manifest.add_feature_shape(features);
  manifest.set_feature_type("float32");
  manifest.set_classes(classes);
  const int64_t test = static_cast<int64_t>(samples * test_fraction);
  std::vector<std::unique_ptr<loader::DatasetWriter>> writers;
  for (const char* split : {"train", "test"}) {
    const std::string dir = absl::StrCat(out, "/", split);
    if (absl::Status s = MakeDir(dir); !s.ok()) return s;
    manifest.set_name(absl::StrCat("synthetic-", split));
    absl::StatusOr<std::unique_ptr<loader::DatasetWriter>> w =
        loader::DatasetWriter::Create(dir, manifest, shards);
    if (!w.ok()) return w.status();
    writers.push_back(*std::move(w));
  }
  std::vector<float> x(features), hidden(kHidden), logits(classes);
  for (int64_t i = 0; i < samples; ++i) {
    for (float& v : x) v = normal(gen);
    for (int h = 0; h < kHidden; ++h) {
      float sum = 0;
      for (int d = 0; d < features; ++d) sum += x[d] * w1[d * kHidden + h];
      hidden[h] = std::max(sum, 0.0f);
    }
    for (int c = 0; c < classes; ++c) {
      float sum = 0;
      for (int h = 0; h < kHidden; ++h) sum += hidden[h] * w2[h * classes + c];
      logits[c] = sum;
    }
    const int label = static_cast<int>(
        std::max_element(logits.begin(), logits.end()) - logits.begin());
    loader::DatasetWriter& w = *writers[i < samples - test ? 0 : 1];
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
  absl::FPrintF(stderr,
                "shardps-data: %s: %d train + %d test samples, %d features, "
                "%d classes, %d shards each\n",
                out, samples - test, test, features, classes, shards);
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  ps::GrpcRuntime grpc_runtime;
  std::vector<char*> args = ps::InitProgram(
      argc, argv,
      "writes sharded data sets.\n"
      "  shardps-data fashion-mnist --out DIR --shards K\n"
      "  shardps-data synthetic --out DIR --samples N --features D "
      "--classes C --shards K --seed S");
  const std::string out = absl::GetFlag(FLAGS_out);
  const int shards = absl::GetFlag(FLAGS_shards);
  const std::string command = args.size() == 2 ? args[1] : "";
  absl::Status status;
  if (command != "fashion-mnist" && command != "synthetic") {
    status = absl::InvalidArgumentError(
        "give one command: fashion-mnist or synthetic (see --help)");
  } else if (out.empty()) {
    status = absl::InvalidArgumentError("--out is required");
  } else if (shards < 1) {
    status = absl::InvalidArgumentError("--shards must be >= 1");
  } else if (absl::Status s = MakeDir(out); !s.ok()) {
    status = s;
  } else if (command == "fashion-mnist") {
    const std::string source = absl::GetFlag(FLAGS_source);
    status = ConvertFashionMnistSplit(source, "train", out + "/train", shards);
    if (status.ok()) {
      status = ConvertFashionMnistSplit(source, "t10k", out + "/test", shards);
    }
  } else {
    status = WriteSynthetic(
        out, absl::GetFlag(FLAGS_samples), absl::GetFlag(FLAGS_features),
        absl::GetFlag(FLAGS_classes), shards, absl::GetFlag(FLAGS_seed),
        absl::GetFlag(FLAGS_test_fraction));
  }
  if (!status.ok()) {
    absl::FPrintF(stderr, "shardps-data: %s\n", status.ToString());
    return 1;
  }
  return 0;
}
