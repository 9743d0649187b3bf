// The training loop of one worker against the parameter servers, which
// apply its gradients with the table's optimizer. Each step pulls every
// parameter (all shards in parallel), runs forward/backward on the next batch
// and pushes the gradient; the servers apply it on arrival. Writes
// RUN_DIR/metrics-<rank>.csv (per-step phase times and loss,
// worker/train/step_log.h), keeps a checkpoint of its position so that a
// restarted worker can rejoin (worker/train/position.h), and reports a
// summary.
//
// Thread-safety: Train and Evaluate run on the calling thread; the loader
// reads on threads of its own.
#ifndef SHARDPS_WORKER_TRAIN_TRAINER_H_
#define SHARDPS_WORKER_TRAIN_TRAINER_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/summary.pb.h"
#include "ps/base/log.h"
#include "ps/client/client.h"
#include "ps/obs/trace.h"
#include "worker/train/worker_metrics.h"

namespace worker {

// Plain SGD with learning rate 0.1.
shardps::OptimizerConfig DefaultOptimizer();

struct TrainerOptions {
  std::string model = "mlp:784-256-256-10";
  std::string data;  // a directory with train/ (and test/) data sets
  std::string loader = "parallel";  // or "sequential" (the baseline)
  int batch = 128;
  // The servers' optimizer for the table (worker/train/training_config.h).
  shardps::OptimizerConfig optimizer = DefaultOptimizer();
  // constant, or cosine: step s of S pushes with its learning rate scaled
  // by (1 + cos(pi s / S)) / 2, decaying from 1 towards 0.
  std::string lr_schedule = "constant";
  // async by default. Under sync and ssp every rank does the same number of
  // steps per epoch (that of the smallest partition), each step its clock.
  shardps::ConsistencyConfig consistency;
  // The client's --compression, recorded in the summary.
  std::string compression = "none";
  // Spans of the worker's phases (init, read, wait_for_data, pull, compute,
  // push, evaluate) go here (ps/obs/trace.h); null: none.
  ps::Tracer* tracer = nullptr;
  // Steps, their phases and the loader's queue are counted here
  // (worker/train/worker_metrics.h); null: none.
  WorkerMetrics* metrics = nullptr;
  int epochs = 1;
  uint64_t seed = 1;
  int reader_threads = 4;
  int prefetch_batches = 8;
  int rank = 0;
  int world = 1;
  std::string run_dir;
  std::string table = "model";
  // Click models: how the embedding rows are sharded, hash or range.
  std::string row_sharding = "hash";
  int progress_every = 100;  // steps between progress lines
  uint64_t max_steps = 0;    // stop after this many steps; 0: run all epochs
  // EMULATION for cluster experiments with more workers than cores: when
  // > 0, each step's forward/backward is replaced by a wait of this many
  // milliseconds and a zero gradient is pushed. Pulls and pushes still move
  // every parameter byte; the summary records that this was used.
  double emulate_compute_ms = 0;
  // "none": pull, forward/backward, push, one after another (the
  // baseline). "layer": each layer's gradient is exchanged for its fresh
  // parameters (PushPull) as soon as backward has it, and forward waits for
  // a layer's only when it reaches it (worker/train/layer_exchange.h).
  std::string overlap = "none";
  // The worker's own checkpoint (RUN_DIR/worker-RANK.checkpoint.json,
  // proto/summary.proto WorkerCheckpoint) is written every this many steps
  // and at every epoch's end, after the step's push; 0: epoch ends only.
  int checkpoint_every = 50;
  // Rejoin a run: continue from the worker's checkpoint (its epoch and
  // position; the steps since it are done again) instead of from the start.
  // Without a checkpoint the worker starts at the beginning.
  bool resume = false;
  // Where the trainer says what it resumed from; null: stderr. Progress
  // lines go to stderr (rewritten in place on a terminal).
  ps::LogSink* log = nullptr;
};

// Trains and returns this worker's summary (proto/summary.proto).
absl::StatusOr<shardps::WorkerSummary> Train(ps::Client& client,
                                             const TrainerOptions& options,
                                             absl::Time process_start);

// Pulls the current model of options.table and returns its accuracy on
// options.data/test. For the final model of an asynchronous run, evaluate
// after every worker has finished: rank 0's own figure is of the model when
// rank 0 finished, which need not be the last.
absl::StatusOr<double> Evaluate(ps::Client& client,
                                const TrainerOptions& options);

}  // namespace worker

#endif  // SHARDPS_WORKER_TRAIN_TRAINER_H_
