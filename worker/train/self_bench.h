// What a worker can do alone, measured without servers or network
// (shardps-worker --bench): training steps of its model on one fixed random
// batch, or one epoch of its data through its loader against a plain
// sequential read of the same files. Each prints one line (JSON with
// `json`) to stdout.
//
// Thread-safety: call from one thread; the loader bench starts the
// loader's own readers.
#ifndef SHARDPS_WORKER_TRAIN_SELF_BENCH_H_
#define SHARDPS_WORKER_TRAIN_SELF_BENCH_H_

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace worker {

struct ModelBenchOptions {
  std::string model = "mlp:784-256-256-10";
  int batch = 128;
  int blas_threads = 1;
  absl::Duration length = absl::Seconds(5);
  bool json = false;
};

// Forward, backward and the SGD update of the flat parameter vector, for
// options.length after a warm-up; prints samples per second and (JSON) the
// mean step's compute and, per parameterised layer, its parameters and
// when in the step it reads them and writes its gradient
// (forward_at_ms, gradient_at_ms).
absl::Status RunModelBench(const ModelBenchOptions& options);

struct LoaderBenchOptions {
  std::string data;  // a data set directory (with manifest.txt)
  std::string loader = "parallel";
  int batch = 128;
  int reader_threads = 4;
  int prefetch_batches = 8;
};

// One epoch of the whole data set through the loader (world 1), and a
// read(2) of the same shard files in 1 MiB blocks for reference; prints a
// JSON line with both rates and the first batch's delay.
absl::Status RunLoaderBench(const LoaderBenchOptions& options);

}  // namespace worker

#endif  // SHARDPS_WORKER_TRAIN_SELF_BENCH_H_
