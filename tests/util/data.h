// Test helpers for data sets: the one way tests make a data set with the
// tool is MakeSyntheticData (shardps-data, as users run it); loader tests
// that must tell samples apart write theirs in-process (WriteIdDataset).
#ifndef SHARDPS_TESTS_UTIL_DATA_H_
#define SHARDPS_TESTS_UTIL_DATA_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "loader/dataset.h"
#include "ps/base/program.h"
#include "util/processes.h"

namespace testutil {

// Writes a synthetic data set (DIR/train, DIR/test) with shardps-data into
// `out`; `flags` as on its command line. The tool's exit code; its output
// is printed on failure.
inline int MakeSyntheticData(const std::string& out, const std::string& flags) {
  std::vector<std::string> argv = {ps::SiblingBinary("shardps-data"),
                                   "synthetic", "--out", out};
  for (absl::string_view f : absl::StrSplit(flags, ' ', absl::SkipEmpty())) {
    argv.emplace_back(f);
  }
  auto [code, output] = RunCommand(argv);
  if (code != 0) ADD_FAILURE() << "shardps-data failed: " << output;
  return code;
}

// What always guessing the most common class scores on the test split of
// the data set in `dir` (DIR/test): the chance level a trained model's test
// accuracy is held against. 1 (nothing beats it) when it cannot be read.
inline double ChanceAccuracy(const std::string& dir) {
  absl::StatusOr<loader::Dataset> test = loader::OpenDataset(dir + "/test");
  if (!test.ok() || test->manifest.class_records().empty()) {
    ADD_FAILURE() << "no class counts in " << dir << "/test";
    return 1;
  }
  const auto& counts = test->manifest.class_records();
  return static_cast<double>(*std::max_element(counts.begin(), counts.end())) /
         test->manifest.records();
}

// The least test accuracy a model that learned reaches on DIR/test: it
// makes at most 70% of the errors of always guessing the most common class.
// (The synthetic teacher's classes are uneven: seed 1's test sets are about
// two thirds one class, so 1/classes is no chance level.)
inline double LearnedAccuracy(const std::string& dir) {
  const double chance = ChanceAccuracy(dir);
  return chance + 0.3 * (1 - chance);
}

// Writes a float32 data set named "ids" into `dir` whose sample i has the
// features {i, rest...} and the label i % classes, in `shards` shards, so
// that tests can tell which samples a loader delivered.
inline void WriteIdDataset(const std::string& dir, std::vector<float> rest,
                           int classes, int shards, int samples) {
  shardps::DatasetManifest spec;
  spec.set_name("ids");
  spec.add_feature_shape(1 + rest.size());
  spec.set_feature_type("float32");
  spec.set_classes(classes);
  absl::StatusOr<std::unique_ptr<loader::DatasetWriter>> writer =
      loader::DatasetWriter::Create(dir, spec, shards);
  ASSERT_TRUE(writer.ok()) << writer.status();
  std::vector<float> x(1 + rest.size());
  std::copy(rest.begin(), rest.end(), x.begin() + 1);
  for (int i = 0; i < samples; ++i) {
    x[0] = static_cast<float>(i);
    ASSERT_TRUE(
        (*writer)
            ->Add(i % classes,
                  absl::string_view(reinterpret_cast<const char*>(x.data()),
                                    x.size() * sizeof(float)))
            .ok());
  }
  ASSERT_TRUE((*writer)->Finish().ok());
}

}  // namespace testutil

#endif  // SHARDPS_TESTS_UTIL_DATA_H_
