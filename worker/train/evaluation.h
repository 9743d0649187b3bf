// The model's accuracy on a test set, for the worker's end-of-epoch figure
// and for shardps-worker --evaluate_only.
//
// Thread-safety: call from one thread; `test` and `ws` are its own.
#ifndef SHARDPS_WORKER_TRAIN_EVALUATION_H_
#define SHARDPS_WORKER_TRAIN_EVALUATION_H_

#include "absl/status/statusor.h"
#include "loader/loader.h"
#include "model/network.h"

namespace worker {

// The fraction of the whole test set (one epoch of `test`) that `params`
// classifies right; 0 for an empty set.
absl::StatusOr<double> TestAccuracy(const model::Network& net,
                                    const float* params, loader::Loader& test,
                                    model::Network::Workspace* ws);

}  // namespace worker

#endif  // SHARDPS_WORKER_TRAIN_EVALUATION_H_
