#include "ps/updater.h"

#include <cmath>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ps {

void SgdUpdater::Apply(uint64_t offset, float* weights, UnalignedFloats grad) {
  const float lr = learning_rate_;
  for (size_t i = 0; i < grad.size(); ++i) weights[i] -= lr * grad[i];
}

absl::StatusOr<std::unique_ptr<Updater>> MakeUpdater(
    const shardps::OptimizerConfig& config, uint64_t num_keys) {
  const float lr = config.learning_rate();
  if (!std::isfinite(lr) || lr <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "optimizer learning_rate must be finite and > 0, got ", lr));
  }
  if (config.name() == "sgd") return std::make_unique<SgdUpdater>(lr);
  return absl::InvalidArgumentError(
      absl::StrCat("unknown optimizer '", config.name(), "' (supported: sgd)"));
}

}  // namespace ps
