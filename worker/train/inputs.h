// What a worker trains on, opened before its first step: the model, its
// partition of DATA/train behind the chosen loader, and (rank 0 only) the
// test set behind a sequential loader, read once into memory.
//
// Thread-safety: owned and used by the training thread; the loaders run
// their own readers.
#ifndef SHARDPS_WORKER_TRAIN_INPUTS_H_
#define SHARDPS_WORKER_TRAIN_INPUTS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "loader/dataset.h"
#include "loader/loader.h"
#include "model/model_spec.h"
#include "model/network.h"
#include "worker/train/trainer.h"

namespace worker {

struct Inputs {
  explicit Inputs(model::Network net) : net(std::move(net)) {}
  Inputs(const Inputs&) = delete;
  Inputs& operator=(const Inputs&) = delete;

  const model::Network net;
  loader::Dataset train;  // the loaders read through these
  loader::Dataset test_set;
  std::unique_ptr<loader::Loader> batches;
  std::unique_ptr<loader::Loader> test;  // null but on rank 0
};

// Opens options.model and the data sets; INVALID_ARGUMENT when the model
// does not fit the data (features, classes), naming both.
absl::StatusOr<std::unique_ptr<Inputs>> OpenInputs(
    const TrainerOptions& options);

// The loader options of a worker's partition of the training set (its
// reads traced and counted when options give a tracer or metrics).
loader::LoaderOptions TrainLoaderOptions(const TrainerOptions& options);

// A sample's shape as a data set's manifest gives it: [H, W] is an H x W
// image of one channel, [H, W, C] one of C channels (channels last),
// anything else a flat vector.
model::Shape SampleShape(const shardps::DatasetManifest& manifest);

// The test set of options.data behind a sequential loader of 1000-sample
// batches.
absl::StatusOr<std::unique_ptr<loader::Loader>> OpenTestSet(
    const TrainerOptions& options, loader::Dataset* dataset);

// Steps every rank takes per epoch: under a barrier (sync, ssp) all ranks
// must push the same clocks, so all take the smallest partition's steps
// (the larger ones skip at most one batch).
uint64_t StepsPerEpoch(const TrainerOptions& options, const Inputs& inputs);

}  // namespace worker

#endif  // SHARDPS_WORKER_TRAIN_INPUTS_H_
