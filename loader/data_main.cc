// shardps-data: writes sharded data sets (loader/data_tool.h).
//   shardps-data fashion-mnist --out DIR --shards K
//   shardps-data synthetic --out DIR --samples N --features D --classes C
//                          --shards K --seed S
//   shardps-data criteo-synthetic --out DIR --samples N --vocabulary V
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_format.h"
#include "loader/data_tool.h"
#include "ps/base/program.h"

ABSL_FLAG(std::string, out, "",
          "Output directory (created with its parents if missing).");
ABSL_FLAG(int, shards, 4, "Record shards per data set.");
ABSL_FLAG(std::string, source, "/usr/share/datasets/fashion-mnist",
          "fashion-mnist: directory with the four IDX .gz files (Debian "
          "package dataset-fashion-mnist).");
ABSL_FLAG(int64_t, samples, 10000,
          "synthetic, criteo-synthetic: number of samples.");
ABSL_FLAG(int, features, 64, "synthetic: features per sample.");
ABSL_FLAG(int, classes, 10, "synthetic: number of classes.");
ABSL_FLAG(uint64_t, seed, 1,
          "synthetic, criteo-synthetic: seed of the hidden model and the "
          "data.");
ABSL_FLAG(double, test_fraction, 0.1,
          "synthetic, criteo-synthetic: share of samples written to the test "
          "set.");
ABSL_FLAG(uint64_t, vocabulary, 1000,
          "criteo-synthetic: ids per categorical field.");
ABSL_FLAG(double, zipf, 1.1,
          "criteo-synthetic: Zipf exponent (> 1) of each field's ids.");

int main(int argc, char** argv) {
  std::vector<char*> args = ps::InitProgram(
      argc, argv,
      "writes sharded data sets.\n"
      "  shardps-data fashion-mnist --out DIR --shards K\n"
      "  shardps-data synthetic --out DIR --samples N --features D "
      "--classes C --shards K --seed S\n"
      "  shardps-data criteo-synthetic --out DIR --samples N --vocabulary V "
      "--zipf Q --seed S");
  loader::DataToolOptions o;
  o.command = args.size() == 2 ? args[1] : "";
  o.out = absl::GetFlag(FLAGS_out);
  o.shards = absl::GetFlag(FLAGS_shards);
  o.source = absl::GetFlag(FLAGS_source);
  o.samples = absl::GetFlag(FLAGS_samples);
  o.features = absl::GetFlag(FLAGS_features);
  o.classes = absl::GetFlag(FLAGS_classes);
  o.seed = absl::GetFlag(FLAGS_seed);
  o.test_fraction = absl::GetFlag(FLAGS_test_fraction);
  o.vocabulary = absl::GetFlag(FLAGS_vocabulary);
  o.zipf = absl::GetFlag(FLAGS_zipf);
  if (absl::Status s = loader::RunDataTool(o); !s.ok()) {
    absl::FPrintF(stderr, "shardps-data: %s\n", s.ToString());
    return 1;
  }
  return 0;
}
