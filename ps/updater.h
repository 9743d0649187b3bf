// An Updater turns a gradient into new parameter values on one shard. It is
// the seam where server-side optimizers plug in; plain SGD is the only one
// so far.
//
// Thread-safety: Apply may run concurrently from several threads, always on
// disjoint key ranges (ShardStore holds the stripe lock of each range), so
// an implementation may keep per-key state without locks of its own.
#ifndef SHARDPS_PS_UPDATER_H_
#define SHARDPS_PS_UPDATER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "proto/shardps.pb.h"
#include "ps/float_pieces.h"

namespace ps {

class Updater {
 public:
  virtual ~Updater() = default;

  // Updates weights[0, grad.size()) with `grad`, read in place from the
  // request. `offset` is the position of weights[0] within the shard, for
  // optimizers that keep per-key state.
  virtual void Apply(uint64_t offset, float* weights, UnalignedFloats grad) = 0;

  // The per-key state arrays (e.g. momentum), each with one float per key
  // of the shard, which checkpoints save and restore. Plain SGD has none.
  virtual std::vector<absl::Span<float>> state() { return {}; }
};

// w -= learning_rate * g
class SgdUpdater final : public Updater {
 public:
  explicit SgdUpdater(float learning_rate) : learning_rate_(learning_rate) {}
  void Apply(uint64_t offset, float* weights, UnalignedFloats grad) override;

 private:
  const float learning_rate_;
};

// Validates `config` and builds its updater for a shard of `num_keys` keys.
// An unknown name or a learning rate that is not finite and > 0 is
// INVALID_ARGUMENT.
absl::StatusOr<std::unique_ptr<Updater>> MakeUpdater(
    const shardps::OptimizerConfig& config, uint64_t num_keys);

}  // namespace ps

#endif  // SHARDPS_PS_UPDATER_H_
