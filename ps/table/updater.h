// An Updater turns a gradient into new parameter values on one shard: the
// server-side optimizers SGD, momentum (and Nesterov), Adagrad and Adam, as
// proto/shardps.proto's OptimizerConfig defines them. Optimizer state is one
// float array per kind of state, with one entry per key of the shard, which
// checkpoints save and restore.
//
// Thread-safety: Apply may run concurrently from several threads, always on
// disjoint key ranges (ShardStore holds the stripe lock of each range), so
// an implementation keeps per-key state without locks of its own.
#ifndef SHARDPS_PS_TABLE_UPDATER_H_
#define SHARDPS_PS_TABLE_UPDATER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "proto/shardps.pb.h"
#include "ps/wire/float_pieces.h"
#include "ps/wire/table_spec.h"

namespace ps {

class Updater {
 public:
  virtual ~Updater() = default;

  // Updates weights[0, grad.size()) with `grad`, read in place from the
  // request, at learning rate lr * lr_scale (a worker's schedule; 1
  // normally). `offset` is the position of weights[0] within the shard,
  // where the per-key state of those keys lives.
  virtual void Apply(uint64_t offset, float* weights, UnalignedFloats grad,
                     float lr_scale) = 0;

  // The per-key state arrays (e.g. momentum), each with one float per key
  // of the shard. Plain SGD has none.
  virtual std::vector<absl::Span<float>> state() { return {}; }
};

// w -= learning_rate * g
class SgdUpdater final : public Updater {
 public:
  explicit SgdUpdater(float learning_rate) : learning_rate_(learning_rate) {}
  void Apply(uint64_t offset, float* weights, UnalignedFloats grad,
             float lr_scale) override;

 private:
  const float learning_rate_;
};

// How many per-key state arrays a valid `config` keeps (for memory limits).
int OptimizerStateArrays(const shardps::OptimizerConfig& config);

// Validates `config` and builds its updater for a shard of `num_keys` keys,
// with its state as at the start of training (Adagrad's accumulators at
// initial_accumulator, everything else zero).
absl::StatusOr<std::unique_ptr<Updater>> MakeUpdater(
    const shardps::OptimizerConfig& config, uint64_t num_keys);

}  // namespace ps

#endif  // SHARDPS_PS_TABLE_UPDATER_H_
