// What shardps-data does: writes a sharded data set (loader/dataset.h), with
// a train/ and a test/ split under `out` (created with its parents):
//   fashion-mnist: converted from the four IDX .gz files in `source`;
//   synthetic: `samples` Gaussian vectors of `features` floats, labelled by a
//     fixed random teacher network (D -> 32 ReLU -> C) drawn from `seed`, so
//     the task is learnable but not linearly trivial; `test_fraction` of
//     them go to test/. A seed always gives the same bytes.
//   criteo-synthetic: Criteo's schema (loader/criteo_synthetic.h).
// What was written goes to `log`; errors name the file.
//
// Thread-safety: call from one thread.
#ifndef SHARDPS_LOADER_DATA_TOOL_H_
#define SHARDPS_LOADER_DATA_TOOL_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "ps/base/log.h"

namespace loader {

struct DataToolOptions {
  std::string command;  // fashion-mnist, synthetic or criteo-synthetic
  std::string out;
  int shards = 4;
  std::string source = "/usr/share/datasets/fashion-mnist";
  int64_t samples = 10000;
  int features = 64;
  int classes = 10;
  uint64_t seed = 1;
  double test_fraction = 0.1;
  // criteo-synthetic: ids per categorical field and their Zipf exponent.
  uint64_t vocabulary = 1000;
  double zipf = 1.1;
  ps::LogSink* log = nullptr;  // what was written; null: stderr
};

absl::Status RunDataTool(const DataToolOptions& options);

}  // namespace loader

#endif  // SHARDPS_LOADER_DATA_TOOL_H_
