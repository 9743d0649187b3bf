#include "worker/train/inputs.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace worker {
namespace {

absl::Status CheckModelFitsData(const TrainerOptions& options,
                                const model::Network& net,
                                const shardps::DatasetManifest& manifest) {
  if (loader::FeatureCount(manifest) ==
          static_cast<uint64_t>(net.input_width()) &&
      manifest.classes() == static_cast<uint32_t>(net.num_classes())) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--model=", options.model, " takes ", net.input_width(), " features and ",
      net.num_classes(), " classes but ", options.data, "/train has ",
      loader::FeatureCount(manifest), " and ", manifest.classes()));
}

}  // namespace

loader::LoaderOptions TrainLoaderOptions(const TrainerOptions& options) {
  loader::LoaderOptions lo;
  lo.batch_size = options.batch;
  lo.rank = options.rank;
  lo.world = options.world;
  lo.seed = options.seed;
  lo.reader_threads = options.reader_threads;
  lo.prefetch_batches = options.prefetch_batches;
  if (options.tracer != nullptr || options.metrics != nullptr) {
    lo.on_read = [tracer = options.tracer, metrics = options.metrics](
                     absl::Time start, absl::Time end) {
      if (tracer != nullptr) tracer->Record("read", "loader", start, end);
      if (metrics != nullptr) metrics->RecordRead(end - start);
    };
  }
  return lo;
}

model::Shape SampleShape(const shardps::DatasetManifest& manifest) {
  const auto& dims = manifest.feature_shape();
  if (dims.size() == 2 || dims.size() == 3) {
    return model::Shape{static_cast<int>(dims[0]), static_cast<int>(dims[1]),
                        dims.size() == 3 ? static_cast<int>(dims[2]) : 1};
  }
  return model::Shape{1, 1, static_cast<int>(loader::FeatureCount(manifest))};
}

absl::StatusOr<std::unique_ptr<loader::Loader>> OpenTestSet(
    const TrainerOptions& options, loader::Dataset* dataset) {
  absl::StatusOr<loader::Dataset> test =
      loader::OpenDataset(options.data + "/test");
  if (!test.ok()) return test.status();
  *dataset = *std::move(test);
  loader::LoaderOptions to;
  to.batch_size = 1000;
  return loader::MakeSequentialLoader(*dataset, to);
}

absl::StatusOr<std::unique_ptr<Inputs>> OpenInputs(
    const TrainerOptions& options) {
  absl::StatusOr<model::ModelSpec> spec = model::ParseModelSpec(options.model);
  if (!spec.ok()) return spec.status();
  absl::StatusOr<loader::Dataset> train =
      loader::OpenDataset(options.data + "/train");
  if (!train.ok()) return train.status();
  absl::StatusOr<model::Network> net =
      model::Network::Create(*spec, SampleShape(train->manifest));
  if (!net.ok()) return net.status();
  auto inputs = std::make_unique<Inputs>(*std::move(net));
  inputs->train = *std::move(train);
  if (absl::Status s =
          CheckModelFitsData(options, inputs->net, inputs->train.manifest);
      !s.ok()) {
    return s;
  }
  absl::StatusOr<std::unique_ptr<loader::Loader>> batches = loader::MakeLoader(
      options.loader, inputs->train, TrainLoaderOptions(options));
  if (!batches.ok()) return batches.status();
  inputs->batches = *std::move(batches);
  // The test set is rank 0's, and optional: without one, no accuracy.
  if (options.rank == 0) {
    absl::StatusOr<std::unique_ptr<loader::Loader>> test =
        OpenTestSet(options, &inputs->test_set);
    if (test.ok()) {
      inputs->test = *std::move(test);
    } else if (!absl::IsNotFound(test.status())) {
      return test.status();
    }
  }
  return inputs;
}

uint64_t StepsPerEpoch(const TrainerOptions& options, const Inputs& inputs) {
  uint64_t records = inputs.batches->partition_size();
  if (options.consistency.mode() != shardps::CONSISTENCY_ASYNC) {
    for (int r = 0; r < options.world; ++r) {
      const loader::Partition part = loader::PartitionFor(
          inputs.train.manifest.records(), r, options.world);
      records = std::min(records, part.end - part.begin);
    }
  }
  return (records + options.batch - 1) / options.batch;
}

}  // namespace worker
