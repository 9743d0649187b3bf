// The training loop of a click model (--model=dlrm:..., model/dlrm.h) on
// data with categorical fields (shardps-data criteo-synthetic). Two tables:
// options.table holds the MLP (dense, initialised on the servers by its
// InitPlan) and options.table + "-rows" the embedding rows (sparse, rows
// of D floats made on first pull from a seeded normal, sharded by
// options.row_sharding over the data's id space). Each step pulls the MLP
// and the rows of the batch's ids, runs forward and backward, and pushes
// the MLP's gradient and the rows' (repeated ids summed by the client).
// Asynchronous only. Steps go to RUN_DIR/metrics-RANK.csv like the dense
// trainer's; rank 0 scores the test set when it is done.
//
// Thread-safety: runs on the calling thread; the loader reads on its own.
#ifndef SHARDPS_WORKER_TRAIN_CLICK_TRAINER_H_
#define SHARDPS_WORKER_TRAIN_CLICK_TRAINER_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/summary.pb.h"
#include "ps/client/client.h"
#include "worker/train/trainer.h"

namespace worker {

// A click model on DATA/test: its AUC, its accuracy at a 0.5 threshold,
// and the AUC of the data's own generator (0 when the manifest gives none).
struct ClickScore {
  double auc = 0;
  double accuracy = 0;
  double generator_auc = 0;
  uint64_t samples = 0;
};

absl::StatusOr<shardps::WorkerSummary> TrainClickModel(
    ps::Client& client, const TrainerOptions& options,
    absl::Time process_start);

// Pulls the current model (creating, from the initializer, the rows of ids
// never trained) and scores options.data/test.
absl::StatusOr<ClickScore> EvaluateClickModel(ps::Client& client,
                                              const TrainerOptions& options);

}  // namespace worker

#endif  // SHARDPS_WORKER_TRAIN_CLICK_TRAINER_H_
