#include "worker/train/self_bench.h"

#include <cblas.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <random>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "loader/loader.h"
#include "model/network.h"
#include "ps/base/file_io.h"

namespace worker {
namespace {

// A fixed random batch of `batch` samples for `net`.
struct RandomBatch {
  std::vector<float> x;
  std::vector<int32_t> labels;
};

RandomBatch MakeRandomBatch(const model::Network& net, int batch) {
  std::mt19937 gen(2);
  std::uniform_real_distribution<float> pixel(0.0f, 1.0f);
  RandomBatch b;
  b.x.resize(static_cast<size_t>(batch) * net.input_width());
  for (float& v : b.x) v = pixel(gen);
  b.labels.resize(batch);
  for (int i = 0; i < batch; ++i) b.labels[i] = i % net.num_classes();
  return b;
}

// Seconds to read every shard file of `data` with read(2), 1 MiB at a time.
absl::StatusOr<double> PlainReadSeconds(const loader::Dataset& data) {
  const absl::Time start = absl::Now();
  std::vector<char> block(1 << 20);
  for (size_t k = 0; k < data.indexes.size(); ++k) {
    const std::string path = data.ShardPath(k);
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ps::ErrnoStatus(errno, "open", path);
    ssize_t got;
    while ((got = ps::ReadSome(fd, block.data(), block.size())) > 0) {
    }
    const int error = errno;
    ::close(fd);
    if (got < 0) return ps::ErrnoStatus(error, "read", path);
  }
  return absl::ToDoubleSeconds(absl::Now() - start);
}

// When, within a step, each parameterised layer first reads its parameters
// and last writes its gradient: what decides how much communication
// --overlap=layer can hide (experiments/perfmodel.py). Milliseconds from
// the step's start, summed over the steps observed.
class LayerTimes : public model::LayerObserver {
 public:
  explicit LayerTimes(const model::Network& net) {
    for (int l = 0; l < net.num_layers(); ++l) {
      const model::Layer& layer = net.layer(l);
      if (!layer.has_params()) continue;
      index_of_[l] = static_cast<int>(layers_.size());
      layers_.push_back({layer.params_end() - layer.params_begin(), 0, 0});
    }
  }

  // Forgets the steps observed so far (the warm-up's).
  void Reset() {
    for (Layer& layer : layers_) layer.forward_at_ms = layer.gradient_at_ms = 0;
    step_ms_ = 0;
    steps_ = 0;
  }
  void StartStep() { step_start_ = absl::Now(); }
  void EndStep() {
    step_ms_ += Since();
    ++steps_;
  }
  void BeforeForward(int layer) override {
    layers_[index_of_.at(layer)].forward_at_ms += Since();
  }
  void AfterBackward(int layer) override {
    layers_[index_of_.at(layer)].gradient_at_ms += Since();
  }

  // JSON: the mean step and, per layer in forward order, its parameters
  // and mean offsets.
  std::string Json() const {
    const double n = std::max<uint64_t>(steps_, 1);
    std::string out =
        absl::StrFormat("\"step_ms\":%.4f,\"layers\":[", step_ms_ / n);
    for (size_t i = 0; i < layers_.size(); ++i) {
      absl::StrAppendFormat(&out,
                            "%s{\"params\":%d,\"forward_at_ms\":%.4f,"
                            "\"gradient_at_ms\":%.4f}",
                            i == 0 ? "" : ",", layers_[i].params,
                            layers_[i].forward_at_ms / n,
                            layers_[i].gradient_at_ms / n);
    }
    return out + "]";
  }

 private:
  struct Layer {
    uint64_t params;
    double forward_at_ms;
    double gradient_at_ms;
  };
  double Since() const {
    return absl::ToDoubleMilliseconds(absl::Now() - step_start_);
  }

  absl::flat_hash_map<int, int> index_of_;
  std::vector<Layer> layers_;
  absl::Time step_start_;
  double step_ms_ = 0;
  uint64_t steps_ = 0;
};

}  // namespace

absl::Status RunModelBench(const ModelBenchOptions& options) {
  absl::StatusOr<model::Network> net = model::Network::FromSpec(options.model);
  if (!net.ok()) return net.status();
  if (options.batch < 1 || options.blas_threads < 1 ||
      options.length <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "--batch and --blas_threads must be >= 1 and --bench_seconds > 0");
  }
  openblas_set_num_threads(options.blas_threads);
  std::vector<float> params(net->num_params()), grad(net->num_params());
  net->Initialize(1, params.data());
  const RandomBatch batch = MakeRandomBatch(*net, options.batch);
  model::Network::Workspace ws = net->MakeWorkspace(options.batch);
  LayerTimes times(*net);
  auto step = [&] {
    times.StartStep();
    net->TrainStep(params.data(), batch.x.data(), batch.labels.data(),
                   options.batch, grad.data(), &ws, &times);
    times.EndStep();
    for (size_t i = 0; i < params.size(); ++i) params[i] -= 1e-3f * grad[i];
  };
  for (int i = 0; i < 5; ++i) step();  // warm caches and BLAS buffers
  times.Reset();
  uint64_t steps = 0;
  const absl::Time start = absl::Now();
  while (absl::Now() < start + options.length) {
    step();
    ++steps;
  }
  const double rate =
      steps * options.batch / absl::ToDoubleSeconds(absl::Now() - start);
  if (options.json) {
    absl::PrintF(
        "{\"mode\":\"model\",\"model\":\"%s\",\"batch\":%d,"
        "\"blas_threads\":%d,\"samples_per_s\":%.0f,%s}\n",
        options.model, options.batch, options.blas_threads, rate, times.Json());
  } else {
    absl::PrintF("%s batch %d, %d BLAS thread(s): %.0f samples/s\n",
                 options.model, options.batch, options.blas_threads, rate);
  }
  return absl::OkStatus();
}

absl::Status RunLoaderBench(const LoaderBenchOptions& options) {
  absl::StatusOr<loader::Dataset> data = loader::OpenDataset(options.data);
  if (!data.ok()) return data.status();
  uint64_t bytes = 0;
  for (const auto& shard : data->manifest.shards()) bytes += shard.bytes();
  absl::StatusOr<double> plain_s = PlainReadSeconds(*data);
  if (!plain_s.ok()) return plain_s.status();

  loader::LoaderOptions o;
  o.batch_size = options.batch;
  o.reader_threads = options.reader_threads;
  o.prefetch_batches = options.prefetch_batches;
  absl::StatusOr<std::unique_ptr<loader::Loader>> l =
      loader::MakeLoader(options.loader, *data, o);
  if (!l.ok()) return l.status();
  const absl::Time start = absl::Now();
  if (absl::Status s = (*l)->StartEpoch(0); !s.ok()) return s;
  double first_batch_s = -1;
  uint64_t records = 0;
  while (true) {
    absl::StatusOr<const loader::Batch*> b = (*l)->Next();
    if (!b.ok()) return b.status();
    if (*b == nullptr) break;
    if (first_batch_s < 0) {
      first_batch_s = absl::ToDoubleSeconds(absl::Now() - start);
    }
    records += (*b)->size;
  }
  const double epoch_s = absl::ToDoubleSeconds(absl::Now() - start);
  absl::PrintF(
      "{\"mode\":\"loader\",\"loader\":\"%s\",\"records\":%d,"
      "\"MB\":%.1f,\"first_batch_s\":%.4f,\"epoch_s\":%.4f,"
      "\"records_per_s\":%.0f,\"MBps\":%.1f,\"plain_read_MBps\":%.1f}\n",
      options.loader, records, bytes / 1e6, first_batch_s, epoch_s,
      records / epoch_s, bytes / 1e6 / epoch_s, bytes / 1e6 / *plain_s);
  return absl::OkStatus();
}

}  // namespace worker
